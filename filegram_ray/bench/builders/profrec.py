"""ProfRec — Profile Reconstruction (T1; open-ended; context: all trajectories). Reference §9.1, §9.4.

One item per profile × behavioural attribute of the profile (the 16 attributes of reference §5.2 for the FileGram
set: 20 × 16 = 320, matching §9.1). The question asks, in plain words, for the user's habit on one attribute; the
reference value goes to the answer key; the item metadata carries what the judge needs (reference §9.4): the
attribute key, its value space, the 1–5 rubric (identity rubric for name/role/language) and the vagueness rule.
Metadata is evaluator-facing and never part of :meth:`Item.public_view`.
"""

from __future__ import annotations

from filegram_ray.bench.common import Draft, sample_down, scaled_count, session_label
from filegram_ray.bench.inputs import BenchInputs
from filegram_ray.bench.schema import ContextSpec
from filegram_ray.bench.vocab import (
    ATTRIBUTE_CHANNEL,
    BEHAVIOUR_RUBRIC,
    IDENTITY_RUBRIC,
    JUDGE_VALUE_SPACE,
    VAGUENESS_RULE,
    attribute_topic,
)

NAME = "ProfRec"


def default_count(inputs: BenchInputs) -> int:
    return (sum(len(p.attributes) for p in inputs.scaled_profiles())
            or scaled_count(NAME, inputs.n_profiles, 0, by_tasks=False))


def _value_space(attr: str, inputs: BenchInputs) -> list[str]:
    if attr in JUDGE_VALUE_SPACE:
        return list(JUDGE_VALUE_SPACE[attr])
    return sorted({p.attributes[attr] for p in inputs.profiles if attr in p.attributes})


def build(inputs: BenchInputs, seed: int, target: int) -> list[Draft]:
    drafts: list[Draft] = []
    for p in inputs.profiles:
        trajs = sorted(inputs.trajectories_of(p.profile_id), key=lambda t: t.task_id)
        if not trajs:
            continue
        ctx = ContextSpec(kind="all_trajectories", trajectories=[t.trajectory_id for t in trajs],
                          labels=[session_label(t.task_id) for t in trajs])
        for attr in sorted(p.attributes):
            topic = attribute_topic(attr)
            rubric = IDENTITY_RUBRIC.get(attr, BEHAVIOUR_RUBRIC)
            drafts.append(Draft(
                sub_task=NAME, sub_class=f"attr:{attr}", channel=ATTRIBUTE_CHANNEL.get(attr, "procedural"),
                profile_id=p.profile_id,
                question=(f"From the {len(trajs)} work sessions of this user, describe {topic}. State the habit you "
                          "infer and cite concrete evidence from the sessions."),
                correct=p.attributes[attr], distractors=[], context=ctx, open_ended=True,
                facts={"attribute": attr, "value": p.attributes[attr]},
                metadata={"attribute": attr, "value_space": _value_space(attr, inputs),
                          "rubric": {str(k): v for k, v in rubric.items()}, "vagueness_rule": VAGUENESS_RULE},
                sort_key=f"{p.profile_id}|{attr}"))
    return sample_down(drafts, target, seed, NAME)
