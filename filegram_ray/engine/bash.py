"""The restricted ``bash`` tool: a parser for a small, exact subset of the shell language and its executor.

It is not a shell. Only ``mkdir``, ``mv``, ``cp``, ``rm``, ``ls`` and ``touch`` run — in Python, on sandbox paths
(:mod:`filegram_ray.engine.sandbox`) — chained with ``&&`` or ``;``.

Parsing follows bash's quoting rules, so a command means what bash would make of it or is refused:

* words split on unquoted spaces and tabs; ``'...'`` is literal; ``"..."`` is literal except ``\\"``, ``\\\\``,
  ``\\$`` and ``\\``` (a ``$`` or backquote inside double quotes is refused); an unquoted backslash quotes the next
  character; adjacent pieces join into one word.
* **quoted text is never an operator**: ``mkdir x '&&' rm a`` makes three folders, as in bash.
* unquoted ``;`` and ``&&`` separate sub-commands; every other unquoted operator (``|``, ``||``, ``&``, ``<``,
  ``>``, ``(``, ``)``) is refused, as are unquoted expansions: ``$``, backquotes, globs (``* ? [ ]``), braces,
  ``~``, ``!``, a ``#`` that starts a word (a comment), and newlines or other control characters anywhere (tab
  excepted). Refusal happens before anything runs.
* options: GNU short options (bundled, anywhere before ``--``; ``--`` ends options). Each accepted option means
  what it means in GNU coreutils: ``mkdir -p -v``; ``rm -r -R -f -d -v``; ``cp -r -R -a -p -n -f -v`` (``-n``
  no-clobber: an existing destination is left as it is, exit status 0 as in coreutils 9.1; ``-p``/``-a`` keep mode
  and mtime; ``-f`` is implied because writes replace the destination atomically); ``mv -f -n -v`` (the last of
  ``-f``/``-n`` wins); ``touch -c``; ``ls -a -A -R -1 -F -t``. ``ls -l`` and ``-h`` are accepted as display
  options that leave the output in the short form (one name per line, no owners, sizes or real times), and ``-a``
  lists hidden entries without ``.`` and ``..`` — the persona simulator is calibrated on these outputs. Any other
  option (long options included) is refused.

Execution: every path argument is checked against the sandbox before the first sub-command runs (one refused path
refuses the whole command), and checked again, with every filesystem call re-walking the path under the link rule,
when its sub-command runs — so a link moved into place by an earlier sub-command is refused when reached.

``.`` and ``..`` in operands are followed as the kernel follows them (case REL2-SEM-rm-dot-dotdot-deletes-parent;
:meth:`~filegram_ray.engine.sandbox.Sandbox.resolve`), with GNU coreutils 9.1's answers: ``missing/..`` → "No such
file or directory", ``file.txt/..`` → "Not a directory" (silent under ``rm -f``; ``touch -c`` skips a missing
one); ``rm`` refuses an operand whose last component is ``.`` or ``..`` ("refusing to remove '.' or '..'
directory: skipping 'd/e/..'"); ``mv d/. x`` fails as rename(2) does ("Device or resource busy"); ``cp -r d/. x``
copies the contents of ``d`` into ``x``; ``mkdir -p a/../b`` makes ``a`` and then ``b``. Words holding a character
the names rule of :mod:`filegram_ray.names` refuses (controls, U+2028/2029, bidi overrides) refuse the command.
"""

from __future__ import annotations

import posixpath
import stat
from dataclasses import dataclass
from typing import Any

from filegram_ray.engine.sandbox import LimitExceeded, PathLookupError, Sandbox, SandboxError
from filegram_ray.names import name_problem

BASH_PROGRAMS = ("mkdir", "mv", "cp", "rm", "ls", "touch")
#: short options accepted per program (see the module docstring for what each one does)
BASH_FLAGS = {"mkdir": "pv", "rm": "rfRdv", "cp": "rRfpnav", "mv": "fnv", "ls": "alR1AhFt", "touch": "c"}
#: our own bound on entries printed by ``ls`` (same as the ``list`` tool)
LIST_CAP = 100

