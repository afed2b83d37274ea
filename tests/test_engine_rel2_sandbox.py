"""Issue #27 item 4, "bash means what bash means, or is refused": ``.``/``..`` operands as GNU coreutils treat
them (REL2-SEM-rm-dot-dotdot-deletes-parent), hard links planted into a live sandbox treated like links
(REL2-SANDBOX-touch-planted-hardlink-changes-outside-mtime), one names rule for tool arguments, bundle copies,
listings and the workspace import (REL2-SANDBOX-c1-control-names-accepted,
REL2-IMPORT-control-char-names-dropped-by-engine) and one line model for read, grep and the recorded diff
(BR2-12). Each kind also runs generated variants (hypothesis, fixed seed) beyond the handed inputs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

import pytest
from engine_helpers import PROFILE, TASK, make_bundle
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from filegram_ray.engine import EngineSession
from filegram_ray.names import BIDI_CONTROLS, escape_name, name_problem, refused_char

START = 1_760_000_000_000.0
GEN = settings(derandomize=True, database=None, deadline=None, max_examples=60,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
BASH = shutil.which("bash")
TREE = {"a.txt": "A\n", "d1/x.txt": "X\n", "d2/.keep": "", "d4/d1/y.txt": "Y\n", "notes/n.md": "n\n"}


def session(base: Path, files: dict | None = None, bundle: Path | None = None) -> EngineSession:
    if bundle is None and files is not None:
        bundle = make_bundle(base, files)
    s = EngineSession(bundle, base / "work", PROFILE, TASK, seed=1, start_ms=START)
    s.start()
    return s


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


def gnu(command: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([BASH, "--norc", "--noprofile", "-c", command], cwd=cwd, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"}, timeout=30)


# --- . and .. operands ------------------------------------------------------------------------------------------

@pytest.mark.skipif(BASH is None or shutil.which("rm") is None, reason="needs bash and GNU coreutils")
def test_REL2_SEM_rm_dot_dotdot_deletes_parent(tmp_path):
    """REL2-SEM-rm-dot-dotdot-deletes-parent: ``rm -r d/e/..`` and ``rm -rf notes/.`` are refused with GNU rm's
    words and exit status, nothing is deleted; the same commands in real bash leave the same tree."""
    files = {"d/e/f.txt": "x\n", "notes/a.md": "a\n"}
    s = session(tmp_path, files)
    real = make_bundle(tmp_path / "gnu", files)
    for cmd in ["rm -r d/e/..", "rm -rf notes/.", "rm -rf notes/./", "rm -r d/e/../", "rm -rf ./"]:
        r = s.call("bash", command=cmd)
        p = gnu(cmd, real)
        arg = cmd.split()[-1]
        assert not r.ok and r.output == f"rm: refusing to remove '.' or '..' directory: skipping '{arg}'", cmd
        assert p.returncode == 1 and p.stderr.strip() == r.output, (cmd, p.stderr)
    assert snapshot(s.sandbox_path) == snapshot(real) == {"d": None, "d/e": None, "d/e/f.txt": "x\n",
                                                          "notes": None, "notes/a.md": "a\n"}
    assert not any(e["event_type"] == "file_delete" for e in s.events)


def test_dot_paths_are_followed_as_the_kernel_follows_them(tmp_path):
    """``missing/..``, ``file/..`` and ``file/`` fail as in bash (no lexical shortcut), in bash and the other tools;
    ``..`` through a link is refused; ``cp -r d/. x`` copies d's content into x; ``mkdir -p a/../b`` makes both."""
    s = session(tmp_path, {"a.txt": "A\n", "src/s.txt": "S\n", "dest/keep.md": "k\n"})
    os.symlink("src", s.sandbox_path / "lnk")
    cases = {
        "rm -r missing/..": "rm: cannot remove 'missing/..': No such file or directory",
        "rm a.txt/..": "rm: cannot remove 'a.txt/..': Not a directory",
        "ls missing/..": "ls: cannot access 'missing/..': No such file or directory",
        "touch missing/../t.txt": "touch: cannot touch 'missing/../t.txt': No such file or directory",
        "mkdir new3/../new4": "mkdir: cannot create directory 'new3/../new4': No such file or directory",
        "mv src/. zz": "mv: cannot move 'src/.' to 'zz': Device or resource busy",
        "mv a.txt/. zz": "mv: cannot stat 'a.txt/.': Not a directory",
        "cp src/. x2": "cp: -r not specified; omitting directory 'src/.'",
    }
    for cmd, want in cases.items():
        r = s.call("bash", command=cmd)
        assert not r.ok and r.output == want, (cmd, r.output)
    assert s.call("bash", command="rm -f missing/..").ok  # -f: a missing name is no error (coreutils)
    r = s.call("bash", command="ls lnk/..")
    assert not r.ok and "symbolic links are not followed" in r.output
    for tool, args in [("read", {"file_path": "missing/../a.txt"}), ("write", {"file_path": "a.txt/../b.txt",
                                                                               "content": "x"}),
                       ("read", {"file_path": "a.txt/"}), ("edit", {"file_path": "a.txt/", "old_string": "A",
                                                                    "new_string": "B"})]:
        r = s.call(tool, **args)
        assert not r.ok and ("No such file or directory" in r.output or "Not a directory" in r.output), r.output
    assert not (s.sandbox_path / "b.txt").exists() and (s.sandbox_path / "a.txt").read_text() == "A\n"
    assert s.call("bash", command="cp -r src/. dest").ok
    assert sorted(p.name for p in (s.sandbox_path / "dest").iterdir()) == ["keep.md", "s.txt"]
    assert s.call("bash", command="cp -r src/. fresh").ok and (s.sandbox_path / "fresh/s.txt").read_text() == "S\n"
    r = s.call("bash", command="mkdir -pv r/../s")
    assert r.ok and r.output == "mkdir: created directory 'r'\nmkdir: created directory 'r/../s'"
    assert (s.sandbox_path / "r").is_dir() and (s.sandbox_path / "s").is_dir()
    assert s.call("read", file_path="src/../a.txt").content == "A"


