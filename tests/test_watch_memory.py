"""Incremental FileGramOS memory on watcher sessions (`filegram watch --out STORE --update-memory`), equal to a
from-scratch consolidation; `filegram watch --out STORE --show-memory`; the Real-World setting: a watcher store imported as a profile's
trajectories, encoded by the encode stage and ingested by every registered memory method."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from watch_helpers import start

from filegram_ray.cli import main as cli_main
from filegram_ray.engine.filter import filter_events
from filegram_ray.memory.consolidate import ConsolidateConfig, FingerprintStats, consolidate
from filegram_ray.memory.embed import HashingEmbedder
from filegram_ray.memory.engram import encode_engram
from filegram_ray.memory.incremental import update_memory
from filegram_ray.storage import RunDir
from filegram_ray.watch.export import import_store, watch_units
from filegram_ray.watch.store import WatchStore

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify (Linux) observer")


def test_running_fingerprint_stats_are_exact_and_order_independent():
    rng = np.random.default_rng(3)
    F = rng.normal(size=(9, 17)) * rng.integers(1, 1000, size=17)
    F[:, 4] = 2.5  # constant feature
    whole = FingerprintStats.of(F)
    parts = FingerprintStats().add_many(F[5:]).add_many(F[:2]).add_many(F[2:5])
    again = FingerprintStats.model_validate_json(parts.model_dump_json())  # through the stored JSON
    assert whole.zscores(F).tobytes() == again.zscores(F).tobytes()
    mu, sd = whole.mean_std()
    assert np.allclose(mu, F.mean(axis=0)) and np.allclose(sd, F.std(axis=0, ddof=1)) and sd[4] == 0.0


def _session(tmp_path, i: int) -> None:
    """One working session of a small, varied activity (a watcher run: stopping it closes the session)."""
    w, root = start(tmp_path)
    try:
        _work(w, root, i)
    finally:
        w.stop()


def _work(w, root, i: int) -> None:
    d = root / f"proj{i}"
    d.mkdir()
    (d / f"notes_{i}.md").write_text(f"# Notes {i}\n\n" + "".join(f"- point {j} of session {i}\n"
                                                              for j in range(3 + i)))
    (d / f"data{i}.csv").write_text("a,b\n" + "".join(f"{j},{j * i}\n" for j in range(4)))
    w.sync()
    (d / f"notes_{i}.md").read_text()
    with open(d / f"notes_{i}.md", "a") as fh:
        fh.write("\n| k | v |\n|---|---|\n| x | 1 |\n")
    if i % 2:
        os.rename(d / f"data{i}.csv", d / f"data-{i}.csv")
    w.sync()


def _scratch(store: WatchStore, embedder) -> str:
    """A from-scratch consolidation of all closed sessions, encoded anew."""
    units, _ = watch_units(store)
    engrams = []
    for tid, load in sorted(units.items()):
        events, media = load()
        engrams.append(encode_engram(events, f"real_user/{tid}", tid, media, source=tid))
    engrams.sort(key=lambda e: e.trajectory_id)
    texts = [ep.get("content") or ep.get("summary") or "" for e in engrams for ep in e.episodes]
    return consolidate(engrams, config=ConsolidateConfig(), profile_id="real_user",
                       episode_vectors=embedder.encode(texts)).to_json()


def test_incremental_update_equals_from_scratch_and_feeds_the_real_world_setting(tmp_path, capsys):
    store_dir = tmp_path / "store"
    run = RunDir(store_dir)
    for i in range(2):
        _session(tmp_path, i)
    st = WatchStore.open(store_dir)
    units, _ = watch_units(st)
    first = update_memory(run, "real_user", units, embedder="hashing")
    assert (first["encoded_now"], first["sessions"]) == (2, 2)
    old = {p.name: p.stat().st_mtime_ns for p in (store_dir / "engrams" / "real_user").glob("*.json")}
    for i in range(2, 5):
        _session(tmp_path, i)
    st = WatchStore.open(store_dir)
    units, _ = watch_units(st)
    second = update_memory(run, "real_user", units, embedder="hashing")
    assert (second["encoded_now"], second["reused"], second["sessions"]) == (3, 2, 5)
    # old sessions were not encoded again
    assert {p.name: p.stat().st_mtime_ns for p in (store_dir / "engrams" / "real_user").glob("*.json")
            if p.name in old} == old
    incremental = (store_dir / "memory" / "real_user" / "store.json").read_text()
    assert incremental == _scratch(st, HashingEmbedder())
    assert update_memory(run, "real_user", units, embedder="hashing")["up_to_date"]

    # `filegram watch --out STORE --show-memory --query …` on it (its embedder is taken from the update state)
    assert cli_main(["watch", "--out", str(store_dir), "--show-memory", "--query", "notes table"]) == 0
    out = capsys.readouterr().out
    assert "Behavioral Memory Profile (5 sessions" in out and "Relevant content" in out
    # searches and browsing are not observable to the watcher: the shown memory says so before any "never"
    # (a fresh-eyes finding: "Never used search in any of 2 trajectories" read as a habit)
    assert out.startswith("[note: this memory comes from the watcher, which cannot observe searches or folder")

    # the Real-World setting: the store imported as one profile's trajectories …
    rundir = tmp_path / "run"
    imp = import_store(store_dir, str(rundir))
    assert len(imp["imported"]) == 5 and not imp["errors"]
    runp = RunDir(rundir)
    index = runp.read_table("trajectories/index.parquet")
    assert index["profile_id"].to_list() == ["real_user"] * 5 and set(index["status"].to_list()) == {"ok"}
    tid = imp["imported"][0]
    raw = runp.read_json(f"trajectories/real_user/{tid}/events_raw.json")
    assert runp.read_json(f"trajectories/real_user/{tid}/events.json") == filter_events(raw)
    manifest = runp.read_json(f"trajectories/real_user/{tid}/media/manifest.json")
    assert manifest["version"] == 1 and all(runp.exists(f"trajectories/real_user/{tid}/media/{e['type']}s/{h}."
                                                        f"{e['type']}") for h, e in manifest["entries"].items())
    # … encoded by the encode stage: the same memory as the incremental one
    from filegram_ray.config import load_config
    from filegram_ray.memory.stage import run_encode

    cfg = load_config(None, [f"run_dir={rundir}", "encode.embedder=hashing"])
    summary = run_encode(cfg, executor="serial")
    assert summary["errors"] == 0 and summary["profiles"] == 1
    assert (rundir / "memory" / "real_user" / "store.json").read_text() == incremental
    # … and ingested by every registered memory method
    from filegram_ray.methods import make_method, method_names
    from filegram_ray.methods.trajectory import build_views

    views = build_views(runp, {"kind": "all_trajectories",
                               "trajectories": [f"real_user/{t}" for t in imp["imported"]]})
    assert [v.task_id for v in views] == imp["imported"] and all(v.events for v in views)
    assert all("real_user" not in str(e) for v in views for e in v.events)  # no profile id reaches a method
    for name in method_names():  # two sessions are enough to exercise each method's ingest and retrieval
        m = make_method(name, embedder=HashingEmbedder())
        ctx = m.retrieve(m.ingest(views[:2]), "How does this user organise notes and data files?")
        assert isinstance(ctx.text, str), name
        if name not in ("no_context",):
            assert ctx.text.strip(), name


def test_cli_watch_status_forget_and_import(tmp_path, capsys):
    root = tmp_path / "w"
    root.mkdir()
    (root / "old.md").write_text("old\n")
    store = tmp_path / "store"
    assert cli_main(["watch", str(root), "--out", str(store), "--duration", "0.3", "--quiet",
                     "--content", "off", "--ignore", "*.log"]) == 0
    out = capsys.readouterr().out
    assert "content capture: off" in out and "not observable:" in out and "stopped after" in out
    cfg = WatchStore.open(store).config
    assert cfg.content == "off" and cfg.ignore == ["*.log"]
    w, _ = start(tmp_path)  # same store, stored folder; test timings
    try:
        (root / "new.md").write_text("new\n")
        w.sync()
    finally:
        w.stop()
    assert cli_main(["watch", "--out", str(store), "--status"]) == 0
    out = capsys.readouterr().out
    assert "closed" in out and '"file_write": 1' in out
    assert cli_main(["watch", "--out", str(store), "--import-into", str(tmp_path / "run")]) == 0
    assert "imported 1 session(s)" in capsys.readouterr().out
    assert cli_main(["watch", "--out", str(store), "--forget", str(root / "new.md")]) == 0
    assert "forgot w/new.md: 1 events removed" in capsys.readouterr().out
    assert cli_main(["watch", "--out", str(tmp_path / "nostore"), "--status"]) == 2
    assert "not a filegram watch store" in capsys.readouterr().err
