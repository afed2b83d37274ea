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

__all__ = ["METHODS", "Context", "LlmFn", "MemoryMethod", "make_method", "method_names", "register"]

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
    #: human-readable row name in the report.
    display: str = "Method"
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

    @abstractmethod
    def ingest(self, trajectories: Sequence[TrajectoryView]) -> Any:
        """Build the memory state from the views (picklable; may be large)."""

    @abstractmethod
    def retrieve(self, state: Any, query: str) -> Context:
        """Render the context for one query from a state returned by :meth:`ingest`."""


METHODS: dict[str, Callable[..., MemoryMethod]] = {}


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


def _load_builtin() -> None:
    # import for the registration side effect
    from filegram_ray.methods import baselines, filegramos  # noqa: F401
