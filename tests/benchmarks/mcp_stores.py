"""Watcher stores made from persona-simulator trajectories, for the `filegram mcp` benchmarks (not product code).

A real store comes from `filegram watch`; these benchmarks need stores of simulated people (whose ground-truth
tiers are known, for bench_mcp_agent.py) and of 10,000 sessions (bench_mcp_recall.py), which no watcher records in
a benchmark's time. :func:`write_store` lays simulated trajectories out exactly as the watcher does
(``store.json`` marked ``redacted``, ``sessions/index.json``, ``sessions/<id>/events.jsonl``,
``sessions/<id>/summary.json``, ``media/blobs|diffs``): events keep the engine's schema (they are the engine's
events), with the profile id replaced by ``real_user``, the generator fields emptied and every path put under one
watched folder ``/sandbox/w/…``. ``vary`` (an int) rewrites the text of every blob and diff of a session with a
deterministic word substitution, so that copies of one trajectory hold distinct texts (same seed, same bytes).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import uuid
from pathlib import Path
from typing import Any

from filegram_ray.watch.config import WatchConfig
from filegram_ray.watch.forget import PATH_FIELDS
from filegram_ray.watch.store import WatchStore, task_id_for

MEDIA_FIELDS = ("media_ref", "media_ref_old", "media_ref_new", "media_ref_diff")
_SANDBOX = re.compile(r"^/sandbox/[^/]+")
_WORD = re.compile(r"[A-Za-z]{4,}")


def _vocab() -> list[str]:
    from faker.providers.lorem.en_US import Provider

    return sorted(set(Provider.word_list))


def vary_text(text: str, key: int, vocab: list[str]) -> str:
    """Replace about half of the words of 4+ letters by a vocabulary word chosen by a hash of (word, key): the
    same word becomes the same substitute within one key, so a diff and its blobs stay consistent."""
    def sub(m: re.Match) -> str:
        w = m.group(0)
        h = int.from_bytes(hashlib.blake2b(f"{key}\x00{w.lower()}".encode(), digest_size=8).digest(), "big")
        return w if h % 2 else vocab[(h >> 1) % len(vocab)]
    return _WORD.sub(sub, text)


def _path(v: Any) -> Any:
    if isinstance(v, str):
        return _SANDBOX.sub("/sandbox/w", v)
    if isinstance(v, list):
        return [_path(x) for x in v]
    return v


def session_events(raw: list[dict[str, Any]], media_dir: Path, store: Path, sid: str, start_ms: float,
                   vary: int | None, vocab: list[str]) -> list[dict[str, Any]]:
    """One trajectory's raw events as a watcher session of ``store`` (media copied, optionally varied)."""
    t0 = min(float(e["timestamp"]) for e in raw)
    out = []
    for e in raw:
        e = dict(e)
        e["timestamp"] = start_ms + (float(e["timestamp"]) - t0)
        e["session_id"] = sid
        e["profile_id"] = "real_user"
        for f in ("model_provider", "model_name", "message_id"):
            if f in e:
                e[f] = None
        if "target_directory" in e:
            e["target_directory"] = "/sandbox/w"
        for f in PATH_FIELDS:
            if f in e:
                e[f] = _path(e[f])
        for f in MEDIA_FIELDS:
            ref = e.get(f)
            if not isinstance(ref, dict):
                continue
            data = (media_dir / ref["path"]).read_bytes()
            if vary is not None and e["event_type"] != "fs_snapshot":  # a listing holds relative paths: kept
                data = vary_text(data.decode("utf-8", "replace"), vary, vocab).encode("utf-8")
            h = hashlib.sha256(data).hexdigest()[:16]
            rel = f"{'blobs' if ref['type'] == 'blob' else 'diffs'}/{h}.{'blob' if ref['type'] == 'blob' else 'diff'}"
            target = store / "media" / rel
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            e[f] = {**ref, "hash": h, "path": rel}
        out.append(e)
    return out


def write_store(store: Path, trajectories: list[tuple[Path, float, int | None]], seed: int = 0) -> list[str]:
    """Write a store holding one closed session per ``(trajectory folder, start ms, vary key or None)``; returns
    the task ids. The watched folder is ``<store>.root`` (created empty)."""
    root = Path(str(store) + ".root")
    root.mkdir(parents=True, exist_ok=True)
    ws = WatchStore.open_or_create(store, [str(root)], WatchConfig(content="redacted"))
    rng = random.Random(seed)
    vocab = _vocab()
    records = ws.sessions()
    tids = []
    for traj, start_ms, vary in trajectories:
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        raw = json.loads((Path(traj) / "events_raw.json").read_text("utf-8"))
        events = session_events(raw, Path(traj) / "media", ws.path, sid, start_ms, vary, vocab)
        d = ws.path / "sessions" / sid
        d.mkdir(parents=True, exist_ok=True)
        (d / "events.jsonl").write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events), "utf-8")
        end_ms = max(float(e["timestamp"]) for e in events)
        tid = task_id_for(sid, start_ms)
        (d / "summary.json").write_text(json.dumps({"session_id": sid, "task_id": tid, "start_time": start_ms,
                                                    "end_time": end_ms, "total_events": len(events),
                                                    "content_mode": "redacted"}), "utf-8")
        records.append({"session_id": sid, "task_id": tid, "started_ms": start_ms, "ended_ms": end_ms,
                        "closed": True, "events": len(events), "lines": len(events)})
        tids.append(tid)
    ws.save_sessions(sorted(records, key=lambda r: r["started_ms"]))
    return tids


def simulate(out: Path, profiles: list[Any], tasks: list[Any], seeds: list[int], bundles: dict[str, Path]
             ) -> list[tuple[Any, Any, int, Path]]:
    """Persona-simulator trajectories of every (profile, task, seed) → ``[(profile, task, seed, folder)]`` (a folder
    already written is reused)."""
    from filegram_ray.engine.simulator import simulate_trajectory

    done = []
    for p in profiles:
        for t in tasks:
            for s in seeds:
                dest = out / p.profile_id / t.task_id / f"s{s}"
                if not (dest / "events_raw.json").exists():
                    sess = simulate_trajectory(p, t, bundles[t.task_id], out / "work", seed=s)
                    sess.write_trajectory(dest)
                    sess.close()
                done.append((p, t, s, dest))
    return done


def bundles_for(tasks: list[Any], out: Path, seed: int = 7) -> dict[str, Path]:
    """Input bundles of ``tasks`` (built once under ``out``)."""
    from filegram_ray.workspace.bundle import build_bundle

    res = {}
    for t in tasks:
        d = out / t.task_id
        if not (d / "bundle.json").exists():
            build_bundle(t, seed, d)
        res[t.task_id] = d
    return res
