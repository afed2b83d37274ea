"""Hostile and broken inputs, second pass (issue #13, deliverable 2).

* BR-27, engine side: a name that is not valid UTF-8 gets the workspace import's ``%XX`` name in the sandbox
  (bundle copy and any name met later), is recorded, and nothing the engine writes (events, media, outputs,
  summary, meta.json) holds a surrogate; readers refuse a lone surrogate escape naming the file and the field.
* One bad per-trajectory file (``meta.json``, an Engram) is a recorded skip naming the file and the field; the
  rest of the batch completes; a stage left with 0 usable units still fails loudly.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
from engine_helpers import PROFILE, ROOT, START_MS, TASK

from filegram_ray.engine import EngineSession
from filegram_ray.engine.media import MediaStore, content_hash
from filegram_ray.limits import load_json
from filegram_ray.names import escape_bytes, find_lone_surrogate, free_name, printable
from filegram_ray.storage import RunDir, StorageError

LATIN1 = b"caf\xe9_latin1.txt"


def _br27_bundle(base: Path) -> Path:
    """The BR-27 input (notes.txt + a Latin-1 name), a literal name equal to its %XX form, and a sub-folder whose
    own name is not UTF-8."""
    d = base / "input"
    d.mkdir(parents=True)
    (d / "notes.txt").write_text("hello\n", encoding="utf-8")
    raw = os.fsencode(d)
    with open(os.path.join(raw, LATIN1), "wb") as fh:
        fh.write(b"a file named in latin-1\n")
    (d / "caf%E9_latin1.txt").write_text("a literal percent name\n", encoding="utf-8")
    os.mkdir(os.path.join(raw, b"dossier_\xff"))
    with open(os.path.join(raw, b"dossier_\xff", b"r\xe9sum\xe9.md"), "wb") as fh:
        fh.write(b"# inside a latin-1 folder\n")
    return d


def _all_utf8(folder: Path) -> list[Path]:
    """Every file under ``folder`` decodes as strict UTF-8 (and holds no surrogate when it is JSON)."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    for p in files:
        text = p.read_bytes().decode("utf-8")  # raises on invalid UTF-8 (surrogatepass bytes included)
        if p.suffix == ".json":
            assert find_lone_surrogate(json.loads(text)) is None, p
    return files


def test_names_rule_escape_collisions_and_reporting():
    """BR-27: the one rule shared by the import and the engine: %XX for undecodable bytes, U+FFFD for any other
    lone surrogate, ~k for a taken name, ``\\xNN`` when the original is shown."""
    name = os.fsdecode(LATIN1)
    assert escape_bytes(name) == "caf%E9_latin1.txt" and printable(name) == "caf\\xe9_latin1.txt"
    assert escape_bytes("a\ud800b") == "a\ufffdb" and escape_bytes("plain é") == "plain é"
    assert free_name("caf%E9.txt", {"caf%E9.txt", "caf%E9~2.txt"}) == "caf%E9~3.txt"
    assert free_name("README", {"README"}) == "README~2" and free_name(".env", {".env"}) == ".env~2"
    assert find_lone_surrogate([{"a": 1}, {"b": ["x", "y\udce9"]}]) == "[1].b[1]"
    assert find_lone_surrogate({"ok": "\U0001F600"}) is None


