"""Shared helpers for the engine tests: build a bundle, open a session, pick events."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from filegram_ray.engine import EngineSession

START_MS = 1_760_000_000_000.0
PROFILE, TASK = "p9_tester", "T-07"
ROOT = f"/sandbox/{PROFILE}_{TASK}"


def make_bundle(base: Path, files: dict[str, str | bytes]) -> Path:
    bundle = base / "bundle"
    bundle.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        p = bundle / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
    return bundle


def open_session(tmp: Path, files: dict[str, str | bytes] | None = None, *, seed: int = 1,
                 **kw) -> EngineSession:
    bundle = make_bundle(tmp, files) if files is not None else None
    sess = EngineSession(bundle, tmp / "work", PROFILE, TASK, seed=seed, start_ms=START_MS, **kw)
    sess.start()
    return sess


def behavioural(sess: EngineSession, since: int = 0) -> list[dict]:
    """Events after index ``since`` minus the simulation types."""
    from filegram_ray.schema.events import SIMULATION_TYPES

    return [e for e in sess.events[since:] if e["event_type"] not in SIMULATION_TYPES]


def v(rel: str) -> str:
    return ROOT if rel == "." else f"{ROOT}/{rel}"


def tree_digest(root: Path, skip: Path | None = None) -> str:
    """Hash of every entry under ``root`` (names, kinds, file bytes, link targets), never following links."""
    h = hashlib.sha256()
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        if skip is not None and Path(dirpath) == skip.parent:
            dirs[:] = [d for d in dirs if Path(dirpath, d) != skip]
        for name in sorted(dirs + files):
            p = Path(dirpath, name)
            st = os.lstat(p)
            h.update(str(p.relative_to(root)).encode("utf-8", "surrogateescape") + b"|" + oct(st.st_mode).encode())
            if stat.S_ISLNK(st.st_mode):
                h.update(os.readlink(p).encode())
            elif stat.S_ISREG(st.st_mode):
                h.update(p.read_bytes())
    return h.hexdigest()
