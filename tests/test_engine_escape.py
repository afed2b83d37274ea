"""Escape suite: every attempt to reach outside the sandbox is a tool error and changes nothing anywhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from engine_helpers import PROFILE, TASK, make_bundle, tree_digest

from filegram_ray.engine import EngineSession, Limits

START = 1_760_000_000_000.0


@pytest.fixture
def env(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    bundle = make_bundle(tmp_path, {"notes/a.md": "alpha\nbeta\n", "readme.txt": "hi\n"})
    os.symlink(outside / "secret.txt", bundle / "link_secret.txt")
    os.symlink(outside, bundle / "outdir")
    os.symlink("../../outside/secret.txt", bundle / "notes" / "rel_link.md")
    sess = EngineSession(bundle, tmp_path / "work", PROFILE, TASK, seed=5, start_ms=START,
                         limits=Limits(max_write_bytes=64 * 1024))
    sess.start()
    # the link rule keeps bundle links out of the sandbox ...
    assert sorted(p for p, _why in sess.sandbox.skipped) == ["link_secret.txt", "notes/rel_link.md", "outdir"]
    # ... so plant the same links inside it, as if they got there anyway: every call must refuse them at use
    box = sess.sandbox_path
    os.symlink(outside / "secret.txt", box / "link_secret.txt")
    os.symlink(outside, box / "outdir")
    os.symlink("../../../../outside/secret.txt", box / "notes" / "rel_link.md")
    os.mkfifo(box / "pipe.fifo")
    return tmp_path, outside, sess


SECRET = "OUTSIDE/secret.txt"  # placeholder replaced by the real absolute path in the test

ATTEMPTS = [
    ("read", {"file_path": "../../../outside/secret.txt"}),
    ("read", {"file_path": "/etc/passwd"}),
    ("read", {"file_path": SECRET}),
    ("read", {"file_path": "link_secret.txt"}),
    ("read", {"file_path": "notes/rel_link.md"}),
    ("read", {"file_path": "outdir/secret.txt"}),
    ("read", {"file_path": "/dev/zero"}),
    ("read", {"file_path": "pipe.fifo"}),
    ("read", {"file_path": "notes/\x00a.md"}),
    ("read", {"file_path": "~/.bashrc"}),
    ("write", {"file_path": "../escape.txt", "content": "x"}),
    ("write", {"file_path": "/tmp/fg_escape_probe.txt", "content": "x"}),
    ("write", {"file_path": "/sandbox/p1_other_T-01/x.md", "content": "x"}),
    ("write", {"file_path": "outdir/new.txt", "content": "x"}),
    ("write", {"file_path": "link_secret.txt", "content": "pwned"}),
    ("write", {"file_path": "notes/bad\udcffname.md", "content": "x"}),
    ("write", {"file_path": "junk.md", "content": "ok \udcff\udcfe junk"}),
    ("write", {"file_path": "huge.md", "content": "x" * (64 * 1024 + 1)}),
    ("write", {"file_path": "notes/a\nb.md", "content": "x"}),
    ("edit", {"file_path": "link_secret.txt", "old_string": "top", "new_string": "bottom"}),
    ("multiedit", {"file_path": "outdir/secret.txt", "edits": [{"old_string": "top", "new_string": "x"}]}),
    ("grep", {"pattern": "secret", "path": "/etc"}),
    ("grep", {"pattern": "secret", "path": "outdir"}),
    ("glob", {"pattern": "../*"}),
    ("glob", {"pattern": "/etc/*"}),
    ("list", {"path": ".."}),
    ("bash", {"command": "cat /etc/passwd"}),
    ("bash", {"command": "ls | wc -l"}),
    ("bash", {"command": "ls > listing.txt"}),
    ("bash", {"command": "ls < readme.txt"}),
    ("bash", {"command": "mkdir $(whoami)"}),
    ("bash", {"command": "mkdir `id`"}),
    ("bash", {"command": "mkdir $HOME/x"}),
    ("bash", {"command": "rm -rf ../../../outside"}),
    ("bash", {"command": "mv notes/a.md /tmp/stolen.md"}),
    ("bash", {"command": "cp ../../../outside/secret.txt ."}),
    ("bash", {"command": "cp link_secret.txt copy.txt"}),
    ("bash", {"command": "rm -rf ."}),
    ("bash", {"command": "rm -rf /"}),
    ("bash", {"command": "mkdir ok || rm -rf /"}),
    ("bash", {"command": "mkdir ok & rm readme.txt"}),
    ("bash", {"command": "rm *.md"}),
    ("bash", {"command": "mkdir ~/x"}),
    ("bash", {"command": "python -c 'import os'"}),
    ("bash", {"command": "mkdir ok\nrm readme.txt"}),
    ("bash", {"command": "cd .. && ls"}),
    ("bash", {"command": "ls --color=always"}),
    ("bash", {"command": "mkdir ok && rm outdir/secret.txt"}),
    ("bash", {"command": "mkdir ok; mv link_secret.txt notes/"}),
    ("bash", {"command": "(rm readme.txt)"}),
    ("bash", {"command": "mkdir 'unterminated"}),
    ("bash", {"command": "touch /dev/null"}),
    ("nosuchtool", {"x": 1}),
    ("read", {"file_path": "readme.txt", "evil": True}),
]


@pytest.mark.parametrize("tool, args", ATTEMPTS, ids=[f"{i:02d}-{t}" for i, (t, _a) in enumerate(ATTEMPTS)])
def test_escape_attempt_refused_and_nothing_touched(env, tool, args):
    tmp, outside, sess = env
    args = {k: (str(outside / "secret.txt") if v == SECRET else v) for k, v in args.items()}
    around = tree_digest(tmp, skip=sess.sandbox_path)
    inside = tree_digest(sess.sandbox_path)
    n_events = len(sess.events)
    res = sess.call(tool, **args)
    assert res.ok is False, (tool, args, res.output)
    assert res.error
    assert tree_digest(tmp, skip=sess.sandbox_path) == around
    assert tree_digest(sess.sandbox_path) == inside
    assert not Path("/tmp/fg_escape_probe.txt").exists() and not Path("/tmp/stolen.md").exists()
    # only the failed tool_call and its error_encounter were recorded
    assert [e["event_type"] for e in sess.events[n_events:]] == ["tool_call", "error_encounter"]
    assert (outside / "secret.txt").read_text() == "top secret\n"


def test_events_never_contain_the_real_sandbox_dir(env):
    tmp, _outside, sess = env
    sess.call("read", file_path=str(sess.sandbox_path / "readme.txt"))  # real absolute path is accepted …
    sess.call("bash", command="mkdir -p x/y && ls x")
    sess.finish()
    blob = repr(sess.events[-6:-2])
    assert str(tmp) not in blob  # … but recorded under the virtual root
    assert any(e.get("file_path") == f"/sandbox/{PROFILE}_{TASK}/readme.txt" for e in sess.events)


def test_op_and_wall_limits_are_tool_errors(tmp_path):
    s = EngineSession(None, tmp_path / "w", PROFILE, TASK, seed=1, start_ms=START, limits=Limits(max_total_ops=2))
    s.start()
    assert s.call("list").ok and s.call("list").ok
    r = s.call("list")
    assert not r.ok and "more than 2 tool calls" in r.error
    s2 = EngineSession(None, tmp_path / "w2", PROFILE, TASK, seed=1, start_ms=START, limits=Limits(max_wall_s=0.0))
    s2.start()
    r = s2.call("list")
    assert not r.ok and "wall time" in r.error


def test_sandbox_size_limit(tmp_path):
    s = EngineSession(None, tmp_path / "w", PROFILE, TASK, seed=1, start_ms=START,
                      limits=Limits(max_sandbox_bytes=1000))
    s.start()
    assert s.call("write", file_path="a.txt", content="x" * 900).ok
    r = s.call("bash", command="cp a.txt b.txt")
    assert not r.ok and "exceed" in r.output
    assert not (s.sandbox_path / "b.txt").exists()
