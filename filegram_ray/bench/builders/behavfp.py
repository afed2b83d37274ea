"""BehavFP — Behavioral Fingerprint (T1; 4 choices; context: one anonymous trajectory). Reference §9.1.

Which of four behavioural descriptions (one clause per dimension A–F, plain words) belongs to the user who
produced the session shown. Distractors are the descriptions of other profiles that share ≥ 3 dimensions with
the author, fine-grained pairs (1–2 dimensions apart) first (reference §9.2, §5.6); no two options describe the
same tier vector.

Only unperturbed sessions are used: a perturbed session departs from its author in one dimension and could match
a fine-grained neighbour better than its author.

COUNTS: the paper's 560 = 28 per profile (reference §9.1). The FileGram set has 32 − 5 = 27 unperturbed sessions per
profile (reference §5.7), so this builder yields at most 540 for 20 × 32; with fewer similar profiles (small
sets) profiles without three distinct ≥ 3-shared neighbours yield no items.
"""

from __future__ import annotations

from filegram_ray.bench.common import (
    MIN_SHARED_DIMS,
    Draft,
    describe_tiers,
    pick_similar,
    sample_down,
    scaled_count,
    session_label,
)
from filegram_ray.bench.inputs import BenchInputs
from filegram_ray.bench.schema import ContextSpec
from filegram_ray.seeded import rng

NAME = "BehavFP"
N_CHOICES = 4  # reference §9.1


def default_count(inputs: BenchInputs) -> int:
    return scaled_count(NAME, inputs.n_profiles, inputs.n_tasks)


def build(inputs: BenchInputs, seed: int, target: int) -> list[Draft]:
    drafts: list[Draft] = []
    for p in inputs.profiles:
        for t in inputs.trajectories_of(p.profile_id):
            if t.perturbed:
                continue
            r = rng(seed, NAME, t.trajectory_id)
            others = pick_similar(p, inputs.similar(p.profile_id, MIN_SHARED_DIMS), N_CHOICES - 1, r)
            if others is None:
                continue
            drafts.append(Draft(
                sub_task=NAME, sub_class="pair:fine" if any(
                    sum(o.tiers[d] != p.tiers[d] for d in p.tiers) <= 2 for o in others) else "pair:near",
                channel="procedural", profile_id="",  # the author is the answer: not routed publicly
                question=("The session shown was produced by one unnamed user. Which description of working "
                          "habits fits the person who produced it?"),
                correct=describe_tiers(p.tiers), distractors=[describe_tiers(o.tiers) for o in others],
                context=ContextSpec(kind="single_trajectory", trajectories=[t.trajectory_id],
                                    labels=[session_label(t.task_id)]),
                facts={"author": p.profile_id, "tiers": p.tiers,
                       "distractor_tiers": {o.profile_id: o.tiers for o in others}},
                distractor_profiles=[o.profile_id for o in others], sort_key=t.trajectory_id))
    # group by author (kept in facts) so the per-profile spread is even
    return sample_down(drafts, target, seed, NAME, group=lambda d: d.facts["author"])
