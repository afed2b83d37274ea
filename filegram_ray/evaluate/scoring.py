"""Scoring of answered items and aggregation into the paper-style table.

* Multiple-choice item: score 100 if the chosen letter equals the key's letter, else 0 (an unparseable reply or a
  failed item scores 0 and is counted).
* Open-ended item (Profile Reconstruction, Visual Grounding): a per-attribute Likert judge gives s ∈ {1..5}, rescaled
  to 0–100 as ``(s − 1) / 4 · 100``. **This rescaling is our choice**: the paper reports Likert scores on 0–100
  but the formula is not in the released code (reference §9.4). A judge parse failure gives no score and the item
  is left out of the mean (reference §9.4: "score outside 1–5 or parse error → 0 and excluded").

Judges (reference §9.4): :class:`LLMJudge` when the backbone is a language model (temperature 0.1, ≤512 tokens,
vagueness cap at 3), else :class:`RubricJudge`, a deterministic rubric documented on the class.

Aggregation (:func:`summarise`): per method, mean score per sub-task and per channel (channels average over the
items carrying that label, reference §9.5), ``Avg`` = question-count-weighted accuracy over the multiple-choice
items (the closest reconstruction of the paper's Avg, reference §8.4 note), ``In.`` = mean stored-memory tokens per
ingest, ``Out.`` = mean retrieved-context tokens per query (reference §8.4 table header).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from filegram_ray.bench.vocab import JUDGE_VALUE_SPACE
from filegram_ray.llm.parsing import parse_json_object

__all__ = [
    "CHANNELS",
    "SUB_TASK_ORDER",
    "VALUE_SPACES",
    "LLMJudge",
    "RubricJudge",
    "likert_to_100",
    "make_judge",
    "score_mcq",
    "summarise",
]

#: Column order of the report (reference §8.4 Table 3).
SUB_TASK_ORDER = ["AttrRec", "BehavFP", "ProfRec", "BehavInf", "TraceDis", "AnomDet", "ShiftAna", "FileGrd",
                  "VisGrd"]
CHANNELS = ["procedural", "semantic", "episodic"]

#: Value spaces the judge is given per attribute (reference §9.4); used when an item's metadata carries none.
#: One table for the bench (which writes it into each ProfRec item) and the judge.
VALUE_SPACES: dict[str, list[str]] = JUDGE_VALUE_SPACE


def likert_to_100(s: float | None) -> float | None:
    """``(s − 1) / 4 · 100`` for s in 1..5 (our choice, see module docstring); ``None`` stays ``None``.

    Raises:
        ValueError: s outside [1, 5].
    """
    if s is None:
        return None
    if not 1 <= s <= 5:
        raise ValueError(f"Likert score {s} outside 1..5")
    return (float(s) - 1.0) / 4.0 * 100.0


def score_mcq(choice: str | None, correct: str) -> float:
    """100.0 if ``choice`` equals the key letter (case-insensitive), else 0.0."""
    return 100.0 if choice and str(choice).strip().upper() == str(correct).strip().upper() else 0.0


def _norm(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", (text or "").lower()).strip()


def _attribute(item: Mapping[str, Any]) -> str:
    meta = item.get("metadata") or {}
    attr = meta.get("attribute") or ""
    if not attr:
        sub = str(item.get("sub_class") or "")
        attr = sub.split(":", 1)[1] if ":" in sub else sub
    return str(attr)


def _value_space(item: Mapping[str, Any]) -> list[str]:
    meta = item.get("metadata") or {}
    for key in ("value_space", "values", "value_choices"):
        vs = meta.get(key)
        if isinstance(vs, (list, tuple)) and vs:
            return [str(v) for v in vs]
    return list(VALUE_SPACES.get(_attribute(item), []))


class RubricJudge:
    """Deterministic Likert judge used when no LLM backbone is configured (ours, shaped on reference §9.4).

    With V = the attribute's value space (item metadata, else :data:`VALUE_SPACES`) and r = the reference value,
    on normalised text (lower case, ``_``/``-`` → space):

    * 5 — the answer equals r, or names r and no other value of V and cites a number (specific evidence);
    * 4 — names r and no other value of V;
    * 3 — names r together with other values (hedged / generic);
    * 2 — names only other values of V;
    * 1 — empty, or names no value of V (not inferred).

    For free-text attributes (name, role: no value space) the reference's content words are matched instead:
    5 all present, 4 more than half, 3 some, 1 none. It rewards naming the right value; it cannot judge whether the
    evidence is true. Deliberately simple.
    """

    name = "rubric"

    def judge(self, item: Mapping[str, Any], reference: str, answer: str) -> int | None:
        ans, ref = _norm(answer), _norm(reference)
        if not ans:
            return 1
        if ans == ref:
            return 5
        space = [_norm(v) for v in _value_space(item)]
        if not space or ref not in space:
            words = [w for w in ref.split() if len(w) > 2] or ref.split()
            if not words:
                return None
            frac = sum(1 for w in words if re.search(rf"\b{re.escape(w)}\b", ans)) / len(words)
            return 5 if frac == 1 else 4 if frac > 0.5 else 3 if frac > 0 else 1
        named = {v for v in space if re.search(rf"\b{re.escape(v)}\b", ans)}
        if ref in named and len(named) == 1:
            return 5 if re.search(r"\d", ans) else 4
        if ref in named:
            return 3
        return 2 if named else 1


_JUDGE_SYSTEM = (
    "You grade how well an inferred value of a user attribute matches the reference value.\n"
    "Attribute: {attr}\nPossible values: {space}\n"
    "Scores: 5 = correct value with specific, preferably quantitative, behavioural evidence; 4 = correct value with "
    "partial evidence; 3 = generic or adjacent value; 2 = wrong value; 1 = opposite value or nothing inferred.\n"
    "Vagueness rule: an answer so generic that it could describe anyone gets at most 3, even if compatible; 4 and "
    "5 need concrete distinguishing evidence.\n"
    'Reply with JSON only: {{"ground_truth": ..., "inferred": ..., "score": <1-5>, "justification": ...}}')


class LLMJudge:
    """Per-attribute LLM judge (reference §9.4): one call per item, temperature 0.1, ≤512 tokens; a reply without
    a score in 1..5 gives ``None`` (excluded from the mean).

    Args:
        backbone: a backbone whose ``complete`` calls a language model.
    """

    name = "llm"

    def __init__(self, backbone):
        if not getattr(backbone, "is_llm", False):
            raise ValueError(f"LLMJudge needs a language-model backbone, got {getattr(backbone, 'name', backbone)!r}")
        self.backbone = backbone

    def judge(self, item: Mapping[str, Any], reference: str, answer: str) -> int | None:
        space = _value_space(item)
        system = _JUDGE_SYSTEM.format(attr=_attribute(item) or "(see question)",
                                      space=", ".join(space) if space else "free text")
        prompt = f"Question: {item.get('question', '')}\nReference value: {reference}\nInferred value: {answer}"
        reply = self.backbone.complete(prompt, system, temperature=0.1, max_tokens=512)
        obj = parse_json_object(reply) or {}
        try:
            s = int(float(obj.get("score")))
        except (TypeError, ValueError):
            m = re.search(r"score\W{0,4}([1-5])\b", reply or "", re.IGNORECASE)
            s = int(m.group(1)) if m else 0
        return s if 1 <= s <= 5 else None


def make_judge(kind: str, backbone=None):
    """``"auto"`` (LLM when the backbone is a language model, else rubric), ``"llm"`` or ``"rubric"``.

    Raises:
        ValueError: unknown kind, or ``"llm"`` without a language-model backbone.
    """
    if kind == "rubric" or (kind == "auto" and not getattr(backbone, "is_llm", False)):
        return RubricJudge()
    if kind in ("llm", "auto"):
        return LLMJudge(backbone)
    raise ValueError(f"unknown judge {kind!r} (auto, llm, rubric)")


def _mean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def summarise(results: pl.DataFrame) -> pl.DataFrame:
    """One row per method: n, n_errors, one column per sub-task present, the three channels, Avg, In, Out,
    ``multimodal`` (accuracy over the multiple-choice items of the multimodal setting; None without any) and
    ``real_world`` (mean score over every item of the Real-World setting; None without any).

    Args:
        results: the results table (columns method, sub_track, channel, is_open, score, status,
            tokens_in_memory, tokens_out, cache_key).
    """
    rows = []
    subs = [s for s in SUB_TASK_ORDER if s in set(results["sub_track"].to_list())]
    subs += sorted(set(results["sub_track"].to_list()) - set(subs))
    for method in list(dict.fromkeys(results["method"].to_list())):
        df = results.filter(pl.col("method") == method)
        row: dict[str, Any] = {"method": method, "n": df.height,
                               "n_errors": df.filter(pl.col("status") != "ok").height}
        for s in subs:
            row[s] = _mean(df.filter(pl.col("sub_track") == s)["score"].to_list())
        for c in CHANNELS:
            row[c] = _mean(df.filter(pl.col("channel") == c)["score"].to_list())
        row["avg"] = _mean(df.filter(~pl.col("is_open"))["score"].to_list())
        if "setting" in df.columns:  # the Multimodal setting's accuracy (its items: FileGrd, reference §9.1 T4)
            row["multimodal"] = _mean(df.filter((pl.col("setting") == "multimodal") & ~pl.col("is_open"))
                                      ["score"].to_list())
            # the Real-World setting (events read back from recordings; its items: VisGrd), all items
            row["real_world"] = _mean(df.filter(pl.col("setting") == "real_world")["score"].to_list())
        ok = df.filter(pl.col("status") == "ok")
        per_ingest = ok.group_by("cache_key").agg(pl.col("tokens_in_memory").max())["tokens_in_memory"].to_list()
        row["tokens_in"] = _mean([float(x) for x in per_ingest])
        row["tokens_out"] = _mean([float(x) for x in ok["tokens_out"].to_list()])
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None)
