"""Issue #53: each session's task outcome from its final workspace, silent overwrites, verbatim sentences, tool
markers in files, and how file operations spread in time."""

from __future__ import annotations

import json
from pathlib import Path

from filegram_ray.validity.motivation import SourceText, markers_in_outputs, ngrams, timing
from filegram_ray.validity.outcomes import replay, session_outcome


def _bundle(root: Path, files: dict[str, str], facts: list[dict]) -> Path:
    b = root / "ws" / "T-11"
    for rel, text in files.items():
        (b / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
        (b / "files" / rel).write_text(text, encoding="utf-8")
    (b / "bundle.json").write_text(json.dumps({"files": [{"path": p} for p in files], "facts": facts}),
                                   encoding="utf-8")
    return b


def _traj(root: Path, events: list[dict], outputs: dict[str, str]) -> Path:
    t = root / "traj"
    for rel, text in outputs.items():
        (t / "outputs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (t / "outputs" / rel).write_text(text, encoding="utf-8")
    t.mkdir(parents=True, exist_ok=True)
    start = {"event_type": "session_start", "target_directory": "/s"}
    (t / "events_raw.json").write_text(json.dumps([start] + events), encoding="utf-8")
    return t


FACT = {"type": "figure", "field": "headcount", "correct": 40, "wrong": 47, "files": ["team.md"]}


def test_a_correction_is_an_outcome_only_when_made_and_logged(tmp_path):
    b = _bundle(tmp_path, {"team.md": "Total employees: 47.\n", "overview.md": "Team size: 40 employees.\n"}, [FACT])
    done = _traj(tmp_path / "a", [{"event_type": "file_edit", "file_path": "/s/team.md"},
                                  {"event_type": "file_write", "file_path": "/s/correction_log.md",
                                   "operation": "create"}],
                 {"team.md": "Total employees: 40.\n", "correction_log.md": "- team.md: 47 corrected to 40\n"})
    assert session_outcome(done, b, "T-11") == {"ok": True, "missing": [], "overwrites": []}
    undone = _traj(tmp_path / "b", [{"event_type": "file_write", "file_path": "/s/correction_log.md",
                                     "operation": "create"}], {"correction_log.md": "nothing found\n"})
    r = session_outcome(undone, b, "T-11")
    assert not r["ok"] and "headcount not corrected in team.md" in r["missing"]


def test_replay_follows_moves_and_counts_a_move_onto_a_file(tmp_path):
    b = _bundle(tmp_path, {"a.md": "A\n", "b.md": "B\n", "d/c.md": "C\n"}, [])
    t = _traj(tmp_path, [{"event_type": "file_move", "old_path": "/s/d", "new_path": "/s/e/d"},
                         {"event_type": "file_rename", "old_path": "/s/a.md", "new_path": "/s/b.md"},
                         {"event_type": "file_copy", "source_path": "/s/b.md", "dest_path": "/s/b.md.bak"},
                         {"event_type": "file_delete", "file_path": "/s/e/d/c.md"}], {})
    fin = replay(t, b)
    assert fin.paths == {"b.md": "a.md", "b.md.bak": "a.md"}
    assert fin.overwrites == ["a.md -> b.md"] and fin.text("b.md") == "A\n"


def test_verbatim_sentences_markers_timing_and_ngrams(tmp_path):
    src = SourceText(["Catherine Jones instructed us on 2024-06-02 regarding matter CIV-2024-7342; the next hearing "
                      "is listed for 2024-07-28.", "本季度渠道检查显示各地区需求保持稳定。"])
    assert src.verbatim("The next hearing is listed for 2024-07-28.")
    assert not src.verbatim("CIV-2024-7342 (Catherine Jones): instructed 2024-06-02, next hearing 2024-07-28.")
    assert not src.verbatim("Hearing on 2024-07-28.")  # too short to be a pasted sentence
    assert src.verbatim("本季度渠道检查显示各地区需求保持稳定") and not src.verbatim("各地区的需求在本季度都比较稳定")
    t = tmp_path / "t"
    (t / "outputs" / "d").mkdir(parents=True)
    (t / "outputs" / "d" / "ok.md").write_text("# Notes\n\n- fine\n")
    (t / "outputs" / "bad.md").write_text("# Notes\n\nText.\n[end of file, 12 lines]\n")
    (t / "outputs" / "num.txt").write_text("     3\tcopied with its line number\n")
    assert [f for f, _ in markers_in_outputs(t)] == ["bad.md", "num.txt"]
    ev = [{"event_type": "file_delete", "timestamp": 5}, {"event_type": "file_delete", "timestamp": 5},
          {"event_type": "file_move", "timestamp": 5}, {"event_type": "file_move", "timestamp": 9}]
    assert timing(ev) == {"max_ops": 3, "deletes_one_instant": True}
    assert timing(ev[1:]) == {"max_ops": 2, "deletes_one_instant": False}
    assert ("the", "next", "hearing", "is") in ngrams("The next hearing is set.")


def test_a_duplicate_is_settled_when_deleted_archived_or_logged_as_kept(tmp_path):
    """T-21: a duplicate kept where it is counts when the cleanup log says so in any case ("Kept …" opening a
    sentence: set 5301, g0019, was read as not dealt with); one neither moved, deleted nor logged does not, and an
    original that is gone is named."""
    dup = {"type": "duplicate", "file": "misc/dir copy.md", "original": "misc/dir.md"}
    junk = {"type": "junk", "file": "a.tmp"}
    files = {"misc/dir copy.md": "Ann: lead\n", "misc/dir.md": "Ann: lead\n", "a.tmp": "x\n"}
    log = "- `a.tmp`: deleted\n- `misc/dir copy.md`: same content as `misc/dir.md`. Kept where it is, noted here\n"
    b = _bundle(tmp_path, files, [dup, junk])
    create = {"event_type": "file_write", "file_path": "/s/cleanup_log.md", "operation": "create"}
    kept = _traj(tmp_path / "k", [{"event_type": "file_delete", "file_path": "/s/a.tmp"}, create],
                 {"cleanup_log.md": log})
    assert session_outcome(kept, b, "T-21")["ok"]
    silent = _traj(tmp_path / "s", [{"event_type": "file_delete", "file_path": "/s/a.tmp"}, create],
                   {"cleanup_log.md": "- `a.tmp`: deleted\n- `misc/dir copy.md`: looked at\n"})
    assert session_outcome(silent, b, "T-21")["missing"] == ["misc/dir copy.md not dealt with"]
    lost = _traj(tmp_path / "l", [{"event_type": "file_delete", "file_path": "/s/a.tmp"},
                                  {"event_type": "file_move", "old_path": "/s/misc/dir copy.md",
                                   "new_path": "/s/archive/dir copy.md"},
                                  {"event_type": "file_delete", "file_path": "/s/misc/dir.md"}, create],
                 {"cleanup_log.md": log})
    assert session_outcome(lost, b, "T-21")["missing"] == ["the original misc/dir.md was lost"]


def test_batches_read_out_of_order_or_skipped_are_missing_not_a_crash(tmp_path):
    """T-18: a session that never opens batch 1 (the old simulator read batch 3 first and never batch 2) is told
    what it lacks; the index check between batches needs both batches read (it raised KeyError on such a
    session)."""
    files = {f"updates/batch_{k}.md": f"# Batch {k}\n\n- Add a summary of FAM-2024-{k}00{k} to case_law/\n"
             for k in (1, 2, 3)}
    b = _bundle(tmp_path, {**files, "index.md": "# Index\n"}, [])
    reads = [{"event_type": "file_read", "file_path": f"/s/updates/batch_{k}.md"} for k in (3, 2)]
    t = _traj(tmp_path / "t", reads + [{"event_type": "file_edit", "file_path": "/s/index.md"}],
              {"index.md": "# Index\n\n- batch 2 and 3\n"})
    missing = session_outcome(t, b, "T-18")["missing"]
    assert missing[0] == "batches read in the order [3, 2]"
    assert "the index not refreshed between batch 1 and batch 2" not in missing  # batch 1 was never read
    assert "no summary of FAM-2024-1001" in missing and "no final regrouping into reference/ and operations/" in missing