_DOT_OPS = st.sampled_from(["a.txt", "d1", "d2", "d4/d1", "d1/.", "d1/..", "d2/./", "d4/d1/..", "d4/d1/../d1",
                            "m1/..", "m1/../m2", "a.txt/..", "a.txt/.", "d1/x.txt/..", "notes/.", "notes/..",
                            "d4/../d2/new", "d2/../d4/.", "m2/z", "d1/./x.txt"])
_DOT_FLAGS = {"cp": ["", "-r", "-rn"], "mv": ["", "-n"], "rm": ["", "-r", "-rf", "-d", "-f"], "mkdir": ["", "-p"],
              "touch": ["", "-c"], "ls": [""]}


@st.composite
def dot_commands(draw) -> str:
    prog = draw(st.sampled_from(sorted(_DOT_FLAGS)))
    lo = 2 if prog in ("cp", "mv") else 1
    ops = draw(st.lists(_DOT_OPS, min_size=lo, max_size=lo + 1))
    return " ".join(x for x in [prog, draw(st.sampled_from(_DOT_FLAGS[prog])), *ops] if x)


def _root_or_into_itself(command: str) -> bool:
    """cp whose source is the root or an ancestor of the destination: GNU copies part before failing, the engine
    refuses without copying (the deliberate difference of test_engine_semantics). Also a cp naming one source
    twice: GNU's table of folders already copied makes the second one fail ("into itself") even under -n; the
    engine does not keep that table (not a matter of ``.``/``..``)."""
    words = command.split()
    if words[0] != "cp":
        return False
    ops = [os.path.normpath(w) for w in words[1:] if not w.startswith("-")]
    *srcs, dst = ops
    return len(set(srcs)) < len(srcs) or any(
        s == "." or dst == s or dst.startswith(s + "/") or s.startswith(dst + "/") for s in srcs)