_OPERATORS = ("&&", "||", ">>", "<<", ">&", "<&", "&>", ";;", "|&", "<>", ">|")
_OPERATOR_CHARS = set(";&|<>()")
_REFUSED = {"$": "variable or command substitution", "`": "command substitution", "*": "glob", "?": "glob",
            "[": "glob", "]": "glob", "{": "brace expansion", "}": "brace expansion", "~": "home expansion",
            "!": "history expansion"}
_REFUSED_ANYWHERE = {"\n": "newline", "\r": "newline", "\x00": "NUL byte"}
_ALLOWED_HINT = f"only {', '.join(BASH_PROGRAMS)} chained with && or ; are allowed"


class BashRefused(SandboxError):
    """The command is outside the supported language; nothing ran."""


@dataclass(frozen=True)
class Command:
    """One parsed sub-command. ``connector``: ``""`` (first), ``"&&"`` or ``";"``; ``flags``: option letters in
    the order given; ``operands``: words after quote removal that are not options."""

    connector: str
    program: str
    flags: str
    operands: tuple[str, ...]


def tokenize(command: str) -> list[tuple[str, str]]:
    """``[("word", text) | ("op", operator)]`` after bash quote removal; BashRefused for anything outside the
    supported language (see the module docstring)."""
    for ch, what in _REFUSED_ANYWHERE.items():
        if ch in command:
            raise BashRefused(f"refused: {what} is not supported; {_ALLOWED_HINT}")
    bad = name_problem(command.replace("\t", " "))  # the one names rule (filegram_ray.names); tab separates
    if bad:
        raise BashRefused(f"refused: the command {bad}; control, line-separator and bidi characters are not "
                          f"supported")
    toks: list[tuple[str, str]] = []
    word: list[str] | None = None
    i, n = 0, len(command)

    def flush() -> None:
        nonlocal word
        if word is not None:
            toks.append(("word", "".join(word)))
            word = None

    def add(text: str) -> None:
        nonlocal word
        if word is None:
            word = []
        word.append(text)

    while i < n:
        c = command[i]
        if c in " \t":
            flush()
            i += 1
        elif c == "'":
            j = command.find("'", i + 1)
            if j < 0:
                raise BashRefused("cannot parse command: no closing quotation (')")
            add(command[i + 1:j])
            i = j + 1
        elif c == '"':
            add("")  # "" is a word even when empty
            j = i + 1
            while True:
                if j >= n:
                    raise BashRefused('cannot parse command: no closing quotation (")')
                d = command[j]
                if d == '"':
                    break
                if d == "\\" and j + 1 < n and command[j + 1] in '$`"\\':
                    add(command[j + 1])
                    j += 2
                    continue
                if d in "$`":
                    raise BashRefused(f"refused: {_REFUSED[d]} ({d!r}) inside double quotes is not supported")
                add(d)
                j += 1
            i = j + 1
        elif c == "\\":
            if i + 1 >= n:
                raise BashRefused("cannot parse command: it ends with a backslash")
            add(command[i + 1])
            i += 2
        elif c in _OPERATOR_CHARS:
            flush()
            op = command[i:i + 2] if command[i:i + 2] in _OPERATORS else c
            toks.append(("op", op))
            i += len(op)
        elif c in _REFUSED or (c == "#" and word is None):
            what = "comment" if c == "#" else _REFUSED[c]
            raise BashRefused(f"refused: {what} ({c!r}) is not supported; {_ALLOWED_HINT}")
        else:
            add(c)
            i += 1
    flush()
    return toks


def parse_bash(command: str) -> list[Command]:
    """Parse ``command`` into sub-commands; BashRefused (nothing runs) for anything outside the language."""
    if not command.strip(" \t"):
        raise BashRefused("empty command")
    raw: list[tuple[str, list[str]]] = []
    cur: list[str] | None = None
    conn = ""
    for kind, text in tokenize(command):
        if kind == "op":
            if text not in (";", "&&"):
                raise BashRefused(f"refused: shell operator {text!r} (pipes, redirection, ||, & and subshells "
                                  f"are not supported)")
            if cur is None:
                raise BashRefused(f"refused: empty command before {text!r}")
            raw.append((conn, cur))
            cur, conn = None, text
        else:
            cur = (cur or []) + [text]
    if cur is not None:
        raw.append((conn, cur))
    elif conn == "&&":
        raise BashRefused("refused: command ends with '&&'")
    cmds = []
    for conn, words in raw:
        prog = words[0]
        if prog not in BASH_PROGRAMS:
            raise BashRefused(f"refused: {prog!r} is not an allowed program (allowed: {', '.join(BASH_PROGRAMS)})")
        flags: list[str] = []
        operands: list[str] = []
        options_done = False
        for w in words[1:]:
            if not options_done and w == "--":
                options_done = True
            elif not options_done and w.startswith("-") and w != "-":
                bad = [c for c in w[1:] if c not in BASH_FLAGS[prog]] if not w.startswith("--") else [w]
                if bad:
                    raise BashRefused(f"refused: unsupported option {w!r} for {prog}")
                flags.extend(w[1:])
            else:
                operands.append(w)
        cmds.append(Command(conn, prog, "".join(flags), tuple(operands)))
    return cmds


