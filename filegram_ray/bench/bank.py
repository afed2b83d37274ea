"""Assemble a FileGramBench bank: run the registered builders, number items, split public items from the key.

    bank = build_bank(inputs, seed=7)                       # every registered sub-task, paper-scaled counts
    bank.items[0].public_view()                             # what a method sees
    bank.keys[0].correct                                    # ground truth, kept apart

Counts: each builder's ``default_count(inputs)`` (the paper's §9.1 count scaled to the profile/task set, see each
builder's COUNTS note) unless ``counts`` overrides it; a builder yields fewer when its pool is smaller, and
:attr:`Bank.stats` says so.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from filegram_ray.bench.builders import BUILDERS, check_sub_tasks
from filegram_ray.bench.common import Draft, finalize
from filegram_ray.bench.inputs import BenchInputs
from filegram_ray.bench.schema import AnswerKey, Item

log = logging.getLogger(__name__)

#: Default sub-task order (reference §9.1 table order).
DEFAULT_SUBTASKS: tuple[str, ...] = ("AttrRec", "BehavFP", "ProfRec", "BehavInf", "TraceDis", "AnomDet",
                                     "ShiftAna", "FileGrd", "VisGrd")


@dataclass
class Bank:
    """Items, answer keys (same order) and per-sub-task stats ``{sub_task: {target, built, note}}``."""

    items: list[Item]
    keys: list[AnswerKey]
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)

    def counts(self) -> dict[str, Counter]:
        """Counters of items by ``track``, ``sub_task``, ``channel`` and ``setting``."""
        return {
            "track": Counter(i.track for i in self.items),
            "sub_task": Counter(i.sub_track for i in self.items),
            "channel": Counter(i.channel for i in self.items),
            "setting": Counter(i.setting for i in self.items),
        }


def build_bank(inputs: BenchInputs, seed: int, sub_tasks: Sequence[str] | None = None,
               counts: dict[str, int] | None = None, llm_fn: Callable[[str], str] | None = None) -> Bank:
    """Build the item bank.

    Args:
        inputs: profiles, tasks, usable trajectories.
        seed: master seed; the bank is a pure function of (inputs, seed, sub_tasks, counts).
        sub_tasks: names from :data:`~filegram_ray.bench.builders.BUILDERS`; ``None`` = :data:`DEFAULT_SUBTASKS`.
        counts: per-sub-task target overrides.
        llm_fn: optional question paraphraser (``prompt -> text``).

    Raises:
        ValueError: an unknown sub-task name.
    """
    names = list(sub_tasks or DEFAULT_SUBTASKS)
    check_sub_tasks(names)
    counts = dict(counts or {})
    drafts: dict[str, list[Draft]] = {}
    stats: dict[str, dict[str, Any]] = {}
    # plain builders first, derived ones (FileGrd) after their sources
    order = [n for n in names if n in BUILDERS and not BUILDERS[n].sources] + \
            [n for n in names if n in BUILDERS and BUILDERS[n].sources]
    for n in order:
        spec = BUILDERS[n]
        target = int(counts.get(n, spec.default_count(inputs)))
        if spec.sources:
            missing = [s for s in spec.sources if s not in drafts]
            src = dict(drafts)
            for s in missing:  # build sources it needs but were not asked for, without keeping them
                src[s] = BUILDERS[s].build(inputs, seed, BUILDERS[s].default_count(inputs))
            got = spec.build(inputs, seed, target, src)
        else:
            got = spec.build(inputs, seed, target)
        drafts[n] = got
        note = ""
        if len(got) < target:
            note = "pool smaller than target"
            if n == "FileGrd":
                note = filegrd_note(inputs)
            if n == "VisGrd" and not inputs.recordings:
                note = "no recordings with reconstructed events (record and caption stages not run)"
        stats[n] = {"target": target, "built": len(got), "note": note}
    items: list[Item] = []
    keys: list[AnswerKey] = []
    qid_of: dict[str, dict[str, str]] = {}  # sub-task → draft sort key → question id
    for n in order:
        its, ks = finalize(drafts[n], seed, n, llm_fn=llm_fn)
        ordered = sorted(drafts[n], key=lambda d: d.sort_key)  # finalize numbers drafts in this order
        qid_of[n] = {d.sort_key: it.question_id for d, it in zip(ordered, its)}
        if BUILDERS[n].sources:
            _link_twins(ordered, its, qid_of)
        items.extend(its)
        keys.extend(ks)
    return Bank(items=items, keys=keys, stats=stats)


def filegrd_note(inputs: BenchInputs) -> str:
    """Why FileGrd built fewer items than its target, in terms of what the render stage did: not run, run with
    ``render.limit``, or run without covering the selected trajectories (or, when it covered them, a pool smaller
    than the target)."""
    ids = {t.trajectory_id for t in inputs.trajectories}
    covered = len(ids & set(inputs.rendered))
    cover = f"{covered} of {len(ids)} selected trajectories have every text output rendered"
    ran = inputs.render.get("ran", bool(inputs.rendered))
    if not ran:
        return "no rendered derivatives (render stage not run)"
    if inputs.render.get("limit") is not None:
        return f"render limited (render.limit={inputs.render['limit']}): {cover}"
    if not covered:
        return f"no usable derivatives for the selected trajectories ({cover})"
    return f"pool smaller than target ({cover})"


def _link_twins(drafts: Sequence[Draft], items: Sequence[Item], qid_of: dict[str, dict[str, str]]) -> None:
    """Record in each derived item's ``metadata.text_twin`` the question id of the text item it re-issues (FileGrd:
    same question, choices and context in the multimodal setting), when that source item is in the bank; the
    report's Text → Multimodal comparison pairs items through it."""
    for d, it in zip(drafts, items):
        src = str(d.facts.get("source_sub_task", ""))
        key = d.sort_key.split("|", 1)[1] if "|" in d.sort_key else ""
        twin = qid_of.get(src, {}).get(key)
        if twin:
            it.metadata["text_twin"] = twin
