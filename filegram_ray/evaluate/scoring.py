"""Scoring of answered items and aggregation into the paper-style table.

* Multiple-choice item: score 100 if the chosen letter equals the key's letter, else 0.
* A failed item (an error row: no usable reply, a reply that states no single option, a failed ingest or
  retrieval) has **no score**: it is left out of every mean here and of every interval, paired test and finding,
  and counted per method and cause (:mod:`filegram_ray.evaluate.failures`). A method never answered is not a
  method that answered wrong.
* Open-ended item (Profile Reconstruction, Visual Grounding): a per-attribute Likert judge gives s ∈ {1..5}, rescaled
  to 0–100 as ``(s − 1) / 4 · 100``. **This rescaling is our choice**: the paper reports Likert scores on 0–100
  but the formula is not in the released code (reference §9.4). A judge parse failure gives no score and the item
  is left out of the mean (reference §9.4: "score outside 1–5 or parse error → 0 and excluded").

Judges (reference §9.4): :class:`LLMJudge` when the backbone (or ``evaluate.judge_backbone``) is a language model
(temperature 0.1, ≤512 tokens, vagueness cap at 3; its requests go through the same ``ray.data.llm`` processors
as the answers), else :class:`RubricJudge`, a deterministic rubric documented on the class. Either must pass the
validity rows of :func:`judge_validity` (reference value ≥ 90, empty ≤ 10, wrong value in between).

Aggregation (:func:`summarise`): per method, mean score per sub-task and per channel (channels average over the
items carrying that label, reference §9.5), ``Avg`` = question-count-weighted accuracy over the multiple-choice
items (the closest reconstruction of the paper's Avg, reference §8.4 note), ``In.`` = mean stored-memory tokens per
ingest, ``Out.`` = mean retrieved-context tokens per query (reference §8.4 table header).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from filegram_ray.bench.vocab import JUDGE_VALUE_SPACE
from filegram_ray.llm.parsing import parse_json_object

log = logging.getLogger(__name__)

__all__ = [
    "CHANNELS",
    "SUB_TASK_ORDER",
    "VALUE_SPACES",
    "VALIDITY_CASES",
    "LLMJudge",
    "JudgeRequests",
    "RubricJudge",
    "JUDGE_CACHE",
    "collect_verdict",
    "judge_messages",
    "judge_validity",
    "likert_to_100",
    "open_answers",
    "save_judge_cache",
    "score_rows",
    "make_judge",
    "parse_judge_reply",
    "validity_requests",
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


def _stem(word: str) -> str:
    """Prefix that a word's inflections share (``sequential`` → ``sequent`` matches ``sequentially``)."""
    return word[:max(4, len(word) - 3)]


def _names_value(value: str, answer: str) -> bool:
    """True when the normalised ``answer`` names ``value``: the whole phrase, or every content word of it (3+
    letters, parentheses dropped) as a word stem (:func:`_stem`), e.g. "reads each file sequentially and in depth"
    names ``sequential_deep``."""
    if re.search(rf"\b{re.escape(value)}\b", answer):
        return True
    words = [w for w in re.findall(r"[a-z0-9\u4e00-\u9fff]+", value) if len(w) >= 3]
    return bool(words) and all(re.search(rf"\b{re.escape(_stem(w))}", answer) for w in words)


