"""Task model: one of the 32 FileGram tasks (ref §6) plus the spec of its input workspace bundle.

Shape (one YAML per task under ``conf/tasks/``): the upstream task fields of ref §6.1 (task_id, name, name_en, type,
dimensions, observable_attributes, depends_on, prompt_zh, prompt_en, behavioral_freedom, expected_file_ops) plus
``modality`` (ref §6.2 inferred 16/16 split) and ``workspace`` (:class:`WorkspaceSpec`, what the seed stage builds).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from filegram_ray.schema.meta import Dimension

#: Task types (ref §6.1).
TASK_TYPES: tuple[str, ...] = ("understand", "create", "organize", "synthesize", "iterate", "maintain")
#: File kinds a workspace bundle may hold (seed stage generators).
INPUT_KINDS: tuple[str, ...] = ("md", "txt", "pdf", "docx", "xlsx", "csv", "pptx", "eml", "ics", "json",
                                "png", "jpg", "gif", "mp3", "wav", "mp4")
#: Kinds that make a workspace multimodal (ref §6.2: audio, image or video inputs).
MEDIA_KINDS: frozenset[str] = frozenset({"png", "jpg", "gif", "mp3", "wav", "mp4"})
#: Ref §6.2 inferred multimodal set (16 tasks); the other 16 are text-centric.
MULTIMODAL_TASKS: frozenset[str] = frozenset(
    f"T-{n:02d}" for n in (2, 7, 12, 16, 18, 19, 22, 23, 24, 25, 26, 27, 28, 30, 31, 32))

TaskType = Literal["understand", "create", "organize", "synthesize", "iterate", "maintain"]


class WorkspaceSpec(BaseModel):
    """What the seed stage must build for a task (``workspaces/<task_id>/files``).

    ``inputs`` counts files per kind (keys from :data:`INPUT_KINDS`); ``subdirs`` is the pre-existing folder layout;
    ``plants`` names facts the task needs planted (e.g. "inconsistencies" T-11, "versions" T-14, "duplicates"/"junk"
    T-21/T-32, "update_batches" T-18, "contradictory_feedback" T-13, "long_report" T-09, "bull_bear_claims" T-15,
    "knowledge_base" T-10, "inconsistent_styles" T-12, "reference_errors" T-32)."""

    model_config = ConfigDict(extra="forbid")
    scenario: str = Field("", pattern=r"^[a-z0-9_]*$", description="snake_case scenario key")
    empty: bool = False
    inputs: dict[str, int] = Field(default_factory=dict)
    subdirs: list[str] = Field(default_factory=list)
    plants: list[str] = Field(default_factory=list)
    language: Literal["en", "zh", "mixed"] = "en"

    @field_validator("inputs")
    @classmethod
    def _kinds(cls, v: dict[str, int]) -> dict[str, int]:
        bad = sorted(set(v) - set(INPUT_KINDS))
        if bad:
            raise ValueError(f"unknown input kind(s) {bad}; expected one of {list(INPUT_KINDS)}")
        neg = [k for k, n in v.items() if n < 0]
        if neg:
            raise ValueError(f"negative count for {neg}")
        return {k: v[k] for k in INPUT_KINDS if v.get(k)}

    @model_validator(mode="after")
    def _empty_consistent(self) -> WorkspaceSpec:
        if self.empty and self.inputs:
            raise ValueError("empty workspace must not list inputs")
        return self

    @property
    def total_files(self) -> int:
        return sum(self.inputs.values())


class Task(BaseModel):
    """One task (ref §6.3). Raises ``pydantic.ValidationError`` on a bad id, type, dimension or modality."""

    model_config = ConfigDict(extra="forbid")
    task_id: str = Field(pattern=r"^T-\d{2,}$")
    name: str = Field(description="Chinese title")
    name_en: str
    type: TaskType
    dimensions: list[Dimension] = Field(min_length=1, description="probed dimensions, priority order")
    modality: Literal["text", "multimodal"]
    prompt_en: str = Field(min_length=1)
    prompt_zh: str = Field(min_length=1)
    expected_file_ops: int = Field(ge=0)
    depends_on: str | None = None
    behavioral_freedom: list[str] = Field(default_factory=list)
    observable_attributes: dict[str, str] = Field(default_factory=dict)
    workspace: WorkspaceSpec = Field(default_factory=WorkspaceSpec)

    @property
    def number(self) -> int:
        return int(self.task_id[2:])

    @property
    def key(self) -> str:
        """Short key used in file names and perturbation tables, e.g. ``"t12"``."""
        return f"t{self.number:02d}"

    def prompt(self, lang: str) -> str:
        """Prompt in ``"en"`` or ``"zh"``."""
        return self.prompt_zh if lang == "zh" else self.prompt_en
