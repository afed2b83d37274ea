"""pyproject.toml pins every weight-shipping package to the version the models manifest lists (issue 32): a
loader refuses any other version (weights.check_once), so a looser range would let pip install one that fails at
load time. Also: the comparison-method libraries have upper bounds and the gpu extra is Ray's own LLM extra."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement

from filegram_ray import weights

REPO = Path(__file__).resolve().parent.parent


def _project() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_core_weight_packages_are_pinned_to_the_manifest_versions():
    deps = {Requirement(r).name.lower(): Requirement(r) for r in _project()["dependencies"]}
    core = [e for e in weights.manifest() if e["extra"] in ("core", "media", "speech")]
    assert core
    for e in core:
        req = deps.get(e["package"].lower())
        assert req is not None, f"{e['package']} is not a dependency in pyproject.toml"
        assert str(req.specifier) == f"=={e['version']}", (e["package"], str(req.specifier))


def test_method_libraries_are_bounded_and_gpu_is_rays_llm_extra():
    deps = {Requirement(r).name.lower(): Requirement(r) for r in _project()["dependencies"]}
    for name in ("mem0ai", "graphiti-core", "kuzu", "piper-tts"):
        assert any(s.operator in ("<", "<=", "==", "~=") for s in deps[name].specifier), name
    (gpu,) = [Requirement(r) for r in _project()["optional-dependencies"]["gpu"]]
    assert gpu.name == "ray" and gpu.extras == {"llm"} and str(gpu.specifier) == "==2.60.*"
    assert gpu.specifier.contains("2.60.0") and not gpu.specifier.contains("2.61.0")
