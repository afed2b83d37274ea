"""A real multi-node Ray cluster on one machine: every node in its own network namespace (tests only).

Layout (all made here, all removed by :meth:`NetCluster.close`, also after a failure)::

    root namespace (this process, `ray job submit`, the S3 server)    10.X.Y.1  veth <name>c ─┐
    namespace <name>h: Ray head (GCS, dashboard :8265, raylet)         10.X.Y.2  veth ─────────┤ bridge in
    namespace <name>1: Ray worker node                                 10.X.Y.3  veth ─────────┤ namespace
    namespace <name>2: Ray worker node                                 10.X.Y.4  veth ─────────┘ <name>b

A node's namespace holds its loopback and one veth into the bridge, and no route: it reaches the other nodes and
the root namespace's 10.X.Y.1 (where the test's S3 server listens), nothing else. ``10.X.Y`` is picked at random
among /24s that no route of the root namespace uses. Every node is a plain ``ray start`` (head: ``--head``; workers:
``--address``) run with ``ip netns exec``; a node's processes are exactly ``ip netns pids`` of its namespace, so a
node is killed (all of it, or only its raylet) and the cluster stopped without touching any other Ray on the
machine. Needs root and ``ip`` (iproute2); :func:`unavailable` says why not where they are missing.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from raycluster import head_env, ray_cli, wait_for_dashboard

#: the pipeline slice tests/test_multinode.py and tests/benchmarks/bench_multinode.py run (``jobs/pipeline.py``
#: arguments): profiles p1, p3, p18 × tasks T-01, T-03, every stage but record and caption; generate and evaluate on
#: three 1-CPU actors — one per node of a 3-node, 1-CPU-per-node cluster, so every node holds an actor of the stage
#: when a node is killed — and render on its three 0.5-CPU actors (documents ×2, images ×1; render refuses more
#: than 0.5 CPU per actor)
PIPELINE_SLICE = ["--skip", "record", "caption",
                  "--set", "profiles=[p1_methodical,p3_efficient_executor,p18_decisive_scanner]",
                  "--set", "tasks=[T-01,T-03]", "--set", "workspace.tts=tone", "--set", "encode.embedder=hashing",
                  "--set", "render.formats=[pdf,docx,md,xlsx,png_page]",
                  "--set", "evaluate.methods=[no_context,full_context]", "--set", "evaluate.sample_per_sub_task=2",
                  "--set", "evaluate.settings=[text]",
                  "--set", "generate.num_actors=3", "--set", "generate.num_cpus_per_actor=1",
                  "--set", "evaluate.num_actors=3", "--set", "evaluate.num_cpus_per_actor=1"]
#: what a job uploads of the checkout (``ray job submit --runtime-env-json``)
JOB_EXCLUDES = {"excludes": ["runs/", ".git/", "**/__pycache__/", ".pytest_cache/", "*.egg-info/", "build/",
                             "dist/"]}

#: process titles of a Ray worker running a unit: an actor-pool actor (``ActorPoolExecutor``) or a Ray Data map
#: actor (``RayDataExecutor``, render) inside a call
BUSY_TITLES = ("ray::_Actor.process", "ray::_MapWorker.submit")

GCS_PORT = 6379
DASHBOARD_PORT = 8265
METRICS_PORT = 8090


def unavailable() -> str | None:
    """Why a namespaced cluster cannot be built here (not root, no ``ip``, no netns support), or None."""
    if sys.platform != "linux":
        return "network namespaces are Linux-only"
    if os.geteuid() != 0:
        return "needs root (ip netns add, veth pairs)"
    if shutil.which("ip") is None:
        return "needs the ip command (iproute2)"
    probe = f"fgprobe{os.getpid() % 100000}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


def _free_subnet() -> str:
    """``10.X.Y`` of a /24 that no route of the root namespace covers."""
    routes = _ip("-4", "route", "show", "table", "all").stdout
    used = set(re.findall(r"\b(10\.\d+\.\d+)\.\d+", routes))
    rng = random.Random()
    for _ in range(200):
        net = f"10.{rng.randint(160, 250)}.{rng.randint(0, 255)}"
        if net not in used:
            return net
    raise RuntimeError("no free 10.x.y.0/24 for the test cluster")


def ns_pids(ns: str) -> list[int]:
    r = _ip("netns", "pids", ns, check=False)
    return [int(p) for p in r.stdout.split()] if r.returncode == 0 else []


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@dataclass
class Node:
    """One Ray node: its namespace, address, temp dir and the options of its ``ray start``."""

    name: str
    ns: str
    ip: str
    head: bool
    temp_dir: str
    args: list[str] = field(default_factory=list)
    log: str = ""

    def pids(self) -> list[int]:
        return ns_pids(self.ns)

    def runs_unit(self) -> bool:
        """Whether a worker process of this node is inside a unit's call (:data:`BUSY_TITLES`)."""
        return any(_cmdline(p).startswith(BUSY_TITLES) for p in self.pids())

    def raylet_pid(self) -> int | None:
        for pid in self.pids():
            cmd = _cmdline(pid)
            if "/raylet/raylet " in cmd or cmd.startswith("raylet "):
                return pid
        return None


