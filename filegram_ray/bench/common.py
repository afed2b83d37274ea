"""Shared helpers of the item builders: seeding, quotas, distractor profiles, MCQ assembly.

Determinism (house rule "same seed, same bytes"): every random choice goes through
:func:`filegram_ray.seeded.rng`, a ``random.Random`` seeded from a SHA-256 of the master seed and a tuple of stable
parts; Python's ``hash()`` is never used. Choice order is shuffled by the same means, so a seed fixes the bank byte
for byte.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from filegram_ray.bench.inputs import ProfileRec
from filegram_ray.bench.schema import LETTERS, SUBTASK_TRACK, AnswerKey, ContextSpec, Item
from filegram_ray.bench.vocab import DIMENSIONS, TIER_BEHAVIOUR
from filegram_ray.seeded import rng

#: Minimum number of shared dimensions between a target profile and a distractor profile (reference §9.2
#: appendix rule).
MIN_SHARED_DIMS = 3
#: Hamming distance range of fine-grained pairs (reference §5.6: differ in 1–2 dimensions).
FINE_MAX_DISTANCE = 2

#: Paper item counts for 20 profiles × 32 tasks (reference §9.1).
PAPER_COUNTS: dict[str, int] = {"AttrRec": 326, "BehavFP": 560, "ProfRec": 320, "BehavInf": 560,
                                "TraceDis": 1134, "AnomDet": 815, "ShiftAna": 288, "FileGrd": 550,
                                "VisGrd": 100}
#: The paper's profile and task counts, the base of count scaling (reference §5.3, §6.3).
PAPER_PROFILES = 20
PAPER_TASKS = 32


def quotas(total: int, keys: Sequence[str]) -> dict[str, int]:
    """Split ``total`` items over ``keys`` as evenly as possible (earlier keys get the remainder)."""
    if not keys:
        return {}
    base, extra = divmod(max(total, 0), len(keys))
    return {k: base + (1 if i < extra else 0) for i, k in enumerate(keys)}


def hamming(a: ProfileRec, b: ProfileRec) -> int:
    """Number of dimensions A–F on which two profiles' tiers differ (reference §5.3)."""
    return sum(a.tiers[d] != b.tiers[d] for d in DIMENSIONS)


def pick_similar(target: ProfileRec, pool: Sequence[ProfileRec], k: int, r: random.Random,
                 distinct_vectors: bool = True) -> list[ProfileRec] | None:
    """``k`` distractor profiles from ``pool`` (profiles sharing ≥ 3 dimensions with ``target``): fine-grained pairs first, then farther ones, random inside each distance band; with
    ``distinct_vectors`` no two picks share a tier vector. ``None`` if the pool is too small."""
    by_dist: dict[int, list[ProfileRec]] = {}
    for p in pool:
        by_dist.setdefault(hamming(target, p), []).append(p)
    ordered: list[ProfileRec] = []
    for d in sorted(by_dist):
        band = sorted(by_dist[d], key=lambda p: p.profile_id)
        r.shuffle(band)
        ordered.extend(band)
    picked: list[ProfileRec] = []
    seen = {target.vector()}
    for p in ordered:
        if distinct_vectors and p.vector() in seen:
            continue
        picked.append(p)
        seen.add(p.vector())
        if len(picked) == k:
            return picked
    return None


def describe_tiers(tiers: dict[str, str], dims: Sequence[str] = DIMENSIONS) -> str:
    """A behavioural description of a tier vector, one clause per dimension, in plain words."""
    return "; ".join(TIER_BEHAVIOUR[d][tiers[d]] for d in dims).capitalize() + "."


def scaled_count(sub_task: str, n_profiles: int, n_tasks: int, by_tasks: bool = True) -> int:
    """The paper's count for a sub-task scaled to ``n_profiles`` × ``n_tasks`` (reference §9.1 counts)."""
    f = n_profiles / PAPER_PROFILES
    if by_tasks:
        f *= n_tasks / PAPER_TASKS
    return round(PAPER_COUNTS[sub_task] * f)


@dataclass
class Draft:
    """An item before numbering: builders return drafts; the bank assigns ids and shuffles choices."""

    sub_task: str
    sub_class: str
    channel: str
    question: str
    correct: str
    distractors: list[str]
    context: ContextSpec
    profile_id: str = ""
    facts: dict[str, Any] = field(default_factory=dict)
    distractor_profiles: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    setting: str = "text"
    open_ended: bool = False
    sort_key: str = ""


