"""FileGrd — File Grounding (T4; choices as the source item; Multimodal setting). Reference §9.1, §9.2, §10.

"The same behavioural questions as T1–T3 but outputs given as rendered PDFs/images": this builder re-issues
multiple-choice drafts of the T1–T3 builders in the ``multimodal`` setting, for items whose every context
trajectory is rendered (:func:`filegram_ray.bench.inputs.rendered_trajectories`: each of its text outputs went
through the render stage; a trajectory without a text output qualifies, it has nothing to render). Without a render
stage the pool is empty and the stage reports why. The bank records each item's text counterpart in
``metadata.text_twin`` (the evaluate report compares the two settings on these pairs).

COUNTS: the paper's 550 for 20 × 32 (reference §9.1), scaled by profiles × tasks / (20 × 32), spread evenly over the
six source sub-tasks (a source short of its share hands the rest to the others). The pool is the sources' kept
multiple-choice drafts (≈3,650 on 20 × 32), so 550 is reached whenever the render stage covers the run: on the
20 × 32 synthetic set and on a real 640-trajectory run, 92/92/92/92/91/91 items (tests/test_bench_filegrd.py). Two
things shrink it: a partial render (``render.limit``; at 10 % of trajectories rendered: 76 items, since AttrRec
needs all 32 sessions of a user, BehavInf 31, AnomDet several), and — before ``rendered_trajectories`` — counting
only the ids listed in ``derivatives/index.parquet``, which dropped every all-sessions item (AttrRec, BehavInf) of
a user with one trajectory that wrote no text: 550 were still built, but from four sources instead of six.
"""

from __future__ import annotations

from dataclasses import replace

from filegram_ray.bench.common import Draft, sample_down, scaled_count
from filegram_ray.bench.inputs import BenchInputs

NAME = "FileGrd"
SOURCES = ("AttrRec", "BehavFP", "BehavInf", "TraceDis", "AnomDet", "ShiftAna")


def default_count(inputs: BenchInputs) -> int:
    return scaled_count(NAME, inputs.n_profiles, inputs.n_tasks)


def build(inputs: BenchInputs, seed: int, target: int, sources: dict[str, list[Draft]]) -> list[Draft]:
    rendered = inputs.rendered
    drafts: list[Draft] = []
    for src in SOURCES:
        for d in sources.get(src, []):
            if d.open_ended or not d.context.trajectories:
                continue
            if not all(t in rendered for t in d.context.trajectories):
                continue
            drafts.append(replace(d, sub_task=NAME, sub_class=f"{src}/{d.sub_class}", setting="multimodal",
                                  facts={**d.facts, "source_sub_task": src},
                                  metadata={**d.metadata, "source_sub_task": src},
                                  sort_key=f"{src}|{d.sort_key}"))
    return sample_down(drafts, target, seed, NAME, group=lambda d: d.sort_key.split("|", 1)[0])