@pytest.mark.skipif(BASH is None or shutil.which("cp") is None, reason="needs bash and GNU coreutils")
@settings(GEN, max_examples=120)
@given(dot_commands())
def test_REL2_SEM_rm_dot_dotdot_deletes_parent_generated(command):
    """REL2-SEM-rm-dot-dotdot-deletes-parent, generated: rm/cp/mv/mkdir/touch/ls with operands holding ``.`` and
    ``..`` (after a folder, a file, a missing name) leave the same tree and the same success/failure as GNU
    coreutils in real bash."""
    assume(not _root_or_into_itself(command))
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        real = make_bundle(base / "gnu", TREE)
        s = session(base / "ours", TREE)
        ours = s.call("bash", command=command)
        p = gnu(command, real)
        assert snapshot(s.sandbox_path) == snapshot(real), (command, ours.output, p.stderr)
        assert ours.ok == (p.returncode == 0), (command, ours.output, p.returncode, p.stderr)
        s.close()


# --- hard links planted into a live sandbox -------------------------------------------------------------------

HL_CALLS = [
    ("bash", {"command": "touch hl.txt"}), ("bash", {"command": "touch -c hl.txt"}),
    ("bash", {"command": "cp hl.txt copy.txt"}), ("bash", {"command": "cp readme.txt hl.txt"}),
    ("bash", {"command": "cp -r sub copied"}), ("bash", {"command": "cp -rp sub copied"}),
    ("bash", {"command": "mv hl.txt moved.txt"}), ("bash", {"command": "mv readme.txt hl.txt"}),
    ("bash", {"command": "rm hl.txt"}), ("bash", {"command": "rm -f hl.txt"}), ("bash", {"command": "rm -r sub"}),
    ("bash", {"command": "ls -R"}),
    ("read", {"file_path": "hl.txt"}), ("read", {"file_path": "sub/hl2.txt"}),
    ("write", {"file_path": "hl.txt", "content": "pwned\n"}),
    ("edit", {"file_path": "hl.txt", "old_string": "TOPSECRET", "new_string": "pwned"}),
    ("multiedit", {"file_path": "hl.txt", "edits": [{"old_string": "TOP", "new_string": "x"}]}),
    ("grep", {"pattern": "TOPSECRET"}), ("grep", {"pattern": "TOP", "path": "hl.txt"}),
    ("grep", {"pattern": "TOP", "path": "sub"}), ("glob", {"pattern": "**/*.txt"}), ("list", {}),
]


@pytest.mark.parametrize("tool,args", HL_CALLS, ids=[f"{t}:{a}" for t, a in HL_CALLS])
def test_REL2_SANDBOX_touch_planted_hardlink_changes_outside_mtime(tmp_path, tool, args):
    """REL2-SANDBOX-touch-planted-hardlink-changes-outside-mtime: hard links to a canary outside the sandbox,
    planted after the session started (top level and in a folder), are treated like links: no tool reads the
    canary's text, and its content, mtime, ctime and link count stay as they were."""
    out = tmp_path / "outside"
    out.mkdir()
    canary = out / "secret.txt"
    canary.write_text("TOPSECRET\n")
    os.utime(canary, ns=(1_000_000_000 * 10**9, 1_000_000_000 * 10**9))
    s = session(tmp_path, {"readme.txt": "hello\n", "sub/keep.md": "k\n"})
    os.link(canary, s.sandbox_path / "hl.txt")
    os.link(canary, s.sandbox_path / "sub" / "hl2.txt")
    before = os.stat(canary)
    r = s.call(tool, **args)
    after = os.stat(canary)
    assert canary.read_text() == "TOPSECRET\n"
    assert (after.st_mtime_ns, after.st_ctime_ns, after.st_nlink, after.st_ino) == \
        (before.st_mtime_ns, before.st_ctime_ns, before.st_nlink, before.st_ino), (tool, args, r.output)
    assert "TOPSECRET" not in r.output and "TOPSECRET" not in (r.content or "")
    names = {p.name for p in s.sandbox_path.rglob("*")}
    assert {"hl.txt", "hl2.txt"} <= names  # nothing removed or moved a name of the canary
    for p in s.sandbox_path.rglob("*"):
        if p.is_file() and p.name not in ("hl.txt", "hl2.txt"):
            assert "TOPSECRET" not in p.read_text(), p
    if tool in ("read", "write", "edit", "multiedit") or args.get("command", "").split()[:2] in (
            ["touch", "hl.txt"], ["cp", "hl.txt"], ["mv", "hl.txt"], ["rm", "hl.txt"], ["rm", "-r"]):
        assert not r.ok and "hard link" in r.output, (tool, args, r.output)
    s.close()


