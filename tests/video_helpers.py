"""A fixed small trajectory for the video tests: every kept event type once or more, English and Chinese paths,
written content and a diff in the media store, an ``fs_snapshot`` listing and a workspace with previews.

The events follow the engine's field rules (reference §3.2–§3.4); timestamps are epoch ms, 5–12 s apart.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import polars as pl

T0 = 1767870658000.0
PROFILE, TASK = "p1_methodical", "T-03"
TRAJECTORY_ID = f"{PROFILE}/{TASK}"
WORKSPACE_FILES = {
    "notes/meeting_notes.md": "# Meeting notes\n\n- Budget review on Friday\n- Draft due next week\n",
    "data/sales_q3.csv": "region,revenue\nnorth,120\nsouth,95\n",
    "readme.txt": "Project folder for the quarterly summary.\n",
}


def _h(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _blob(media: Path, text: str, kind: str = "blob") -> dict:
    h = _h(text)
    sub = "blobs" if kind == "blob" else "diffs"
    (media / sub).mkdir(parents=True, exist_ok=True)
    (media / sub / f"{h}.{kind}").write_text(text, encoding="utf-8")
    return {"type": kind, "hash": h, "path": f"{sub}/{h}.{kind}"}


def trajectory_events(media: Path) -> list[dict]:
    """The kept events (the blobs they reference are written into ``media``)."""
    report = ("# Quarterly summary\n\nRevenue grew in the north region.\n\n## Figures\n\n"
              "- North: 120\n- South: 95\n")
    report2 = report.replace("grew in the north region", "grew by 26% in the north region")
    diff = ("--- a/report.md\n+++ b/report.md\n@@ -1,3 +1,3 @@\n # Quarterly summary\n \n"
            "-Revenue grew in the north region.\n+Revenue grew by 26% in the north region.\n")
    cn = "# 会议记录\n\n- 预算评审\n"
    evs: list[dict] = []
    t = T0

    def add(etype: str, gap_s: float, **kw) -> None:
        nonlocal t
        t += gap_s * 1000
        evs.append({"event_id": f"e{len(evs):03d}", "event_type": etype, "timestamp": t, "session_id": "s",
                    "profile_id": PROFILE, **kw})

    add("file_browse", 0.0, directory_path=".", files_listed=3, depth=0)
    add("file_search", 6, search_type="grep", query="revenue", files_matched=2, files_opened_after=[])
    add("context_switch", 5, from_file=None, to_file="notes/meeting_notes.md", trigger="file_read", switch_count=1)
    add("file_read", 0, file_path="notes/meeting_notes.md", file_type="md", directory_depth=1, view_count=1,
        view_range=[1, 4], content_length=80, revisit_interval_ms=None)
    add("context_switch", 7, from_file="notes/meeting_notes.md", to_file="data/sales_q3.csv", trigger="file_read",
        switch_count=2)
    evs[-1]["timestamp"] = t
    add("cross_file_reference", 0, source_file="notes/meeting_notes.md", target_file="data/sales_q3.csv",
        reference_type="sequential_access", interval_ms=7000)
    add("file_read", 0, file_path="data/sales_q3.csv", file_type="csv", directory_depth=1, view_count=1,
        view_range=[1, 3], content_length=40, revisit_interval_ms=None)
    add("dir_create", 6, dir_path="output", depth=1, sibling_count=2)
    add("file_write", 8, file_path="report.md", file_type="md", directory_depth=0, operation="create",
        content_length=len(report), before_hash=None, after_hash=_h(report), media_ref=_blob(media, report))
    add("file_copy", 9, source_path="report.md", dest_path="report.md.bak", is_backup=True)
    add("file_edit", 6, file_path="report.md", file_type="md", edit_tool="edit", lines_added=1, lines_deleted=1,
        lines_modified=1, diff_summary="+1 -1", before_hash=_h(report), after_hash=_h(report2),
        media_ref_old=_blob(media, report), media_ref_new=_blob(media, report2),
        media_ref_diff=_blob(media, diff, "diff"))
    add("file_write", 7, file_path="scratch.tmp", file_type="tmp", directory_depth=0, operation="create",
        content_length=12, before_hash=None, after_hash=_h("temp numbers"), media_ref=_blob(media, "temp numbers"))
    add("file_delete", 6, file_path="scratch.tmp", file_age_ms=None, was_temporary=True)
    add("file_move", 5, old_path="report.md", new_path="output/report.md", destination_directory_depth=1)
    add("file_write", 7, file_path="output/会议纪要.md", file_type="md", directory_depth=1, operation="create",
        content_length=len(cn), before_hash=None, after_hash=_h(cn), media_ref=_blob(media, cn))
    add("file_rename", 8, old_path="output/会议纪要.md", new_path="output/会议纪要_final.md",
        naming_pattern_change="other")
    return evs


def write_trajectory(run_root: Path, trajectory_id: str = TRAJECTORY_ID, index: bool = True) -> Path:
    """Write the trajectory (and its task's workspace) into a run directory at ``run_root``; returns its folder.

    With ``index``, ``trajectories/index.parquet`` lists it (status ok), as the generate stage would.
    """
    pid, task = trajectory_id.split("/")
    folder = run_root / "trajectories" / pid / task
    media = folder / "media"
    media.mkdir(parents=True, exist_ok=True)
    events = trajectory_events(media)
    (folder / "events.json").write_text(json.dumps(events, ensure_ascii=False, indent=2), encoding="utf-8")
    listing = sorted(WORKSPACE_FILES)
    snap = _blob(media, json.dumps(listing))
    raw = [{"event_id": "snap", "event_type": "fs_snapshot", "timestamp": T0, "session_id": "s",
            "profile_id": pid, "file_count_by_type": {}, "max_depth": 2, "total_files": len(listing),
            "media_ref": snap}, *events]
    (folder / "events_raw.json").write_text(json.dumps(raw, ensure_ascii=False, indent=2), encoding="utf-8")
    ws = run_root / "workspaces" / task
    for rel, text in WORKSPACE_FILES.items():
        (ws / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / "files" / rel).write_text(text, encoding="utf-8")
    (ws / "bundle.json").write_text(json.dumps({"task_id": task, "files": []}), encoding="utf-8")
    if index:
        idx = run_root / "trajectories" / "index.parquet"
        rows = pl.read_parquet(idx).to_dicts() if idx.exists() else []
        rows = [r for r in rows if r["trajectory_id"] != trajectory_id]
        rows.append({"trajectory_id": trajectory_id, "profile_id": pid, "task_id": task, "status": "ok"})
        pl.DataFrame(rows).write_parquet(idx)
    return folder


def external_mp4(path: Path, seconds: int = 6) -> Path:
    """An MP4 made by another tool: ffmpeg's ``testsrc`` pattern with two ``drawtext`` overlays (the font is the
    DejaVu Sans that matplotlib ships), not by our renderer."""
    import imageio_ffmpeg
    import matplotlib

    font = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
    vf = (f"drawtext=fontfile='{font}':text='Quarterly report draft':x=30:y=30:fontsize=30:fontcolor=white:"
          f"box=1:boxcolor=black,drawtext=fontfile='{font}':text='Saved budget.xlsx':x=30:y=300:fontsize=26:"
          f"fontcolor=black:box=1:boxcolor=white:enable='gte(t,2)'")
    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
           f"testsrc=size=640x360:rate=25:duration={seconds}", "-vf", vf, "-c:v", "libx264", "-pix_fmt", "yuv420p",
           str(path)]
    subprocess.run(cmd, check=True, capture_output=True)
    return path
