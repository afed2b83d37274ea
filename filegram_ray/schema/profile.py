"""Persona profile model: identity, the six-dimension L/M/R tier vector, 16 behavioural attributes.

Shape (one YAML per profile under ``conf/profiles/``)::

    profile_id: p1_methodical        # "p<N>_<slug>" for the bundled set
    name / role / language           # identity attributes (ref §5.2); language "English" | "Chinese"
    tiers: {A: L, B: L, ..., F: M}   # ref §5.3 profile matrix
    rhythm: phased | steady | bursty # ref §5.3 column E(y): ordering texture only (TIER_TARGETS §2.5)
    attributes: {tone: ..., ...}     # exactly the 16 behavioural attributes of ref §5.2 / §5.4
    persona: str                     # free-text persona description in the profile's language
    preferences / avoidances: {A..F: [str, ...]}
    greeting: str

**E means CURATION in this project** (selective L / pragmatic M / preservative R, the tiers of upstream
``profile_matrix.json``). Upstream is inconsistent (ref §5.1): its YAML header vectors, runner and perturbation logic
use the old *work rhythm* meaning of E (phased / steady / bursty), whose M and R are swapped relative to curation for
13 profiles. We keep rhythm separately in :attr:`Profile.rhythm` (L=phased, M=steady, R=bursty in the rhythm column)
and never put it in ``tiers``.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from filegram_ray.schema.meta import Dimension, Tier

#: The six behavioural dimensions (ref §5.1 / paper Table 2).
DIMENSIONS: tuple[str, ...] = ("A", "B", "C", "D", "E", "F")
#: Tier letters (ref §5.1).
TIERS: tuple[str, ...] = ("L", "M", "R")
#: Human names of the dimensions (ref §5.1 table, E in the curation meaning).
DIMENSION_NAMES: dict[str, str] = {
    "A": "consumption", "B": "production", "C": "organization",
    "D": "iteration", "E": "curation", "F": "cross_modal",
}
#: Tier names per dimension (ref §5.1, matrix tier keys; E = curation).
TIER_NAMES: dict[str, dict[str, str]] = {
    "A": {"L": "sequential", "M": "targeted", "R": "breadth_first"},
    "B": {"L": "comprehensive", "M": "balanced", "R": "minimal"},
    "C": {"L": "deeply_nested", "M": "adaptive", "R": "flat"},
    "D": {"L": "incremental", "M": "balanced", "R": "rewrite"},
    "E": {"L": "selective", "M": "pragmatic", "R": "preservative"},
    "F": {"L": "visual_heavy", "M": "balanced", "R": "text_only"},
}
#: Upstream rhythm tier names of the old E (ref §5.1 / §5.7: L phased, M steady, R bursty).
RHYTHM_BY_TIER: dict[str, str] = {"L": "phased", "M": "steady", "R": "bursty"}

#: The 16 behavioural attributes and the dimension each belongs to (ref §5.2 table).
ATTRIBUTE_DIMENSIONS: dict[str, str] = {
    "tone": "B", "verbosity": "B", "output_detail": "B", "documentation": "B", "output_structure": "B",
    "reading_strategy": "A", "thoroughness": "A",
    "organization_style": "C", "naming_convention": "C", "directory_style": "C", "naming": "C",
    "edit_strategy": "D", "version_strategy": "D", "error_handling": "D",
    "working_style": "E",
    "cross_modal_behavior": "F",
}
BEHAVIOURAL_ATTRIBUTES: tuple[str, ...] = tuple(ATTRIBUTE_DIMENSIONS)

#: Attribute values that are a deterministic function of the tier in all 20 bundled profiles (ref §5.2, the
#: attributes marked (L)/(M)/(R)); ``verbosity`` mirrors ``output_detail`` (ref §5.2 note).
DETERMINISTIC_ATTRIBUTES: dict[str, tuple[str, dict[str, str]]] = {
    "output_detail": ("B", {"L": "detailed", "M": "balanced", "R": "concise"}),
    "verbosity": ("B", {"L": "detailed", "M": "balanced", "R": "concise"}),
    "reading_strategy": ("A", {"L": "sequential_deep", "M": "targeted_search", "R": "breadth_first"}),
    "directory_style": ("C", {"L": "nested_by_topic", "M": "adaptive", "R": "flat"}),
    "edit_strategy": ("D", {"L": "incremental_small", "M": "balanced", "R": "bulk_rewrite"}),
    "cross_modal_behavior": ("F", {"L": "visual_heavy", "M": "tables_and_references", "R": "text_only"}),
}
#: Value spaces of the free attributes observed in the 20 profiles (ref §5.2 table).
FREE_ATTRIBUTE_VALUES: dict[str, tuple[str, ...]] = {
    "tone": ("professional", "friendly", "casual"),
    "documentation": ("comprehensive", "moderate", "minimal"),
    "output_structure": ("hierarchical", "flat_list", "narrative"),
    "thoroughness": ("exhaustive", "balanced", "minimal"),
    "organization_style": ("deeply_nested", "by_type", "flat"),
    "naming_convention": ("descriptive_long", "short_abbreviation", "date_prefixed"),
    "naming": ("long_descriptive", "short_abbrev", "date_prefix", "mixed"),
    "version_strategy": ("keep_history", "archive_old", "overwrite"),
    "error_handling": ("defensive", "balanced", "optimistic"),
    "working_style": ("methodical", "exploratory", "pragmatic"),
}

#: The one rule for a profile or task id (ours): ASCII letters or digits first, then letters, digits, ``_``, ``.``,
#: ``-``; at most :data:`ID_MAX_CHARS`. Ids name folders (``trajectories/<profile_id>/<task_id>/``) and the
#: engine's virtual root, so an id is never a path: no ``/``, no ``..``-only or empty id, no control character
#: (case REL2-CONFIG-profile-id-path-accepted).
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
#: Longest id (ours: well under a file name's 255 bytes once ``_<task_id>`` is appended).
ID_MAX_CHARS = 128


def id_problem(value: object) -> str | None:
    """Why ``value`` is not a valid profile/task id (:data:`ID_RE`), or ``None`` when it is one."""
    if not isinstance(value, str):
        return f"wrong type: expected a string id, got {type(value).__name__}"
    if not value:
        return "empty id"
    if len(value) > ID_MAX_CHARS:
        return f"id longer than {ID_MAX_CHARS} characters"
    if ID_RE.fullmatch(value) is None:
        return (f"{value!r} is not an id: it must start with a letter or digit and hold only letters, digits, "
                "'_', '.', '-' (it names a folder, so it is never a path)")
    return None


Language = Literal["English", "Chinese"]
Rhythm = Literal["phased", "steady", "bursty"]


class Profile(BaseModel):
    """One persona (ref §5). Raises ``pydantic.ValidationError`` on: a ``profile_id`` that is not an id
    (:func:`id_problem`: a path, empty, control characters), a missing/unknown dimension in ``tiers``,
    a tier outside L/M/R, a missing or unknown behavioural attribute, a free attribute's value outside
    :data:`FREE_ATTRIBUTE_VALUES`, an unknown dimension key in preferences or avoidances."""

    model_config = ConfigDict(extra="forbid")

    profile_id: str = Field(min_length=1, description="e.g. 'p1_methodical'")
    name: str = Field(min_length=1)
    role: str = Field(min_length=1)
    language: Language
    tiers: dict[Dimension, Tier] = Field(description="A..F -> L|M|R; E = curation (module docstring)")
    rhythm: Rhythm = Field(description="old work-rhythm E (ref §5.3 E(y)); ordering texture only")
    attributes: dict[str, str] = Field(description="the 16 behavioural attributes of ref §5.2")
    persona: str = ""
    preferences: dict[Dimension, list[str]] = Field(default_factory=dict)
    avoidances: dict[Dimension, list[str]] = Field(default_factory=dict)
    greeting: str = ""

    @field_validator("profile_id")
    @classmethod
    def _id_is_a_name(cls, v: str) -> str:
        problem = id_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("tiers")
    @classmethod
    def _all_dims(cls, v: dict[str, str]) -> dict[str, str]:
        missing = [d for d in DIMENSIONS if d not in v]
        if missing:
            raise ValueError(f"missing tier for dimension(s) {missing}")
        return {d: v[d] for d in DIMENSIONS}

    @field_validator("attributes")
    @classmethod
    def _known_attrs(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(v) - set(BEHAVIOURAL_ATTRIBUTES))
        if unknown:
            raise ValueError(f"unknown attribute(s) {unknown}; expected {list(BEHAVIOURAL_ATTRIBUTES)}")
        missing = [a for a in BEHAVIOURAL_ATTRIBUTES if a not in v]
        if missing:
            raise ValueError(f"missing attribute(s) {missing}")
        for a, space in FREE_ATTRIBUTE_VALUES.items():  # the simulator acts on these values: a typo is refused
            if v[a] not in space:
                raise ValueError(f"{a}: unknown value {v[a]!r} (expected one of {', '.join(space)})")
        return {a: v[a] for a in BEHAVIOURAL_ATTRIBUTES}

    @model_validator(mode="after")
    def _dims_sorted(self) -> Profile:
        self.preferences = {d: self.preferences[d] for d in DIMENSIONS if d in self.preferences}
        self.avoidances = {d: self.avoidances[d] for d in DIMENSIONS if d in self.avoidances}
        return self

    @property
    def lang(self) -> str:
        """``"en"`` or ``"zh"``."""
        return "zh" if self.language == "Chinese" else "en"

    @property
    def number(self) -> int | None:
        """The N of a ``p<N>_...`` id, else None."""
        head = self.profile_id.split("_", 1)[0]
        return int(head[1:]) if head[:1] == "p" and head[1:].isdigit() else None

    def vector(self) -> str:
        """Tier vector as a compact string, e.g. ``"A:L B:L C:L D:L E:L F:M"``."""
        return " ".join(f"{d}:{self.tiers[d]}" for d in DIMENSIONS)