# --- execution ------------------------------------------------------------------------------------------------

class _Run:
    """State of one sub-command: output lines, observations and exit status."""

    def __init__(self, sb: Sandbox, cmd: Command) -> None:
        self.sb, self.cmd, self.prog = sb, cmd, cmd.program
        self.flags = set(cmd.flags)
        self.out: list[str] = []
        self.obs: list[dict[str, Any]] = []
        self.status = 0

    def fail(self, msg: str) -> None:
        self.out.append(f"{self.prog}: {msg}")
        self.status = 1

    def resolve(self, arg: str, what: str = "") -> str | None:
        """Re-check ``arg`` now (the disk may have changed since the pre-flight); None after reporting.
        ``what`` ("cannot remove", ...) words a missing folder or a file before ``.``/``..`` as coreutils does:
        ``rm: cannot remove 'missing/..': No such file or directory``."""
        try:
            return self.sb.resolve(arg)
        except PathLookupError as exc:
            missing = exc.strerror.startswith("No such")
            if self.prog == "rm" and "f" in self.flags:
                pass  # rm -f: neither a missing name nor a file before ".." is an error (coreutils 9.1)
            elif self.prog == "touch" and not missing:
                self.fail(f"setting times of '{arg}': {exc.strerror}")
            elif self.prog == "touch" and "c" in self.flags:
                pass  # touch -c: a missing name is skipped silently
            else:
                self.fail(f"{what or _LOOKUP_VERB[self.prog]} '{arg}': {exc.strerror}")
            return None
        except SandboxError as exc:
            self.fail(str(exc))
            return None


#: how each program words a failed path lookup (GNU coreutils 9.1)
_LOOKUP_VERB = {"ls": "cannot access", "rm": "cannot remove", "touch": "cannot touch", "mv": "cannot stat",
                "cp": "cannot stat", "mkdir": "cannot create directory"}


def _dot_last(arg: str) -> bool:
    """Whether the last component of ``arg`` (trailing slashes ignored) is ``.`` or ``..``."""
    return arg.rstrip("/").rpartition("/")[2] in (".", "..") if arg.rstrip("/") else False


def _classify(e: Any) -> str:
    if e.kind == "dir":
        return "/"
    if e.kind == "link":
        return "@"
    if e.kind == "other":
        return "|" if stat.S_ISFIFO(e.mode) else "=" if stat.S_ISSOCK(e.mode) else ""
    return "*" if e.mode & 0o111 else ""


def _listing(sb: Sandbox, rel: str, flags: set[str]) -> tuple[int, list[str]]:
    hidden = bool(flags & {"a", "A"})
    entries = [e for e in sb.scandir(rel) if hidden or not e.name.startswith(".")]
    if "t" in flags:
        entries.sort(key=lambda e: (-e.mtime_ns, e.name))
    count = len(entries)
    lines = [e.name + (_classify(e) if "F" in flags else "") for e in entries]
    if "R" in flags:
        for e in entries:
            if e.kind == "dir":
                sb.check_time("ls -R")
                c, sub = _listing(sb, e.rel, flags)
                count += c
                lines.extend(f"{e.name}/{s}" for s in sub)
    return count, lines


