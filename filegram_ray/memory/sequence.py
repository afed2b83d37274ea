"""Sequence features over the behavioural events of one trajectory (FILEGRAM_REFERENCE §7.8)."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

from filegram_ray.memory.constants import PHASE_WINDOW_SIZE
from filegram_ray.memory.normalize import NormalizedEvent

__all__ = ["PHASE_OF", "detect_phases", "phase_of", "sequence_features"]

#: Event type → phase class (§7.8). Anything else is "other".
PHASE_OF: dict[str, str] = {
    "file_read": "exploration", "file_browse": "exploration", "file_search": "exploration",
    "file_write": "production", "file_edit": "production",
    "file_move": "organization", "file_rename": "organization", "dir_create": "organization",
    "file_delete": "organization", "file_copy": "organization",
}


def phase_of(event_type: str) -> str:
    return PHASE_OF.get(event_type, "other")


def detect_phases(types: list[str], window: int = PHASE_WINDOW_SIZE) -> list[dict[str, Any]]:
    """Phases over non-overlapping windows of ``window`` events (§7.8).

    Each window's dominant class is its most frequent non-"other" class (first seen wins ties; "other" if none);
    consecutive windows with the same class merge.

    Returns:
        ``[{phase, start_idx, end_idx (inclusive), dominant_actions: {event_type: count}}]``.
    """
    phases: list[dict[str, Any]] = []
    for start in range(0, len(types), window):
        chunk = types[start:start + window]
        counts: Counter[str] = Counter()
        for t in chunk:
            c = phase_of(t)
            if c != "other":
                counts[c] += 1
        dom = max(counts, key=lambda k: counts[k]) if counts else "other"  # max keeps first-seen on ties
        end = start + len(chunk) - 1
        if phases and phases[-1]["phase"] == dom:
            phases[-1]["end_idx"] = end
            phases[-1]["_types"].extend(chunk)
        else:
            phases.append({"phase": dom, "start_idx": start, "end_idx": end, "_types": list(chunk)})
    for p in phases:
        p["dominant_actions"] = dict(Counter(p.pop("_types")).most_common())
    return phases


def sequence_features(events: list[NormalizedEvent]) -> dict[str, Any]:
    """Transition matrix, phases, phase counts, file-access graph, dominant transition and phase pattern (§7.8).

    Args:
        events: behavioural events in order.
    """
    types = [e.event_type for e in events]
    trans: dict[str, dict[str, int]] = {}
    for a, b in itertools.pairwise(types):
        row = trans.setdefault(a, {})
        row[b] = row.get(b, 0) + 1
    best, best_n = "", 0
    for a, row in trans.items():  # insertion order; strict > keeps the first maximum
        for b, n in row.items():
            if n > best_n:
                best, best_n = f"{a} -> {b}", n
    phases = detect_phases(types)
    graph: dict[str, list[str]] = {}
    paths = [e.file_path for e in events if e.file_path]
    for a, b in itertools.pairwise(paths):
        if a != b:
            lst = graph.setdefault(a, [])
            if b not in lst:
                lst.append(b)
    return {
        "transition_matrix": trans,
        "phases": phases,
        "phase_counts": dict(Counter(p["phase"] for p in phases)),
        "file_access_graph": graph,
        "dominant_transition": f"{best} ({best_n})" if best else "",
        "phase_pattern": " -> ".join(p["phase"] for p in phases),
    }
