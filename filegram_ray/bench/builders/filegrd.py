"""FileGrd — File Grounding (T4; choices as the source item; Multimodal setting). Reference §9.1, §9.2, §10.

"The same behavioural questions as T1–T3 but outputs given as rendered PDFs/images": this builder re-issues
multiple-choice drafts of the T1–T3 builders in the ``multimodal`` setting, for items whose every context
trajectory has rendered derivatives (``derivatives/index.parquet`` of the render stage, column
``trajectory_id``). Without a render stage the pool is empty and the stage reports why.

COUNTS: the paper's 550 for 20 × 32 (reference §9.1), scaled by profiles × tasks / (20 × 32), spread evenly over the
source sub-tasks.
"""

from __future__ import annotations

from dataclasses import replace

from filegram_ray.bench.common import Draft, sample_down, scaled_count
from filegram_ray.bench.inputs import BenchInputs

NAME = "FileGrd"
SOURCES = ("AttrRec", "BehavFP", "BehavInf", "TraceDis", "AnomDet", "ShiftAna")


def default_count(inputs: BenchInputs) -> int:
    return scaled_count(NAME, len(inputs.profiles), len(inputs.tasks))


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
