"""TraceDis — Trace Disentanglement (T2; 2–4 choices; context: two users' interleaved event streams on one task).

Reference §9.1. For two users who did the same task, which statement names the primary behavioural difference
between "User 1" and "User 2"? Exactly one option is true:

* the correct option states the primary difference: a dimension the task probes on which the two sessions'
  tiers differ (their effective tiers, i.e. with any perturbation applied); among several such dimensions the
  primary one is the one with the largest relative gap in the 17-D fingerprint features of that dimension
  (reference §7.3) when fingerprints exist, else the largest tier distance (L vs R before L vs M), then the task's
  dimension priority;
* one option states the same difference with the users swapped (false);
* up to two options claim a difference on a dimension where both users share the tier (false).

Hence 2–4 options (reference §9.1), depending on how many shared dimensions the pair has.

COUNTS: the pool is every profile pair (order decided by the seed; a random subset of
:data:`PAIR_POOL_FACTOR` × items-per-task pairs when there are more) × task where both sessions are usable and differ on a
probed dimension; it is sampled evenly over pairs down to the paper's 1,134 for 20 × 32 (reference §9.1), scaled by
profiles × tasks / (20 × 32) for other sets.
"""

from __future__ import annotations

from itertools import combinations

from filegram_ray.bench.common import Draft, sample_down, scaled_count
from filegram_ray.bench.inputs import BenchInputs, TrajRec
from filegram_ray.bench.schema import ContextSpec
from filegram_ray.bench.vocab import DIMENSIONS, TIER_BEHAVIOUR, TIERS
from filegram_ray.seeded import rng

NAME = "TraceDis"
#: Fingerprint positions per dimension (reference §7.3 table: features 1–3 A, 4–6 B, 7–9 C, 10–12 D, 13–14 E, 15–17 F).
FINGERPRINT_SLICES = {"A": (0, 3), "B": (3, 6), "C": (6, 9), "D": (9, 12), "E": (12, 14), "F": (14, 17)}
_TIER_POS = {"L": 0, "M": 1, "R": 2}
#: Candidate pairs per task, as a multiple of the items wanted per task, before pairs are sampled (large sets).
PAIR_POOL_FACTOR = 3


def default_count(inputs: BenchInputs) -> int:
    return scaled_count(NAME, inputs.n_profiles, inputs.n_tasks)


def _statement(d: str, t1: str, t2: str) -> str:
    return f"User 1 {TIER_BEHAVIOUR[d][t1]}, whereas User 2 {TIER_BEHAVIOUR[d][t2]}."


def fingerprint_gap(a: TrajRec, b: TrajRec, d: str) -> float:
    """Mean relative gap |x − y| / (|x| + |y|) over dimension ``d``'s fingerprint features (0 when absent)."""
    if not a.fingerprint or not b.fingerprint or len(a.fingerprint) < 17 or len(b.fingerprint) < 17:
        return 0.0
    lo, hi = FINGERPRINT_SLICES[d]
    gaps = []
    for x, y in zip(a.fingerprint[lo:hi], b.fingerprint[lo:hi]):
        den = abs(x) + abs(y)
        gaps.append(abs(x - y) / den if den > 0 else 0.0)
    return sum(gaps) / len(gaps)


def _pairs(pids: list[str], per_task: int, r) -> list[tuple[str, str]]:
    """Every pair when there are at most :data:`PAIR_POOL_FACTOR` × ``per_task`` of them, else that many distinct
    random pairs (large profile sets: the pool stays linear in the number of items wanted)."""
    n_pairs = len(pids) * (len(pids) - 1) // 2
    want = PAIR_POOL_FACTOR * per_task
    if n_pairs <= want:
        return list(combinations(pids, 2))
    seen: set[tuple[str, str]] = set()
    while len(seen) < want:
        a, b = r.sample(pids, 2)
        seen.add((a, b) if a < b else (b, a))
    return sorted(seen)


def build(inputs: BenchInputs, seed: int, target: int) -> list[Draft]:
    by_task: dict[str, dict[str, TrajRec]] = {}
    for t in inputs.trajectories:
        by_task.setdefault(t.task_id, {})[t.profile_id] = t
    drafts: list[Draft] = []
    per_task = -(-target // max(len(by_task), 1))
    for task_id in sorted(by_task):
        task = inputs.task(task_id)
        probed = list(task.dimensions) or list(DIMENSIONS)
        for pa, pb in _pairs(sorted(by_task[task_id]), per_task, rng(seed, NAME, task_id, "pairs")):
            r = rng(seed, NAME, task_id, pa, pb)
            a, b = by_task[task_id][pa], by_task[task_id][pb]
            if r.random() < 0.5:
                a, b = b, a
            ta, tb = inputs.effective_tiers(a), inputs.effective_tiers(b)
            diff = [d for d in probed if ta[d] != tb[d]]
            if not diff:
                continue
            primary = max(diff, key=lambda d: (round(fingerprint_gap(a, b, d), 6),
                                               abs(_TIER_POS[ta[d]] - _TIER_POS[tb[d]]), -probed.index(d)))
            shared = [d for d in DIMENSIONS if ta[d] == tb[d]]
            r.shuffle(shared)
            n_false = r.randint(0, min(2, len(shared)))
            distractors = [_statement(primary, tb[primary], ta[primary])]
            for d in shared[:n_false]:
                own = ta[d]
                other = r.choice([t for t in TIERS if t != own])
                distractors.append(_statement(d, own, other) if r.random() < 0.5 else _statement(d, other, own))
            drafts.append(Draft(
                sub_task=NAME, sub_class=f"dim:{primary}", channel="procedural", profile_id="",
                question=("The events of two users who did the same task are shown interleaved in time, each event "
                          "tagged User 1 or User 2. Which statement captures the main difference in how the two "
                          "users worked?"),
                correct=_statement(primary, ta[primary], tb[primary]), distractors=distractors,
                context=ContextSpec(kind="interleaved_pair", trajectories=[a.trajectory_id, b.trajectory_id],
                                    labels=["User 1", "User 2"]),
                facts={"primary_dimension": primary, "user1": a.trajectory_id, "user2": b.trajectory_id,
                       "user1_tiers": ta, "user2_tiers": tb, "differing": diff,
                       "false_claims": shared[:n_false]},
                distractor_profiles=[], sort_key=f"{task_id}|{pa}|{pb}", metadata={"task_id": task_id}))
    return sample_down(drafts, target, seed, NAME, group=lambda d: d.sort_key.split("|", 1)[1])
