"""VisGrd — Visual Grounding (T4; open-ended; Real-World setting; context: the first half of a screen recording).
Reference §9.1, §9.4, §11.

The paper gives participants' screen recordings, cut in half, and asks for the subsequent file operations and the
behaviour pattern, Likert-judged. Here the recordings are the record stage's guidance videos; the context a method
ingests is the events the caption stage read back from the first half (:mod:`video.realworld`,
``held_out: "second half"``). Per recording:

* one ``next_operations`` item: "which file operations follow?"; the reference is the kinds of operations of the
  gestures that start in the second half, with counts (:func:`filegram_ray.bench.recordings.describe_operations`),
  judged as free text (channel episodic: it is about what comes next in time);
* one item per behavioural attribute with a judge value space (reference §9.4, the ProfRec rubric and vagueness
  rule), skipping the attribute whose dimension the trajectory was perturbed on (one recording shows the shifted
  tier, not the profile's).

COUNTS: the paper's 100 (reference §9.1), drawn evenly over recordings (:func:`sample_down`). A FileGram profile
has 16 of these attributes, so a recording gives 17 items (fewer when perturbed): the default record sample of 6
recordings gives 102, cut to 100.
"""

from __future__ import annotations

from filegram_ray.bench.common import PAPER_COUNTS, Draft, sample_down
from filegram_ray.bench.inputs import BenchInputs
from filegram_ray.bench.schema import ContextSpec
from filegram_ray.bench.vocab import (
    ATTRIBUTE_CHANNEL,
    ATTRIBUTE_DIMENSION,
    BEHAVIOUR_RUBRIC,
    IDENTITY_RUBRIC,
    JUDGE_VALUE_SPACE,
    VAGUENESS_RULE,
    attribute_topic,
)

NAME = "VisGrd"
#: Attributes asked about: those with a judge value space (reference §9.4), in that table's order.
ATTRIBUTES: tuple[str, ...] = tuple(JUDGE_VALUE_SPACE)
HELD_OUT = "second half"  # video.realworld.HELD_OUT_SECOND_HALF (kept literal: the bench does not import video/)


def default_count(inputs: BenchInputs) -> int:
    """The paper's 100 (reference §9.1), not scaled to the profile/task set: VisGrd items come from the recordings,
    whose number is the record stage's ``sample``; the pool of recorded trajectories bounds what is built."""
    return PAPER_COUNTS[NAME]


def build(inputs: BenchInputs, seed: int, target: int) -> list[Draft]:
    drafts: list[Draft] = []
    trajs = {t.trajectory_id: t for t in inputs.trajectories}
    for tid, rec in sorted(inputs.recordings.items()):
        traj = trajs.get(tid)
        if traj is None:
            continue
        p = inputs.profile(traj.profile_id)
        ctx = ContextSpec(kind="recording", trajectories=[tid], labels=["Recording 1"], held_out=HELD_OUT)
        meta = {"recording": f"recordings/{tid}.mp4", "cut_s": round(rec.cut_s, 3),
                "context_events": rec.n_context_events}
        drafts.append(Draft(
            sub_task=NAME, sub_class="next_operations", channel="episodic", profile_id=p.profile_id,
            question=("You see the first half of a screen recording of this user's work session (the file operations "
                      "read from it). Predict the file operations the user performs in the rest of the session: "
                      "which kinds of operations, on which files or folders, in what order. Cite the evidence from "
                      "the first half."),
            correct=rec.next_operations, distractors=[], context=ctx, open_ended=True, setting="real_world",
            facts={"attribute": "next_operations", "value": rec.next_operations, "trajectory_id": tid},
            metadata={**meta, "attribute": "next_operations", "value_space": [],
                      "rubric": {str(k): v for k, v in BEHAVIOUR_RUBRIC.items()}, "vagueness_rule": VAGUENESS_RULE},
            sort_key=f"{tid}|00_next_operations"))
        shifted = traj.perturbation["dimension"] if traj.perturbation else None
        for attr in ATTRIBUTES:
            if attr not in p.attributes or (shifted and ATTRIBUTE_DIMENSION.get(attr) == shifted):
                continue
            topic = attribute_topic(attr)
            rubric = IDENTITY_RUBRIC.get(attr, BEHAVIOUR_RUBRIC)
            drafts.append(Draft(
                sub_task=NAME, sub_class=f"attr:{attr}", channel=ATTRIBUTE_CHANNEL.get(attr, "procedural"),
                profile_id=p.profile_id,
                question=(f"You see the first half of a screen recording of this user's work session (the file "
                          f"operations read from it). From how the session goes on, describe {topic}. State the "
                          "pattern you infer and cite concrete evidence from the recording."),
                correct=p.attributes[attr], distractors=[], context=ctx, open_ended=True, setting="real_world",
                facts={"attribute": attr, "value": p.attributes[attr], "trajectory_id": tid},
                metadata={**meta, "attribute": attr, "value_space": list(JUDGE_VALUE_SPACE[attr]),
                          "rubric": {str(k): v for k, v in rubric.items()}, "vagueness_rule": VAGUENESS_RULE},
                sort_key=f"{tid}|{attr}"))
    return sample_down(drafts, target, seed, NAME, group=lambda d: d.context.trajectories[0])
