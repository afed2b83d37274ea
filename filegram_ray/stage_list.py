"""The pipeline's stages in order — the one list of them (:data:`STAGES`).

Config sections, the command lines (``filegram run <stage>``, ``jobs/<stage>.py``, ``filegram pipeline --only`` /
``--skip``) and the viewer derive from it; adding a stage is one line here and its
:class:`~filegram_ray.stages.base.Stage` subclass. This module imports nothing of the project but the error type, so
every other module may read it (``filegram --help`` loads no stage: a line names its class, imported on first use).
"""

from __future__ import annotations

from importlib import import_module
from typing import NamedTuple

from filegram_ray.errors import UserError

__all__ = ["STAGES", "StageRef", "sections", "stage_names", "stage_ref"]


class StageRef(NamedTuple):
    """One line of :data:`STAGES`: a stage's ``name``, the ``module:Class`` of its
    :class:`~filegram_ray.stages.base.Stage`, the config section holding its options, one line of help and the
    stages it ``needs`` run before it by its own door (``filegram run generate`` runs seed first; a finished item
    of the needed stage is skipped)."""

    name: str
    target: str
    section: str
    description: str
    needs: tuple[str, ...] = ()

    def load(self) -> type:
        """The stage's :class:`~filegram_ray.stages.base.Stage` subclass (its module is imported on first use)."""
        module, _, cls = self.target.partition(":")
        return getattr(import_module(module), cls)


#: The pipeline's stages in order — the only list of them. The seed stage's options sit in ``workspace:`` because
#: the top-level ``seed`` is the run's master seed (an int).
STAGES: list[StageRef] = [
    StageRef("seed", "filegram_ray.workspace.stage:SeedStage", "workspace",
             "build every task's seeded multi-format input bundle → workspaces/"),
    StageRef("generate", "filegram_ray.engine.generate:GenerateStage", "generate",
             "persona agents do the tasks; typed events + content deltas → trajectories/", needs=("seed",)),
    StageRef("encode", "filegram_ray.memory.stage:EncodeStage", "encode",
             "FileGramOS Engrams, channels and FAISS indices → engrams/, memory/, indices/"),
    StageRef("render", "rendering.stage:RenderStage", "render",
             "multimodal derivatives of agent outputs → derivatives/"),
    StageRef("record", "video.record_stage:RecordStage", "record",
             "guidance videos of a seeded sample → recordings/"),
    StageRef("caption", "video.caption_stage:CaptionStage", "caption",
             "keyframes → OCR/VLM captions → events read back → captions/, realworld/"),
    StageRef("bench", "filegram_ray.bench.stage:BenchStage", "bench", "FileGramBench items → bench/"),
    StageRef("evaluate", "filegram_ray.evaluate.stage:EvaluateStage", "evaluate",
             "every memory method × the items → results/report.md"),
]


def stage_names() -> list[str]:
    """The stage names in pipeline order."""
    return [s.name for s in STAGES]


def stage_ref(name: str) -> StageRef:
    """The :data:`STAGES` line of ``name``.

    Raises:
        UserError: an unknown stage (the message lists the stages)."""
    for s in STAGES:
        if s.name == name:
            return s
    raise UserError(f"unknown stage {name!r}; stages are {', '.join(stage_names())}")


def sections() -> dict[str, str]:
    """``{config section: stage name}`` of every stage."""
    return {s.section: s.name for s in STAGES}
