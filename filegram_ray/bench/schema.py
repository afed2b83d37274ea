"""FileGramBench item schema: what an answering method sees, what the evaluator routes on, and the answer key.

Three views of one item (ARCHITECTURE.md rule 6, reference §9.2 leakage rule):

* :meth:`Item.public_view` — the only thing a memory method / backbone receives: question, lettered choices,
  the context *kind* and the session labels ("Session T-12", "User 1"). No profile id, no trajectory id, no
  ground truth.
* ``bench/items.parquet`` (:meth:`Item.to_row`) — public fields plus the evaluator's routing: the context spec
  with trajectory ids (which trajectories to ingest, in the order shown), ``profile_id`` (the user the question is
  about; empty when naming it would give the answer away, BehavFP, or when the context mixes users, TraceDis) and
  evaluator metadata (e.g. the judge rubric of ProfRec). Field names follow the released bank (reference §9.3:
  question_id, track, sub_track, sub_class, channel, profile_id, input_trajectories, question, choices, correct,
  metadata); ``correct`` is always empty there.
* ``bench/answers_key.parquet`` (:class:`AnswerKey`) — correct letter (or reference text for open-ended items),
  the generating facts, and the profile ids behind distractor options. Never given to a method.

Choices are stored as a JSON list of strings; the letter of choice ``i`` is ``"ABCDEF"[i]``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

LETTERS = "ABCDEFGH"

Track = Literal["T1_understanding", "T2_reasoning", "T3_detection", "T4_multimodal"]
Channel = Literal["procedural", "semantic", "episodic"]
Setting = Literal["text", "multimodal", "real_world"]
ContextKind = Literal["all_trajectories", "single_trajectory", "held_out", "interleaved_pair",
                      "sessions_with_impostor", "baseline_plus_session", "recording"]

#: Sub-task → track, reference §9.1.
SUBTASK_TRACK: dict[str, str] = {
    "AttrRec": "T1_understanding", "BehavFP": "T1_understanding", "ProfRec": "T1_understanding",
    "BehavInf": "T2_reasoning", "TraceDis": "T2_reasoning",
    "AnomDet": "T3_detection", "ShiftAna": "T3_detection",
    "FileGrd": "T4_multimodal", "VisGrd": "T4_multimodal",
}
#: Open-ended sub-tasks (judged, reference §9.4); the rest are multiple choice.
OPEN_ENDED = frozenset({"ProfRec", "VisGrd"})


class ContextSpec(BaseModel):
    """Which trajectories the answering method is given, and under which labels.

    Attributes:
        kind: how the context is built (reference §9.1 "Context given" column):
            ``all_trajectories`` every trajectory of one user; ``single_trajectory`` one anonymous trajectory;
            ``held_out`` all of one user's trajectories but the held-out task; ``interleaved_pair`` two users'
            event streams on one task, merged by timestamp; ``sessions_with_impostor`` several sessions of one
            user plus one foreign session; ``baseline_plus_session`` baseline sessions of one user followed by
            the session under question (the last entry); ``recording`` a screen recording (VisGrd).
        trajectories: trajectory ids ``"<profile_id>/<task_id>"`` in the order they are shown. Evaluator-only.
        labels: one label per trajectory, the only name a method sees for it (``"Session T-12"``, ``"User 1"``).
        held_out: the held-out task id (``held_out`` kind), else ``None``.
    """

    model_config = ConfigDict(extra="forbid")
    kind: ContextKind
    trajectories: list[str]
    labels: list[str]
    held_out: str | None = None

    @model_validator(mode="after")
    def _same_length(self) -> ContextSpec:
        if len(self.labels) != len(self.trajectories):
            raise ValueError(f"context: {len(self.labels)} labels for {len(self.trajectories)} trajectories")
        if len(set(self.labels)) != len(self.labels):
            raise ValueError(f"context: duplicate session labels {self.labels}")
        return self

    def public(self) -> dict[str, Any]:
        """The context as a method may see it: kind, labels, held-out task (no trajectory ids)."""
        return {"kind": self.kind, "labels": list(self.labels), "held_out": self.held_out}


class Item(BaseModel):
    """One FileGramBench item (question + context). Ground truth lives in :class:`AnswerKey`.

    Attributes:
        question_id: ``"<SubTask>-<5 digits>"``, unique in a bank, stable for a seed.
        track / sub_track: reference §9.1 (``sub_track`` = sub-task abbreviation, e.g. ``"AttrRec"``).
        sub_class: finer family inside the sub-task, e.g. ``"dim:C"``, ``"attr:tone"``, ``"pair:fine"``.
        channel: procedural | semantic | episodic (reference §9.5).
        setting: text | multimodal | real_world (reference §9.2 settings; real_world = events read back from
            screen recordings, VisGrd).
        profile_id: the user the question is about (evaluator routing; empty when that would be the answer).
        question: public question text.
        choices: option texts (empty for open-ended items); shown with letters A, B, …
        context: :class:`ContextSpec`.
        metadata: evaluator-facing extras that are not the answer (judge rubric, value space, n_choices).
    """

    model_config = ConfigDict(extra="forbid")
    question_id: str
    track: Track
    sub_track: str
    sub_class: str = ""
    channel: Channel
    setting: Setting = "text"
    profile_id: str = ""
    question: str
    choices: list[str] = Field(default_factory=list)
    context: ContextSpec
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def is_open(self) -> bool:
        return not self.choices

    def public_view(self) -> dict[str, Any]:
        """Everything the answering method/backbone may see (no profile ids, no trajectory ids, no answer)."""
        return {
            "question_id": self.question_id,
            "track": self.track,
            "sub_track": self.sub_track,
            "channel": self.channel,
            "setting": self.setting,
            "question": self.question,
            "choices": {LETTERS[i]: c for i, c in enumerate(self.choices)},
            "context": self.context.public(),
        }

    def to_row(self) -> dict[str, Any]:
        """Row of ``bench/items.parquet`` (all strings, JSON for nested fields; ``correct`` always empty)."""
        return {
            "question_id": self.question_id,
            "track": self.track,
            "sub_track": self.sub_track,
            "sub_class": self.sub_class,
            "channel": self.channel,
            "setting": self.setting,
            "profile_id": self.profile_id,
            "input_trajectories": json.dumps(self.context.trajectories, ensure_ascii=False),
            "question": self.question,
            "choices": json.dumps(self.choices, ensure_ascii=False),
            "n_choices": len(self.choices),
            "correct": "",
            "context": json.dumps(self.context.model_dump(mode="json"), ensure_ascii=False, sort_keys=True),
            "metadata": json.dumps(self.metadata, ensure_ascii=False, sort_keys=True),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Item:
        """Inverse of :meth:`to_row`.

        Raises:
            ValueError: a JSON field does not parse or a field is invalid (message names the question id).
        """
        qid = row.get("question_id", "?")
        try:
            return cls(
                question_id=row["question_id"], track=row["track"], sub_track=row["sub_track"],
                sub_class=row.get("sub_class") or "", channel=row["channel"], setting=row.get("setting") or "text",
                profile_id=row.get("profile_id") or "", question=row["question"],
                choices=json.loads(row.get("choices") or "[]"),
                context=ContextSpec.model_validate(json.loads(row["context"])),
                metadata=json.loads(row.get("metadata") or "{}"),
            )
        except (KeyError, ValueError) as exc:
            raise ValueError(f"bench item {qid}: {exc}") from exc


class AnswerKey(BaseModel):
    """Ground truth of one item (``bench/answers_key.parquet``).

    Attributes:
        question_id: the item.
        correct: letter of the right choice (MCQ) or the reference value (open-ended).
        correct_text: text of the right choice / reference value.
        facts: generating facts (tiers, attribute values, perturbation, chosen dimension …).
        distractor_profiles: profile ids whose description or session supplied a distractor option.
    """

    model_config = ConfigDict(extra="forbid")
    question_id: str
    correct: str
    correct_text: str
    facts: dict[str, Any] = Field(default_factory=dict)
    distractor_profiles: list[str] = Field(default_factory=list)

    def to_row(self) -> dict[str, Any]:
        return {
            "question_id": self.question_id,
            "correct": self.correct,
            "correct_text": self.correct_text,
            "facts": json.dumps(self.facts, ensure_ascii=False, sort_keys=True),
            "distractor_profiles": json.dumps(self.distractor_profiles),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> AnswerKey:
        return cls(question_id=row["question_id"], correct=row["correct"], correct_text=row["correct_text"],
                   facts=json.loads(row.get("facts") or "{}"),
                   distractor_profiles=json.loads(row.get("distractor_profiles") or "[]"))