def _ls(r: _Run) -> None:
    sb = r.sb
    targets = list(r.cmd.operands) or ["."]
    for arg in targets:
        rel = r.resolve(arg)
        if rel is None:
            continue
        kind = sb.kind(rel, arg)
        if kind is None:
            r.fail(f"cannot access '{arg}': No such file or directory")
        elif kind == "file" and arg.endswith("/"):
            r.fail(f"cannot access '{arg}': Not a directory")
        elif kind == "dir":
            n, names = _listing(sb, rel, r.flags)
            if len(targets) > 1:
                r.out.append(f"{arg}:")
            r.out.extend(names[:LIST_CAP])
            r.obs.append({"kind": "browse", "rel": rel, "listed": n, "tool": "bash"})
        else:
            r.out.append(arg)
            r.obs.append({"kind": "browse", "rel": rel, "listed": 1, "tool": "bash"})


def _dirs_in(sb: Sandbox, rel: str) -> int:
    return sum(1 for e in sb.scandir(rel) if e.kind == "dir")


def _parent(rel: str) -> str:
    return posixpath.dirname(rel) or "."


def _mkdir(r: _Run) -> None:
    for arg in r.cmd.operands:
        if "p" in r.flags:  # mkdir -p a/../b makes a, then b: each folder a later "." or ".." steps out of first
            raw = arg.split("/")
            steps = [i for i, part in enumerate(raw) if part in (".", "..")
                     and any(x not in ("", ".", "..") for x in raw[:i])]
            if not all(_mkdir_one(r, "/".join(raw[:i])) for i in steps):
                continue
        _mkdir_one(r, arg)


def _mkdir_one(r: _Run, arg: str) -> bool:
    """mkdir (``-p``: and missing parents) of one operand; False after reporting a failure. ``-v`` names each
    folder made by the operand as typed, cut after that folder's component (as GNU mkdir does)."""
    sb, parents = r.sb, "p" in r.flags
    rel = r.resolve(arg)
    if rel is None:
        return False
    kind = "dir" if rel == "." else sb.kind(rel, arg)
    if kind is not None:
        if not parents or kind != "dir":
            r.fail(f"cannot create directory '{arg}': File exists")
            return False
        return True
    if not parents and sb.kind(_parent(rel)) != "dir":
        r.fail(f"cannot create directory '{arg}': No such file or directory")
        return False
    n_new = sb.missing_dirs(rel) if parents else 1
    try:
        sb.mkdir(rel, arg, parents=parents)
    except LimitExceeded as exc:
        r.fail(f"cannot create directory '{arg}': {exc}")
        return False
    except OSError as exc:
        r.fail(f"cannot create directory '{arg}': {exc.strerror}")
        return False
    if "v" in r.flags:
        typed = arg.split("/")
        while len(typed) > 1 and typed[-1] in ("", "."):
            typed.pop()
        named = [i for i, part in enumerate(typed) if part not in ("", ".", "..")]
        r.out.extend(f"mkdir: created directory '{'/'.join(typed[:i + 1])}'" for i in named[len(named) - n_new:])
    if sb.kind(rel) == "dir":  # verified on disk
        r.obs.append({"kind": "mkdir", "rel": rel, "dirs_in_parent": _dirs_in(sb, _parent(rel))})
    return True


def _touch(r: _Run) -> None:
    sb = r.sb
    for arg in r.cmd.operands:
        rel = r.resolve(arg)
        if rel is None:
            continue
        kind = "dir" if rel == "." else sb.kind(rel, arg)
        if arg.endswith("/") and kind != "dir":
            if kind is not None or "c" not in r.flags:
                r.fail(f"setting times of '{arg}': {'Not a directory' if kind else 'No such file or directory'}")
            continue
        if kind is not None:
            sb.touch(rel, arg)
            continue
        if "c" in r.flags:
            continue
        if sb.kind(_parent(rel)) != "dir":
            r.fail(f"cannot touch '{arg}': No such file or directory")
            continue
        try:
            created = sb.touch(rel, arg)
        except LimitExceeded as exc:
            r.fail(f"cannot touch '{arg}': {exc}")
            continue
        if created and sb.kind(rel) == "file":
            r.obs.append({"kind": "write", "rel": rel, "existed": False, "before": None, "after": "",
                          "written_chars": 0, "tool": "touch"})


