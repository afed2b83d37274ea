"""A real local Ray head for job-submission tests: ``ray start --head`` kept on loopback.

Ray binds the machine's external address by default; ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` together with
``--node-ip-address=127.0.0.1`` keeps every listener on 127.0.0.1 (ENVIRONMENT_FACTS §1). The head gets its own
temp dir and is stopped by killing exactly the processes that belong to it (``ray stop`` would stop every Ray
on the machine, including the test session's own).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_cli() -> list[str]:
    """The ``ray`` command of the interpreter running the tests: the ``ray`` script next to ``sys.executable``
    (a venv's ``bin/``), else ``python -m ray.scripts.scripts``. Never a ``ray`` that happens to be first on
    ``PATH`` — a venv's python may run pytest without the venv on ``PATH``."""
    script = Path(sys.executable).parent / "ray"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "ray.scripts.scripts"]


def head_env() -> dict[str, str]:
    """Environment of the head and of ``ray job`` calls: loopback, no auth, and this interpreter's ``bin/`` first on
    ``PATH`` so a job entrypoint ``python …`` and Ray's own helpers run the interpreter that runs the tests."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update({"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
                "RAY_AUTH_MODE": "disabled"})
    env.pop("RAY_ADDRESS", None)
    return env


def _pids_with(marker: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd and int(d.name) != os.getpid():
            pids.append(int(d.name))
    return pids


def wait_for_dashboard(url: str, timeout_s: float) -> None:
    """Return once the Ray dashboard at ``url`` answers ``/api/version``; RuntimeError after ``timeout_s``."""
    deadline = time.time() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/version", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            if time.time() > deadline:
                raise RuntimeError(f"Ray dashboard at {url} did not come up") from None
            time.sleep(1.0)


@contextlib.contextmanager
def local_head(num_cpus: int = 2, timeout_s: float = 90.0):
    """Start a Ray head on loopback; yields ``(dashboard_url, env)``; stops it afterwards."""
    temp_dir = tempfile.mkdtemp(prefix="fgray-", dir="/tmp")  # short: Ray's socket paths have a length limit
    gcs, dash = free_port(), free_port()
    env = head_env()
    # Every listener on its own free port: another Ray on the machine (the test session's own, say) holds the
    # defaults, e.g. the dashboard agent's 52365, and then `ray job submit` answers "No available agent".
    ports = {flag: free_port() for flag in ("dashboard-agent-listen-port", "dashboard-agent-grpc-port",
                                            "metrics-export-port", "runtime-env-agent-port", "node-manager-port",
                                            "object-manager-port", "ray-client-server-port")}
    cmd = [*ray_cli(), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={gcs}",
           "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}", f"--num-cpus={num_cpus}",
           f"--temp-dir={temp_dir}", "--disable-usage-stats", "--include-dashboard=true",
           *[f"--{flag}={port}" for flag, port in ports.items()]]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        raise RuntimeError(f"ray start failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    url = f"http://127.0.0.1:{dash}"
    try:
        wait_for_dashboard(url, timeout_s)
        yield url, env
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = _pids_with(temp_dir) + _pids_with(f"--gcs-address=127.0.0.1:{gcs}")
            for pid in set(pids):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            if not pids:
                break
            time.sleep(3.0)


def submit_job(url: str, env: dict[str, str], working_dir: str, entrypoint: list[str], *,
               runtime_env_json: str | None = None, timeout_s: float = 600.0,
               agent_wait_s: float = 360.0) -> subprocess.CompletedProcess:
    """``ray job submit`` (waits for the job; exit code non-zero when the job fails).

    Retries while the head's job agent is still starting ("No available agent to submit job").
    """
    cmd = [*ray_cli(), "job", "submit", "--address", url, "--working-dir", working_dir]
    if runtime_env_json:
        cmd += ["--runtime-env-json", runtime_env_json]
    cmd += ["--", *entrypoint]
    deadline = time.time() + agent_wait_s
    while True:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0 and "No available agent" in proc.stderr and time.time() < deadline:
            time.sleep(3.0)
            continue
        return proc