def test_BR_27_engine_sandbox_tools_events_media_are_utf8(tmp_path):
    """BR-27 (engine side, the case's own input used directly as a bundle): the Latin-1 file is copied under its
    %XX name (taken by a literal file → ~2), listed by ``list``, found by ``grep`` (was: 'No matches found'), read
    and edited; the rename is recorded; events.json, events_raw.json, media/ and summary.json are valid UTF-8."""
    bundle = _br27_bundle(tmp_path)
    sess = EngineSession(bundle, tmp_path / "work", PROFILE, TASK, seed=3, start_ms=START_MS)
    sess.start()
    with sess.iteration():
        listing = sess.call("list", path=".")
        grep = sess.call("grep", pattern="latin-1")
        read = sess.call("read", file_path="caf%E9_latin1~2.txt")
        sub = sess.call("read", file_path="dossier_%FF/r%E9sum%E9.md")
        edit = sess.call("edit", file_path="caf%E9_latin1~2.txt", old_string="latin-1", new_string="Latin-1")
        ls = sess.call("bash", command="ls")
    assert listing.ok and "caf%E9_latin1~2.txt" in listing.output and "dossier_%FF/" in listing.output
    assert "\\x" not in listing.output and not any(0xD800 <= ord(c) <= 0xDFFF for c in listing.output)
    assert grep.ok and "caf%E9_latin1~2.txt:1: a file named in latin-1" in grep.output
    assert read.ok and "a file named in latin-1" in read.output
    assert sub.ok and "inside a latin-1 folder" in sub.output
    assert edit.ok, edit.output
    assert ls.output.split() == ["caf%E9_latin1.txt", "caf%E9_latin1~2.txt", "dossier_%FF", "notes.txt"]
    sess.finish()
    assert sess.sandbox_record() == {"renamed": [
        {"path": "caf%E9_latin1~2.txt", "renamed_from": "caf\\xe9_latin1.txt"},
        {"path": "dossier_%FF", "renamed_from": "dossier_\\xff"},
        {"path": "dossier_%FF/r%E9sum%E9.md", "renamed_from": "dossier_\\xff/r\\xe9sum\\xe9.md"}], "skipped": []}
    out = tmp_path / "traj"
    sess.write_trajectory(out)
    files = _all_utf8(out)
    assert any(p.parent.name == "blobs" for p in files)
    snaps = [e for e in sess.events if e["event_type"] == "fs_snapshot"]
    blob = (out / "media" / snaps[-1]["media_ref"]["path"]).read_text(encoding="utf-8")
    assert "caf%E9_latin1~2.txt" in blob and "dossier_%FF/r%E9sum%E9.md" in blob
    edits = [e for e in sess.events if e["event_type"] == "file_edit"]
    assert edits and edits[0]["file_path"] == f"{ROOT}/caf%E9_latin1~2.txt"
    assert (out / "outputs" / "caf%E9_latin1~2.txt").read_text(encoding="utf-8") == "a file named in Latin-1\n"
    sess.close()


def test_BR_27_name_planted_during_a_session_is_renamed_when_met(tmp_path):
    """BR-27, the whole kind: a name that is not UTF-8 appearing in the sandbox after the copy (planted from
    outside; no tool can create one) is renamed %XX by the listing that meets it and recorded; the final
    fs_snapshot blob stays UTF-8."""
    sess = EngineSession(None, tmp_path / "work", PROFILE, TASK, seed=3, start_ms=START_MS)
    sess.start()
    with open(os.path.join(os.fsencode(sess.sandbox_path), b"planted\xfe.md"), "wb") as fh:
        fh.write(b"planted text\n")
    with sess.iteration():
        found = sess.call("glob", pattern="*.md")
        grep = sess.call("grep", pattern="planted")
    assert found.ok and "planted%FE.md" in found.output
    assert grep.ok and "planted%FE.md:1: planted text" in grep.output
    assert sess.sandbox.renamed == [("planted\\xfe.md", "planted%FE.md")]
    assert sorted(os.listdir(sess.sandbox_path)) == ["planted%FE.md"]
    sess.finish()
    _all_utf8(_written(sess, tmp_path / "traj"))
    sess.close()


def _written(sess: EngineSession, dest: Path) -> Path:
    sess.write_trajectory(dest)
    return dest


