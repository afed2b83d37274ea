"""What the Visual Grounding builder knows about the run's screen recordings (reference §9.1 T4, §11).

A recording qualifies when the record stage rendered it (``recordings/<trajectory_id>.timeline.json``) and the
caption stage rebuilt its events (``realworld/index.parquet`` row ``ok``) with at least one event in its first half
(the context). The ground truth of "what happens next" comes from the trajectory's **true** events: the gestures of
the recording's timeline that start in its second half, by kind (reference §11 event → gesture table).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

log = logging.getLogger(__name__)

__all__ = ["OPERATION_WORDS", "RecordingRec", "describe_operations", "load_recordings"]

#: How each gesture kind is said in a "next operations" reference (plain words, no dimension vocabulary).
OPERATION_WORDS: dict[str, str] = {
    "read": "read files", "write": "write new files", "edit": "edit files", "search": "search",
    "browse": "browse folders", "dir_create": "create folders", "move": "move files", "rename": "rename files",
    "copy": "copy files", "delete": "delete files", "tab_switch": "switch between files",
    "side_by_side": "compare files side by side",
}


@dataclass(frozen=True)
class RecordingRec:
    """A recording usable for VisGrd.

    Attributes:
        trajectory_id: the recorded trajectory (``<profile_id>/<task_id>``).
        duration_s: recording length, seconds; ``cut_s`` = its half.
        n_context_events: reconstructed events in the first half (what a method ingests).
        next_operations: the reference answer "what the user does in the second half" (ground truth).
    """

    trajectory_id: str
    duration_s: float
    cut_s: float
    n_context_events: int
    next_operations: str


def describe_operations(kinds: list[str]) -> str:
    """``["edit", "edit", "move"]`` → ``"edit files (2), move files (1)"`` (order of first occurrence)."""
    counts = Counter(kinds)
    seen = list(dict.fromkeys(kinds))
    return ", ".join(f"{OPERATION_WORDS.get(k, k)} ({counts[k]})" for k in seen)


def load_recordings(run, trajectory_ids: list[str] | None = None) -> dict[str, RecordingRec]:
    """Recordings of ``run`` with reconstructed events (see module doc); ``{}`` before the caption stage.

    Raises:
        ValueError: a timeline file is malformed (names it).
    """
    if not run.exists("realworld/index.parquet"):
        return {}
    keep = set(trajectory_ids) if trajectory_ids is not None else None
    out: dict[str, RecordingRec] = {}
    for r in run.read_table("realworld/index.parquet").to_dicts():
        tid = str(r.get("trajectory_id") or "")
        if not tid or r.get("status") != "ok" or (keep is not None and tid not in keep):
            continue
        tl_rel = f"recordings/{tid}.timeline.json"
        times_rel = f"realworld/{tid}/video_times.json"
        if not (run.exists(tl_rel) and run.exists(times_rel)):
            continue
        tl = run.read_json(tl_rel)
        try:
            duration = float(tl["duration_s"])
            gestures = list(tl["gestures"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{tl_rel}: malformed timeline ({exc})") from exc
        cut = duration / 2.0
        later = [str(g.get("kind")) for g in gestures if float(g.get("start_s", 0.0)) >= cut]
        times = [float(t) for t in run.read_json(times_rel).get("video_t_s") or []]
        n_ctx = sum(t < cut for t in times)
        if not later or n_ctx == 0:
            continue
        out[tid] = RecordingRec(trajectory_id=tid, duration_s=duration, cut_s=cut, n_context_events=n_ctx,
                                next_operations=describe_operations(later))
    return out