class RubricJudge:
    """Deterministic Likert judge used when no LLM judge is configured (ours, shaped on reference §9.4).

    With V = the attribute's value space (item metadata, else :data:`VALUE_SPACES`) and r = the reference value,
    on normalised text (lower case, ``_``/``-`` → space), a value counts as *named* when its phrase or each of its
    content words as a stem occurs (:func:`_names_value`):

    * 5 — the answer equals r, or names r and no other value of V and cites a number (specific evidence);
    * 4 — names r and no other value of V;
    * 3 — names r together with other values (hedged / generic);
    * 2 — names only other values of V;
    * 1 — empty, or names no value of V (not inferred).

    For free-text attributes (name, role: no value space) the reference's content words are matched instead:
    5 all present, 4 more than half, 3 some, 1 none. It rewards naming the right value; it cannot judge whether the
    evidence is true. Deliberately simple. Validity (:func:`judge_validity`): the reference value itself scores 5
    (100), another value of V 2 (25), an empty answer 1 (0).
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
        named = {v for v in space if _names_value(v, ans)}
        if len(named) > 1:  # a value whose words are all inside another named value is not named on its own
            named = {v for v in named if not any(v != o and set(v.split()) < set(o.split()) for o in named)}
        if ref in named and len(named) == 1:
            return 5 if re.search(r"\d", ans) else 4
        if ref in named:
            return 3
        return 2 if named else 1

    def judge_many(self, requests: Sequence[tuple[Mapping[str, Any], str, str]]) -> list[tuple[int | None, str]]:
        """``[(likert or None, note)]`` for ``(item, reference, answer)`` requests (note: "" or why unscored)."""
        out = []
        for item, ref, ans in requests:
            s = self.judge(item, ref, ans)
            out.append((s, "" if s is not None else "rubric: empty reference"))
        return out


_JUDGE_SYSTEM = (
    "You grade how well an inferred value of a user attribute matches the reference value.\n"
    "Attribute: {attr}\nPossible values: {space}\n"
    "Scores: 5 = correct value with specific, preferably quantitative, behavioural evidence; 4 = correct value with "
    "partial evidence; 3 = generic or adjacent value; 2 = wrong value; 1 = opposite value or nothing inferred.\n"
    "Vagueness rule: an answer so generic that it could describe anyone gets at most 3, even if compatible; 4 and "
    "5 need concrete distinguishing evidence.\n"
    'Reply with JSON only: {{"ground_truth": ..., "inferred": ..., "score": <1-5>, "justification": ...}}')

#: Version of the judge prompt; part of the judge cache key, so a changed prompt never reuses old verdicts.
JUDGE_PROMPT_VERSION = "j1"


def judge_messages(item: Mapping[str, Any], reference: str, answer: str) -> list[dict[str, str]]:
    """The chat messages of one LLM-judge call (reference §9.4: attribute, value space, 1–5 rubric, vagueness)."""
    space = _value_space(item)
    system = _JUDGE_SYSTEM.format(attr=_attribute(item) or "(see question)",
                                  space=", ".join(space) if space else "free text")
    user = f"Question: {item.get('question', '')}\nReference value: {reference}\nInferred value: {answer}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


#: "score: 4", "Final score = 4/5", "**Score**: 4"; a second number after "or" / "-" / "to" makes it a range
_SCORE = re.compile(r"\bscore\b[\s*_]*(?:is|of)?[\s*_:=]{0,4}(\d+(?:\.\d+)?)(?!\.?\d)"
                    r"(?P<range>\s*(?:or|-|–|to|/(?!\s*5\b))\s*\d)?", re.IGNORECASE)


def parse_judge_reply(reply: str) -> int | None:
    """The 1–5 score of a judge reply: the JSON ``score`` field, else the *last* ``score: N`` in the text (a judge
    that revises itself ends on its verdict, as :func:`~filegram_ray.llm.parsing.read_choice` reads answers);
    None when there is none, it is outside 1–5 or not whole, or it is a range ("score: 3 or 4")."""
    obj = parse_json_object(reply) or {}
    if "score" in obj:
        try:
            v = float(obj.get("score"))
        except (TypeError, ValueError):
            return None
        return int(v) if v.is_integer() and 1 <= v <= 5 else None
    found = list(_SCORE.finditer(reply or ""))
    if not found or found[-1].group("range"):
        return None
    v = float(found[-1].group(1))
    return int(v) if v.is_integer() and 1 <= v <= 5 else None


class LLMJudge:
    """Per-attribute LLM judge (reference §9.4) on a ``ray.data.llm`` processor: one request per (item, answer),
    temperature 0.1, ≤512 tokens (:func:`~filegram_ray.llm.processors.run_chat`). An empty answer is 1 without a
    call (rubric: nothing inferred). A reply without a score in 1..5, or an error reply, gives ``None`` (excluded
    from the mean) and a note. A request whose reply failed is sent once per judge (one evaluate pass: the
    processor has already retried it) and again by the next evaluate.

    In the evaluate stage the judge's calls are the stage's ``verdicts`` step (model-call items run by the
    model-call executor, one per distinct request, resumable like any item): :meth:`request_items` lists them,
    :meth:`learn` reads the step's rows back, and the judge is ``offline`` afterwards (a request it was not given
    a verdict for is unscored, never sent).

    Args:
        spec: the judge model (:class:`~filegram_ray.llm.processors.HttpChatSpec` or ``VLLMEngineSpec``, or a
            backbone config mapping).
        cache: optional ``{key: likert}`` mapping of earlier verdicts (read and extended in place; the evaluate
            stage keeps it in ``results/judge/``).
        temperature / max_tokens: sampling of the judge call (reference §9.4: 0.1, 512).
    """

    def __init__(self, spec: Any, cache: dict[str, int | None] | None = None, temperature: float = 0.1,
                 max_tokens: int = 512):
        from filegram_ray.llm.processors import chat_spec

        self.spec = chat_spec(spec)
        self.name = f"llm:{self.spec.display()}"
        self.cache = cache if cache is not None else {}
        self.temperature, self.max_tokens = float(temperature), int(max_tokens)
        self.replies: dict[str, str] = {}
        #: ``key -> note`` of the requests that failed in this judge's lifetime (one stage pass): asked once per
        #: pass (the processor already retried them), asked again by the next evaluate
        self.failed: dict[str, str] = {}
        #: True once :meth:`learn` has read the verdicts step: no further model calls
        self.offline = False

    def request_items(self, requests: Sequence[tuple[Mapping[str, Any], str, str]]) -> list[dict[str, Any]]:
        """One model-call item per distinct non-empty ``(item, reference, answer)`` request: ``{"unit_id": its
        cache key, "request": the chat request row}`` (:class:`JudgeRequests`, :func:`collect_verdict`), in
        first-seen order."""
        out: dict[str, dict[str, Any]] = {}
        for it, ref, ans in requests:
            if not (ans or "").strip():
                continue
            k = self.key(it, ref, ans)
            if k not in out:
                out[k] = {"unit_id": k, "request": {"req_key": k, "messages": judge_messages(it, ref, ans),
                                                    "max_tokens": self.max_tokens,
                                                    "temperature": self.temperature}}
        return list(out.values())

    def learn(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Take the verdicts step's rows (``unit`` = request key; ok rows carry ``likert`` and ``reply``, error
        rows ``error``) into the cache and the failures, and stop calling the model (``offline``)."""
        for r in rows:
            self._take(r)
        self.offline = True

    def _take(self, row: Mapping[str, Any]) -> None:
        """One verdict row (as :meth:`learn` reads them) into the cache, or its error into the failures."""
        k = str(row.get("unit"))
        if row.get("status") == "ok":
            self.cache[k] = row.get("likert")
            self.replies[k] = str(row.get("reply") or "")
        else:
            self.failed[k] = str(row.get("error") or "judge: no reply")[:400]

    def key(self, item: Mapping[str, Any], reference: str, answer: str) -> str:
        import hashlib
        import json

        blob = json.dumps([JUDGE_PROMPT_VERSION, self.spec.identity(), self.temperature, self.max_tokens,
                           str(item.get("question_id", "")), _attribute(item), reference, answer], sort_keys=True,
                          default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:24]

    def judge_many(self, requests: Sequence[tuple[Mapping[str, Any], str, str]]) -> list[tuple[int | None, str]]:
        """``[(likert or None, note)]`` for ``(item, reference, answer)`` requests, in order."""
        from filegram_ray.llm.processors import run_chat

        keys = [self.key(it, ref, ans) if (ans or "").strip() else "" for it, ref, ans in requests]
        todo = [it["request"] for it in self.request_items(requests)
                if it["unit_id"] not in self.cache and it["unit_id"] not in self.failed]
        if todo and not self.offline:
            for r in run_chat(todo, self.spec):
                try:  # an error reply is not cached: judged again by the next evaluate, not again in this one
                    self._take({"unit": r["req_key"], "status": "ok", **collect_verdict({}, {}, [], [r])})
                except RuntimeError as exc:
                    self._take({"unit": r["req_key"], "status": "error", "error": str(exc)})
        out = []
        for k in keys:
            if not k:
                out.append((1, ""))
            elif k in self.cache:
                s = self.cache[k]
                out.append((s, self.failed.get(k, "" if s is not None else
                                               f"judge reply without a 1-5 score: {self.replies.get(k, '')[:200]!r}")))
            else:
                out.append((None, self.failed.get(k, "judge: no reply")))
        return out

    def judge(self, item: Mapping[str, Any], reference: str, answer: str) -> int | None:
        return self.judge_many([(item, reference, answer)])[0][0]


