"""Calibration helpers: the §7.2 procedural features of a written trajectory (via ``filegram_ray.memory``) and the
per-profile rule classification of TIER_TARGETS J rows (``filegram_ray.memory.classify.classify_rules``).

Used by ``tests/benchmarks/calibrate_simulator.py`` and the simulator tests. Never used by a memory method.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The flat feature names reported per dimension (ref §7.2 / §7.3; TIER_TARGETS tables).
DIM_FEATURES: dict[str, list[str]] = {
    "A": ["total_searches", "total_browses", "total_reads", "search_ratio", "browse_ratio", "revisit_ratio",
          "avg_content_length"],
    "B": ["files_created", "avg_output_length", "total_output_chars", "heading_max_depth"],
    "C": ["dirs_created", "max_dir_depth", "files_moved"],
    "D": ["total_edits", "avg_lines_changed", "small_edit_ratio", "total_overwrites", "backup_copies"],
    "E": ["total_deletes", "delete_to_create_ratio"],
    "F": ["image_files_created", "structured_files_created", "markdown_table_rows"],
}
#: TIER_TARGETS core bands for a content task (lo, hi) per dimension → tier → feature.
BANDS: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    "A": {"L": {"total_searches": (0, 0), "revisit_ratio": (0.12, 0.30), "total_reads": (14, 25)},
          "M": {"total_searches": (4, 7), "search_ratio": (0.30, 0.60), "total_reads": (3, 8)},
          "R": {"total_browses": (3, 6), "browse_ratio": (0.18, 0.40), "revisit_ratio": (0, 0.04)}},
    "B": {"L": {"files_created": (4, 8), "avg_output_length": (3500, 9000), "total_output_chars": (12000, 35000)},
          "M": {"files_created": (1, 3), "avg_output_length": (1500, 3000), "total_output_chars": (3000, 7000)},
          "R": {"files_created": (1, 1), "avg_output_length": (400, 1200), "total_output_chars": (400, 2500)}},
    "C": {"L": {"dirs_created": (3, 8), "max_dir_depth": (3, 4)}, "M": {"dirs_created": (0, 2),
          "max_dir_depth": (1, 2)}, "R": {"dirs_created": (0, 0), "max_dir_depth": (0, 0)}},
    "D": {"L": {"total_edits": (6, 15), "small_edit_ratio": (0.7, 1.0)}, "M": {"total_edits": (2, 5),
          "avg_lines_changed": (15, 45)}, "R": {"total_edits": (0, 1)}},
    "E": {"L": {"total_deletes": (1, 4), "delete_to_create_ratio": (0.2, 1.0)},
          "M": {"total_deletes": (0, 1), "delete_to_create_ratio": (0, 0.15)},
          "R": {"total_deletes": (0, 0)}},
    "F": {"L": {"image_files_created": (1, 3), "structured_files_created": (1, 3)},
          "M": {"image_files_created": (0, 0), "markdown_table_rows": (6, 30)},
          "R": {"image_files_created": (0, 0), "markdown_table_rows": (0, 1)}},
}
RULE_ATTR = {"A": "reading_strategy", "B": "output_detail", "C": "directory_style", "D": "edit_strategy",
             "E": "working_style", "F": "cross_modal_behavior"}


def procedural(traj_dir: Path | str) -> dict[str, dict[str, Any]]:
    """The nine §7.2 procedural attributes of the trajectory in ``traj_dir`` (events.json + media/)."""
    from filegram_ray.memory.features import extract_procedural
    from filegram_ray.memory.normalize import normalize_events

    d = Path(traj_dir)
    events = json.loads((d / "events.json").read_text(encoding="utf-8"))
    return extract_procedural(normalize_events(events, d / "media", source=str(d / "events.json")))


def flatten(proc: dict[str, dict[str, Any]]) -> dict[str, float]:
    """``{feature: value}`` over all attributes (first occurrence wins; numbers only)."""
    out: dict[str, float] = {}
    for attr in proc.values():
        for k, v in attr.items():
            if k not in out and isinstance(v, (int, float)):
                out[k] = float(v)
    return out


def trajectory_features(traj_dir: Path | str) -> dict[str, float]:
    """Flat procedural features of one trajectory, plus ``heading_max_depth`` of the created text."""
    return flatten(procedural(traj_dir))


def classify_profile(procs: list[dict[str, dict[str, Any]]]) -> dict[str, str]:
    """Rule-classifier tiers {A..F} from one profile's trajectories (TIER_TARGETS J rows, ref §7.6)."""
    from filegram_ray.memory.classify import classify_rules
    from filegram_ray.memory.consolidate import aggregate

    agg = aggregate(procs, len(procs))
    res = classify_rules(agg)
    by_attr = {r["attribute"]: r["tier"] for r in res}
    return {d: by_attr.get(a, "?") for d, a in RULE_ATTR.items()}