def _rm(r: _Run) -> None:
    sb, verbose = r.sb, "v" in r.flags
    for arg in r.cmd.operands:
        rel = r.resolve(arg)
        if rel is None:
            continue
        if _dot_last(arg):  # an existing d/. or d/..: GNU rm refuses it (coreutils 9.1); missing/.. failed above
            r.fail(f"refusing to remove '.' or '..' directory: skipping '{arg}'")
            continue
        if rel == ".":
            r.fail("refusing to remove the sandbox root")
            continue
        kind = sb.kind(rel, arg)
        if kind is None:
            if "f" not in r.flags:
                r.fail(f"cannot remove '{arg}': No such file or directory")
            continue
        if kind == "file" and arg.endswith("/"):
            if "f" not in r.flags:  # rm -f ignores it, like a missing name (coreutils)
                r.fail(f"cannot remove '{arg}': Not a directory")
            continue
        removed: list[str] = []
        if kind == "dir":
            if not r.flags & {"r", "R"}:
                if "d" in r.flags and not sb.scandir(rel, arg):
                    sb.rmdir(rel, arg)
                    removed.append(f"removed directory '{arg}'")
                else:
                    r.fail(f"cannot remove '{arg}': Is a directory")
                    continue
            else:
                if verbose:
                    for d, _dirs, others in sb.walk(rel, arg, what="rm -r"):  # pre-order, reversed below
                        shown = arg + d[len(rel):]
                        removed.append(f"removed directory '{shown}'")
                        removed.extend(f"removed '{shown}/{e.name}'" for e in reversed(others))
                    removed.reverse()
                sb.rmtree(rel, arg)
        else:
            sb.unlink(rel, arg)
            removed.append(f"removed '{arg}'")
        if verbose:
            r.out.extend(removed)
        if not sb.exists(rel):
            r.obs.append({"kind": "delete", "rel": rel})


def _mv_cp(r: _Run) -> None:
    sb, prog, ops = r.sb, r.prog, r.cmd.operands
    if len(ops) < 2:
        r.fail(f"missing destination operand after '{ops[0]}'")
        return
    if prog == "mv":
        last = [c for c in r.cmd.flags if c in "fn"]
        no_clobber = bool(last) and last[-1] == "n"
    else:
        no_clobber = "n" in r.flags
    *sources, darg = ops
    # a trailing "/" on the destination is judged below, per source, as coreutils does (mv -n onto "file/" is silent)
    drel = r.resolve(darg.rstrip("/") or darg,
                     "cannot create regular file" if prog == "cp" else f"cannot move '{sources[0]}' to")
    if drel is None:
        return
    dkind = "dir" if drel == "." else sb.kind(drel, darg)
    if len(sources) > 1 and dkind != "dir":
        r.fail(f"target '{darg}' is not a directory")
        return
    for sarg in sources:
        srel = r.resolve(sarg.rstrip("/") or sarg)  # "file/" is judged below, after mv -n's existence check
        if srel is None:
            continue
        if prog == "mv" and _dot_last(sarg):  # rename(2) of "d/." or "d/..": EBUSY (coreutils 9.1) ...
            try:
                exists = drel == "." or sb.kind(drel, darg) is not None
            except SandboxError as exc:
                r.fail(str(exc))
                continue
            if not (no_clobber and exists):  # ... unless mv -n meets an existing destination first
                r.fail(f"cannot move '{sarg}' to '{darg}': Device or resource busy")
            continue
        if srel == ".":
            r.fail(f"cannot {prog} the sandbox root")
            continue
        skind = sb.kind(srel, sarg)
        if skind is None:
            r.fail(f"cannot stat '{sarg}': No such file or directory")
            continue
        if _dot_last(sarg):  # cp -r d/. x: the name copied is "." — into x itself, or x made a copy of d
            trel = drel
        else:
            name = posixpath.basename(srel)
            trel = (name if drel == "." else f"{drel}/{name}") if dkind == "dir" else drel
        try:
            tkind = sb.kind(trel, darg) if trel != srel else skind
        except SandboxError as exc:
            r.fail(str(exc))
            continue
        if prog == "mv" and no_clobber and tkind is not None:
            continue  # mv -n: an existing destination is left alone (coreutils 9.1: silently, status 0)
        if skind == "file" and sarg.endswith("/"):
            r.fail(f"cannot stat '{sarg}': Not a directory")
            continue
        if darg.endswith("/") and dkind != "dir" and (dkind is not None or skind != "dir"):
            r.fail(f"cannot move '{sarg}' to '{darg}': Not a directory" if prog == "mv" else
                   f"cannot create regular file '{darg}': Not a directory")
            continue
        if trel == srel:
            if not (no_clobber and (skind == "file" or r.flags & {"r", "R", "a"})):  # cp -n skips before comparing
                r.fail(f"'{sarg}' and '{darg}' are the same file")
            continue
        if trel.startswith(srel + "/"):
            r.fail(f"cannot {prog} '{sarg}' to a subdirectory of itself")
            continue
        if sb.kind(_parent(trel)) != "dir":
            r.fail(f"cannot {prog} to '{darg}': No such file or directory")
            continue
        if tkind == "dir" and skind != "dir":
            r.fail(f"cannot overwrite directory '{darg}' with non-directory")
            continue
        if tkind == "file" and skind == "dir":
            r.fail(f"cannot overwrite non-directory '{darg}' with directory '{sarg}'")
            continue
        existed = tkind is not None
        if existed and no_clobber and skind == "file":
            continue  # cp -n: an existing destination file is left alone (coreutils 9.1: silently, status 0)
        try:
            if prog == "mv":
                sb.rename(srel, trel, sarg, darg)  # onto a folder: only an empty one is replaced (rename(2))
            else:
                if skind == "dir" and not r.flags & {"r", "R", "a"}:
                    r.fail(f"-r not specified; omitting directory '{sarg}'")
                    continue
                sb.copy(srel, trel, sarg, darg, preserve=bool(r.flags & {"p", "a"}), no_clobber=no_clobber)
        except LimitExceeded as exc:
            r.fail(str(exc))
            continue
        except SandboxError as exc:
            r.fail(f"cannot {prog} '{sarg}': {exc}")
            continue
        except OSError as exc:
            r.fail(f"cannot {prog} '{sarg}': {exc.strerror}")
            continue
        if "v" in r.flags:
            r.out.append(f"renamed '{sarg}' -> '{trel}'" if prog == "mv" else f"'{sarg}' -> '{trel}'")
        if prog == "mv" and sb.exists(trel) and not sb.exists(srel):
            r.obs.append({"kind": "move", "src": srel, "dst": trel, "dst_arg": drel})
        elif prog == "cp" and sb.exists(trel):
            r.obs.append({"kind": "copy", "src": srel, "dst": trel, "dst_arg": drel, "existed": existed})


