"""Sandbox confinement as a security boundary: the link rule at the moment of use, limits counted however deep,
per-call time bounds, bash meaning what bash means, one Unicode form per path.

Each case of ../shared/cases/ owned here has a test naming it; the escape and limit tests also run generated
variants (hypothesis, fixed seed) beyond the handed inputs.
"""

from __future__ import annotations

import os
import tempfile
import tracemalloc
import unicodedata
from pathlib import Path

import pytest
from engine_helpers import PROFILE, TASK, make_bundle, tree_digest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filegram_ray.engine import EngineSession, Limits

START = 1_760_000_000_000.0
SECRET = "OUTSIDE-SECRET\n"
GEN = settings(derandomize=True, database=None, deadline=None, max_examples=60,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def session(base: Path, files: dict | None = None, bundle: Path | None = None, **limits) -> EngineSession:
    if bundle is None and files is not None:
        bundle = make_bundle(base, files)
    s = EngineSession(bundle, base / "work", PROFILE, TASK, seed=1, start_ms=START,
                      limits=Limits(**limits) if limits else None)
    s.start()
    return s


def make_outside(base: Path) -> Path:
    out = base / "OUTSIDE"
    (out / "victim").mkdir(parents=True)
    (out / "secret.txt").write_text(SECRET)
    (out / "victim" / "v.txt").write_text("v\n")
    return out


def sandbox_holds_secret(s: EngineSession) -> bool:
    for dirpath, _dirs, files, dfd in os.fwalk(s.sandbox_path):
        for f in files:
            try:
                fd = os.open(f, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as fh:
                if b"OUTSIDE-SECRET" in fh.read():
                    return True
    return False


# --- links ------------------------------------------------------------------------------------------------------

def test_REL_sandbox_symlink_relocation_toctou_bundle(tmp_path):
    """REL-sandbox-symlink-relocation-toctou, handed input: a relative link 12 folders deep in the bundle that
    points inside until moved up. Links never enter the sandbox, so no call reads, writes or deletes outside."""
    outside = make_outside(tmp_path)
    bundle = tmp_path / "bundle"
    deep = bundle / "/".join(["d"] * 12)
    deep.mkdir(parents=True)
    (bundle / "readme.txt").write_text("hello\n")
    os.symlink("../" * 12 + str(outside).lstrip("/"), deep / "lnk")
    before = tree_digest(outside)
    chain = "/".join(["d"] * 12)
    for i, (cmd, after) in enumerate([(f"cp -r {chain} c ; cp c/lnk/secret.txt stolen.txt", "stolen.txt"),
                                      (f"mv {chain}/lnk L ; cp readme.txt L/secret.txt", None),
                                      (f"mv {chain}/lnk L ; rm -rf L/victim", None)]):
        s = EngineSession(bundle, tmp_path / f"w{i}", PROFILE, TASK, seed=1, start_ms=START)
        s.start()
        assert s.sandbox.skipped == [(f"{chain}/lnk", "symbolic link (links are never copied into a sandbox)")]
        s.call("bash", command=cmd)
        if after:
            r = s.call("read", file_path=after)
            assert not r.ok or "OUTSIDE" not in r.output
        assert not sandbox_holds_secret(s)
        assert tree_digest(outside) == before
        s.close()


def _plant_relocatable_link(s: EngineSession, outside: Path, extra: int) -> tuple[str, int]:
    """A relative link that points inside the sandbox where it is planted and outside once its folder is moved
    to depth 1 (its '..' climb past the filesystem root, as in the case). Returns (folder chain, depth)."""
    n = len(Path(os.path.realpath(s.sandbox_path)).parts) + extra
    chain = "/".join(["d"] * n)
    (s.sandbox_path / chain).mkdir(parents=True)
    os.symlink("../" * n + str(outside).lstrip("/"), s.sandbox_path / chain / "lnk")
    return chain, n


FOLLOW = [
    ("bash", lambda L: {"command": f"cp {L}/secret.txt stolen.txt"}),
    ("bash", lambda L: {"command": f"cp readme.txt {L}/secret.txt"}),
    ("bash", lambda L: {"command": f"rm -rf {L}/victim"}),
    ("bash", lambda L: {"command": f"rm {L}/secret.txt"}),
    ("bash", lambda L: {"command": f"mv {L}/secret.txt stolen.txt"}),
    ("bash", lambda L: {"command": f"mv readme.txt {L}/new.txt"}),
    ("bash", lambda L: {"command": f"touch {L}/new.txt"}),
    ("bash", lambda L: {"command": f"mkdir -p {L}/newdir/x"}),
    ("bash", lambda L: {"command": f"ls -R {L}"}),
    ("bash", lambda L: {"command": f"cp -r {L} copied"}),
    ("bash", lambda L: {"command": f"cp -r {L}/victim copied"}),
    ("read", lambda L: {"file_path": f"{L}/secret.txt"}),
    ("write", lambda L: {"file_path": f"{L}/secret.txt", "content": "pwned\n"}),
    ("write", lambda L: {"file_path": f"{L}/brand/new.txt", "content": "pwned\n"}),
    ("edit", lambda L: {"file_path": f"{L}/secret.txt", "old_string": "OUTSIDE", "new_string": "pwned"}),
    ("multiedit", lambda L: {"file_path": f"{L}/secret.txt", "edits": [{"old_string": "S", "new_string": "x"}]}),
    ("grep", lambda L: {"pattern": "SECRET", "path": L}),
    ("glob", lambda L: {"pattern": "**/*", "path": L}),
    ("list", lambda L: {"path": L}),
]
ARRIVAL = ["moved-same-call", "moved-earlier-call", "copied-folder", "planted-absolute", "planted-in-folder"]


@GEN
@given(extra=st.integers(1, 4), arrival=st.sampled_from(ARRIVAL), follow=st.integers(0, len(FOLLOW) - 1),
       name=st.sampled_from(["L", "sub/L", "Ĺink"]))
def test_REL_sandbox_symlink_relocation_toctou_generated(extra, arrival, follow, name):
    """REL-sandbox-symlink-relocation-toctou, generated variants: links planted inside the sandbox (as if they
    got there anyway) are relocated (same bash call, earlier call, by copying their folder) or planted where an
    agent path passes through them; every tool refuses them when it reaches them. Outside stays unchanged and
    no outside byte lands in the sandbox or in a tool's output."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        outside = make_outside(base)
        s = session(base, {"readme.txt": "hello\n", "sub/keep.md": "k\n"})
        before = tree_digest(outside)
        tool, args = FOLLOW[follow]
        args = args(name)
        results = []
        if arrival.startswith("planted"):
            target = outside if arrival == "planted-absolute" else Path(os.path.relpath(outside, s.sandbox_path /
                                                                                         Path(name).parent))
            (s.sandbox_path / name).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, s.sandbox_path / name)
        else:
            chain, _n = _plant_relocatable_link(s, outside, extra)
            parent = str(Path(name).parent)
            prep = f"mkdir -p {parent} ; " if parent != "." else ""
            move = f"{prep}mv {chain} {name}" if arrival != "copied-folder" else f"{prep}cp -r {chain} {name}"
            if arrival == "moved-same-call" and tool == "bash":
                args = {"command": f"{move} ; {args['command']}"}
            else:
                results.append(s.call("bash", command=move))
            if arrival == "copied-folder":
                assert not results[-1].ok and "symbolic link" in results[-1].output
            elif arrival == "moved-earlier-call":  # a real attempt: the moved link now points outside
                assert os.path.realpath(s.sandbox_path / name / "lnk") == os.path.realpath(outside)
            name = f"{name}/lnk"
            args = FOLLOW[follow][1](name) if not (arrival == "moved-same-call" and tool == "bash") else args
        r = s.call(tool, **args)
        results.append(r)
        if tool in ("read", "write", "edit", "multiedit", "grep", "glob", "list"):
            assert not r.ok, (arrival, tool, args, r.output)
        assert tree_digest(outside) == before, (arrival, tool, args)
        assert all("OUTSIDE-SECRET" not in x.output for x in results)
        assert not sandbox_holds_secret(s)
        s.finish()
        s.close()


def test_link_replaced_between_check_and_use_is_refused(tmp_path, monkeypatch):
    """A folder swapped for a link after the pre-flight check (a race) is refused by the call itself."""
    outside = make_outside(tmp_path)
    s = session(tmp_path, {"box/a.txt": "a\n", "readme.txt": "r\n"})
    from filegram_ray.engine.sandbox import Sandbox

    real_resolve = Sandbox.resolve
    swapped = []

    def racing_resolve(self, path, **kw):
        rel = real_resolve(self, path, **kw)
        if not swapped and path.startswith("box/"):
            swapped.append(path)
            os.rename(s.sandbox_path / "box", tmp_path / "box_away")
            os.symlink(outside, s.sandbox_path / "box")
        return rel

    monkeypatch.setattr(Sandbox, "resolve", racing_resolve)
    r = s.call("write", file_path="box/secret.txt", content="pwned\n")
    assert not r.ok and "symbolic link" in r.output
    assert (outside / "secret.txt").read_text() == SECRET


# --- limits counted however deep ------------------------------------------------------------------------------

def real_usage(root: Path) -> tuple[int, int, int, int]:
    """(entries, bytes, deepest components, longest relative path) measured with os.fwalk."""
    entries = nbytes = depth = chars = 0
    for dirpath, dirs, files, dfd in os.fwalk(root):
        rel = os.path.relpath(dirpath, root)
        for name in dirs + files:
            p = name if rel == "." else f"{rel}/{name}"
            entries += 1
            depth, chars = max(depth, p.count("/") + 1), max(chars, len(p))
            if name in files:
                nbytes += os.lstat(name, dir_fd=dfd).st_size
    return entries, nbytes, depth, chars


def test_REL_sandbox_size_limit_bypass_deep_paths(tmp_path):
    """REL-sandbox-size-limit-bypass-deep-paths: moving folders into each other must not bury files below what
    the size check sees. The moves that would create paths longer than max_path_chars are refused, the sandbox
    never holds more than max_sandbox_bytes, and finish() writes the trajectory."""
    s = session(tmp_path, {}, max_write_bytes=600_000, max_sandbox_bytes=1_000_000)
    seg = "/".join(["x" * 50] * 19)
    refused_moves = 0
    for k in range(6):
        w = s.call("write", file_path=f"stage/big{k}.bin", content="Z" * 590_000)
        assert w.ok == (k == 0), w.output
        cmds = [f"mkdir -p c{k}/{seg}", f"mv stage/big{k}.bin c{k}/{seg}/big{k}.bin"]
        for _ in range(5):
            cmds += [f"mkdir -p w/{seg}", f"mv c{k} w/{seg}/c", f"mv w c{k}"]
        for c in cmds:
            r = s.call("bash", command=c)
            refused_moves += "chars long; the limit is 1024" in r.output
        entries, nbytes, _depth, chars = real_usage(s.sandbox_path)
        assert nbytes <= 1_000_000 and chars <= 1024 and s.sandbox.tree_bytes() == nbytes
    assert refused_moves >= 6
    s.finish()
    info = s.write_trajectory(tmp_path / "traj")
    assert info["n_outputs"] >= 1


def test_REL_sandbox_no_file_count_limit(tmp_path):
    """REL-sandbox-no-file-count-limit: one call cannot carry 20,000 names, and copies stop at max_entries."""
    s = session(tmp_path, {})
    s.call("bash", command="mkdir d")
    r = s.call("bash", command="touch " + " ".join(f"d/f{i:05d}" for i in range(20000)))
    assert not r.ok and "words; the limit is 256" in r.output
    assert real_usage(s.sandbox_path)[0] == 1
    s2 = session(tmp_path / "b", {}, max_entries=300)
    assert s2.call("bash", command="mkdir d && touch " + " ".join(f"d/f{i:03d}" for i in range(99))).ok
    results = [s2.call("bash", command=f"cp -r d d{k}") for k in range(5)]
    assert [r.ok for r in results] == [True, True, False, False, False]
    assert "files and folders; the limit is 300" in results[2].output
    assert real_usage(s2.sandbox_path)[0] <= 300
    r = s2.call("write", file_path="x/y/z.txt", content="")  # 303 > 300
    assert not r.ok and "303 files and folders" in r.output
    assert s2.call("bash", command="rm -r d0").ok and s2.call("write", file_path="x/y/z.txt", content="").ok
    r = s2.call("bash", command="mkdir " + " ".join(f"m{i}" for i in range(99)))
    assert not r.ok and r.output.count("limit is 300") == 2  # the first 97 fit
    assert real_usage(s2.sandbox_path)[0] == 300


_SEGS = st.sampled_from(["a", "b", "cc", "q" * 12])
_PATHS = st.lists(_SEGS, min_size=1, max_size=8).map("/".join)


@st.composite
def _ops(draw):
    kind = draw(st.sampled_from(["write", "mkdir", "touch", "cp", "mv", "edit", "rm"]))
    if kind == "write":
        return "write", {"file_path": draw(_PATHS) + ".txt", "content": "w" * draw(st.integers(0, 3500))}
    if kind == "edit":
        return "edit", {"file_path": draw(_PATHS) + ".txt", "old_string": "w", "new_string": "w" * 9,
                        "replace_all": True}
    if kind == "mkdir":
        return "bash", {"command": "mkdir -p " + " ".join(draw(st.lists(_PATHS, min_size=1, max_size=4)))}
    if kind == "touch":
        return "bash", {"command": "touch " + " ".join(f"{p}.t" for p in draw(st.lists(_PATHS, min_size=1,
                                                                                             max_size=5)))}
    if kind == "rm":
        return "bash", {"command": f"rm -rf {draw(_PATHS)}"}
    return "bash", {"command": f"{kind} {'-r ' if kind == 'cp' else ''}{draw(_PATHS)} {draw(_PATHS)}"}


@GEN
@given(ops=st.lists(_ops(), min_size=1, max_size=25))
def test_REL_sandbox_limits_hold_for_generated_sequences(ops):
    """Generated variants of REL-sandbox-size-limit-bypass-deep-paths and REL-sandbox-no-file-count-limit:
    random writes, edits, mkdir -p, touch, cp -r, mv and rm never take the sandbox past a limit, measured on
    disk however deep, and the trajectory can always be written."""
    lim = dict(max_write_bytes=3000, max_sandbox_bytes=8000, max_entries=40, max_path_chars=60, max_depth=6)
    with tempfile.TemporaryDirectory() as tmp:
        s = session(Path(tmp), {"a/seed.txt": "w" * 100}, **lim)
        for tool, args in ops:
            s.call(tool, **args)
            entries, nbytes, depth, chars = real_usage(s.sandbox_path)
            assert entries <= 40 and nbytes <= 8000 and depth <= 6 and chars <= 60, (tool, args)
        s.finish()
        s.write_trajectory(Path(tmp) / "traj")
        s.close()


def test_REL_edit_replace_all_memory_amplification(tmp_path):
    """REL-edit-replace-all-memory-amplification: the projected size is refused before the text is built."""
    s = session(tmp_path, {})
    assert s.call("write", file_path="a.txt", content="a" * 1_000_000).ok
    tracemalloc.start()
    try:
        r1 = s.call("edit", file_path="a.txt", old_string="a", new_string="a" * 100, replace_all=True)
        r2 = s.call("multiedit", file_path="a.txt", edits=[
            {"old_string": "a", "new_string": "b" * 300, "replace_all": True},
            {"old_string": "b" * 300, "new_string": "c", "replace_all": True}])
        r3 = s.call("multiedit", file_path="a.txt", edits=[
            {"old_string": "a", "new_string": "bbbbbb", "replace_all": True},   # 6 MB intermediate
            {"old_string": "bbbbbb", "new_string": "c", "replace_all": True}])
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not r1.ok and "edit would make a.txt 100000000 bytes" in r1.output
    assert not r2.ok and r2.output.startswith("edits[0]: edit would make")
    assert not r3.ok and r3.output.startswith("edits[0]")
    assert peak < 30_000_000, peak  # the refused results (100-300 MB) were never built
    assert (s.sandbox_path / "a.txt").read_text() == "a" * 1_000_000
    r = s.call("edit", file_path="a.txt", old_string="a", new_string="x" * 6_000_000, replace_all=False)
    assert not r.ok and "new_string" in r.output


# --- per-call time ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("pattern, text", [
    ("(a+)+$", ("a" * 19 + "!\n") * 200_000),       # the case's heavy input: 4 MB of backtracking lines
    ("(a|aa)+$", "a" * 60 + "!\n"),
    ("(x+x+)+y", "x" * 4000 + "\n"),
], ids=["case-heavy", "alternation", "nested-plus"])
def test_REL_grep_regex_backtracking_unbounded(tmp_path, pattern, text):
    """REL-grep-regex-backtracking-unbounded: catastrophic patterns stop at the per-call limit with a tool error;
    the helper doing the matching is killed, and the next call (a fresh helper) has its own budget."""
    s = session(tmp_path, {"big.txt": text, "other.txt": "x\n"}, max_call_s=1.0)
    r = s.call("grep", pattern=pattern, path="big.txt")
    assert not r.ok and "time limit" in r.output and "1.0 s per call" in r.output
    assert [e["event_type"] for e in s.events[-2:]] == ["tool_call", "error_encounter"]
    r = s.call("grep", pattern="(a+)+$", path="other.txt")
    assert r.ok and r.output == "No matches found"


def test_per_call_deadline_stops_walks_and_extraction(tmp_path):
    """grep, glob, list-like walks and document extraction stop at the call's deadline (here: already due)."""
    files = {f"d{i % 20}/f{i}.txt": "hit\n" for i in range(400)}
    s = session(tmp_path, files, max_call_s=0.0)
    for tool, args in [("grep", {"pattern": "hit"}), ("glob", {"pattern": "**/*.txt"}),
                       ("bash", {"command": "ls -R"})]:
        r = s.call(tool, **args)
        assert not r.ok and "time limit" in r.output, (tool, r.output)


def test_glob_brace_expansion_and_pattern_limits(tmp_path):
    s = session(tmp_path, {"a.md": "x\n"})
    r = s.call("glob", pattern="{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}.md")
    assert not r.ok and "more than 64 alternatives" in r.output
    r = s.call("grep", pattern="x" * 1001)
    assert not r.ok and "longer than 1000" in r.output
    assert s.call("glob", pattern="{a,b}.{md,txt}").output == "a.md"


def _dense_xlsx(path: Path, rows: int, first: int = 0) -> None:
    """A sheet of ``rows`` x 2000 numeric cells. 250 rows (500K cells) take ~3 s to extract on an idle 2-core
    machine, several times the budgets the deadline tests give, whatever the machine; ``first`` varies the bytes."""
    from openpyxl import Workbook

    wb = Workbook(write_only=True)
    ws = wb.create_sheet("dense")
    row = list(range(first, first + 2000))
    for _ in range(rows):
        ws.append(row)
    wb.save(path)


def test_extraction_is_stopped_at_the_deadline_and_the_helper_restarts(tmp_path):
    """A document whose extraction runs past max_call_s is a tool error; the next read works."""
    pytest.importorskip("openpyxl")
    bundle = make_bundle(tmp_path, {"ok.md": "fine\n"})
    _dense_xlsx(bundle / "wide.xlsx", 250)
    s = session(tmp_path, bundle=bundle, max_call_s=0.5)
    r = s.call("read", file_path="wide.xlsx")
    assert not r.ok and "text extraction stopped" in r.output and "wide.xlsx" in r.output
    s2 = session(tmp_path / "b", {"plan.eml": "From: a@x.org\nSubject: Plan\n\nbody\n"}, max_call_s=30.0)
    r = s2.call("read", file_path="plan.eml")
    assert r.ok and "Subject: Plan" in r.output


def test_BR_28_spreadsheet_with_huge_used_range_is_read(tmp_path):
    """BR-28: two rows of data plus one formatted empty cell at XFD1048576: read by the engine and extracted
    for import from the cells actually stored (the call is bounded by max_call_s either way)."""
    openpyxl = pytest.importorskip("openpyxl")
    from openpyxl.styles import Font

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Budget"
    ws["A1"], ws["B1"], ws["A2"], ws["B2"] = "item", "amount", "rent", 1200
    ws["XFD1048576"].font = Font(bold=True)
    wb.save(bundle / "budget.xlsx")
    s = session(tmp_path, bundle=bundle, max_call_s=60.0)
    r = s.call("read", file_path="budget.xlsx")
    assert r.ok, r.output
    assert r.content == "# sheet: Budget\nitem\tamount\nrent\t1200"
    from filegram_ray.engine.bounded import extract_document

    text = extract_document((bundle / "budget.xlsx").read_bytes(), "budget.xlsx", timeout=60.0, max_chars=10_000)
    assert text == r.content


# --- bash means what bash means ---------------------------------------------------------------------------------

def test_REL_bash_quoted_operator_executed(tmp_path):
    """REL-bash-quoted-operator-executed: a quoted '&&' or ';' is a word: mkdir makes 'x', '&&'/';' and 'rm'
    and fails on readme.txt (it exists); nothing is deleted."""
    for i, (cmd, op) in enumerate([("mkdir x '&&' rm readme.txt", "&&"), ("mkdir x ';' rm readme.txt", ";"),
                                   ('mkdir x "&&" rm readme.txt', "&&"), ("mkdir x \\; rm readme.txt", ";")]):
        s = session(tmp_path / str(i), {"readme.txt": "hello\n"})
        r = s.call("bash", command=cmd)
        assert not r.ok and "cannot create directory 'readme.txt': File exists" in r.output
        assert sorted(p.name for p in s.sandbox_path.iterdir()) == sorted(["x", op, "rm", "readme.txt"])
        assert [e["event_type"] for e in s.events if e["event_type"] in ("file_delete", "dir_create")] == \
            ["dir_create"] * 3


def test_REL_bash_no_clobber_ignored(tmp_path):
    """REL-bash-no-clobber-ignored: mv -n / cp -n leave an existing destination alone (GNU coreutils 9.1:
    silently, status 0); the last of mv -f / -n wins; cp -rn merges without overwriting."""
    s = session(tmp_path, {"readme.txt": "hello\n", "src/a.txt": "new a\n", "src/b.txt": "new b\n"})
    s.call("write", file_path="b.txt", content="KEEP ME\n")
    s.call("write", file_path="dst/src/a.txt", content="old a\n")
    for cmd in ("mv -n readme.txt b.txt", "cp -n readme.txt b.txt", "cp -nf readme.txt b.txt"):
        n = len(s.events)
        r = s.call("bash", command=cmd)
        assert r.ok and (s.sandbox_path / "b.txt").read_text() == "KEEP ME\n", cmd
        assert not [e for e in s.events[n:] if e["event_type"] in ("file_move", "file_rename", "file_copy")]
    assert s.call("bash", command="cp -rn src dst").ok
    assert (s.sandbox_path / "dst/src/a.txt").read_text() == "old a\n"
    assert (s.sandbox_path / "dst/src/b.txt").read_text() == "new b\n"
    assert s.call("bash", command="mv -nf readme.txt b.txt").ok
    assert (s.sandbox_path / "b.txt").read_text() == "hello\n" and not (s.sandbox_path / "readme.txt").exists()


def test_bash_flags_mean_what_they_mean(tmp_path):
    s = session(tmp_path, {"a.txt": "a\n", "d/x.txt": "x\n"})
    r = s.call("bash", command="mkdir -pv p/q")
    assert r.output == "mkdir: created directory 'p'\nmkdir: created directory 'p/q'"
    r = s.call("bash", command="cp -v a.txt b.txt && mv -v b.txt c.txt && rm -v c.txt")
    assert r.output == "'a.txt' -> 'b.txt'\nrenamed 'b.txt' -> 'c.txt'\nremoved 'c.txt'"
    s.advance(60_000)
    s.call("write", file_path="z_new.txt", content="n\n")
    assert s.call("bash", command="ls -t").output.splitlines()[0] == "z_new.txt"   # simulated mtime
    assert s.call("bash", command="ls").output.splitlines()[0] == "a.txt"
    assert "d/" in s.call("bash", command="ls -F").output.splitlines()
    s.advance(60_000)
    mtime = os.stat(s.sandbox_path / "a.txt").st_mtime_ns
    assert s.call("bash", command="cp -p a.txt kept.txt").ok
    assert os.stat(s.sandbox_path / "kept.txt").st_mtime_ns == mtime
    assert os.stat(s.sandbox_path / "z_new.txt").st_mtime_ns == int((START + 60_000 + _exec_ms(s, "z_new.txt")) * 1e6)
    r = s.call("bash", command="rm -rv d")
    assert r.output == "removed 'd/x.txt'\nremoved directory 'd'"


def _exec_ms(s: EngineSession, rel: str) -> float:
    ev = next(e for e in s.events if e.get("file_path", "").endswith(rel) and e["event_type"] == "file_write")
    return ev["timestamp"] - START - 60_000


# --- Unicode ----------------------------------------------------------------------------------------------------

def test_BR_03_one_canonical_form_per_path(tmp_path):
    """BR-03: a bundle folder spelled in NFD and the same name typed in NFC are one folder (NFC); a refused
    sibling path is recorded as the agent wrote it, never rewritten by prefix into a virtual path."""
    nfd, nfc = unicodedata.normalize("NFD", "Café"), unicodedata.normalize("NFC", "Café")
    s = session(tmp_path, {f"{nfd}/a.md": "x\n"})
    r = s.call("write", file_path=f"{nfc}/plan.md", content="plan\n")
    assert r.ok
    assert [p.name for p in s.sandbox_path.iterdir()] == [nfc]
    assert sorted(p.name for p in (s.sandbox_path / nfc).iterdir()) == ["a.md", "plan.md"]
    r = s.call("read", file_path=f"{nfd}/plan.md")  # typed decomposed: the same file
    assert r.ok and r.content == "plan"
    assert s.events[-2]["file_path"] == f"/sandbox/{PROFILE}_{TASK}/{nfc}/plan.md"
    sib = Path(str(s.sandbox_path) + "2")
    sib.mkdir()
    (sib / "secret.txt").write_text("s\n")
    typed = str(sib / "secret.txt")
    r = s.call("read", file_path=typed)
    assert not r.ok and typed in r.output
    err = s.events[-1]
    assert err["event_type"] == "error_encounter" and typed in err["context"] and err["file_path"] == typed
    s.finish()
    snap = s.media.read(s.events[-2]["media_ref"]["path"]).decode()
    assert nfd not in snap and f"{nfc}/plan.md" in snap


def test_bundle_names_that_cannot_be_paths_are_skipped_or_renamed_and_listed(tmp_path):
    """Special files and a second NFC spelling are skipped and listed; a name with a control character is copied
    under its %XX name (the one names rule, REL2-IMPORT-control-char-names-dropped-by-engine) and listed."""
    bundle = make_bundle(tmp_path, {"ok.txt": "x\n", unicodedata.normalize("NFD", "é.txt"): "d\n",
                                    unicodedata.normalize("NFC", "é.txt"): "c\n"})
    os.mkfifo(bundle / "pipe")
    (bundle / "bad\x01name.txt").write_text("x")
    s = session(tmp_path, bundle=bundle)
    reasons = dict(s.sandbox.skipped)
    assert reasons["pipe"] == "not a regular file or directory"
    assert "bad\x01name.txt" not in reasons and s.sandbox.renamed == [("bad\\x01name.txt", "bad%01name.txt")]
    assert any("normalised to NFC" in why for why in reasons.values())
    assert sorted(p.name for p in s.sandbox_path.iterdir()) == ["bad%01name.txt", "ok.txt", "é.txt"]
    assert (s.sandbox_path / "bad%01name.txt").read_text() == "x"
