"""Exact content deltas: stored diffs that patch / git apply accept and that rebuild the new text byte for byte
(BR-06), CRLF-aware edits, and the property random edits → apply(diff, old) == new."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from engine_helpers import open_session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filegram_ray.engine.media import apply_diff, unified_diff

PATCH, GIT = shutil.which("patch"), shutil.which("git")
PROPS = settings(derandomize=True, database=None, deadline=None, max_examples=300,
                 suppress_health_check=[HealthCheck.too_slow])


def apply_with(tool: str, old: bytes, diff: bytes, workdir: Path) -> bytes:
    """Apply ``diff`` to a file ``f.txt`` holding ``old`` with GNU patch or git apply; returns the new bytes."""
    workdir.mkdir(parents=True)
    (workdir / "f.txt").write_bytes(old)
    (workdir / "x.diff").write_bytes(diff)
    if tool == "patch":
        cmd = [PATCH, "-p1", "-s", "--no-backup-if-mismatch", "-i", "x.diff"]
    else:
        subprocess.run([GIT, "init", "-q"], cwd=workdir, check=True)
        cmd = [GIT, "apply", "--whitespace=nowarn", "x.diff"]
    r = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)
    assert r.returncode == 0, (tool, r.stdout + r.stderr, diff)
    return (workdir / "f.txt").read_bytes()


def last_edit(s):
    return [e for e in s.events if e["event_type"] == "file_edit"][-1]


# --- BR-06 ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tool", [pytest.param("patch", marks=pytest.mark.skipif(PATCH is None, reason="no patch")),
                                  pytest.param("git", marks=pytest.mark.skipif(GIT is None, reason="no git"))])
def test_BR_06_end_of_file_diffs_apply_with_patch_and_git(tmp_path, tool):
    """BR-06 (a), (c): a file without a final newline and a change of only the final newline give diffs with
    the end-of-file marker that patch / git apply accept, rebuilding the new text exactly; +1/-1 lines."""
    s = open_session(tmp_path, {"a.txt": b"x = 1\ny = 2", "c.txt": b"one\ntwo"})
    for rel, old, new, want in [("a.txt", "y = 2", "y = 3", b"x = 1\ny = 3"),
                                ("c.txt", "two", "two\n", b"one\ntwo\n")]:
        before = (s.sandbox_path / rel).read_bytes()
        assert s.call("edit", file_path=rel, old_string=old, new_string=new).ok
        e = last_edit(s)
        assert (e["lines_added"], e["lines_deleted"]) == (1, 1), rel
        diff = s.media.read(e["media_ref_diff"]["path"])
        assert b"\\ No newline at end of file\n" in diff
        assert s.media.read(e["media_ref_old"]["path"]) == before
        assert apply_with(tool, before, diff.replace(f"/{rel}".encode(), b"/f.txt"), tmp_path / f"{tool}-{rel}") \
            == want == (s.sandbox_path / rel).read_bytes()


def test_BR_06_crlf_file_edited_with_lf_strings_keeps_crlf(tmp_path):
    """BR-06 (b): an LF old_string/new_string on a CRLF file applies (single and replace_all) and the file keeps
    CRLF endings; the stored diff rebuilds it."""
    crlf = b"alpha\r\nbeta\r\ngamma\r\nalpha\r\nbeta\r\n"
    s = open_session(tmp_path, {"b.txt": crlf, "b2.txt": crlf, "mixed.txt": b"a\r\nb\nc\r\n"})
    r = s.call("edit", file_path="b.txt", old_string="gamma\nalpha", new_string="GAMMA\nALPHA\nnew")
    assert r.ok, r.output
    assert (s.sandbox_path / "b.txt").read_bytes() == b"alpha\r\nbeta\r\nGAMMA\r\nALPHA\r\nnew\r\nbeta\r\n"
    r = s.call("edit", file_path="b2.txt", old_string="alpha\nbeta", new_string="ALPHA\nBETA", replace_all=True)
    assert r.ok
    assert (s.sandbox_path / "b2.txt").read_bytes() == b"ALPHA\r\nBETA\r\ngamma\r\nALPHA\r\nBETA\r\n"
    e = last_edit(s)
    old = s.media.read(e["media_ref_old"]["path"]).decode()
    assert apply_diff(s.media.read(e["media_ref_diff"]["path"]).decode(), old) == \
        (s.sandbox_path / "b2.txt").read_bytes().decode()
    r = s.call("edit", file_path="b.txt", old_string="new\r\n", new_string="new\n")
    assert not r.ok and "line endings" in r.output
    # a mixed-ending file is matched exactly as written
    assert not s.call("edit", file_path="mixed.txt", old_string="a\nb", new_string="x").ok
    assert s.call("edit", file_path="mixed.txt", old_string="b\nc", new_string="B\nC").ok
    assert (s.sandbox_path / "mixed.txt").read_bytes() == b"a\r\nB\nC\r\n"


def test_diff_lines_split_at_newline_only():
    """Form feeds and U+2028 are characters inside a line for patch/git, not line ends."""
    old, new = "a\x0cb\u2028c\n", "a\x0cB\u2028c\n"
    d = unified_diff(old, new, "f")
    assert d == "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\x0cb\u2028c\n+a\x0cB\u2028c\n"
    assert apply_diff(d, old) == new


def test_apply_diff_rejects_a_diff_that_does_not_fit():
    d = unified_diff("a\nb\n", "a\nc\n", "f")
    with pytest.raises(ValueError, match="does not match"):
        apply_diff(d, "a\nx\n")


# --- properties -------------------------------------------------------------------------------------------------

_line = st.text(alphabet=st.sampled_from(list("abcxyz \t\r\x0cé中") + ["\u2028"]), max_size=8)
_eol = st.sampled_from(["\n", "\r\n"])


@st.composite
def texts(draw) -> str:
    lines = draw(st.lists(st.tuples(_line, _eol), max_size=12))
    text = "".join(a + b for a, b in lines)
    if draw(st.booleans()) and lines:
        text = text[:-len(lines[-1][1])]  # no final newline
    return text


@st.composite
def edited(draw) -> tuple[str, str]:
    """(old, new): random texts, then 1-3 random splices (delete a span, insert random text)."""
    old = draw(texts())
    new = old
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(new)))
        j = draw(st.integers(i, min(len(new), i + 20)))
        new = new[:i] + draw(st.one_of(texts(), _eol, st.just(""))) + new[j:]
    return old, new


@PROPS
@given(edited())
def test_property_random_edits_apply_diff_old_is_new(pair):
    """Random edits on random texts (CRLF, LF, mixed, with or without a final newline): apply(diff, old) == new."""
    old, new = pair
    d = unified_diff(old, new, "f.txt")
    assert (d == "") == (old == new)
    assert apply_diff(d, old) == new


@pytest.mark.skipif(PATCH is None or GIT is None, reason="needs GNU patch and git")
@settings(PROPS, max_examples=30)
@given(edited())
def test_property_patch_and_git_apply_rebuild_new(pair):
    """The same property through GNU patch and git apply, byte for byte."""
    old, new = pair
    if old == new:
        return
    d = unified_diff(old, new, "f.txt").encode()
    with tempfile.TemporaryDirectory() as tmp:
        for tool in ("patch", "git"):
            assert apply_with(tool, old.encode(), d, Path(tmp) / tool) == new.encode()


@settings(PROPS, max_examples=80)
@given(texts(), st.data())
def test_property_engine_edit_diff_rebuilds_the_file(text, data):
    """Through the engine: an edit of a random span of a random file stores old blob + diff that rebuild the
    file on disk exactly; a CRLF file stays CRLF."""
    if not text:
        return
    i = data.draw(st.integers(0, len(text) - 1))
    j = data.draw(st.integers(i + 1, min(len(text), i + 15)))
    old_s = text[i:j]
    new_s = data.draw(texts())
    with tempfile.TemporaryDirectory() as tmp:
        s = open_session(Path(tmp), {"f.txt": text.encode()})
        r = s.call("edit", file_path="f.txt", old_string=old_s, new_string=new_s, replace_all=True)
        if not r.ok:
            return  # identical strings or (for CRLF files) strings equal once line endings are matched
        on_disk = (s.sandbox_path / "f.txt").read_bytes().decode()
        e = last_edit(s)
        before = s.media.read(e["media_ref_old"]["path"]).decode()
        assert before == text
        assert apply_diff(s.media.read(e["media_ref_diff"]["path"]).decode(), before) == on_disk
        if "\n" in text and text.count("\n") == text.count("\r\n") and "\r" not in old_s + new_s:
            assert on_disk.count("\n") == on_disk.count("\r\n")
        s.close()