def test_BR_27_surrogates_an_agent_types_are_recorded_utf8(tmp_path):
    """BR-27: an agent (an LLM's JSON ``"\\udce9"`` escape) passing a path, an edit text or a search pattern with a
    lone surrogate gets a tool error or no match, never a crash when the trajectory is written (a grep pattern
    reached file_search.query and made events.json unwritable); recorded strings use the %XX rule."""
    sess = EngineSession(None, tmp_path / "work", PROFILE, TASK, seed=3, start_ms=START_MS)
    sess.start()
    with sess.iteration():
        bad_read = sess.call("read", file_path="caf\udce9.txt")
        assert sess.call("write", file_path="a.md", content="hello\n").ok
        bad_edit = sess.call("edit", file_path="a.md", old_string="hello", new_string="caf\udce9")
        bad_write = sess.call("write", file_path="b.md", content="x\ud800y")
        assert sess.call("grep", pattern="caf\udce9").ok and sess.call("glob", pattern="*\udce9*").ok
        assert not sess.call("bash", command="mv a.md c\udce9.md").ok
    assert not bad_read.ok and "not valid UTF-8" in bad_read.output
    assert not bad_edit.ok and "not encodable as UTF-8" in bad_edit.output
    assert not bad_write.ok
    sess.finish()
    out = _written(sess, tmp_path / "traj")
    _all_utf8(out)
    raw = json.loads((out / "events_raw.json").read_text(encoding="utf-8"))
    params = [e["tool_parameters"] for e in raw if e["event_type"] == "tool_call"]
    assert params[0] == {"file_path": "caf%E9.txt"} and params[2]["new_string"] == "caf%E9"
    assert params[3]["content"] == "x\ufffdy"
    assert [e["query"] for e in raw if e["event_type"] == "file_search"] == ["caf%E9", "*%E9*"]
    sess.close()


def test_BR_27_media_store_and_extraction_never_write_surrogates(tmp_path, monkeypatch):
    """BR-27: the media store writes a text holding a lone surrogate by the %XX rule (valid UTF-8; hash = hash of
    the stored bytes); document extraction (import and the engine's read) leaves no lone surrogate either."""
    store = MediaStore()
    ref = store.save_blob("name caf\udce9.md\n", "x.md", 0.0)
    data = store.read(ref["path"])
    assert data.decode("utf-8") == "name caf%E9.md\n" and ref["hash"] == content_hash("name caf\udce9.md\n")
    assert store.save_diff("a\n", "caf\udce9\n", "x.md", 0.0) is not None
    store.write_to(tmp_path / "media")
    _all_utf8(tmp_path / "media")

    from filegram_ray.workspace import extract as X

    eml = tmp_path / "mail.eml"
    eml.write_bytes(b"From: a@b.c\nSubject: caf\xe9 menu\n\nbody caf\xe9\n")
    assert "caf\ufffd menu" in X.extract_text(eml)
    j = tmp_path / "data.json"
    j.write_text('{"name": "caf"}', encoding="utf-8")
    monkeypatch.setattr(X, "_decode", lambda data: "parser left caf\udce9 and \ud800")  # what a decoder may return
    assert X.extract_text(j) == "parser left caf%E9 and \ufffd"


def test_BR_27_readers_refuse_lone_surrogate_escapes_naming_file_and_field(tmp_path):
    """BR-27, reading side: a JSON file holding a lone surrogate escape (what an old engine wrote with
    surrogatepass, re-escaped) is refused by the strict reader naming the file and the field; a valid escaped
    pair is text. In encode the trajectory is an error row and the rest encodes."""
    with pytest.raises(ValueError, match=r"^x\.json: field '\[1\]\.file_path': a lone surrogate escape"):
        load_json(b'[{}, {"file_path": "caf\\udce9.md"}]', "x.json")
    assert load_json('{"a": "\\ud83d\\ude00"}', "y.json") == {"a": "\U0001F600"}
    run = RunDir(tmp_path / "r")
    run.write_bytes("m.json", b'{"perturbation": {"dimension": "\\udcff"}}')
    with pytest.raises(StorageError, match=r"m\.json: field 'perturbation\.dimension': a lone surrogate"):
        run.read_json("m.json")

    from test_memory_stage import make_run

    from filegram_ray.config import load_config
    from filegram_ray.memory.stage import run_encode

    root = make_run(tmp_path / "run", bad=None)
    f = root / "trajectories" / "pa_reader" / "T-02" / "events.json"
    ev = json.loads(f.read_text(encoding="utf-8"))
    ev[1]["file_path"] = "inputs/caf\udce9.md"
    f.write_text(json.dumps(ev), encoding="utf-8")  # ensure_ascii: written as the escape "\udce9"
    s = run_encode(load_config(None, [f"run_dir={root}", "encode.embedder=hashing"]), executor="serial")
    assert s["error_ids"] == ["pa_reader/T-02"] and s["trajectories"] == 8
    err = RunDir(root).error_rows("encode")[0]["error"]
    assert f"{f}: field '[1].file_path': a lone surrogate escape" in err
    for p in (root / "engrams").rglob("*.json"):
        p.read_bytes().decode("utf-8")


