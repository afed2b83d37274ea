"""Generated variants (hypothesis, fixed seed) for the kinds of issue #13 deliverable 1 that are about meaning
rather than escape: bash options against real GNU coreutils (REL-bash-no-clobber-ignored), grep results against
stdlib ``re`` (REL-grep-regex-backtracking-unbounded), exact edit-size projection
(REL-edit-replace-all-memory-amplification) and one Unicode form per name (BR-03)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import unicodedata
from pathlib import Path

import pytest
from engine_helpers import PROFILE, TASK, make_bundle
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from filegram_ray.engine import EngineSession, Limits

START = 1_760_000_000_000.0
GEN = settings(derandomize=True, database=None, deadline=None, max_examples=150,
               suppress_health_check=[HealthCheck.too_slow])
BASH = shutil.which("bash")
TREE = {"a.txt": "A\n", "b.txt": "B\n", "d1/x.txt": "X\n", "d2/.keep": "", "d3/d1/.keep": "",
        "d4/d1/y.txt": "Y\n"}


def snapshot(root: Path) -> dict[str, str | None]:
    """{relative path: file text, or None for a folder}; .keep files mark folders and are left out."""
    out: dict[str, str | None] = {}
    for dirpath, dirs, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for d in dirs:
            out[os.path.normpath(os.path.join(rel, d))] = None
        for f in files:
            if f != ".keep":
                out[os.path.normpath(os.path.join(rel, f))] = Path(dirpath, f).read_text()
    return out


def gnu(command: str, cwd: Path) -> int:
    r = subprocess.run([BASH, "--norc", "--noprofile", "-c", command], cwd=cwd, capture_output=True,
                       env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"}, timeout=30)
    return r.returncode


_NAMES = st.sampled_from(["a.txt", "b.txt", "d1", "d2", "d3", "d4", "d1/x.txt", "m1", "m2/z", "d2/new"])
_OPERAND = st.tuples(_NAMES, st.booleans()).map(lambda t: t[0] + ("/" if t[1] else ""))
_FLAGS = {"cp": ["", "-r", "-n", "-f", "-rn", "-nf", "-fn", "-R"], "mv": ["", "-n", "-f", "-nf", "-fn"],
          "rm": ["", "-r", "-f", "-rf", "-d"], "mkdir": ["", "-p"], "touch": ["", "-c"]}


@st.composite
def coreutils_commands(draw) -> str:
    parts = []
    for i in range(draw(st.integers(1, 2))):
        prog = draw(st.sampled_from(sorted(_FLAGS)))
        flags = draw(st.sampled_from(_FLAGS[prog]))
        lo = 2 if prog in ("cp", "mv") else 1
        ops = draw(st.lists(_OPERAND, min_size=lo, max_size=lo + 1))
        if i:
            parts.append(draw(st.sampled_from([" ; ", " && "])))
        parts.append(" ".join(x for x in [prog, flags, *ops] if x))
    return "".join(parts)


def _into_itself(args: list[str]) -> bool:
    ops = [a.rstrip("/") for a in args if not a.startswith("-")]
    ops = ops[:ops.index(";")] if ";" in ops else ops[:ops.index("&&")] if "&&" in ops else ops
    return len(ops) >= 2 and any(ops[-1] == s or ops[-1].startswith(s + "/") for s in ops[:-1])


@pytest.mark.skipif(BASH is None or shutil.which("cp") is None, reason="needs bash and GNU coreutils")
@settings(GEN, max_examples=100)
@given(coreutils_commands())
def test_REL_bash_no_clobber_ignored_options_match_gnu_coreutils(command):
    """REL-bash-no-clobber-ignored, generated: mkdir/touch/rm/cp/mv with -n, -f, -r, -d, -c, trailing
    slashes and several operands leave the same tree and the same success/failure as GNU coreutils. (One
    deliberate difference is left out: GNU ``cp -r d d`` copies part of ``d`` into itself before failing; the
    engine refuses it without copying.)"""
    words = command.replace("/ ", " ").split()
    assume(not any(w == "cp" and words[i + 1:] and _into_itself(words[i + 1:]) for i, w in enumerate(words)))
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        real = make_bundle(base / "gnu", TREE)
        s = EngineSession(make_bundle(base / "ours", TREE), base / "work", PROFILE, TASK, seed=1, start_ms=START)
        s.start()
        ours = s.call("bash", command=command)
        rc = gnu(command, real)
        assert snapshot(s.sandbox_path) == snapshot(real), (command, ours.output)
        assert ours.ok == (rc == 0), (command, ours.output, rc)
        s.close()


# --- grep equals re, and stops -------------------------------------------------------------------------------

_ATOMS = st.sampled_from(["a", "b", "ab", ".", "\\w", "\\d", "[ab]", "x", "中"])


@st.composite
def patterns(draw) -> str:
    pat = ""
    for _ in range(draw(st.integers(1, 4))):
        atom = draw(_ATOMS)
        if draw(st.booleans()):
            atom = f"({atom}{draw(st.sampled_from(['', '|a', '|b']))})"
        pat += atom + draw(st.sampled_from(["", "", "*", "+", "?", "{1,2}"]))
    return draw(st.sampled_from(["", "^"])) + pat + draw(st.sampled_from(["", "$"]))


_LINES = st.lists(st.text(alphabet="abx1中 ", max_size=12), min_size=1, max_size=15)


@GEN
@given(patterns(), st.lists(_LINES, min_size=1, max_size=3))
def test_grep_matches_exactly_what_re_matches(pattern, files):
    """grep's matching runs in the bounded helper; its hits are exactly stdlib re's per-line hits."""
    with tempfile.TemporaryDirectory() as tmp:
        content = {f"f{i}.txt": "\n".join(lines) + "\n" for i, lines in enumerate(files)}
        s = EngineSession(make_bundle(Path(tmp), content), Path(tmp) / "w", PROFILE, TASK, seed=1,
                          start_ms=START)
        s.start()
        r = s.call("grep", pattern=pattern)
        rx = re.compile(pattern)
        want = [f"{rel}:{no}: {line}" for rel, text in sorted(content.items())
                for no, line in enumerate(text.splitlines(), 1) if rx.search(line)]
        if not want:
            assert r.ok and r.output == "No matches found"
        else:
            assert r.ok and r.output.splitlines()[1:] == want[:100], pattern
        s.close()


@settings(GEN, max_examples=6)
@given(st.sampled_from(["(a+)+$", "(a|aa)+$", "(a*)*$", "(a|a)*$"]), st.integers(40, 80))
def test_REL_grep_regex_backtracking_unbounded_generated(pattern, n):
    """REL-grep-regex-backtracking-unbounded, generated: nested-quantifier patterns on a-runs either answer or
    stop at the per-call limit as a tool error."""
    with tempfile.TemporaryDirectory() as tmp:
        s = EngineSession(make_bundle(Path(tmp), {"x.txt": "a" * n + "!\n"}), Path(tmp) / "w", PROFILE, TASK,
                          seed=1, start_ms=START, limits=Limits(max_call_s=0.5))
        s.start()
        r = s.call("grep", pattern=pattern, path="x.txt")
        assert r.ok and r.output == "No matches found" or (not r.ok and "time limit" in r.output)
        s.close()


# --- edit size projection ---------------------------------------------------------------------------------------

@GEN
@given(st.text(alphabet="ab中\n", min_size=1, max_size=60), st.text(alphabet="ab中", min_size=1, max_size=3),
       st.text(alphabet="ab中é\n", max_size=40), st.booleans(), st.integers(1, 4))
def test_REL_edit_replace_all_memory_amplification_projection_is_exact(text, old, new, replace_all, copies):
    """REL-edit-replace-all-memory-amplification, generated: an edit whose result would exceed
    max_write_bytes is refused and the file is unchanged; an accepted edit has exactly the projected size."""
    text = text * copies
    limit = 120
    with tempfile.TemporaryDirectory() as tmp:
        s = EngineSession(make_bundle(Path(tmp), {"f.txt": text}), Path(tmp) / "w", PROFILE, TASK, seed=1,
                          start_ms=START, limits=Limits(max_write_bytes=limit))
        s.start()
        count = text.count(old)
        r = s.call("edit", file_path="f.txt", old_string=old, new_string=new, replace_all=replace_all)
        on_disk = (s.sandbox_path / "f.txt").read_bytes()
        n = count if replace_all else 1
        projected = len(text.encode()) + n * (len(new.encode()) - len(old.encode()))
        if count and old != new and (replace_all or count == 1) and len(new) <= limit:
            if projected > limit:
                assert not r.ok and f"edit would make f.txt {projected} bytes" in r.output
                assert on_disk == text.encode()
            else:
                assert r.ok and len(on_disk) == projected
        else:
            assert not r.ok and on_disk == text.encode()
        s.close()


# --- one Unicode form per name ---------------------------------------------------------------------------------

_WORD = st.lists(st.sampled_from(["e\u0301", "é", "a", "A\u030a", "Å", "n\u0303", "ñ", "x"]), min_size=1,
                 max_size=4).map("".join)


@GEN
@given(st.lists(st.tuples(st.sampled_from(["write", "mkdir", "cp", "mv", "touch"]), _WORD, _WORD,
                          st.sampled_from(["NFC", "NFD"])), min_size=1, max_size=8))
def test_BR_03_one_form_per_name_generated(ops):
    """BR-03, generated: whatever mix of composed and decomposed spellings the agent types, no folder ever holds
    two names that are the same text in different Unicode forms, and every name on disk is NFC."""
    with tempfile.TemporaryDirectory() as tmp:
        bundle = make_bundle(Path(tmp), {unicodedata.normalize("NFD", "Café/a.md"): "x\n"})
        s = EngineSession(bundle, Path(tmp) / "w", PROFILE, TASK, seed=1, start_ms=START)
        s.start()
        for tool, a, b, form in ops:
            a, b = unicodedata.normalize(form, a), unicodedata.normalize(form, b)
            if tool == "write":
                s.call("write", file_path=f"{a}/{b}.md", content="t\n")
            else:
                s.call("bash", command={"mkdir": f"mkdir -p {a}/{b}", "cp": f"cp -r {a} {b}",
                                        "mv": f"mv {a} {b}", "touch": f"touch {a}.md"}[tool])
        for dirpath, dirs, files in os.walk(s.sandbox_path):
            names = dirs + files
            assert all(unicodedata.is_normalized("NFC", n) for n in names), names
            assert len({unicodedata.normalize("NFC", n) for n in names}) == len(names)
        s.close()
