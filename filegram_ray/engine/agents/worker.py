"""Generate-stage actor body for the LLM agent: many trajectories in flight per actor (asyncio).

The stage hands each actor a *shard* (``{"unit_id": "llm-shard-0003", "units": [...]}``, ``generate.llm.shard_size``
trajectories); :meth:`LLMGenerateWorker.process` runs them as concurrent asyncio sessions — at most
``sessions_per_actor`` at once, a new one starting as soon as one finishes — so that the server always has a full
batch (vLLM's continuous batching merges the requests of every session of every actor). Tool calls run inline
between requests (they take milliseconds; the sandbox is per trajectory). Each trajectory is written and gets its
own completion record the moment it finishes, exactly as the simulator's units do
(:meth:`~filegram_ray.engine.generate.GenerateWorker.write_unit`), so a rerun or a resubmitted shard skips it.

Errors: one failing trajectory becomes its own error row; a server that stops answering
(:class:`~filegram_ray.engine.agents.llm_agent.LLMServerUnavailable`) stops the whole shard at once (a shared flag,
no per-session retries) and its unfinished trajectories become error rows naming the URL.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import time
from typing import Any

from filegram_ray.engine.agents.llm_agent import (
    AGENT_VERSION,
    ChatEndpoint,
    LLMAgentConfig,
    LLMServerUnavailable,
    run_llm_trajectory,
)
from filegram_ray.engine.worker import STAGE, GenerateWorker
from filegram_ray.stages.base import Row
from filegram_ray.storage import safe_unit_name

__all__ = ["LLMGenerateWorker", "shard_units"]


def shard_units(units: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """Group work units into shards of ``size`` (in order); a shard's ``unit_id`` is ``llm-shard-<k>``."""
    return [{"unit_id": f"llm-shard-{k // size:04d}", "units": units[k:k + size]}
            for k in range(0, len(units), size)]


class LLMGenerateWorker(GenerateWorker):
    """Actor body: ``process(shard)`` → ``{"rows": [one result row per trajectory]}``.

    Args (besides :class:`GenerateWorker`'s):
        llm: the ``generate.llm`` section as a dict. base_urls: the endpoints (probed by the stage).
        model: the served model name. provider: ``model_provider`` recorded in raw events.
    """

    def __init__(self, *, llm: dict[str, Any], base_urls: list[str], model: str, provider: str, api_key: str,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.cfg = LLMAgentConfig.model_validate(llm)
        self.base_urls, self.model, self.provider, self.api_key = list(base_urls), model, provider, api_key

    def fingerprint(self, unit: dict[str, Any], bundle_sha: str | None) -> str:
        """What decides the trajectory besides the server's sampling: a finished unit is reused only if it
        matches (the endpoint URL is not part of it: the same model may move)."""
        return self.unit_fingerprint(
            [unit["profile"], unit["task"], unit["seed"], unit.get("perturbation"), self.upstream_quirks,
             AGENT_VERSION, self.model, self.cfg.behaviour_key()], bundle_sha)

    def process(self, unit: dict[str, Any]) -> dict[str, Any]:
        units = list(unit.get("units") or [unit])
        return {"status": "ok", "rows": asyncio.run(self._run_shard(units))}

    async def _run_shard(self, units: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from filegram_ray.schema.task import Task

        rows: list[dict[str, Any]] = []
        todo = []
        for u in units:
            sha = self.bundle_hash(str(u["task"]["task_id"]))
            fp = self.fingerprint(u, sha)
            done = self.finished_row(u, fp, sha)
            if done is not None:
                rows.append(done)
            else:
                todo.append((u, (fp, sha)))
        for u, _ in todo:  # bundles built before the loop starts (building one is slow and synchronous)
            try:
                self.bundle_dir(Task.model_validate(u["task"]), int(u["seed"]))
            except Exception:  # noqa: BLE001 - reported by the unit itself below
                pass
        endpoints = [ChatEndpoint(url, self.model, api_key=self.api_key, timeout_s=self.cfg.request_timeout_s,
                                  retries=self.cfg.retries, backoff_s=self.cfg.backoff_s, jitter_seed=k)
                     for k, url in enumerate(self.base_urls)]
        down = {e.base_url: asyncio.Event() for e in endpoints}
        sem = asyncio.Semaphore(self.cfg.sessions_per_actor)

        async def one(k: int, u: dict[str, Any], key: tuple[str, str | None]) -> dict[str, Any]:
            uid = u["unit_id"]
            ep = endpoints[_endpoint_index(uid, len(endpoints))]
            async with sem:
                if down[ep.base_url].is_set():
                    return Row.error(uid, LLMServerUnavailable(f"LLM server at {ep.base_url} is down"), STAGE)
                try:
                    return await self._one(u, key, ep, down[ep.base_url])
                except Exception as exc:  # one trajectory never sinks the shard
                    return Row.error(uid, exc, STAGE)

        try:
            rows += await asyncio.gather(*(one(k, u, key) for k, (u, key) in enumerate(todo)))
        finally:
            for e in endpoints:
                await e.aclose()
        return rows

    async def _one(self, u: dict[str, Any], key: tuple[str, str | None], ep: ChatEndpoint,
                   down: asyncio.Event) -> dict[str, Any]:
        from filegram_ray.schema.profile import Profile
        from filegram_ray.schema.task import Task

        uid = u["unit_id"]
        t0 = time.perf_counter()
        profile = Profile.model_validate(u["profile"])
        task = Task.model_validate(u["task"])
        seed = int(u["seed"])
        pert = u.get("perturbation")
        bdir = self.bundle_dir(task, seed)
        work = self.tmp / "work" / safe_unit_name(uid)
        res = await run_llm_trajectory(profile, task, bdir, work, seed=seed, endpoint=ep, cfg=self.cfg,
                                       perturbation=pert, provider=self.provider,
                                       upstream_quirks=self.upstream_quirks, down=down)
        sess = res.session
        dest = self.tmp / "traj" / profile.profile_id / task.task_id
        shutil.rmtree(dest, ignore_errors=True)
        try:
            info = sess.write_trajectory(dest)
            started = sess.events[0]["timestamp"] if sess.events else 0.0
            written = {"info": info, "started": started, "duration": sess.clock_ms - started,
                       "outputs": sess.output_files(), "sandbox": sess.sandbox_record(),
                       "completed": sess.completed}
        finally:
            sess.close()
        data = (json.dumps(res.transcript, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
        (dest / "transcript.json.tmp").write_bytes(data)
        os.replace(dest / "transcript.json.tmp", dest / "transcript.json")
        extra = {"agent": "llm", "stop_reason": res.stop_reason, "iterations": res.iterations,
                 "tool_calls": res.tool_calls, "malformed_calls": res.malformed_calls,
                 "prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens,
                 "completed": sess.completed, "llm_wall_s": round(res.wall_s, 3)}
        fp, sha = key
        return self.write_unit(uid, profile, task, seed, pert, dest, written, t0, fp, sha, agent_kind="llm-agent",
                               agent_version=f"{AGENT_VERSION}:{self.model}", record_extra=extra)


def _endpoint_index(uid: str, n: int) -> int:
    """Stable endpoint of a trajectory (its requests stay on one replica: prefix caching)."""
    return int(hashlib.sha256(uid.encode()).hexdigest()[:8], 16) % max(1, n)
