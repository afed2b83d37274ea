"""The reader kinds and the one function that builds a reader (a backbone) from a config value.

:func:`make_backbone` builds any kind of :data:`BACKBONE_KINDS`: the readers without a language model
(:mod:`filegram_ray.llm.backbones`: lexical, random, oracle; :mod:`filegram_ray.llm.encoder_reader`: encoder) and
the OpenAI-compatible HTTP kinds. It lives apart from both modules so that neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from filegram_ray.llm.backbones import (
    Backbone,
    LexicalBackbone,
    OpenAIBackbone,
    OracleBackbone,
    RandomBackbone,
)

__all__ = ["BACKBONE_KINDS", "make_backbone"]

#: Backbone kinds :func:`make_backbone` (and the evaluate stage's processors) accept; the four HTTP kinds are
#: OpenAI-compatible servers, ``vllm_engine`` runs vLLM engines in the evaluate stage (``filegram_ray.llm.processors``).
BACKBONE_KINDS = ("lexical", "encoder", "random", "oracle", "openai", "openai_compatible", "vllm", "vllm_server", "llama_cpp",
                  "vllm_engine")


def make_backbone(spec: str | Mapping[str, Any] | None, *, seed: int = 7,
                  answer_key: Mapping[str, Any] | None = None) -> Backbone:
    """Build a backbone from a config value.

    Args:
        spec: ``"lexical"`` / ``"encoder"`` / ``"random"`` / ``"oracle"`` (``{kind: encoder, pool, tau, head, …}``:
            :class:`~filegram_ray.llm.encoder_reader.EncoderBackbone`) or a mapping ``{kind: openai, base_url, model, …}``
            (the fields of :class:`filegram_ray.llm.processors.HttpChatSpec`); ``None`` = lexical.
        seed: master seed (lexical, random).
        answer_key: required for ``oracle``.

    Raises:
        ValueError: unknown kind or missing settings.
    """
    if spec is None:
        spec = {"kind": "lexical"}
    if isinstance(spec, str):
        spec = {"kind": spec}
    spec = dict(spec)
    kind = str(spec.pop("kind", "lexical")).lower()
    if kind == "lexical":
        return LexicalBackbone(seed=int(spec.get("seed", seed)))
    if kind == "random":
        return RandomBackbone(seed=int(spec.get("seed", seed)))
    if kind == "encoder":
        import inspect

        from filegram_ray.llm.encoder_reader import EncoderBackbone

        known = set(inspect.signature(EncoderBackbone).parameters)
        unknown = sorted(set(spec) - known)
        if unknown:
            raise ValueError(f"backbone 'encoder' has no setting {', '.join(map(repr, unknown))} "
                             f"(its settings: {', '.join(sorted(known))})")
        return EncoderBackbone(**{"seed": seed, **spec})
    if kind == "oracle":
        if answer_key is None:
            raise ValueError("backbone 'oracle' needs the answer key")
        return OracleBackbone(answer_key)
    if kind in ("openai", "openai_compatible", "vllm", "vllm_server", "llama_cpp", "vllm_engine"):
        from filegram_ray.llm.processors import HttpChatSpec, chat_spec

        cs = chat_spec({"kind": kind, **spec})  # validates every setting (pydantic names a wrong one)
        if not isinstance(cs, HttpChatSpec):
            raise ValueError(f"backbone {kind!r} runs vLLM engines inside the evaluate stage's ray.data.llm "
                             "processor; it has no one-off client (use an OpenAI-compatible server for that)")
        return OpenAIBackbone(**cs.backbone_kwargs())
    raise ValueError(f"unknown backbone kind {kind!r} (one of {', '.join(BACKBONE_KINDS)})")

