"""EngineSession end to end: trajectory folder, filter, determinism, upstream quirks, documents, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import PROFILE, ROOT, START_MS, TASK, make_bundle, open_session, v

from filegram_ray.engine import EngineSession
from filegram_ray.engine.filter import PATH_FIELDS, anonymise_path, filter_events
from filegram_ray.schema.events import KEPT_TYPES, LEAKAGE_FIELDS, read_events_json

FILES = {"notes/a.md": "# A\nalpha\nbeta\n", "notes/b.md": "one\ntwo\n", "readme.txt": "hello\n",
         "My_Draft.md": "draft\n", "img/c.png": b"\x89PNG\x00"}
ANN = {"c.png": {"modality": "image", "content": "A chart of sales.\nRising."}}


def script(s: EngineSession) -> None:
    """A small but complete agent run touching every tool and most event types."""
    with s.iteration(input_tokens=1000, output_tokens=50):
        s.call("bash", command="ls")
        s.call("read", file_path="notes/a.md")
        s.advance(700)
        s.call("read", file_path=f"{ROOT}/notes/b.md", offset=1, limit=1)
        s.call("read", file_path="img/c.png")
    with s.iteration(input_tokens=1500, output_tokens=400):
        s.call("glob", pattern="**/*.md")
        s.call("grep", pattern="alpha|one", include="*.md")
        s.call("bash", command="mkdir -p out/final && mkdir drafts")
        s.call("write", file_path="out/final/report.md", content="# Report\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
        s.call("edit", file_path="out/final/report.md", old_string="| 1 | 2 |", new_string="| 1 | 3 |\n| 4 | 5 |")
        s.call("multiedit", file_path="notes/b.md", edits=[{"old_string": "one", "new_string": "ONE"},
                                                           {"old_string": "two", "new_string": "2\n3"}])
        s.call("bash", command="cp notes/b.md notes/b.md.bak && mv My_Draft.md my-draft.md && mv my-draft.md drafts/")
        s.call("write", file_path="scratch.tmp", content="temp")
        s.advance(2000)
        s.call("bash", command="rm scratch.tmp")
        s.call("read", file_path="nope.md")  # error …
        s.call("read", file_path="out/final/report.md")  # … and recovery
        s.call("list", path="out")


def run(tmp: Path, seed: int = 11, **kw) -> tuple[EngineSession, dict]:
    s = open_session(tmp, FILES, seed=seed, annotations=ANN, **kw)
    script(s)
    s.finish(completed=True)
    counts = s.write_trajectory(tmp / "traj")
    return s, counts


def test_trajectory_folder_round_trip_and_filter(tmp_path):
    s, counts = run(tmp_path)
    t = tmp_path / "traj"
    raw = read_events_json(t / "events_raw.json")
    kept = read_events_json(t / "events.json")
    raw_d = json.loads((t / "events_raw.json").read_text(encoding="utf-8"))
    kept_d = json.loads((t / "events.json").read_text(encoding="utf-8"))
    assert counts["n_events_raw"] == len(raw) == len(s.events) and counts["n_events"] == len(kept)
    assert {e.event_type for e in kept} <= set(KEPT_TYPES)
    assert [e["event_id"] for e in kept_d] == [e["event_id"] for e in raw_d if e["event_type"] in KEPT_TYPES]
    assert len({e["event_type"] for e in kept_d}) == 12  # the script reaches all 12 kept types
    for e in kept_d:
        assert not set(LEAKAGE_FIELDS) & set(e)
        for f in PATH_FIELDS:
            if isinstance(e.get(f), str):
                assert "/sandbox/" not in e[f] and PROFILE not in e[f]
    # filtering raw again gives the same list (the filter applies to raw events only: by the reference rule a
    # relative path outside /sandbox/ is cut to its basename, so filtering twice is not a no-op)
    assert filter_events(raw_d) == kept_d
    assert next(e for e in kept_d if e["event_type"] == "file_read")["file_path"] == "notes/a.md"
    # media: every reference resolves, manifest stats agree with the files
    man = json.loads((t / "media" / "manifest.json").read_text())
    for e in raw_d:
        for k in ("media_ref", "media_ref_old", "media_ref_new", "media_ref_diff"):
            if isinstance(e.get(k), dict):
                assert (t / "media" / e[k]["path"]).is_file() and e[k]["hash"] in man["entries"]
    assert man["stats"]["total_blobs"] == len(list((t / "media" / "blobs").iterdir()))
    assert man["stats"]["total_diffs"] == len(list((t / "media" / "diffs").iterdir())) >= 1
    for ent in man["entries"].values():
        assert PROFILE not in ent["original_path"]  # media/ is read by memory methods: no profile id in it
    # outputs: final state of created/changed files only
    outs = sorted(str(p.relative_to(t / "outputs")) for p in (t / "outputs").rglob("*") if p.is_file())
    assert outs == ["notes/b.md", "notes/b.md.bak", "out/final/report.md"]
    assert (t / "outputs/out/final/report.md").read_text() == "# Report\n\n| a | b |\n|---|---|\n| 1 | 3 |\n| 4 | 5 |\n"
    summ = json.loads((t / "summary.json").read_text())
    assert summ["completed"] is True and summ["total_events"] == len(raw_d) and summ["total_iterations"] == 2
    assert summ["files_created"] == [v("out/final/report.md"), v("scratch.tmp")]
    assert summ["files_renamed"] == [[v("My_Draft.md"), v("my-draft.md")]]
    assert summ["dirs_created"] == [v("out/final"), v("drafts")]
    assert summ["error_count"] == 1 and summ["error_recovery_count"] == 1
    assert summ["tool_usage_frequency"]["bash"] == 4 and summ["tool_sequence"][0] == "bash"
    assert 0 < summ["tool_success_rate"] < 1


def test_same_seed_same_bytes_different_seed_differs(tmp_path):
    run(tmp_path / "a", seed=11)
    run(tmp_path / "b", seed=11)
    run(tmp_path / "c", seed=12)
    a, b, c = (tmp_path / x / "traj" for x in "abc")
    files = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    assert files == sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file())
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    assert (a / "events_raw.json").read_bytes() != (c / "events_raw.json").read_bytes()


def test_incomplete_session_has_no_session_end(tmp_path):
    s = open_session(tmp_path, FILES)
    s.call("read", file_path="readme.txt")
    s.finish(completed=False)
    assert s.events[-1]["event_type"] == "fs_snapshot"
    assert s.summary()["completed"] is False
    with pytest.raises(RuntimeError):
        s.call("list")


def test_session_misuse_raises(tmp_path):
    s = EngineSession(None, tmp_path / "w", PROFILE, TASK, seed=1, start_ms=START_MS)
    assert list(s.sandbox_path.iterdir()) == []
    with pytest.raises(RuntimeError, match="start"):
        s.call("list")
    with pytest.raises(ValueError, match="profile_id"):
        EngineSession(None, tmp_path / "w3", "../evil", TASK, seed=1, start_ms=START_MS)
    with pytest.raises(FileExistsError):
        (s.sandbox_path / "x").write_text("x")
        EngineSession(None, tmp_path / "w", PROFILE, TASK, seed=1, start_ms=START_MS)


def _kinds(s, n0):
    return [e for e in s.events[n0:] if e["event_type"] in KEPT_TYPES]


def test_upstream_quirks_switch(tmp_path):
    def go(quirks: bool, sub: str):
        s = open_session(tmp_path / sub, FILES, upstream_quirks=quirks)
        out = {}
        n = len(s.events)
        s.call("bash", command="mkdir docs && mv readme.txt docs/")
        out["mv"] = _kinds(s, n)[-1]
        n = len(s.events)
        s.call("edit", file_path="new.md", old_string="", new_string="hi\n")
        out["edit_create"] = _kinds(s, n)
        n = len(s.events)
        s.call("list", path=".")
        out["list"] = _kinds(s, n)
        n = len(s.events)
        s.call("bash", command="touch t.md")
        out["touch"] = _kinds(s, n)
        s.call("read", file_path="notes/a.md")
        s.advance(4000)
        s.call("write", file_path="notes/a.md", content="changed\n")
        n = len(s.events)
        s.call("bash", command="rm notes/a.md")
        out["rm_bundle"] = _kinds(s, n)[-1]
        s.call("write", file_path="x.log", content="x")
        s.advance(1000)
        n = len(s.events)
        s.call("bash", command="rm x.log")
        out["rm_new"] = _kinds(s, n)[-1]
        n = len(s.events)
        s.call("bash", command="mkdir ok ; mkdir docs")  # second fails → exit status 1
        out["failed_bash"] = _kinds(s, n)
        s.call("write", file_path="d.md", content="a\n")
        s.call("edit", file_path="d.md", old_string="a", new_string="b")
        ed = [e for e in s.events if e["event_type"] == "file_edit"][-1]
        out["diff"] = s.media.read(ed["media_ref_diff"]["path"]).decode()
        return out

    fixed, quirky = go(False, "fixed"), go(True, "quirky")
    assert fixed["mv"]["event_type"] == "file_move" and fixed["mv"]["new_path"] == v("docs/readme.txt")
    assert quirky["mv"]["event_type"] == "file_rename" and quirky["mv"]["new_path"] == v("docs")
    assert [e["event_type"] for e in fixed["edit_create"]] == ["file_write"] and quirky["edit_create"] == []
    assert [e["event_type"] for e in fixed["list"]] == ["file_browse"] and quirky["list"] == []
    assert [e["event_type"] for e in fixed["touch"]] == ["file_write"] and quirky["touch"] == []
    # file_age_ms: since creation (null for a bundle file) vs since the last read
    assert fixed["rm_bundle"]["file_age_ms"] is None
    assert quirky["rm_bundle"]["file_age_ms"] >= 4000
    assert fixed["rm_new"]["file_age_ms"] >= 1000 and quirky["rm_new"]["file_age_ms"] is None
    assert [e["event_type"] for e in fixed["failed_bash"]] == ["dir_create"] and quirky["failed_bash"] == []
    assert fixed["diff"].startswith("--- a/d.md") and quirky["diff"].startswith(f"--- a/{v('d.md')}")


@pytest.mark.parametrize("path, want", [
    (f"{ROOT}/notes/a.md", "notes/a.md"), (f"{ROOT}/", "."), (ROOT, "."), ("/home/u/x/report.md", "report.md"),
    ("notes/a.md", "a.md"), (None, None),
])
def test_anonymise_path(path, want):
    assert anonymise_path(path) == want


def test_documents_are_read_through_extract_text(tmp_path):
    docx = pytest.importorskip("docx")
    bundle = make_bundle(tmp_path, {"mail.eml": "From: a@x.org\nTo: b@y.org\nSubject: Budget\n\nPlease review.\n"})
    d = docx.Document()
    d.add_paragraph("Quarterly plan")
    d.add_paragraph("Second paragraph")
    d.save(bundle / "plan.docx")
    s = EngineSession(bundle, tmp_path / "w", PROFILE, TASK, seed=2, start_ms=START_MS)
    s.start()
    r = s.call("read", file_path="plan.docx")
    assert r.ok and "Quarterly plan" in r.output and "Second paragraph" in r.output
    ev = s.events[-2]
    assert ev["event_type"] == "file_read" and ev["file_type"] == "docx" and ev["content_length"] == len(r.output)
    r = s.call("read", file_path="mail.eml")
    assert r.ok and "Budget" in r.output
    (s.sandbox_path / "broken.pdf").write_bytes(b"not a pdf")
    r = s.call("read", file_path="broken.pdf")
    assert not r.ok and "broken.pdf" in r.error


def test_cli_filter(tmp_path, capsys):
    from filegram_ray.cli import main

    run(tmp_path)
    src = tmp_path / "traj" / "events_raw.json"
    out = tmp_path / "filtered.json"
    assert main(["engine", "filter", str(src), "-o", str(out)]) == 0
    assert out.read_bytes() == (tmp_path / "traj" / "events.json").read_bytes()
    assert main(["engine", "filter", str(src)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text())
    bad = tmp_path / "bad.json"
    bad.write_text('[{"event_type": "nope"}]')
    assert main(["engine", "filter", str(bad)]) == 2
    assert "unknown event type 'nope'" in capsys.readouterr().err
