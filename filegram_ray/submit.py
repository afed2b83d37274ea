"""``filegram submit``: submit a job to a Ray cluster and follow it, like ``ray job submit``, and say plainly what
happened when the cluster's head node goes away.

A job's driver runs on the head node, so a lost head ends the job with it. ``ray job submit`` then ends with a
Python traceback (``RuntimeError: WebSocket connection closed unexpectedly with close code 1006``, Ray 2.60);
this command ends with one line naming the head, the job, the last stage the job's log showed, and what to do: the
run directory keeps every finished unit, so the same command, submitted again once a head is back, resumes.

Exit codes: 0 the job succeeded; 1 it failed or was stopped (its status and message are printed); 2 a user mistake
(no address, nothing answers there, no entrypoint); 3 the head stopped answering while the job ran.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import sys
import time
from typing import Any

from filegram_ray.errors import UserError

__all__ = ["submit_job", "register", "HEAD_LOST"]

#: exit code when the head node stopped answering while the job ran
HEAD_LOST = 3
#: how long the job's status is asked for after its log stream broke, before the head counts as lost (seconds)
STATUS_GRACE_S = 20.0
_STAGE_LINE = re.compile(r"^=== stage (\S+) ===$", re.M)


def _client(address: str):
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(address)
    except Exception as exc:  # noqa: BLE001 - ConnectionError, or Ray's RuntimeError wrapping one
        raise UserError(f"no Ray dashboard answers at {address} ({type(exc).__name__}): start the cluster (or "
                        "port-forward its dashboard, 8265) and pass --address / RAY_ADDRESS") from None


def _status(client, job_id: str, grace_s: float) -> Any | None:
    """The job's status, asked for up to ``grace_s`` seconds; None when the head never answers."""
    deadline = time.monotonic() + grace_s
    while True:
        try:
            return client.get_job_status(job_id)
        except Exception:  # noqa: BLE001 - connection refused / reset: the head is gone (or restarting)
            if time.monotonic() > deadline:
                return None
            time.sleep(2.0)


def submit_job(address: str, entrypoint: list[str], *, runtime_env: dict[str, Any] | None = None,
               submission_id: str | None = None, wait: bool = True, out=None,
               status_grace_s: float = STATUS_GRACE_S) -> int:
    """Submit ``entrypoint`` to the Ray cluster whose dashboard is at ``address`` and follow its log until it ends.

    Args:
        address: the dashboard's URL (``http://HEAD:8265``).
        entrypoint: the command the job runs (``["python", "jobs/pipeline.py", ...]``).
        runtime_env: Ray runtime environment (``working_dir`` is uploaded from this machine).
        submission_id: the job's id (Ray makes one when None).
        wait: follow the log and wait for the job's end; False returns once the job is submitted.
        out: where the job's log goes (default stdout).
        status_grace_s: how long a broken log stream may go without an answer from the head before the job counts
            as lost with it.

    Returns:
        0 succeeded (or submitted, without ``wait``), 1 failed or stopped, :data:`HEAD_LOST` the head stopped
        answering.

    Raises:
        UserError: nothing answers at ``address``; an empty entrypoint.
    """
    if not entrypoint:
        raise UserError("no entrypoint: filegram submit [options] -- python jobs/pipeline.py …")
    out = out or sys.stdout
    client = _client(address)
    job_id = client.submit_job(entrypoint=shlex.join(entrypoint), runtime_env=runtime_env or None,
                               submission_id=submission_id)
    print(f"submitted job {job_id} to {address}", file=sys.stderr, flush=True)
    if not wait:
        return 0
    stages: list[str] = []

    async def follow() -> None:
        async for chunk in client.tail_job_logs(job_id):
            out.write(chunk)
            out.flush()
            stages.extend(_STAGE_LINE.findall(chunk))

    broken = None
    try:
        asyncio.run(follow())
    except Exception as exc:  # noqa: BLE001 - the stream broke: the job's status decides what it means
        broken = exc
    status = _status(client, job_id, status_grace_s if broken else 5.0)
    if status is None:
        where = f" in stage {stages[-1]}" if stages else ""
        print(f"error: the Ray head at {address} stopped answering while job {job_id} ran{where} (the head node was "
              "lost?): the job ended with it. The run directory keeps every finished unit: once a head is back, "
              "submit the same command again and it resumes", file=sys.stderr, flush=True)
        return HEAD_LOST
    from ray.job_submission import JobStatus

    if not status.is_terminal():  # the stream broke but the head answers: wait for the end
        while not (status := _status(client, job_id, status_grace_s) or status).is_terminal():
            time.sleep(2.0)
    if status == JobStatus.SUCCEEDED:
        print(f"job {job_id} succeeded", file=sys.stderr, flush=True)
        return 0
    try:
        message = client.get_job_info(job_id).message or ""
    except Exception:  # noqa: BLE001
        message = ""
    print(f"error: job {job_id} {status.value.lower()}" + (f": {message}" if message else ""), file=sys.stderr,
          flush=True)
    return 1


def _runtime_env(args: argparse.Namespace) -> dict[str, Any]:
    env: dict[str, Any] = {}
    if args.runtime_env:
        from filegram_ray.limits import load_yaml_file

        try:
            env = load_yaml_file(args.runtime_env) or {}
        except OSError as exc:
            raise UserError(f"--runtime-env {args.runtime_env}: {exc.strerror}") from None
        if not isinstance(env, dict):
            raise UserError(f"--runtime-env {args.runtime_env}: not a mapping")
    if args.runtime_env_json:
        from filegram_ray.limits import load_json

        extra = load_json(args.runtime_env_json, "--runtime-env-json")
        if not isinstance(extra, dict):
            raise UserError("--runtime-env-json: not a JSON object")
        env.update(extra)
    if args.working_dir:
        env["working_dir"] = args.working_dir
    return env


def _main(args: argparse.Namespace) -> int:
    address = args.address or os.environ.get("RAY_ADDRESS")
    if not address:
        raise UserError("no cluster given: --address http://HEAD:8265 (or RAY_ADDRESS)")
    entry = list(args.entrypoint)
    if entry[:1] == ["--"]:
        entry = entry[1:]
    return submit_job(address, entry, runtime_env=_runtime_env(args), submission_id=args.submission_id,
                      wait=not args.no_wait)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "submit", help="submit a job to a Ray cluster (as ray job submit) and say plainly when its head is lost",
        description="Submit a job to a Ray cluster and follow its log, like `ray job submit`; when the head node "
                    "stops answering, end with one line saying so and how to resume, not a traceback.",
        epilog="example: filegram submit --address http://HEAD:8265 --working-dir . -- python jobs/pipeline.py "
               "--run-dir s3://bucket/run-001. Exit codes: 0 succeeded, 1 failed or stopped, 2 a usage mistake, "
               "3 the head stopped answering (resubmit the same command to resume).")
    p.add_argument("--address", help="the cluster's dashboard URL (default: RAY_ADDRESS)")
    p.add_argument("--working-dir", help="a local directory uploaded as the job's working directory")
    p.add_argument("--runtime-env", help="a runtime environment YAML file (cluster/runtime_env.yaml)")
    p.add_argument("--runtime-env-json", help="runtime environment as JSON, laid over --runtime-env")
    p.add_argument("--submission-id", help="the job's id (default: Ray makes one)")
    p.add_argument("--no-wait", action="store_true", help="return once the job is submitted")
    p.add_argument("entrypoint", nargs=argparse.REMAINDER, help="-- then the command the job runs")
    p.set_defaults(func=_main)