class JudgeRequests:
    """The ``prepare`` worker of the judge's model calls: a :meth:`LLMJudge.request_items` item → its one request
    (the prompt is built in the driver: it is a few hundred characters)."""

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        return {"requests": [dict(item["request"])], "state": {}}


def collect_verdict(item: dict[str, Any], state: dict[str, Any], requests: list[dict[str, Any]],
                    replies: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``collect`` of the judge's model calls (and of :meth:`LLMJudge.judge_many`'s own): ``{"likert": 1–5 or
    None (the reply's score), "reply": the reply's first 2,000 characters}`` (:func:`parse_judge_reply`).

    Raises:
        RuntimeError: no reply came back, or the reply is an error (the item's error row; asked again by the
            next evaluate).
    """
    if not replies:
        raise RuntimeError("judge: no reply")
    r = replies[0]
    if r.get("error"):
        raise RuntimeError(f"judge error: {str(r['error'])[:300]}")
    return {"likert": parse_judge_reply(r.get("reply") or ""),
            "reply": str(r.get("reply") or r.get("raw") or "")[:2000]}


def make_judge(kind: str, backbone: Any = None, cache: dict[str, int | None] | None = None,
               max_tokens: int = 512):
    """``"auto"`` (LLM judge when ``backbone`` is a language-model config, else rubric), ``"llm"`` or
    ``"rubric"``.

    Args:
        kind: judge kind.
        backbone: the judge's model: a backbone config (``{kind: openai, …}``, ``{kind: vllm_engine, …}``) or a
            processor spec; a non-LLM backbone (``lexical`` …) or None means no model.
        cache: earlier LLM verdicts (see :class:`LLMJudge`).
        max_tokens: longest reply of an LLM judge (reference §9.4: 512).

    Raises:
        ValueError: unknown kind, or ``"llm"`` without a language-model backbone.
    """
    from filegram_ray.llm.processors import is_llm_spec

    if kind not in ("auto", "llm", "rubric"):
        raise ValueError(f"unknown judge {kind!r} (auto, llm, rubric)")
    llm = is_llm_spec(backbone)
    if kind == "rubric" or (kind == "auto" and not llm):
        return RubricJudge()
    if not llm:
        raise ValueError(f"judge 'llm' needs a language-model backbone, got {backbone!r}")
    return LLMJudge(backbone, cache=cache, max_tokens=max_tokens)


#: The judge validity cases (a judge must separate right from wrong): the reference value as the answer
#: must score at least 90, an empty answer at most 10, another value of the attribute's value space in between.
VALIDITY_CASES = {"true_value": (90.0, 100.0), "wrong_value": (10.0, 90.0), "empty": (0.0, 10.0)}


def judge_validity(judge, items: Sequence[Mapping[str, Any]], key: Mapping[str, Mapping[str, Any]],
                   seed: int) -> pl.DataFrame:
    """Score three synthetic answers per open-ended item with ``judge``: the reference value (``true_value``), a
    seeded other value of the item's value space (``wrong_value``; items without one are skipped) and ``""``
    (``empty``). Returns one row per case: judge, case, n, mean, lo, hi (the bounds of
    :data:`VALIDITY_CASES`, on 0–100), ok (mean within bounds; for ``wrong_value`` strictly between), n_unscored.
    """
    reqs = _validity_cases(items, key, seed)
    schema = {"judge": pl.Utf8, "case": pl.Utf8, "n": pl.Int64, "mean": pl.Float64, "lo": pl.Float64,
              "hi": pl.Float64, "ok": pl.Boolean, "n_unscored": pl.Int64}
    if not reqs:
        return pl.DataFrame(schema=schema)
    verdicts = judge.judge_many([(it, ref, ans) for _, it, ref, ans in reqs])
    rows = []
    for case, (lo, hi) in VALIDITY_CASES.items():
        scores = [likert_to_100(s) for (c, *_), (s, _) in zip(reqs, verdicts) if c == case]
        got = [x for x in scores if x is not None]
        mean = sum(got) / len(got) if got else None
        if mean is None:
            ok = False
        elif case == "wrong_value":
            ok = lo < mean < hi
        else:
            ok = lo <= mean <= hi
        rows.append({"judge": judge.name, "case": case, "n": len(scores), "mean": mean, "lo": lo, "hi": hi,
                     "ok": ok, "n_unscored": len(scores) - len(got)})
    return pl.DataFrame(rows, schema=schema)


def validity_requests(items: Sequence[Mapping[str, Any]], key: Mapping[str, Mapping[str, Any]],
                      seed: int) -> list[tuple[Mapping[str, Any], str, str]]:
    """The ``(item, reference, answer)`` requests :func:`judge_validity` will make (the evaluate stage's
    ``verdicts`` step lists them as model calls)."""
    return [(it, ref, ans) for _, it, ref, ans in _validity_cases(items, key, seed)]


def _validity_cases(items: Sequence[Mapping[str, Any]], key: Mapping[str, Mapping[str, Any]],
                    seed: int) -> list[tuple[str, Mapping[str, Any], str, str]]:
    import random

    from filegram_ray.llm.backbones import stable_seed

    reqs: list[tuple[str, Mapping[str, Any], str, str]] = []
    for it in items:
        if it.get("choices"):
            continue
        k = key.get(str(it.get("question_id")), {})
        ref = str(k.get("correct_text") or k.get("correct") or "")
        if not ref:
            continue
        reqs.append(("true_value", it, ref, ref))
        others = [v for v in _value_space(it) if _norm(v) != _norm(ref)]
        if others:
            wrong = random.Random(stable_seed(seed, "judge-validity", it.get("question_id"))).choice(others)
            reqs.append(("wrong_value", it, ref, wrong))
        reqs.append(("empty", it, ref, ""))
    return reqs


def _mean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def summarise(results: pl.DataFrame) -> pl.DataFrame:
    """One row per method: n, n_errors, ``n_scored`` (items with a score), ``failed`` (most of its items were never
    answered: no result, :func:`~filegram_ray.evaluate.failures.failed_methods`), one column per
    sub-task present, the three channels, Avg, In, Out, ``multimodal`` (accuracy over the multiple-choice items of
    the multimodal setting; None without any) and ``real_world`` (mean score over every item of the Real-World
    setting; None without any). Error rows have no score and enter no mean.

    Args:
        results: the results table (columns method, sub_track, channel, is_open, score, status,
            tokens_in_memory, tokens_out, cache_key).
    """
    from filegram_ray.evaluate.failures import failed_methods

    failed = set(failed_methods(results))
    rows = []
    subs = [s for s in SUB_TASK_ORDER if s in set(results["sub_track"].to_list())]
    subs += sorted(set(results["sub_track"].to_list()) - set(subs))
    for method in list(dict.fromkeys(results["method"].to_list())):
        df = results.filter(pl.col("method") == method)
        n_err = df.filter(pl.col("status") != "ok").height
        row: dict[str, Any] = {"method": method, "n": df.height, "n_errors": n_err,
                               "n_scored": df.filter(pl.col("score").is_not_null()).height,
                               "failed": method in failed}
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


def score_rows(answers: pl.DataFrame, items: list[dict[str, Any]], key: Mapping[str, Mapping[str, Any]],
               judge) -> pl.DataFrame:
    """Join answers with item fields and the key; add ``correct`` (letter / reference), ``is_correct``,
    ``score`` (0–100; see :mod:`filegram_ray.evaluate.scoring`) and ``text_twin`` (a multimodal item's text
    counterpart, :func:`filegram_ray.evaluate.multimodal.text_twins`; "" otherwise). The open-ended rows are judged
    in one batch (``judge.judge_many``: one Ray Dataset for an LLM judge)."""
    from filegram_ray.evaluate.items import item_profile
    from filegram_ray.evaluate.multimodal import text_twins
    from filegram_ray.evaluate.worker import error_text

    by_id = {it["question_id"]: it for it in items}
    twins = text_twins(items)
    out = []
    to_judge: list[int] = []
    for r in answers.iter_rows(named=True):
        it = by_id[r["question_id"]]
        k = key.get(r["question_id"], {})
        correct = str(k.get("correct", ""))
        is_open = not it.get("choices")
        row = {**r, "track": it.get("track", ""), "sub_track": it.get("sub_track", ""),
               "sub_class": it.get("sub_class", ""), "channel": it.get("channel", ""),
               "setting": it.get("setting", "text"), "is_open": is_open, "correct": correct,
               "n_choices": len(it.get("choices") or []), "likert": None, "profile": item_profile(it),
               "text_twin": twins.get(r["question_id"], "")}
        if not k:
            row.update(is_correct=None, score=None, status="error",
                       error=(r["error"] + "; " if r["error"] else "") + "no answer key entry")
        elif r["status"] != "ok":  # never answered: no score (module docstring)
            row.update(is_correct=None, score=None)
        elif is_open:
            row.update(score=None, is_correct=None)
            to_judge.append(len(out))
        else:
            sc = score_mcq(r["choice"], correct)
            row.update(score=sc, is_correct=sc == 100.0)
        out.append(row)
    if to_judge:
        reqs = []
        for i in to_judge:
            k = key[out[i]["question_id"]]
            reqs.append((by_id[out[i]["question_id"]], str(k.get("correct_text") or k.get("correct") or ""),
                         out[i]["answer_text"]))
        try:
            verdicts = judge.judge_many(reqs)
        except Exception as exc:  # noqa: BLE001 - a judge failure leaves the items unscored, the report still comes
            log.warning("evaluate: judge %s failed: %s", getattr(judge, "name", judge), exc)
            verdicts = [(None, f"judge failed: {error_text(exc)}")] * len(reqs)
        for i, (s, note) in zip(to_judge, verdicts):
            out[i].update(likert=s, score=likert_to_100(s))
            if note and s is None:
                out[i].update(status="error", error=note[:1000])
    return pl.DataFrame(out, infer_schema_length=None)


def open_answers(answers: pl.DataFrame, items: list[dict[str, Any]],
                 key: Mapping[str, Mapping[str, Any]]) -> list[tuple[dict[str, Any], str, str]]:
    """``(item, reference, answer)`` of the answered open-ended rows (what :func:`score_rows` will judge)."""
    by_id = {it["question_id"]: it for it in items}
    out = []
    for r in answers.filter(pl.col("status") == "ok").iter_rows(named=True):
        it, k = by_id.get(r["question_id"]), key.get(r["question_id"])
        if it is not None and k and not it.get("choices"):
            out.append((it, str(k.get("correct_text") or k.get("correct") or ""), r["answer_text"]))
    return out


JUDGE_CACHE = "results/judge/verdicts.parquet"


def save_judge_cache(run, cache: dict[str, int | None]) -> None:
    """Write the run's LLM-judge verdicts ``cache`` (``key -> likert``) to :data:`JUDGE_CACHE`, a table for the
    reader (the verdicts step's completion records are what a rerun skips); nothing when empty."""
    if cache:
        run.write_table(JUDGE_CACHE, pl.DataFrame({"key": list(cache), "likert": list(cache.values())},
                                                   schema={"key": pl.Utf8, "likert": pl.Int64}))