class NetCluster:
    """A head and ``workers`` worker nodes, each in its own network namespace (module docstring).

    Args:
        workers: worker nodes besides the head.
        num_cpus: Ray CPUs of every node (``--num-cpus``).
        object_store_mb: ``--object-store-memory`` of every node, MiB (Ray's minimum is 75).
        memory_mb: ``--memory`` of every node (the logical memory Ray schedules against), MiB.
        env: extra environment of every node's processes (the job's drivers and workers inherit it).
    """

    def __init__(self, workers: int = 2, num_cpus: int = 1, object_store_mb: int = 200, memory_mb: int = 1500,
                 env: dict[str, str] | None = None):
        tag = f"{os.getpid() % 10000:04d}{random.randrange(16 ** 3):03x}"
        self.prefix = f"fg{tag}"  # ≤ 9 characters: interface names stop at 15
        self.net = _free_subnet()
        self.client_ip = f"{self.net}.1"
        self.num_cpus, self.object_store_mb, self.memory_mb = num_cpus, object_store_mb, memory_mb
        # not head_env()'s RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: that keeps a single node on loopback by refusing
        # multi-node clusters ("Multi-node Ray clusters are not supported"); these nodes have addresses of their own
        self.env = {**head_env(), "RAY_worker_niceness": "0", **(env or {})}
        self.env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        self.root = tempfile.mkdtemp(prefix=f"{self.prefix}-", dir="/tmp")
        self.hub = f"{self.prefix}b"
        self.client_if = f"{self.prefix}c"
        self.nodes: list[Node] = []
        self._namespaces: list[str] = []
        self._n_workers = workers
        self._next_worker = 1

    # ------------------------------------------------------------------ network
    def _make_network(self) -> None:
        _ip("netns", "add", self.hub)
        self._namespaces.append(self.hub)
        _ip("-n", self.hub, "link", "set", "lo", "up")
        _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.hub, "link", "set", "br0", "up")
        # this process's side: one veth with the subnet's first address; its peer on the bridge
        _ip("link", "add", self.client_if, "type", "veth", "peer", "name", "p", "netns", self.hub)
        _ip("-n", self.hub, "link", "set", "p", "name", "pc", "master", "br0", "up")
        _ip("addr", "add", f"{self.client_ip}/24", "dev", self.client_if)
        _ip("link", "set", self.client_if, "up")

    def _add_namespace(self, suffix: str, host: int) -> tuple[str, str]:
        ns, ip = f"{self.prefix}{suffix}", f"{self.net}.{host}"
        _ip("netns", "add", ns)
        self._namespaces.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", f"p{suffix}", "netns", self.hub)
        _ip("-n", self.hub, "link", "set", f"p{suffix}", "master", "br0", "up")
        _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        return ns, ip

    # ------------------------------------------------------------------ nodes
    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def workers(self) -> list[Node]:
        return [n for n in self.nodes if not n.head]

    @property
    def gcs(self) -> str:
        return f"{self.head.ip}:{GCS_PORT}"

    @property
    def dashboard(self) -> str:
        return f"http://{self.head.ip}:{DASHBOARD_PORT}"

    def _ray_start(self, node: Node, attempts: int = 3) -> None:
        """``ray start`` of ``node``; retried (after killing what the failed try left in the namespace) when it
        fails: ``ray start`` gives a raylet 30 s to register with the GCS, which a loaded machine can miss."""
        for attempt in range(attempts):
            try:
                return self._ray_start_once(node)
            except RuntimeError:
                if not node.head and self._registers(node.ip, 90.0):  # late, but there: keep it
                    return None
                if attempt == attempts - 1:
                    raise
                self.kill_node(node)
                node.temp_dir = tempfile.mkdtemp(prefix=node.name[0], dir=self.root)

    def _registers(self, ip: str, wait_s: float) -> bool:
        deadline = time.time() + wait_s
        while time.time() < deadline:
            if ip in self.alive_nodes():
                return True
            time.sleep(3.0)
        return False

    def _ray_start_once(self, node: Node) -> None:
        cmd = ["ip", "netns", "exec", node.ns, *ray_cli(), "start", f"--node-ip-address={node.ip}",
               f"--num-cpus={self.num_cpus}", f"--object-store-memory={self.object_store_mb * 2 ** 20}",
               f"--memory={self.memory_mb * 2 ** 20}", f"--temp-dir={node.temp_dir}", "--disable-usage-stats",
               f"--metrics-export-port={METRICS_PORT}", *node.args]
        r = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=240)
        node.log = r.stdout + r.stderr
        if r.returncode != 0:
            raise RuntimeError(f"ray start on {node.name} failed ({r.returncode}):\n{node.log[-3000:]}")

    def start(self, timeout_s: float = 240.0) -> NetCluster:
        """Make the network, start the head, then the workers; returns when the dashboard answers and every node
        is alive. Stops everything again when any step fails."""
        try:
            self._make_network()
            ns, ip = self._add_namespace("h", 2)
            head = Node("head", ns, ip, True, tempfile.mkdtemp(prefix="h", dir=self.root),
                        ["--head", f"--port={GCS_PORT}", f"--dashboard-host={ip}",
                         f"--dashboard-port={DASHBOARD_PORT}", "--include-dashboard=true"])
            self.nodes.append(head)
            self._ray_start(head)
            for _ in range(self._n_workers):
                self.add_worker()
            self.wait_alive(len(self.nodes), timeout_s)
            self._wait_dashboard(timeout_s)
        except BaseException:
            self.close()
            raise
        return self

    def add_worker(self) -> Node:
        """Start one more worker node in a namespace of its own (a replacement for a killed one, say)."""
        i = self._next_worker
        self._next_worker += 1
        ns, ip = self._add_namespace(str(i), 2 + i)
        node = Node(f"worker{i}", ns, ip, False, tempfile.mkdtemp(prefix=f"w{i}", dir=self.root),
                    [f"--address={self.gcs}"])
        self.nodes.append(node)
        self._ray_start(node)
        return node

    def _wait_dashboard(self, timeout_s: float) -> None:
        wait_for_dashboard(self.dashboard, timeout_s)

    def alive_nodes(self) -> dict[str, str]:
        """``{node IP: node id}`` of the nodes the GCS reports alive (``ray list nodes`` against the head)."""
        import json

        r = subprocess.run([*ray_cli(), "list", "nodes", "--address", self.gcs, "--format", "json", "--limit",
                            "100"], env=self.env, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            return {}
        try:
            rows = json.loads(r.stdout)
        except ValueError:
            return {}
        return {n["node_ip"]: n["node_id"] for n in rows if n.get("state") == "ALIVE"}

    def wait_alive(self, n: int, timeout_s: float = 120.0) -> dict[str, str]:
        deadline = time.time() + timeout_s
        while True:
            alive = self.alive_nodes()
            if len(alive) >= n:
                return alive
            if time.time() > deadline:
                raise RuntimeError(f"{len(alive)} of {n} Ray nodes alive after {timeout_s:.0f} s: {alive}")
            time.sleep(1.0)

    # ------------------------------------------------------------------ faults
    def busy_worker(self) -> Node | None:
        """A worker node with a live raylet that runs a unit right now, or None."""
        return next((n for n in self.workers if n.runs_unit() and n.raylet_pid()), None)

    def kill_raylet(self, node: Node) -> int:
        """SIGKILL the raylet of ``node`` (its workers, agents and object store go with it); returns its pid."""
        pid = node.raylet_pid()
        if pid is None:
            raise RuntimeError(f"no raylet running in {node.ns}")
        os.kill(pid, signal.SIGKILL)
        return pid

    def kill_node(self, node: Node, wait_s: float = 15.0) -> None:
        """SIGKILL every process of ``node``'s namespace (what a machine that loses power leaves)."""
        deadline = time.time() + wait_s
        while (pids := node.pids()) and time.time() < deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.3)

    def restart(self, node: Node, timeout_s: float = 120.0) -> None:
        """Start ``node`` again (after :meth:`kill_node`): a new raylet in the same namespace and address."""
        self.kill_node(node)
        node.temp_dir = tempfile.mkdtemp(prefix=node.name[0], dir=self.root)
        self._ray_start(node)
        if node.head:
            self._wait_dashboard(timeout_s)

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        """Kill every process in the cluster's namespaces, delete the namespaces (their veths go with them) and
        the temp dirs. Never raises."""
        for ns in reversed(self._namespaces):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                pids = ns_pids(ns)
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, sig)
                if not pids:
                    break
                deadline = time.time() + 8.0
                while ns_pids(ns) and time.time() < deadline:
                    time.sleep(0.3)
        for ns in reversed(self._namespaces):
            _ip("netns", "del", ns, check=False)
        _ip("link", "del", self.client_if, check=False)  # normally gone with the hub namespace
        self._namespaces.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> NetCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
