"""The restricted bash parser: a fuzz test (fixed seed) against real bash, and the cases it must get right.

REL-bash-quoted-operator-executed: quoted operators are words, never connectors. The differential test runs every
command our parser accepts through bash itself, with each allowed program replaced by a shell function that prints
its arguments, and requires the same programs to run with the same words in the same order (``&&`` skipping
included: a function fails when its first word is ``FAIL``).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filegram_ray.engine.bash import BASH_PROGRAMS, BashRefused, parse_bash, tokenize

BASH = shutil.which("bash")
FUZZ = settings(derandomize=True, database=None, max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

_PRELUDE = "set -f\n" + "".join(
    f"{p}() {{ printf '%s' {p}; for a in \"$@\"; do printf '\\0%s' \"$a\"; done; printf '\\1'; "
    f"[ \"$1\" = FAIL ] && return 1; return 0; }}\n"
    for p in BASH_PROGRAMS)


def bash_runs(command: str) -> list[list[str]]:
    """What bash runs for ``command``: argv of each program call, in order."""
    out = subprocess.run([BASH, "--norc", "--noprofile", "-c", _PRELUDE + command], capture_output=True,
                         timeout=20, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"})
    assert out.returncode in (0, 1), out.stderr
    return [rec.decode("utf-8").split("\0") for rec in out.stdout.split(b"\1") if rec]


def our_runs(command: str) -> list[list[str]]:
    """What our parser would run, with the same FAIL rule for ``&&``."""
    runs: list[list[str]] = []
    cmds: list[tuple[str, list[str]]] = []
    conn, cur = "", None
    for kind, text in tokenize(command):
        if kind == "op":
            cmds.append((conn, cur))
            conn, cur = text, None
        else:
            cur = (cur or []) + [text]
    if cur is not None:
        cmds.append((conn, cur))
    status = 0
    for conn, words in cmds:
        if conn == "&&" and status != 0:
            continue
        runs.append(words)
        status = 1 if len(words) > 1 and words[1] == "FAIL" else 0
    return runs


# --- strategies -------------------------------------------------------------------------------------------------

SPECIAL = ";&|<>()$`*?[]{}~!#\\\"' \t=%^,:@+-."
_plain = st.text(alphabet="abcxyzAB019_-.,:=@%+/", min_size=1, max_size=6)
_any_char = st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\x85\u2028\u2029") | \
    st.sampled_from(list(SPECIAL))
_single = st.text(alphabet=_any_char.filter(lambda c: c != "'"), max_size=6).map(lambda s: f"'{s}'")
_double_body = st.lists(st.sampled_from(list("ab &;|<>()*?[]{}~!#'=%")) | st.sampled_from(['\\"', "\\\\", "\\$",
                                                                                          "\\`", "\\a"]),
                        max_size=6).map("".join)
_double = _double_body.map(lambda s: f'"{s}"')
_escaped = st.sampled_from(list(";&|<>()*?[]{}~!# '\"\\$`")).map(lambda c: "\\" + c)
_piece = st.one_of(_plain, _single, _double, _escaped, st.just("FAIL"), st.just("--"), st.just("-n"))
_word = st.lists(_piece, min_size=1, max_size=3).map("".join)
_sep = st.sampled_from([" ", "  ", "\t", " ; ", ";", " && ", "&&", "; ", " ;", " | ", " & ", " > ", " || ",
                        " ( ", " ) "])
_prog = st.sampled_from(BASH_PROGRAMS) | st.sampled_from(["echo", "'rm'", "\"ls\"", "m\\v", "cat"])


@st.composite
def commands(draw) -> str:
    parts = []
    for i in range(draw(st.integers(1, 3))):
        if i:
            parts.append(draw(_sep))
        parts.append(draw(_prog))
        for _ in range(draw(st.integers(0, 4))):
            parts.append(draw(st.sampled_from([" ", "\t", "  "])))
            parts.append(draw(_word))
    return "".join(parts)


# --- properties -------------------------------------------------------------------------------------------------

@FUZZ
@given(st.text(alphabet=st.sampled_from(list(SPECIAL) + list("ab mkdir\n\x00é")), max_size=40))
def test_fuzz_parser_never_crashes(command):
    """Any text: parsed, or refused with BashRefused (never another exception)."""
    try:
        cmds = parse_bash(command)
    except BashRefused:
        return
    assert cmds and all(c.program in BASH_PROGRAMS for c in cmds)


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
@FUZZ
@given(commands())
def test_fuzz_accepted_commands_run_as_in_bash(command):
    """Every command we accept runs the same programs with the same words as bash (generated variants of
    REL-bash-quoted-operator-executed)."""
    try:
        tokenize(command)
        parse_bash(command)
    except BashRefused:
        return
    assert our_runs(command) == bash_runs(command), command


@FUZZ
@given(st.lists(st.sampled_from(["&&", ";", "||", "|", "&", ">", "<", "(", ")", ">>", "&>"]), min_size=1,
                max_size=4), st.sampled_from(["'", '"', "\\"]))
def test_fuzz_quoted_operators_are_words(ops, quote):
    """REL-bash-quoted-operator-executed: an operator inside quotes (or escaped) is a word, never a connector."""
    quoted = [f"{quote}{op}{quote}" if quote != "\\" else "".join("\\" + c for c in op) for op in ops]
    cmds = parse_bash("mkdir x " + " ".join(quoted) + " y")
    assert len(cmds) == 1 and cmds[0].operands == ("x", *ops, "y")


# --- cases ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command, operands", [
    ("mkdir x '&&' rm readme.txt", ("x", "&&", "rm", "readme.txt")),   # REL-bash-quoted-operator-executed
    ("mkdir x ';' rm readme.txt", ("x", ";", "rm", "readme.txt")),
    ('mkdir "a && b" c\\;d', ("a && b", "c;d")),
    ("mkdir a#b 'c d'\"e\"", ("a#b", "c de")),
    ('mkdir "x\\"y" "p\\q"', ('x"y', "p\\q")),
    ("mkdir -- -n ''", ("-n", "")),
])
def test_quoting_cases(command, operands):
    (cmd,) = parse_bash(command)
    assert cmd.program == "mkdir" and cmd.operands == operands


@pytest.mark.parametrize("command, why", [
    ("mkdir a && rm b || ls", "'||'"), ("ls | wc", "'|'"), ("mkdir $(id)", "substitution"),
    ('mkdir "$HOME"', "inside double quotes"), ("rm *.md", "glob"), ("mkdir a #c", "comment"),
    ("mkdir ~x", "home"), ("mkdir 'open", "no closing quotation"), ("cat x", "not an allowed program"),
    ("rm --force x", "unsupported option"), ("cp -L a b", "unsupported option"), ("mkdir a\x01b", "control"),
    ("; mkdir a", "empty command"), ("mkdir a &&", "ends with"), ("mkdir a\\", "backslash"),
])
def test_refused(command, why):
    with pytest.raises(BashRefused, match=why):
        parse_bash(command)


def test_options_end_and_bundles():
    (cmd,) = parse_bash("cp -rn -v src -- -dst")
    assert cmd.flags == "rnv" and cmd.operands == ("src", "-dst")
    a, b = parse_bash("mv -n a b ; mv -nf c d")
    assert a.connector == "" and b.connector == ";" and b.flags == "nf"