def test_hardlink_read_refused_even_when_planted_after_the_path_check(tmp_path):
    """The hard-link check is made on the open descriptor: a file swapped for a hard link between a tool's path
    check and its read is still refused (Sandbox.read_bytes / touch directly)."""
    out = tmp_path / "outside"
    out.mkdir()
    canary = out / "secret.txt"
    canary.write_text("TOPSECRET\n")
    os.utime(canary, ns=(10**18, 10**18))
    s = session(tmp_path, {"a.txt": "a\n"})
    os.unlink(s.sandbox_path / "a.txt")
    os.link(canary, s.sandbox_path / "a.txt")
    from filegram_ray.engine.sandbox import SandboxError
    with pytest.raises(SandboxError, match="hard link"):
        s.sandbox.read_bytes("a.txt")
    with pytest.raises(SandboxError, match="hard link"):
        s.sandbox.touch("a.txt")
    assert os.stat(canary).st_mtime_ns == 10**18


# --- one names rule ---------------------------------------------------------------------------------------------

REFUSED = ["\x85", "\u2028", "\u2029", "\u202e", "\u2066", "\u200f", "\u061c", "\x07", "\x1b", "\x7f", "\x9b",
           "\x0b", "\x0c", "\x1e"]


def test_names_rule_is_category_cc_zl_zp_and_bidi_controls():
    """The one rule's character set equals 'category Cc, Zl or Zp, or a bidi formatting character of UAX #9'
    over all of Unicode; escape_name writes each as its UTF-8 bytes in %XX."""
    assert BIDI_CONTROLS == {c for c in map(chr, range(0x110000)) if unicodedata.bidirectional(c) in
                             ("LRE", "RLE", "PDF", "LRO", "RLO", "LRI", "RLI", "FSI", "PDI")} | {"\u061c", "\u200e",
                                                                                          "\u200f"}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        want = unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in BIDI_CONTROLS
        assert (refused_char(c) is not None) == want, hex(cp)
    assert escape_name("a\u2028b\x85.md") == "a%E2%80%A8b%C2%85.md"
    assert escape_name("caf\udce9\x07.txt") == "caf%E9%07.txt"
    assert name_problem("ok é.md") is None
    assert name_problem("a\u202etxt.md") == "holds a bidi formatting character U+202E (RIGHT-TO-LEFT OVERRIDE)"


@pytest.mark.parametrize("ch", REFUSED, ids=[f"U+{ord(c):04X}" for c in REFUSED])
def test_REL2_SANDBOX_c1_control_names_accepted(tmp_path, ch):
    """REL2-SANDBOX-c1-control-names-accepted: write, edit, read and every bash program refuse a name holding a
    C0/C1 control, U+2028/2029 or a bidi override, with an error naming the character; nothing is created."""
    s = session(tmp_path, {"ok.md": "x\n"})
    name = f"a{ch}b.md"
    calls = [("write", {"file_path": name, "content": "x"}), ("write", {"file_path": f"d{ch}/n.md", "content": "x"}),
             ("edit", {"file_path": name, "old_string": "x", "new_string": "y"}), ("read", {"file_path": name}),
             ("bash", {"command": f"touch '{name}'"}), ("bash", {"command": f"mkdir '{name}'"}),
             ("bash", {"command": f"cp ok.md '{name}'"}), ("bash", {"command": f"mv ok.md '{name}'"})]
    for tool, args in calls:
        r = s.call(tool, **args)
        assert not r.ok and f"U+{ord(ch):04X}" in r.output, (tool, args, r.output)
    assert sorted(os.listdir(s.sandbox_path)) == ["ok.md"]


def test_planted_control_names_are_renamed_when_listed(tmp_path):
    """A name with controls or U+2028 planted into a live sandbox is renamed %XX by the listing that meets it
    (recorded in Sandbox.renamed): ``ls`` shows one line per entry, and the new name can be used."""
    s = session(tmp_path, {"ok.md": "x\n"})
    for n in ["a\x85b.md", "a\u2028b.md", "a\u202etxt.md"]:
        (s.sandbox_path / n).write_text("p\n")
    r = s.call("bash", command="ls")
    assert r.ok and r.output.splitlines() == r.output.split("\n") == \
        ["a%C2%85b.md", "a%E2%80%A8b.md", "a%E2%80%AEtxt.md", "ok.md"]
    assert sorted(new for _old, new in s.sandbox.renamed) == ["a%C2%85b.md", "a%E2%80%A8b.md", "a%E2%80%AEtxt.md"]
    assert ("a\\u2028b.md", "a%E2%80%A8b.md") in s.sandbox.renamed
    assert s.call("read", file_path="a%E2%80%A8b.md").content == "p"


