"""Installing the project as a user does, for the install tests: a wheel built from this checkout, a venv layered
on the running environment (tests/test_wheel_install.py), and a *core-only* venv that holds exactly the project's
declared core dependencies (tests/test_core_install.py).

A core-only venv is made without downloading anything: the closure of the wheel's own ``Requires-Dist`` (no extras,
markers evaluated here) is resolved against the distributions installed in the running environment, and every file
of those distributions (their RECORD) is linked into the new venv's site-packages; the wheel is installed on top
with ``pip install --no-deps --no-index``. A package the code imports but the metadata does not declare is absent
there, as it would be after ``pip install filegram-ray`` on a clean machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent


def run(cmd, cwd, env, timeout=600, check=True) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check:
        assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def clean_env(tmp: Path) -> dict[str, str]:
    """The test process's environment without what points at this checkout or another venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FILEGRAM_CONF", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["FILEGRAM_CACHE_DIR"] = str(tmp / "cache")
    return env


def build_wheel(tmp: Path, env: dict[str, str]) -> Path:
    """The project's wheel, built from a clean copy of this checkout (an in-tree build/ could carry stale modules)."""
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in ("filegram_ray", "rendering", "video"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp / "dist"),
         "."], cwd=src, env=env)
    (whl,) = (tmp / "dist").glob("filegram_ray-*.whl")
    return whl


def site_folders() -> list[str]:
    """The site-packages folders of the interpreter running the tests, in ``sys.path`` order: a virtual
    environment's own (and its base's, when it was made with ``--system-site-packages``), or the system's."""
    import site

    found = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]
    for p in site.getsitepackages():
        if p not in found and Path(p).is_dir():
            found.append(p)
    return found


def purelib(py: Path) -> Path:
    return Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())


def layer_on_running_environment(py: Path) -> Path:
    """Write ``_running_env.pth`` into the site-packages of the venv of ``py``, listing :func:`site_folders`.

    Returns the ``.pth`` file's path."""
    pth = purelib(py) / "_running_env.pth"
    pth.write_text("".join(f"{p}\n" for p in site_folders()))
    return pth


def wheel_requirements(whl: Path, extra: str = "") -> list[Requirement]:
    """The ``Requires-Dist`` of the wheel that apply with ``extra`` requested (``""``: the core)."""
    with zipfile.ZipFile(whl) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(name).decode("utf-8").splitlines()
    reqs = [Requirement(ln.split(":", 1)[1].strip()) for ln in lines if ln.startswith("Requires-Dist:")]
    env = {"extra": extra}
    return [r for r in reqs if r.marker is None or r.marker.evaluate(env)]


def installed_closure(roots: list[Requirement]) -> set[str]:
    """Canonical names of the installed distributions ``roots`` pull in (markers evaluated here; extras followed).

    Raises:
        AssertionError: a requirement of the closure is not installed in the running environment (the core-only
            venv cannot be made without downloading it).
    """
    seen: dict[str, set[str]] = {}
    stack = [(canonicalize_name(r.name), set(r.extras)) for r in roots]
    missing = []
    while stack:
        name, wanted = stack.pop()
        if name in seen and wanted <= seen[name]:
            continue
        seen[name] = seen.get(name, set()) | wanted
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            missing.append(name)
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker and not any(req.marker.evaluate({"extra": e}) for e in (seen[name] | {""})):
                continue
            stack.append((canonicalize_name(req.name), set(req.extras)))
    assert not missing, f"not installed here: {sorted(set(missing))}"
    return set(seen)


def top_level_modules(dists: set[str]) -> set[str]:
    """Import names (top level) the distributions ``dists`` provide here."""
    out = set()
    for module, owners in metadata.packages_distributions().items():
        if any(canonicalize_name(d) in dists for d in owners):
            out.add(module)
    return out


def link_distributions(dists: set[str], site: Path) -> int:
    """Link every file of the installed distributions ``dists`` (their RECORD) into ``site``; returns the count."""
    n = 0
    for name in sorted(dists):
        dist = metadata.distribution(name)
        base = Path(dist.locate_file("")).resolve()
        assert dist.files is not None, f"{name}: no RECORD, cannot be linked"
        for f in dist.files:
            if f.parts and f.parts[0] == "..":
                continue  # scripts and data outside site-packages
            src = base / f
            dst = site / f
            if not src.exists() or dst.exists():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.symlink_to(src)
            n += 1
    return n


def requirement_names(path: Path) -> set[str]:
    """Canonical names of the packages a requirements file pins (``name==version --hash=…`` lines)."""
    return {canonicalize_name(ln.split("==", 1)[0].strip()) for ln in path.read_text(encoding="utf-8").splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")}


def core_venv(tmp: Path, whl: Path, env: dict[str, str]) -> tuple[Path, set[str]]:
    """A venv holding only what docs/install.md's core install brings: the wheel's core dependencies and the weight
    packages of requirements/models-core.txt (``--no-deps``), linked from this environment, and the wheel itself.

    Returns:
        (the venv's python, the canonical names of the distributions it holds besides filegram-ray).
    """
    venv = tmp / "core-venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp, env=env)
    py = venv / "bin" / "python"
    closure = installed_closure(wheel_requirements(whl)) - {"filegram-ray"}
    closure |= requirement_names(REPO / "requirements" / "models-core.txt")  # --no-deps: the packages alone
    link_distributions(closure, purelib(py))
    # pip is the running environment's; --python installs into the venv (nothing is fetched: --no-index)
    run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(whl)],
        cwd=tmp, env=env)
    return py, closure
