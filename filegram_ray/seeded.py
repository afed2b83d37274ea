"""Seeded randomness, one rule for the whole project ("same seed, same bytes"): every stochastic choice draws from
a ``random.Random`` seeded by SHA-256 of the master seed and a tuple of stable parts naming the decision point
(:func:`rng`); Python's ``hash()`` (salted per process) is never used. Imports nothing of the project."""

from __future__ import annotations

import hashlib
import random
from typing import Any

__all__ = ["rng", "sub_seed"]


def sub_seed(seed: int, *parts: Any) -> int:
    """A 64-bit seed from the master seed and stable parts (the first 16 hex digits of the SHA-256 of
    ``"seed|part|part…"``, each part as ``str``)."""
    text = "|".join([str(seed), *(str(p) for p in parts)])
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:16], 16)


def rng(seed: int, *parts: Any) -> random.Random:
    """A ``random.Random`` for one decision point (:func:`sub_seed` of ``seed`` and ``parts``)."""
    return random.Random(sub_seed(seed, *parts))
