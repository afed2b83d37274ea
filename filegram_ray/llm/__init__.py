"""Backbones (answering models) and local OpenAI-compatible servers.

Public API: :class:`~filegram_ray.llm.backbones.Backbone`, :class:`OpenAIBackbone`, :class:`LexicalBackbone`,
:class:`OracleBackbone`, :class:`RandomBackbone`, :func:`make_backbone`, :func:`parse_choice`.
"""

from filegram_ray.llm.backbones import (
    Answer,
    Backbone,
    LexicalBackbone,
    OpenAIBackbone,
    OracleBackbone,
    RandomBackbone,
    approx_tokens,
    stable_seed,
)
from filegram_ray.llm.parsing import LETTERS, parse_choice, parse_json_object
from filegram_ray.llm.readers import BACKBONE_KINDS, make_backbone

__all__ = [
    "BACKBONE_KINDS",
    "LETTERS",
    "Answer",
    "Backbone",
    "LexicalBackbone",
    "OpenAIBackbone",
    "OracleBackbone",
    "RandomBackbone",
    "approx_tokens",
    "make_backbone",
    "parse_choice",
    "parse_json_object",
    "stable_seed",
]
