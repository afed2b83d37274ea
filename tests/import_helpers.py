"""Shared helpers of the import tests: an engine session on an imported bundle, grep / read through it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from filegram_ray.engine import EngineSession

FIXTURES = Path(__file__).parent / "fixtures" / "import"
START_MS = 1.7e12


def folder_of(tmp: Path, names: list[str], sub: str = "src") -> Path:
    """A source folder holding copies of the named fixtures."""
    d = tmp / sub
    d.mkdir(parents=True, exist_ok=True)
    for n in names:
        shutil.copyfile(FIXTURES / n, d / n)
    return d


def bundle_meta(bundle: Path) -> dict:
    return json.loads((bundle / "bundle.json").read_text(encoding="utf-8"))


def open_on_bundle(bundle: Path, work: Path) -> EngineSession:
    """An engine session on an imported bundle, with the annotations of its bundle.json (as generate does)."""
    meta = bundle_meta(bundle)
    ann = {f["path"]: f["annotation"] for f in meta["files"] if f.get("annotation")}
    sess = EngineSession(bundle / "files", work, "p1_x", meta["task_id"], seed=7, start_ms=START_MS,
                         annotations=ann)
    sess.start()
    return sess


def grep_hits(sess: EngineSession, pattern: str, path: str = ".") -> list[tuple[str, int, str]]:
    """(file, line, text) of every hit grep reports."""
    with sess.iteration():
        res = sess.call("grep", pattern=pattern, path=path)
    assert res.ok, res.output
    out = []
    for ln in res.output.splitlines()[1:]:
        m = re.match(r"^(.+?):(\d+): (.*)$", ln)
        if m:
            out.append((m.group(1), int(m.group(2)), m.group(3)))
    return out


def read_lines(sess: EngineSession, path: str, offset: int | None = None, limit: int | None = None
               ) -> list[tuple[int, str]]:
    """(line number, text) of what read shows (its numbered rows only)."""
    kw = {"file_path": path}
    if offset is not None:
        kw["offset"] = offset
    if limit is not None:
        kw["limit"] = limit
    with sess.iteration():
        res = sess.call("read", **kw)
    assert res.ok, res.output
    rows = []
    for ln in res.output.splitlines():
        m = re.match(r"^\s*(\d+)\t(.*)$", ln)
        if m:
            rows.append((int(m.group(1)), m.group(2)))
    return rows