def finalize(drafts: Sequence[Draft], seed: int, sub_task: str,
             llm_fn: Callable[[str], str] | None = None) -> tuple[list[Item], list[AnswerKey]]:
    """Number drafts (``<SubTask>-00001`` …, in ``sort_key`` order), shuffle their choices deterministically and
    split into public items and answer keys.

    Args:
        llm_fn: optional paraphraser ``prompt -> text``; see :func:`paraphrase`.

    Raises:
        ValueError: a draft has duplicate options or more options than letters.
    """
    items: list[Item] = []
    keys: list[AnswerKey] = []
    for n, d in enumerate(sorted(drafts, key=lambda x: x.sort_key), start=1):
        qid = f"{sub_task}-{n:05d}"
        question = paraphrase(d.question, llm_fn, seed, qid) if llm_fn else d.question
        if d.open_ended:
            choices: list[str] = []
            correct = d.correct
        else:
            choices = [d.correct, *d.distractors]
            if len(set(choices)) != len(choices):
                raise ValueError(f"{qid}: duplicate options {choices}")
            if len(choices) > len(LETTERS):
                raise ValueError(f"{qid}: {len(choices)} options exceed {len(LETTERS)} letters")
            rng(seed, "choices", sub_task, d.sort_key).shuffle(choices)
            correct = LETTERS[choices.index(d.correct)]
        meta = dict(d.metadata)
        meta["n_choices"] = len(choices)
        items.append(Item(question_id=qid, track=SUBTASK_TRACK[sub_task], sub_track=sub_task,
                          sub_class=d.sub_class, channel=d.channel, setting=d.setting, profile_id=d.profile_id,
                          question=question, choices=choices, context=d.context, metadata=meta))
        keys.append(AnswerKey(question_id=qid, correct=correct, correct_text=d.correct, facts=d.facts,
                              distractor_profiles=list(d.distractor_profiles)))
    return items, keys


def paraphrase(question: str, llm_fn: Callable[[str], str], seed: int, qid: str) -> str:
    """Reword a template question through ``llm_fn``; fall back to the template when the reply is empty, far
    longer than the template, or brings in a forbidden term (reference §9.2: the paper had GPT-4.1 turn templates
    into natural language; the options are never sent, so the answer cannot leak into the rewording)."""
    from filegram_ray.bench.vocab import FORBIDDEN_TERMS

    prompt = ("Rewrite the following question in natural, fluent English without changing its meaning, adding "
              "facts or naming any answer. Reply with the question only.\n\n" + question)
    try:
        out = (llm_fn(prompt) or "").strip()
    except Exception:  # noqa: BLE001 - a failing backend must not sink the bank
        return question
    low = out.lower()
    if not out or len(out) > 3 * len(question) + 80 or any(
            re.search(rf"\b{re.escape(t.lower())}", low) for t in FORBIDDEN_TERMS):
        return question
    return out


def sample_preferring(r: random.Random, pool: Sequence[Any], prefer: Callable[[Any], bool], most: int,
                      least: int) -> list[Any]:
    """Up to ``most`` of the ``prefer``-red members of ``pool``, then the others only until there are ``least``
    (seeded by ``r``; the order of the draw is ``r.sample`` of the preferred, then of the others). Like is
    compared with like: AnomDet's user sessions come first from tasks that exercise a dimension where user and
    impostor differ."""
    liked = [x for x in pool if prefer(x)]
    others = [x for x in pool if not prefer(x)]
    got = r.sample(liked, min(most, len(liked)))
    return got + r.sample(others, min(max(0, least - len(got)), len(others)))


def session_label(task_id: str) -> str:
    """How a session is named to a method (by task id, e.g. ``"Session T-12"``)."""
    return f"Session {task_id}"


def sample_down(drafts: list[Draft], target: int, seed: int, sub_task: str,
                group: Callable[[Draft], str] = lambda d: d.profile_id) -> list[Draft]:
    """Keep ``target`` drafts, spread evenly over groups (default: per profile), deterministic for the seed.

    Groups short of their quota hand the remainder to the others, so the total is ``min(target, len(drafts))``.
    """
    if target >= len(drafts):
        return list(drafts)
    groups: dict[str, list[Draft]] = {}
    for d in sorted(drafts, key=lambda x: x.sort_key):
        groups.setdefault(group(d), []).append(d)
    for g, lst in groups.items():
        rng(seed, "sample", sub_task, g).shuffle(lst)
    names = sorted(groups)
    kept: list[Draft] = []
    remaining = target
    # round-robin over groups: one from each group per pass keeps the spread even
    pos = {g: 0 for g in names}
    while remaining > 0:
        progressed = False
        for g in names:
            if remaining == 0:
                break
            if pos[g] < len(groups[g]):
                kept.append(groups[g][pos[g]])
                pos[g] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            break
    return kept
