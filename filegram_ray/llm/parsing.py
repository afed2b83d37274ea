"""Robust extraction of a multiple-choice letter and of JSON objects from free model text.

Small local models rarely follow the format exactly; these helpers accept, in order of preference:
``{"answer": "C"}`` (also inside a code fence), ``Answer: C`` / ``answer is (C)``, a reply that *is* a letter
(``"C"``, ``"C."``, ``"(C)"``, ``"**C**"``), a leading letter (``"C) because …"``), and finally a reply that quotes
exactly one choice's text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["LETTERS", "index_of_letter", "letter_of", "parse_choice", "parse_json_object"]

#: Choice letters; FileGramBench items have 2–6 options (reference §9.1, AnomDet up to 6).
LETTERS = "ABCDEF"

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_ANSWER_IS = re.compile(
    r"(?:final\s+answer|answer|option|choice)\s*(?:is|:|=|-)?\s*[\"'*(\[]*\s*([A-F])\b(?![a-z])", re.IGNORECASE)
_BARE = re.compile(r"^\W*([A-F])\W*$")
_LEADING = re.compile(r"^\W{0,3}([A-F])(?:[).:\]]|\s*$|\s+[-–—]|\s+because)", re.DOTALL)


def letter_of(i: int) -> str:
    """Letter for a 0-based choice index (0 → ``A``)."""
    return LETTERS[i]


def index_of_letter(letter: str) -> int:
    """0-based index of a choice letter (``"c"`` → 2). Raises ValueError for anything else."""
    s = (letter or "").strip().upper()
    if len(s) != 1 or s not in LETTERS:
        raise ValueError(f"not a choice letter: {letter!r}")
    return LETTERS.index(s)


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (code fences and trailing commas tolerated, reference §8.3); else None
    (also for JSON nested too deeply for Python's decoder: model output never raises here)."""
    if not text:
        return None
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for cand in candidates:
        start = cand.find("{")
        while start != -1:
            depth = 0
            for j in range(start, len(cand)):
                if cand[j] == "{":
                    depth += 1
                elif cand[j] == "}":
                    depth -= 1
                    if depth == 0:
                        blob = re.sub(r",\s*([}\]])", r"\1", cand[start:j + 1])
                        try:
                            obj = json.loads(blob)
                        except (json.JSONDecodeError, RecursionError):  # deep nesting from a model: not an answer
                            break
                        if isinstance(obj, dict):
                            return obj
                        break
            start = cand.find("{", start + 1)
    return None


def parse_choice(text: str, n_choices: int, choices: Sequence[str] | None = None) -> str | None:
    """Extract the chosen letter from a model reply; ``None`` when no valid letter can be found.

    Args:
        text: the raw reply.
        n_choices: number of options; letters beyond it are rejected.
        choices: the option texts, used as a last resort (exactly one option's text quoted in the reply).
    """
    if not text:
        return None
    valid = LETTERS[:max(0, min(n_choices, len(LETTERS)))]

    def ok(c: str | None) -> str | None:
        c = (c or "").strip().upper()
        return c if len(c) == 1 and c in valid else None

    obj = parse_json_object(text)
    if obj:
        for key in ("answer", "choice", "option", "letter", "final_answer"):
            if key in obj and ok(str(obj[key]).strip().strip("()").strip()[:1]):
                return ok(str(obj[key]).strip().strip("()")[:1])
    stripped = text.strip()
    m = _BARE.match(stripped)
    if m and ok(m.group(1)):
        return ok(m.group(1))
    for m in _ANSWER_IS.finditer(stripped):
        if ok(m.group(1)):
            return ok(m.group(1))
    m = _LEADING.match(stripped)
    if m and ok(m.group(1)):
        return ok(m.group(1))
    if choices:
        low = stripped.lower()
        hits = [i for i, c in enumerate(choices[:len(valid)]) if c and str(c).strip().lower() in low]
        if len(hits) == 1:
            return valid[hits[0]]
    return None