def test_BR_27_generate_records_renames_in_meta_json(tmp_path):
    """BR-27 through the generate stage: a run's workspace bundle holding a Latin-1 name yields a trajectory whose
    meta.json lists the rename (``sandbox.renamed``) and whose every written file is valid UTF-8; a clean bundle's
    meta.json has no ``sandbox`` key (bytes unchanged)."""
    from filegram_ray.config import load_config
    from filegram_ray.engine.generate import GenerateConfig, GenerateWorker, plan_units

    root = tmp_path / "run"
    ws = root / "workspaces" / "T-03"
    (ws / "files").mkdir(parents=True)
    (ws / "bundle.json").write_text(json.dumps({"task_id": "T-03", "files": []}), encoding="utf-8")
    with open(os.path.join(os.fsencode(ws / "files"), LATIN1), "wb") as fh:
        fh.write(b"a file named in latin-1\n")
    cfg = load_config(None, [f"run_dir={root}", "seed=7", "profiles=[p3]", "tasks=[T-03,T-04]"])
    gcfg = GenerateConfig(perturb=False, executor="serial")
    units = plan_units(cfg, gcfg)
    worker = GenerateWorker(str(root))
    for u in units:
        assert worker.process(u)["trajectory_id"] == u["unit_id"]  # a failure raises
    pid = units[0]["profile"]["profile_id"]
    meta = json.loads((root / "trajectories" / pid / "T-03" / "meta.json").read_text(encoding="utf-8"))
    assert meta["sandbox"] == {"renamed": [{"path": "caf%E9_latin1.txt", "renamed_from": "caf\\xe9_latin1.txt"}],
                               "skipped": []}
    _all_utf8(root / "trajectories" / pid / "T-03")
    clean = json.loads((root / "trajectories" / pid / "T-04" / "meta.json").read_text(encoding="utf-8"))
    assert "sandbox" not in clean


# ------------------------------------------------------------------------------------- one bad unit, every stage
def _bench(run: RunDir, monkeypatch):
    import bench_synth as bs

    from filegram_ray.bench import stage
    from filegram_ray.config import load_config

    real = stage.load_bench_inputs
    monkeypatch.setattr(stage, "load_bench_inputs", lambda r, **kw: real(r, profiles=bs.profiles(), tasks=bs.tasks()))
    return stage.run_bench(load_config(overrides={"run_dir": run.root}))


