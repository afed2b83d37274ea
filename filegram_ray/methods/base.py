"""The memory-method interface (ARCHITECTURE rule 4) and the method registry.

Every method — FileGramOS, its channel ablations and the context baselines — implements::

    state = method.ingest(views)            # views: list[TrajectoryView]; state: picklable
    ctx = method.retrieve(state, query)     # ctx: Context(text, tokens_in_memory, tokens_out)

The evaluate stage ingests once per (method, context spec), pickles ``state`` and answers many items from it; it
never knows which method it is talking to. Token counts follow the paper's table (reference §8.4): ``In.`` = stored
memory tokens per ingest, ``Out.`` = retrieved context tokens per query, both estimated as ``len(text) // 4``
(upstream's counting rule, reference §8.1).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from filegram_ray.methods.trajectory import TrajectoryView

__all__ = ["ENTRY_POINT_GROUP", "METHODS", "Context", "LlmFn", "MemoryMethod", "check_options", "load_plugins",
           "make_method", "method_names", "register"]

#: The entry-point group through which an installed package registers its own memory method (no fork needed):
#: ``[project.entry-points."filegram_ray.methods"] my_method = "my_pkg.module:MyMethod"``.
ENTRY_POINT_GROUP = "filegram_ray.methods"

#: ``llm_fn(prompt, system_prompt=None) -> str`` (reference §8.1); ``None`` when no LLM backbone is configured.
LlmFn = Callable[..., str]


@dataclass
class Context:
    """What a method hands to the backbone for one query.

    Attributes:
        text: the context text (may be empty, e.g. No Context).
        tokens_in_memory: estimated tokens stored in memory for this ingest (paper ``In.``).
        tokens_out: estimated tokens of ``text`` (paper ``Out.``).
    """

    text: str
    tokens_in_memory: int = 0
    tokens_out: int = 0


class MemoryMethod(ABC):
    """A memory method. Subclasses set ``name`` and implement :meth:`ingest` and :meth:`retrieve`.

    Args:
        llm_fn: optional language model for ingest-time work (summaries, classification); methods must work
            without it (documented deterministic fallback).
        embedder: optional sentence embedder with ``encode(texts) -> (N, 384) float32, L2-normalised``.
        **options: method-specific settings (validated by the subclass).
    """

    name: str = "method"
    #: human-readable name of the method (the report's row name unless :meth:`row_name` says more).
    display: str = "Method"
    #: the options this method reads, name → type (``bool``, ``int``, ``str`` or a tuple of types); ``None`` = not
    #: declared (plugins): any option is accepted. The evaluate config refuses an option a method does not read and
    #: a value of another type (:func:`check_options`), so a typo never runs silently with the default.
    options_schema: dict[str, type | tuple[type, ...]] | None = None
    #: methods with the same ``state_group`` build identical ingest states (e.g. FileGramOS and its channel
    #: ablations differ only at retrieval), so the evaluate stage ingests once per group and context spec.
    state_group: str | None = None

    @property
    def group(self) -> str:
        """The ingest-state cache group (``state_group`` or the method name)."""
        return self.state_group or self.name

    def __init__(self, llm_fn: LlmFn | None = None, embedder: Any = None, **options: Any):
        self.llm_fn = llm_fn
        self.embedder = embedder
        self.options = options

    def row_name(self) -> str:
        """The report's row name for this instance, made with the run's ``method_options``: ``display`` unless an
        option changes what the row measures (VisRAG: ``"VisRAG (OCR)"`` or ``"VisRAG (drawn page text)"``). The
        evaluate stage records it per method in run.json (``method_rows``) and the report and ``filegram
        methods`` show it."""
        return self.display

    @classmethod
    def mode(cls, llm: bool) -> str:
        """One line for the report: which mechanism runs with (``llm=True``) or without an LLM backbone, e.g.
        ``"mem0ai 2.2, raw messages (infer=False)"``; "" when the method has one mode only. The evaluate stage
        calls it on an instance made with the configured ``method_options``, so an override may be an instance
        method that reads ``self.options``."""
        return ""

    def embedding_texts(self, trajectories: Sequence[TrajectoryView]) -> list[str] | None:
        """Every text :meth:`ingest` will hand to its embedder for these views (any order, repeats allowed), so the
        evaluate stage can embed all of a run's texts in one pass before any method ingests
        (:mod:`filegram_ray.methods.embed_plan`); ``[]`` when ingest embeds nothing; ``None`` (the default) when
        the method does not say — then its ingest embeds what it needs itself. An override must build its texts
        with the same code as :meth:`ingest` (a text it leaves out is embedded at ingest, one model call
        more; the answers are the same either way)."""
        return None

    def query_embedding_texts(self, query: str) -> list[str]:
        """The texts :meth:`retrieve` embeds for ``query`` (planned with the ingest texts, see
        :meth:`embedding_texts`); ``[]`` (the default) when retrieval embeds nothing or the method does not say."""
        return []

    def embedder_label(self) -> str:
        """Short name of the sentence embedder this instance ingests with, for its :meth:`mode` line: the
        embedder's ``label`` (``MiniLM``, ``MiniLM int8``, ``static MiniLM (model2vec)`` …), ``MiniLM`` when none
        was given (the methods' own default, :func:`filegram_ray.methods.embed.default_embedder`)."""
        return str(getattr(self.embedder, "label", None) or "MiniLM")

    @abstractmethod
    def ingest(self, trajectories: Sequence[TrajectoryView]) -> Any:
        """Build the memory state from the views (picklable; may be large)."""

    @abstractmethod
    def retrieve(self, state: Any, query: str) -> Context:
        """Render the context for one query from a state returned by :meth:`ingest`."""


METHODS: dict[str, Callable[..., MemoryMethod]] = {}


def check_options(name: str, options: dict[str, Any]) -> None:
    """Refuse options the registered method ``name`` does not declare in ``options_schema``, or of another type
    (an ``int`` is not a ``bool``; ``True`` is not an ``int``). Methods without a schema accept anything.

    Raises:
        ValueError: names the method, the option and what it accepts.
    """
    _load_builtin()
    schema = getattr(METHODS.get(name), "options_schema", None)
    if schema is None:
        return
    for key, value in options.items():
        if key not in schema:
            raise ValueError(f"{name} has no option {key!r} ("
                             + (f"its options: {', '.join(schema)}" if schema else "it takes no options") + ")")
        want = schema[key] if isinstance(schema[key], tuple) else (schema[key],)
        if not isinstance(value, want) or (isinstance(value, bool) and bool not in want):
            names = " or ".join(t.__name__ for t in want)
            raise ValueError(f"{name}.{key}: expected {names}, got {value!r}")


def register(name: str) -> Callable[[Callable[..., MemoryMethod]], Callable[..., MemoryMethod]]:
    """Class decorator / factory registration under ``name``."""

    def deco(factory):
        METHODS[name] = factory
        return factory

    return deco


def method_names() -> list[str]:
    """Registered method names in registration order."""
    _load_builtin()
    return list(METHODS)


def make_method(name: str, **kwargs: Any) -> MemoryMethod:
    """Instantiate a registered method.

    Raises:
        ValueError: unknown name (message lists the registered ones).
    """
    _load_builtin()
    if name not in METHODS:
        raise ValueError(f"unknown memory method {name!r}; registered: {', '.join(METHODS)}")
    return METHODS[name](**kwargs)


_PLUGINS_LOADED = False


def _load_builtin() -> None:
    """Import the built-in method modules (registration side effect), then the installed plugins once."""
    from filegram_ray.methods import (  # noqa: F401
        baselines,
        evermemos,
        filegramos,
        mem0_memory,
        memos,
        memu,
        mma,
        simplemem,
        visrag,
        zep,
    )

    global _PLUGINS_LOADED
    if not _PLUGINS_LOADED:
        _PLUGINS_LOADED = True
        load_plugins()


def load_plugins() -> list[str]:
    """Register the methods that installed packages declare in the :data:`ENTRY_POINT_GROUP` entry-point group.

    Each entry point's name is the method name; its object is a :class:`MemoryMethod` subclass (or a factory
    returning one). A plugin that fails to import is logged and skipped (one broken package never hides the
    others); a plugin may not replace a built-in name.

    Returns:
        the names registered by this call.
    """
    import logging
    from importlib.metadata import entry_points

    log = logging.getLogger(__name__)
    added = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in METHODS:
            if getattr(METHODS[ep.name], "__module__", "").startswith("filegram_ray."):
                log.warning("method plugin %s (%s) ignored: %r is a built-in method", ep.name, ep.value, ep.name)
            continue
        try:
            METHODS[ep.name] = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin is reported, the others still load
            log.warning("method plugin %s (%s) failed to load: %s: %s", ep.name, ep.value, type(exc).__name__, exc)
            continue
        added.append(ep.name)
    return added