CTL_NAMES = [b"ctl\x07bell.txt", b"new\nline.txt", b"tab\tname.txt", b"esc\x1b[2Jclear.md", b"ok.md",
             "c1\u0085nel.md".encode(), "ls\u2028sep.txt".encode(), "rlo\u202etxt.md".encode(), b"d\x01ir/in.txt"]


def test_REL2_IMPORT_control_char_names_dropped_by_engine(tmp_path):
    """REL2-IMPORT-control-char-names-dropped-by-engine: the import applies the engine's names rule — each
    control, line-separator or bidi character of a name is written %XX, every rename is listed (warnings and
    renamed_from) — and every file bundle.json lists reaches the sandbox: nothing is dropped."""
    from filegram_ray.workspace.bundle import import_bundle

    src = tmp_path / "src"
    src.mkdir()
    for n in CTL_NAMES:
        p = os.path.join(os.fsencode(src), n)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as fh:
            fh.write(b"text\n")
    info = import_bundle(src, "T-07", tmp_path / "ws", describe={"ocr": False, "asr": False})
    meta = json.loads((tmp_path / "ws" / "bundle.json").read_text())
    paths = sorted(f["path"] for f in meta["files"])
    assert paths == sorted(["/".join(escape_name(c) for c in os.fsdecode(n).split("/")) for n in CTL_NAMES])
    assert meta["errors"] == [] and not info.errors
    assert len(meta["warnings"]) == len(CTL_NAMES) - 1
    assert all(refused_char(p) is None for p in paths)
    renamed = {f["path"]: f.get("renamed_from") for f in meta["files"]}
    assert renamed["ctl%07bell.txt"] == "ctl\\x07bell.txt" and renamed["ls%E2%80%A8sep.txt"] == "ls\\u2028sep.txt"
    s = EngineSession(tmp_path / "ws" / "files", tmp_path / "work", PROFILE, TASK, seed=1, start_ms=START)
    s.start()
    assert s.sandbox.skipped == [] and s.sandbox.renamed == []
    for p in paths:
        r = s.call("read", file_path=p)
        assert r.ok and r.content == "text", (p, r.output)
    s.close()


