"""The tables the record and caption stages write, and what both stages' workers share.

Paths are relative to the run directory. Column types are ``str`` / ``int`` / ``float`` (Parquet ``Utf8`` /
``Int64`` / ``Float64``); a missing value is null.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CAPTION_COLUMNS", "CAPTION_INDEX", "CAPTION_INDEX_COLUMNS", "REALWORLD_COLUMNS", "REALWORLD_INDEX",
           "RECORD_COLUMNS", "RECORD_INDEX", "RECOVERY_COLUMNS", "RECOVERY_TABLE", "cpu_seconds", "error_text",
           "table"]

RECORD_INDEX = "recordings/index.parquet"
CAPTION_INDEX = "captions/index.parquet"
REALWORLD_INDEX = "realworld/index.parquet"
RECOVERY_TABLE = "realworld/recovery.parquet"

#: columns of recordings/index.parquet (one row per recording; ``render_s`` wall seconds and ``cpu_s`` CPU seconds
#: of the worker, so they differ between two runs of the same recording)
RECORD_COLUMNS: dict[str, str] = {
    "trajectory_id": "str", "profile_id": "str", "task_id": "str", "path": "str", "timeline_path": "str",
    "duration_s": "float", "frames": "int", "fps": "int", "width": "int", "height": "int", "bytes": "int",
    "sha256": "str", "n_events": "int", "n_gestures": "int", "distinct_frames": "int", "render_s": "float",
    "cpu_s": "float", "options_key": "str", "status": "str", "error": "str",
}
#: columns of captions/<captioner>/<recording_id>.parquet (one row per keyframe; same for OCR and VLM)
CAPTION_COLUMNS: dict[str, str] = {
    "recording_id": "str", "trajectory_id": "str", "captioner": "str", "keyframe": "int", "frame": "int",
    "t_s": "float", "width": "int", "height": "int", "change": "float", "text": "str", "lines": "str",
    "operation": "str", "error": "str",
}
#: columns of captions/index.parquet (one row per recording; ``seconds`` / ``cpu_s`` are the worker's wall and CPU
#: seconds)
CAPTION_INDEX_COLUMNS: dict[str, str] = {
    "recording_id": "str", "trajectory_id": "str", "source": "str", "captioner": "str", "path": "str",
    "keyframes": "int", "frames": "int", "fps": "float", "duration_s": "float", "width": "int", "height": "int",
    "lines_read": "int", "seconds": "float", "cpu_s": "float", "key": "str", "sha256": "str", "status": "str",
    "error": "str",
}
#: columns of realworld/index.parquet (one row per captioned recording)
REALWORLD_COLUMNS: dict[str, str] = {
    "recording_id": "str", "trajectory_id": "str", "captioner": "str", "events_path": "str", "n_events": "int",
    "duration_s": "float", "status": "str", "error": "str",
}
#: columns of realworld/recovery.parquet (one row per recording of ours × event type)
RECOVERY_COLUMNS: dict[str, str] = {
    "recording_id": "str", "trajectory_id": "str", "captioner": "str", "event_type": "str", "true": "int",
    "recovered": "int", "matched": "int", "precision": "float", "recall": "float",
}


def table(rows: list[dict[str, Any]], columns: dict[str, str]):
    """A polars DataFrame of ``rows`` with exactly ``columns`` (name → ``str``/``int``/``float``), in that order;
    a key a row lacks is null, keys outside ``columns`` are dropped. No rows: an empty frame of that schema."""
    import polars as pl

    types = {"str": pl.Utf8, "int": pl.Int64, "float": pl.Float64}
    schema = {c: types[t] for c, t in columns.items()}
    data = [{c: r.get(c) for c in columns} for r in rows]
    return pl.DataFrame(data, schema=schema, orient="row") if data else pl.DataFrame(schema=schema)


def error_text(row: dict[str, Any]) -> str:
    """The ``error`` column of an index table for an error :class:`~filegram_ray.stages.base.Row`:
    ``"<exception type>: <message>"`` (at most 2,000 characters, the row's own bound)."""
    from filegram_ray.stages.base import Row

    return Row(row).error_line


def cpu_seconds() -> float:
    """CPU seconds used so far by this process and its finished children (ffmpeg), user + system: a worker's
    speed per core does not depend on how busy the machine is."""
    import resource

    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