def test_bench_malformed_meta_json_is_a_recorded_skip(tmp_path, monkeypatch, capsys):
    """A malformed meta.json (truncated, not UTF-8, not an object, a perturbation that is not a dimension/tier), a
    garbled Engram fingerprint and an index row whose folder is gone each leave out one trajectory, named with
    the file and the field in bench/stats.json, run.json and stdout; the bank is built from the rest (bench used
    to stop at the first one). With every trajectory left out the stage still fails loudly, naming the first."""
    import bench_synth as bs

    run = RunDir(tmp_path / "run")
    bs.write_run(run)
    index = run.read_table("trajectories/index.parquet")
    pert = index.filter(pl.col("perturbed") & (pl.col("status") == "ok"))["trajectory_id"].to_list()
    a, b, c, d = pert[:4]
    plain = index.filter(~pl.col("perturbed") & (pl.col("status") == "ok"))["trajectory_id"].to_list()
    e, f = plain[:2]
    good = run.read_bytes(f"trajectories/{a}/meta.json")
    run.write_bytes(f"trajectories/{a}/meta.json", good[: len(good) // 2])
    run.write_bytes(f"trajectories/{b}/meta.json", b"\xff\xfe{}")
    run.write_json(f"trajectories/{c}/meta.json", ["not", "an", "object"])
    run.write_json(f"trajectories/{d}/meta.json", {"perturbation": {"dimension": "Z", "from": "L", "to": "M"}})
    run.write_json(f"engrams/{e}.json", {"fingerprint": [1.0, "x"]})
    run.fs.rm(run.full(f"trajectories/{f}"), recursive=True)
    res = _bench(run, monkeypatch)
    want = {a: ("meta.json", "invalid JSON at line"), b: ("meta.json", "not UTF-8"),
            c: ("meta.json", "expected a JSON object, got list"),
            d: ("meta.json", "field 'perturbation.dimension' must be one of A/B/C/D/E/F, got 'Z'"),
            e: (".json", "field 'fingerprint' must be 17 finite numbers"), f: (f, "missing, but the index lists")}
    got = {s["trajectory_id"]: s for s in res["skipped_trajectories"]}
    assert set(got) == set(want)
    for tid, (file_end, needle) in want.items():
        assert got[tid]["file"].endswith(file_end) and got[tid]["file"] in got[tid]["error"], got[tid]
        assert needle in got[tid]["error"], got[tid]
    assert res["n_items"] > 0
    assert run.read_json("bench/stats.json")["skipped_trajectories"] == res["skipped_trajectories"]
    assert run.read_json("run.json")["stages"]["bench"]["skipped_trajectories"] == res["skipped_trajectories"]
    out = capsys.readouterr().out
    assert f"bench: left out {d}: " in out
    # 0 usable: every trajectory's meta.json unreadable (perturbed unknown → read) → loud failure naming one
    idx = run.read_table("trajectories/index.parquet").with_columns(pl.lit(None, pl.Boolean).alias("perturbed"))
    run.write_table("trajectories/index.parquet", idx)
    for tid in idx["trajectory_id"].to_list():
        if run.exists(f"trajectories/{tid}"):
            run.write_bytes(f"trajectories/{tid}/meta.json", b"{")
    with pytest.raises(ValueError, match=r"bench: no usable trajectory .* left out for a malformed file, first: "
                                         r".*meta\.json: invalid JSON"):
        _bench(run, monkeypatch)


def test_generate_garbled_bundle_json_is_an_error_row_naming_the_file(tmp_path):
    """A run's workspaces/<task>/bundle.json that is not valid JSON (or has a malformed file row) fails only the
    units of that task, each with an error naming the run's bundle.json and the field (it said only 'Expecting
    property name enclosed in double quotes'); the other task's units complete."""
    from filegram_ray.config import load_config
    from filegram_ray.engine.generate import GenerateConfig, GenerateWorker, plan_units
    from filegram_ray.stages.executors import map_units

    root = tmp_path / "run"
    (root / "workspaces" / "T-03" / "files").mkdir(parents=True)
    (root / "workspaces" / "T-03" / "bundle.json").write_text("{", encoding="utf-8")
    cfg = load_config(None, [f"run_dir={root}", "seed=7", "profiles=[p3]", "tasks=[T-03,T-04]"])
    units = plan_units(cfg, GenerateConfig(perturb=False))
    rows = map_units(GenerateWorker, units, init_kwargs={"run_uri": str(root)}, executor="serial", stage="generate")
    by = {r.get("unit") or r.get("trajectory_id"): r for r in rows}
    bad, ok = (by[u["unit_id"]] for u in units)
    assert bad["status"] == "error" and f"{root}/workspaces/T-03/bundle.json: invalid JSON at line 1" in bad["error"]
    assert ok["status"] == "ok"
    (root / "workspaces" / "T-03" / "bundle.json").write_text('{"files": [{"path": 3}]}', encoding="utf-8")
    worker = GenerateWorker(str(root))
    with pytest.raises(ValueError, match=r"workspaces/T-03/bundle\.json: field 'files\[0\]\.path' must be a string"):
        worker.process(units[0])


def test_encode_index_without_a_column_is_a_named_error(tmp_path):
    """An index.parquet without task_id (or a truncated one) is one error naming the file, not a polars
    traceback."""
    from test_memory_stage import make_run

    from filegram_ray.config import load_config
    from filegram_ray.memory.stage import run_encode

    root = make_run(tmp_path / "run", bad=None)
    run = RunDir(root)
    cfg = load_config(None, [f"run_dir={root}", "encode.embedder=hashing"])
    run.write_table("trajectories/index.parquet", run.read_table("trajectories/index.parquet").drop("task_id"))
    with pytest.raises(ValueError, match=r"trajectories/index\.parquet: column\(s\) task_id missing"):
        run_encode(cfg, executor="serial")
    run.write_bytes("trajectories/index.parquet", b"PAR1 truncated")
    with pytest.raises(StorageError, match=r"trajectories/index\.parquet: not a readable Parquet table"):
        run_encode(cfg, executor="serial")


def test_evaluate_zero_answers_ok_fails_loudly(tmp_path):
    """Evaluate with every context unreadable writes its error rows and report, then fails loudly (it reported
    success with 28 of 28 error rows); with no item selected it fails too."""
    from evaluate_fixtures import make_run as make_eval_run

    from filegram_ray.config import load_config
    from filegram_ray.evaluate.stage import run_evaluate

    run = make_eval_run(tmp_path)
    for p in tmp_path.glob("trajectories/*/*/events.json"):
        p.write_text("{}", encoding="utf-8")

    def cfg(**kw):
        return load_config(overrides={"run_dir": str(tmp_path), "evaluate": {
            "methods": ["full_context"], "executor": "serial", "plots": False, "sample_per_sub_task": None, **kw}})

    with pytest.raises(ValueError, match=r"evaluate: 0 of \d+ answers ok for methods \['full_context'\] .* first "
                                         r"error: .*events\.json"):
        run_evaluate(cfg())
    assert run.exists("results/report.md") and run.read_table("results/results.parquet").height
    report, results = run.read_bytes("results/report.md"), run.read_bytes("results/results.parquet")
    with pytest.raises(ValueError, match=r"evaluate: no item selected: .*items\.parquet holds \d+ items, \d+ of "
                                         r"them in settings \['text'\]"):
        run_evaluate(cfg(settings=["text"], max_items=0))
    # refused before anything is written: the last report and results stay as they were
    assert run.read_bytes("results/report.md") == report and run.read_bytes("results/results.parquet") == results
    with pytest.raises(ValueError, match="unknown sub-task"):  # a name no builder has: refused when the config loads
        run_evaluate(cfg(sub_tracks=["NoSuchTask"]))


def test_garbled_engram_store_and_media_are_named(tmp_path, caplog, capsys):
    """An Engram or a memory store that is truncated or of the wrong shape is an error naming the file and the
    field (it was 'invalid configuration (MemoryStore): : Invalid JSON'); a media blob that is not UTF-8 is left
    empty as upstream does (§7.1) but named in a warning instead of silently."""
    from test_memory_stage import make_run

    from filegram_ray.cli import main
    from filegram_ray.config import load_config
    from filegram_ray.memory.api import load_engram, load_store
    from filegram_ray.memory.stage import run_encode

    root = make_run(tmp_path / "run", bad=None)
    blob = next((root / "trajectories" / "pa_reader" / "T-01" / "media" / "blobs").glob("*.blob"))
    blob.write_bytes(b"\xff\xfe not utf-8")
    with caplog.at_level("WARNING"):
        s = run_encode(load_config(None, [f"run_dir={root}", "encode.embedder=hashing"]), executor="serial")
    assert s["errors"] == 0 and f"{blob}: media file unreadable (not UTF-8 at byte 0)" in caplog.text
    (root / "engrams" / "pa_reader" / "T-02.json").write_text('{"trajectory_id": 3}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"engrams/pa_reader/T-02\.json: not a valid Engram: field 'trajectory_id'"):
        load_engram(root, "pa_reader", "T-02")
    (root / "memory" / "pb_writer" / "store.json").write_text('{"x": ', encoding="utf-8")
    with pytest.raises(ValueError, match=r"memory/pb_writer/store\.json: not a valid MemoryStore: Invalid JSON"):
        load_store(root, "pb_writer")
    capsys.readouterr()
    assert main(["memory", "show", str(root), "pb_writer", "--embedder", "hashing"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {root}/memory/pb_writer/store.json: not a valid MemoryStore") and "\n" not in err


def test_profile_with_unknown_field_is_one_line_error_naming_file_and_field(tmp_path, capsys):
    """A profile set where one profile has an unknown field stops generate (and bench) before any unit runs, with
    one line naming the file and the field: profiles are configuration, and the perturbation plan is drawn over
    the whole set, so a set with one profile silently dropped would give other bytes."""
    import shutil

    from filegram_ray.cli import main
    from filegram_ray.paths import profiles_dir

    pd = tmp_path / "profiles"
    shutil.copytree(profiles_dir(), pd)
    f = pd / "p1_methodical.yaml"
    f.write_text(f.read_text(encoding="utf-8") + "\nfavourite_colour: blue\n", encoding="utf-8")
    for argv in (["pipeline", "--only", "generate"], ["pipeline", "--only", "bench"]):
        if "bench" in argv:  # bench reads a run: it refuses a missing run directory first (nothing is created)
            (tmp_path / "run").mkdir(exist_ok=True)
        rc = main([*argv, "--run-dir", str(tmp_path / "run"), "--serial", "--set", f"profiles_dir={pd}",
                   "--set", "profiles=[p1]", "--set", "tasks=[T-03]"])
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert rc == 2 and err == f"error: {f}: field 'favourite_colour': Extra inputs are not permitted", err


def test_generate_refuses_a_malformed_earlier_index_before_running_units(tmp_path):
    """generate merges into the index of earlier runs at the end: an index that lost a column (or is truncated)
    is refused up front naming the file (it was a polars traceback after every unit had run)."""
    from filegram_ray.config import load_config
    from filegram_ray.engine.generate import run_generate

    root = tmp_path / "run"
    run = RunDir(root)
    run.write_table("trajectories/index.parquet", pl.DataFrame({"trajectory_id": ["x/T-01"], "profile_id": ["x"]}))
    cfg = load_config(None, [f"run_dir={root}", "seed=7", "profiles=[p3]", "tasks=[T-03]", "generate.executor=serial",
                             "generate.perturb=false"])
    with pytest.raises(ValueError, match=r"trajectories/index\.parquet: column\(s\) task_id, status, n_events_raw"):
        run_generate(cfg)
    run.write_bytes("trajectories/index.parquet", b"PAR1")
    with pytest.raises(StorageError, match=r"trajectories/index\.parquet: not a readable Parquet table"):
        run_generate(cfg)
    assert not run.exists("_done/generate")  # nothing ran


def test_validity_leaves_out_a_trajectory_with_a_malformed_meta_json(tmp_path):
    """`filegram validity` (same kind): a trajectory whose meta.json is not an object or whose events.json is
    truncated is left out and named instead of ending the whole measure; with none left it fails loudly naming
    the first."""
    from filegram_ray.config import load_config
    from filegram_ray.engine.generate import GenerateConfig, GenerateWorker, plan_units
    from filegram_ray.validity.core import load_sessions
    from filegram_ray.validity.report import run_validity

    root = tmp_path / "run"
    cfg = load_config(None, [f"run_dir={root}", "seed=7", "profiles=[p3]", "tasks=[T-03,T-04]"])
    units = plan_units(cfg, GenerateConfig(perturb=False))
    worker = GenerateWorker(str(root))
    rows = [{"trajectory_id": u["unit_id"], "profile_id": u["unit_id"].split("/")[0],
             "task_id": u["unit_id"].split("/")[1], "status": worker.process(u) and "ok"} for u in units]
    run = RunDir(root)
    run.write_table("trajectories/index.parquet", pl.DataFrame(rows))
    a, b = (r["trajectory_id"] for r in rows)
    run.write_json(f"trajectories/{a}/meta.json", ["not an object"])
    got = load_sessions(str(root))
    assert [s.trajectory_id for s in got.sessions] == [b]
    assert got.skipped == [{"trajectory_id": a, "error": f"{root}/trajectories/{a}/meta.json: expected a JSON "
                                                          "object, got list"}]
    events = run.read_bytes(f"trajectories/{b}/events.json")
    run.write_bytes(f"trajectories/{b}/events.json", events[: len(events) // 2])
    with pytest.raises(ValueError, match=r"no finished trajectories .* \(2 left out, first: .*meta\.json: expected"):
        run_validity(str(root), write=False)