_RUNNERS = {"ls": _ls, "mkdir": _mkdir, "touch": _touch, "rm": _rm, "mv": _mv_cp, "cp": _mv_cp}


def run_bash(sb: Sandbox, command: str) -> tuple[int, list[str], list[dict[str, Any]]]:
    """Parse and run ``command``; returns (exit status of the last sub-command run, output lines,
    observations). Raises BashRefused / SandboxError / LimitExceeded before anything runs when the command is
    refused as a whole."""
    longest = sb.limits.max_bash_words * (sb.limits.max_path_chars + 3)
    if len(command) > longest:
        raise LimitExceeded(f"command is longer than {longest} chars")
    cmds = parse_bash(command)
    words = sum(1 for kind, _text in tokenize(command) if kind == "word")
    if words > sb.limits.max_bash_words:
        raise LimitExceeded(f"command has {words} words; the limit is {sb.limits.max_bash_words}")
    for c in cmds:  # pre-flight: one refused path refuses the whole command
        for arg in c.operands:
            try:
                sb.resolve(arg)
            except PathLookupError:
                pass  # "missing/.." may exist by the time its sub-command runs (mkdir -p missing/../x, a && b)
    outputs: list[str] = []
    observations: list[dict[str, Any]] = []
    status = 0
    for c in cmds:
        if c.connector == "&&" and status != 0:
            continue
        r = _Run(sb, c)
        try:
            if c.operands or c.program == "ls":
                _RUNNERS[c.program](r)
            else:
                r.fail("missing operand")
        except LimitExceeded as exc:
            r.fail(str(exc))
        except SandboxError as exc:
            r.fail(str(exc))
        except OSError as exc:
            r.fail(exc.strerror or str(exc))
        status = r.status
        outputs.extend(r.out)
        observations.extend(r.obs)
    return status, outputs, observations
