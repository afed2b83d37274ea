"""BehavInf — Behavioral Inference (T2; 4 choices; context: all trajectories but one held-out task). Reference §9.1.

Given the user's other sessions, predict how the user behaves on the held-out task. Each item looks at two of the
dimensions the held-out task probes (its ``dimensions`` list, priority order, reference §6.1/6.3; tasks without
two probed dimensions borrow the rest at random) and offers four combined behaviours (3 × 3 tier combinations):
the user's own pair of tiers on that task, and three combinations that differ from it in exactly one of the two
dimensions (the "fine-grained" rule of §9.2 applied to options).

Only unperturbed sessions are held out (a perturbed one would contradict the user's history by design).
Ground truth = the tiers the session was generated under (facts also carry the held-out fingerprint when the
encode stage ran).

COUNTS: the pool has two items per unperturbed held-out session (two dimension pairs), sampled down to the paper's
560 = 28 per profile for 20 × 32 (reference §9.1); other sets scale by profiles × tasks / (20 × 32).
"""

from __future__ import annotations

from filegram_ray.bench.common import Draft, sample_down, scaled_count, session_label
from filegram_ray.bench.inputs import BenchInputs
from filegram_ray.bench.schema import ContextSpec
from filegram_ray.bench.vocab import DIMENSIONS, TIER_BEHAVIOUR, TIERS
from filegram_ray.seeded import rng

NAME = "BehavInf"
N_CHOICES = 4  # reference §9.1
PAIRS_PER_SESSION = 2


def default_count(inputs: BenchInputs) -> int:
    return scaled_count(NAME, inputs.n_profiles, inputs.n_tasks)


def _option(d1: str, t1: str, d2: str, t2: str) -> str:
    text = f"{TIER_BEHAVIOUR[d1][t1]}, and {TIER_BEHAVIOUR[d2][t2]}"
    return text[0].upper() + text[1:] + "."


def _dim_pairs(task_dims: tuple[str, ...], r) -> list[tuple[str, str]]:
    dims = list(task_dims)
    rest = [d for d in DIMENSIONS if d not in dims]
    r.shuffle(rest)
    dims += rest
    pairs = [(dims[0], dims[1]), (dims[0], dims[2]) if len(task_dims) >= 3 else (dims[1], dims[2])]
    return pairs[:PAIRS_PER_SESSION]


def build(inputs: BenchInputs, seed: int, target: int) -> list[Draft]:
    drafts: list[Draft] = []
    for p in inputs.profiles:
        trajs = sorted(inputs.trajectories_of(p.profile_id), key=lambda t: t.task_id)
        if len(trajs) < 2:
            continue
        for held in trajs:
            if held.perturbed:
                continue
            task = inputs.task(held.task_id)
            rest = [t for t in trajs if t.trajectory_id != held.trajectory_id]
            ctx = ContextSpec(kind="held_out", trajectories=[t.trajectory_id for t in rest],
                              labels=[session_label(t.task_id) for t in rest], held_out=held.task_id)
            title = f'"{task.title}"' if task.title else f"task {held.task_id}"
            kind = f"an {task.type} task" if task.type[:1] in "aeiou" and task.type else (
                f"a {task.type} task" if task.type else "a task")
            tiers = inputs.effective_tiers(held)
            for d1, d2 in _dim_pairs(task.dimensions, rng(seed, NAME, held.trajectory_id, "dims")):
                t1, t2 = tiers[d1], tiers[d2]
                near = [(a, t2) for a in TIERS if a != t1] + [(t1, b) for b in TIERS if b != t2]
                rng(seed, NAME, held.trajectory_id, d1, d2).shuffle(near)
                drafts.append(Draft(
                    sub_task=NAME, sub_class=f"dims:{d1}{d2}", channel="procedural", profile_id=p.profile_id,
                    question=(f"These are {len(rest)} past work sessions of one user. Their next assignment, "
                              f"{title} ({held.task_id}), is {kind} that is not among them. How is this user "
                              "most likely to work on it?"),
                    correct=_option(d1, t1, d2, t2),
                    distractors=[_option(d1, a, d2, b) for a, b in near[:N_CHOICES - 1]], context=ctx,
                    facts={"held_out": held.trajectory_id, "dimensions": [d1, d2], "tiers": [t1, t2],
                           "fingerprint": list(held.fingerprint) if held.fingerprint else None},
                    sort_key=f"{held.trajectory_id}|{d1}{d2}"))
    return sample_down(drafts, target, seed, NAME)