def test_REL2_IMPORT_control_char_names_dropped_by_engine_cli(tmp_path):
    """The case's own command: ``filegram workspace import`` prints each rename, and the engine skips none."""
    src = tmp_path / "src"
    src.mkdir()
    for n in CTL_NAMES[:5]:
        with open(os.path.join(os.fsencode(src), n), "wb") as fh:
            fh.write(b"text\n")
    out = tmp_path / "ws" / "T-07"
    p = subprocess.run([sys.executable, "-m", "filegram_ray.cli", "workspace", "import", str(src), "--task", "T-07",
                        "--out", str(out), "--no-ocr", "--no-asr"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("renamed: file name holds a control character") == 4, p.stdout
    files = sorted(f["path"] for f in json.loads((out / "bundle.json").read_text())["files"])
    assert files == ["ctl%07bell.txt", "esc%1B[2Jclear.md", "new%0Aline.txt", "ok.md", "tab%09name.txt"]
    s = EngineSession(out / "files", tmp_path / "work", PROFILE, TASK, seed=1, start_ms=START)
    s.start()
    assert s.sandbox.skipped == [] and sorted(os.listdir(s.sandbox_path)) == files
    s.close()


# --- one line model ---------------------------------------------------------------------------------------------

def _diff_removed_line_numbers(diff: str) -> list[int]:
    """1-based old-file line numbers of the '-' lines of a unified diff (the \\n line model of patch)."""
    out, old = [], 0
    for line in diff.split("\n"):
        m = re.match(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@", line)
        if m:
            old = int(m.group(1))
        elif line.startswith("-") and not line.startswith("---"):
            out.append(old)
            old += 1
        elif line.startswith(" "):
            old += 1
    return out


def _check_line_numbers(tmp_path: Path, text: str) -> None:
    needle_no = text.split("\n").index("delta NEEDLE") + 1
    target_no = text.split("\n").index("epsilon") + 1
    n_lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    s = session(tmp_path, {"log.txt": text})
    g = s.call("grep", pattern="NEEDLE", path=".")
    assert g.ok and re.findall(r"log\.txt:(\d+): ", g.output) == [str(needle_no)], (text, g.output)
    r = s.call("read", file_path="log.txt")
    assert f"{needle_no:6d}\tdelta NEEDLE\n" in r.output and f"[end of file, {n_lines} lines]" in r.output
    assert [e["view_range"] for e in s.events if e["event_type"] == "file_read"] == [[1, n_lines]]
    r = s.call("read", file_path="log.txt", offset=needle_no, limit=1)
    assert r.content == "delta NEEDLE"
    e = s.call("edit", file_path="log.txt", old_string="epsilon", new_string="EPSILON")
    assert e.ok
    edit = [ev for ev in s.events if ev["event_type"] == "file_edit"][-1]
    diff = s.media.read(edit["media_ref_diff"]["path"]).decode()
    assert _diff_removed_line_numbers(diff) == [target_no], diff
    s.close()


def test_BR2_12_line_numbers_agree_between_read_grep_and_diff(tmp_path):
    """BR2-12: a log with progress-bar carriage returns and a form feed — grep, read (numbers, view_range) and the
    recorded diff all count lines ending at \\n (the handed input: NEEDLE on line 4, epsilon on line 5)."""
    _check_line_numbers(tmp_path, "alpha\nbeta\rprogress 50%\rprogress 100%\ngamma\x0cpage two\ndelta NEEDLE\n"
                                  "epsilon\n")


_SEPS = st.sampled_from(["\r", "\r\n", "\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", " "])


@settings(GEN, max_examples=40)
@given(st.lists(st.tuples(st.sampled_from(["a", "bb", "", "x y"]), _SEPS), max_size=6),
       st.lists(st.tuples(st.sampled_from(["c", "dd"]), _SEPS), max_size=4), st.booleans())
def test_BR2_12_line_numbers_agree_generated(before, between, crlf):
    """BR2-12, generated: lines holding \\r, CRLF endings, \\v, \\f, \\x1c-\\x1e, U+0085, U+2028/2029 anywhere
    before and between the searched lines: grep's number, read's numbering and the diff's hunk agree."""
    def chunk(parts):
        return "".join(t + sep for t, sep in parts)
    nl = "\r\n" if crlf else "\n"
    text = chunk(before) + nl + "delta NEEDLE" + nl + chunk(between) + nl + "epsilon" + nl + "tail"
    if crlf:  # a CRLF file: every ending is \r\n (read and grep show lines without the \r)
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
        text_for_numbers = text.replace("\r\n", "\n")
    else:
        text_for_numbers = text
    assume(text_for_numbers.split("\n").count("delta NEEDLE") == 1)
    assume(text_for_numbers.split("\n").count("epsilon") == 1)
    with tempfile.TemporaryDirectory() as tmp:
        needle_no = text_for_numbers.split("\n").index("delta NEEDLE") + 1
        s = session(Path(tmp), {"log.txt": text.encode()})
        g = s.call("grep", pattern="NEEDLE$", path="log.txt")
        assert re.findall(r"log\.txt:(\d+): ", g.output) == [str(needle_no)], (text, g.output)
        r = s.call("read", file_path="log.txt", offset=needle_no, limit=1)
        assert r.content == "delta NEEDLE", (text, r.output)
        e = s.call("edit", file_path="log.txt", old_string="epsilon", new_string="EPSILON")
        assert e.ok, e.output
        edit = [ev for ev in s.events if ev["event_type"] == "file_edit"][-1]
        diff = s.media.read(edit["media_ref_diff"]["path"]).decode()
        assert _diff_removed_line_numbers(diff) == [text_for_numbers.split("\n").index("epsilon") + 1], diff
        s.close()
