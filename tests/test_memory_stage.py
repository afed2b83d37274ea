"""Encode stage on a small synthetic run directory written here (no generate stage needed)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest

from filegram_ray.config import load_config
from filegram_ray.memory.api import build_store_from_trajectory_dirs, load_store
from filegram_ray.memory.embed import HashingEmbedder
from filegram_ray.memory.index import load_indices
from filegram_ray.memory.retrieve import retrieve
from filegram_ray.memory.stage import run_encode
from filegram_ray.storage import RunDir

PROFILES = ("pa_reader", "pb_writer")
TASKS = ("T-01", "T-02", "T-03", "T-04")


def _blob(media: Path, text: str) -> dict:
    h = hashlib.sha256(text.encode()).hexdigest()[:16]
    (media / "blobs").mkdir(parents=True, exist_ok=True)
    (media / "blobs" / f"{h}.blob").write_text(text, encoding="utf-8")
    return {"type": "blob", "hash": h, "path": f"blobs/{h}.blob"}


def _diff(media: Path, text: str) -> dict:
    h = hashlib.sha256(text.encode()).hexdigest()[:16]
    (media / "diffs").mkdir(parents=True, exist_ok=True)
    (media / "diffs" / f"{h}.diff").write_text(text, encoding="utf-8")
    return {"type": "diff", "hash": h, "path": f"diffs/{h}.diff"}


#: the fields of the event schema (filegram_ray.schema.events) these hand-written events leave out; the encode stage
#: validates events.json like `filegram engine filter` does, so every event here is schema-complete
_TYPE_DEFAULTS = {
    "file_read": {"directory_depth": 1, "view_range": [1, 40], "revisit_interval_ms": None},
    "file_search": {"files_opened_after": []},
    "file_write": {"directory_depth": 0, "before_hash": None, "after_hash": "0" * 16},
    "file_edit": {"lines_modified": 0, "diff_summary": "edit", "before_hash": "0" * 16, "after_hash": "1" * 16},
    "dir_create": {},
}


def complete(ev: list[dict], profile: str) -> list[dict]:
    """``ev`` with the envelope (event_id, timestamp in ms, session_id, profile_id) and required fields filled."""
    return [{"event_id": f"e{i}", "event_type": e["event_type"], "timestamp": 1.7e12 + 1000.0 * i,
             "session_id": "s1", "profile_id": profile, **_TYPE_DEFAULTS[e["event_type"]], **e}
            for i, e in enumerate(ev)]


def write_trajectory(folder: Path, profile: str, k: int) -> None:
    """A small trajectory: reads, (searches for pa_reader), one created report with real content, one edit."""
    media = folder / "media"
    media.mkdir(parents=True, exist_ok=True)
    ev = []
    if profile == "pa_reader":
        ev += [{"event_type": "file_search", "search_type": "grep", "query": "budget", "files_matched": 3}] * 2
    for i in range(4 + k):
        ev.append({"event_type": "file_read", "file_path": f"inputs/doc{i}.md", "file_type": "md", "view_count": 1,
                   "content_length": 400 + 10 * i})
    body = (f"# Budget review {k}\n\n## Findings\n\nThe quarterly budget for the river project grew by {k + 3} "
            "percent. Spending on field equipment stayed flat while travel costs rose.\n\n| item | cost |\n"
            "|---|---|\n| boats | 12 |\n") * (1 + (profile == "pb_writer") * 3)
    ev.append({"event_type": "file_write", "file_path": f"report_{k}.md", "file_type": "md", "operation": "create",
               "content_length": len(body), "media_ref": _blob(media, body)})
    diff = ("--- a/report.md\n+++ b/report.md\n@@ -1,3 +1,3 @@\n-The quarterly budget grew.\n+The quarterly "
            "budget for the river project grew noticeably this year.\n")
    ev.append({"event_type": "file_edit", "file_path": f"report_{k}.md", "file_type": "md", "edit_tool": "edit",
               "lines_added": 1, "lines_deleted": 1, "media_ref_diff": _diff(media, diff)})
    if profile == "pb_writer":
        ev.append({"event_type": "dir_create", "dir_path": "out", "depth": 1, "sibling_count": 0})
    (folder / "events.json").write_text(json.dumps(complete(ev, profile)), encoding="utf-8")
    (folder / "meta.json").write_text(json.dumps({"profile_id": profile, "SECRET": "ground truth"}))


def make_run(root: Path, bad: str | None = "pa_reader/T-03") -> Path:
    rows = []
    for p in PROFILES:
        for k, t in enumerate(TASKS):
            folder = root / "trajectories" / p / t
            write_trajectory(folder, p, k)
            if f"{p}/{t}" == bad:
                (folder / "events.json").write_text('[{"event_type": "file_read", "file_pa', encoding="utf-8")
            rows.append({"trajectory_id": f"{p}/{t}", "profile_id": p, "task_id": t, "status": "ok",
                         "n_events_raw": 0, "n_events": 0, "perturbed": False, "error": None})
    RunDir(root).write_table("trajectories/index.parquet", pl.DataFrame(rows))
    return root


def _cfg(root: Path):
    return load_config(None, [f"run_dir={root}", "encode.embedder=hashing"])


def test_encode_serial_writes_engrams_stores_indices_and_error_row(tmp_path):
    root = make_run(tmp_path / "run")
    s = run_encode(_cfg(root), executor="serial")
    run = RunDir(root)
    assert s["errors"] == 1 and s["error_ids"] == ["pa_reader/T-03"]
    err = run.error_rows("encode")  # the runner's one error table of the stage
    assert err[0]["unit"] == "pa_reader/T-03" and err[0]["error_type"] == "UserError"  # a malformed input file: the user's data
    assert "trajectories/pa_reader/T-03/events.json" in err[0]["error"]
    assert sorted(run.listdir("engrams/pa_reader")) == ["T-01.json", "T-02.json", "T-04.json"]
    store = load_store(run, "pb_writer")
    assert store.n_sessions == 4 and store.profile_id == "pb_writer"
    # the edit diff reaches the semantic channel (quirk fixed by default)
    assert any(c["chunk_type"] == "edit_diff" for c in store.content_chunks)
    idx = load_indices(run, "pb_writer")
    assert idx.chunks.index.ntotal == len(store.content_chunks) > 0
    assert idx.episodes.index.ntotal == len(store.episodes())
    ctx = retrieve(store, "river project budget", indices=idx, embedder=HashingEmbedder())
    assert "Relevant content:" in ctx.text and "pb_writer" not in ctx.text
    # resumable: a rerun encodes nothing again and consolidates nothing again
    s2 = run_encode(_cfg(root), executor="serial")
    assert s2["encoded_now"] == 0 and s2["skipped_done"] == 7 and s2["profiles_consolidated_now"] == 0
    # fixing the bad trajectory: only it is encoded, and only its profile is consolidated again
    write_trajectory(root / "trajectories" / "pa_reader" / "T-03", "pa_reader", 2)
    s3 = run_encode(_cfg(root), executor="serial")
    assert s3["encoded_now"] == 1 and s3["errors"] == 0 and s3["profiles_consolidated_now"] == 1
    assert load_store(run, "pa_reader").n_sessions == 4


def test_encode_counts_both_steps_and_force_redoes_them(tmp_path):
    """The record counts every item of both steps (``steps``: per step); ``force`` redoes everything."""
    root = make_run(tmp_path / "run", bad=None)
    run_encode(_cfg(root), executor="serial")
    s = run_encode(_cfg(root), executor="serial")
    assert (s["encoded_now"], s["skipped_done"], s["profiles_consolidated_now"]) == (0, 8, 0)
    assert s["steps"] == {"trajectories": {"planned": 8, "done": 0, "skipped": 8, "failed": 0},
                          "profiles": {"planned": 2, "done": 0, "skipped": 2, "failed": 0}}
    assert s["units"] == {"planned": 10, "done": 0, "skipped": 10, "failed": 0}
    f = run_encode(_cfg(root), executor="serial", force=True)
    assert (f["encoded_now"], f["skipped_done"], f["profiles_consolidated_now"]) == (8, 0, 2)
    assert len(list((root / "_done" / "encode").glob("*.json"))) == 8
    assert len(list((root / "_done" / "encode.profiles").glob("*.json"))) == 2


def test_build_store_from_trajectory_dirs_never_reads_meta(tmp_path):
    root = make_run(tmp_path / "run", bad=None)
    dirs = sorted((root / "trajectories" / "pa_reader").iterdir())
    mem = build_store_from_trajectory_dirs(dirs, embedder=HashingEmbedder())
    assert [e.trajectory_id for e in mem.store.engrams] == list(TASKS)
    ctx = mem.retrieve("budget")
    assert "SECRET" not in mem.store.to_json() and "pa_reader" not in ctx.text
    assert ctx.tokens_context > 0 and ctx.tokens_memory > ctx.tokens_context


def test_build_store_names_malformed_file(tmp_path):
    root = make_run(tmp_path / "run")
    with pytest.raises(ValueError, match="T-03/events.json"):
        build_store_from_trajectory_dirs(sorted((root / "trajectories" / "pa_reader").iterdir()))


def _outputs(root: Path) -> dict[str, bytes]:
    """``{relative path: bytes}`` of every file the encode stage wrote (engrams/, memory/, indices/)."""
    return {str(f.relative_to(root)): f.read_bytes() for top in ("engrams", "memory", "indices")
            for f in sorted((root / top).rglob("*")) if f.is_file()}


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.parametrize("executor", ["actor-pool", "ray-data"])
def test_encode_on_ray_matches_serial(tmp_path, ray_local, executor):
    """The stage's units on Ray (the actor-pool executor, the default, and the Ray Data executor) write the same
    bytes as the serial executor: every Engram, index table, store, FAISS index and its metadata, and the same
    error rows."""
    a = make_run(tmp_path / "a")
    b = make_run(tmp_path / "b")
    run_encode(_cfg(a), executor="serial")
    # on the session's Ray (tests/conftest.py), left running for others
    s = run_encode(_cfg(b), executor=executor)
    assert s["executor"] == executor and s["errors"] == 1 and s["profiles"] == 2
    assert s["profiles_consolidated_now"] == 2 and s["units"] == {"planned": 10, "done": 9, "skipped": 0, "failed": 1}
    got, want = _outputs(b), _outputs(a)
    assert sorted(got) == sorted(want) and len(want) == 1 + 7 + 2 + 2 * 5  # index, Engrams, stores, indices
    for rel in want:
        assert got[rel] == want[rel], rel
    err = [RunDir(r).error_rows("encode") for r in (a, b)]  # the error names the run directory's events.json
    assert [(e["unit"], e["error_type"], e["error"].replace(str(a), str(b))) for e in err[0]] == \
        [(e["unit"], e["error_type"], e["error"]) for e in err[1]] and len(err[0]) == 1


def test_encode_again_when_a_trajectory_was_generated_again(tmp_path):
    """A trajectory rewritten with other content (the run generated again by a newer simulator) is encoded again and
    its profile consolidated again; the other profile's memory is left alone. Found on a run whose encode kept the
    Engrams of the trajectories before (2026-12-07)."""
    root = make_run(tmp_path / "run", bad=None)
    run_encode(_cfg(root), executor="serial")
    run = RunDir(root)
    before = load_store(run, "pb_writer").n_sessions
    write_trajectory(root / "trajectories" / "pa_reader" / "T-02", "pa_reader", 3)  # other content, same path
    s = run_encode(_cfg(root), executor="serial")
    assert (s["encoded_now"], s["skipped_done"], s["profiles_consolidated_now"]) == (1, 7, 1)
    eng = json.loads((root / "engrams" / "pa_reader" / "T-02.json").read_text())
    assert "report_3.md" in json.dumps(eng) and "report_1.md" not in json.dumps(eng)
    assert load_store(run, "pb_writer").n_sessions == before
    s2 = run_encode(_cfg(root), executor="serial")  # and then nothing again
    assert (s2["encoded_now"], s2["profiles_consolidated_now"]) == (0, 0)
