"""Generate-stage actor body for the LLM agent: many trajectories in flight per actor (asyncio).

The stage hands each actor a *shard* (a task of ``generate.llm.shard_size`` trajectory items,
:func:`shard_units`); :meth:`LLMGenerateWorker.process_task` runs them as concurrent asyncio sessions — at most
``sessions_per_actor`` at once, a new one starting as soon as one finishes — so that the server always has a full
batch (vLLM's continuous batching merges the requests of every session of every actor). Tool calls run inline
between requests (they take milliseconds; the sandbox is per trajectory). Each trajectory is written as the
simulator's items are (:meth:`~filegram_ray.engine.generate.GenerateWorker.write_unit`); the runner writes the
completion records of a shard's trajectories when the shard returns.

Errors: one failing trajectory is reported as its own exception (its error row); a server that stops answering
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
from filegram_ray.engine.worker import GenerateWorker
from filegram_ray.storage import safe_unit_name

__all__ = ["LLMGenerateWorker", "shard_units"]


def shard_units(units: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    """Group trajectory items into shards (tasks) of ``size``, in order."""
    return [units[k:k + size] for k in range(0, len(units), size)]


class LLMGenerateWorker(GenerateWorker):
    """Actor body: ``process_task(shard)`` → ``(unit_id, fields or exception)`` per trajectory.

    Args (besides :class:`GenerateWorker`'s):
        llm: the ``generate.llm`` section as a dict. base_urls: the endpoints (probed by the stage).
        model: the served model name. provider: ``model_provider`` recorded in raw events.
    """

    def __init__(self, *, llm: dict[str, Any], base_urls: list[str], model: str, provider: str, api_key: str,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.cfg = LLMAgentConfig.model_validate(llm)
        self.base_urls, self.model, self.provider, self.api_key = list(base_urls), model, provider, api_key

    def process_task(self, units: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any] | BaseException]]:
        return asyncio.run(self._run_shard(units))

    async def _run_shard(self, units: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any] | BaseException]]:
        from filegram_ray.schema.task import Task

        for u in units:  # bundles built before the loop starts (building one is slow and synchronous)
            try:
                self.bundle_dir(Task.model_validate(u["task"]), int(u["seed"]))
            except Exception:  # noqa: BLE001 - reported by the unit itself below
                pass
        endpoints = [ChatEndpoint(url, self.model, api_key=self.api_key, timeout_s=self.cfg.request_timeout_s,
                                  retries=self.cfg.retries, backoff_s=self.cfg.backoff_s, jitter_seed=k)
                     for k, url in enumerate(self.base_urls)]
        down = {e.base_url: asyncio.Event() for e in endpoints}
        sem = asyncio.Semaphore(self.cfg.sessions_per_actor)

        async def one(u: dict[str, Any]) -> tuple[str, dict[str, Any] | BaseException]:
            uid = u["unit_id"]
            ep = endpoints[_endpoint_index(uid, len(endpoints))]
            async with sem:
                if down[ep.base_url].is_set():
                    return uid, LLMServerUnavailable(f"LLM server at {ep.base_url} is down")
                try:
                    return uid, await self._one(u, ep, down[ep.base_url])
                except Exception as exc:  # noqa: BLE001 - one trajectory never sinks the shard
                    return uid, exc

        try:
            return list(await asyncio.gather(*(one(u) for u in units)))
        finally:
            for e in endpoints:
                await e.aclose()

    async def _one(self, u: dict[str, Any], ep: ChatEndpoint, down: asyncio.Event) -> dict[str, Any]:
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
                 "completed": sess.completed, "llm_wall_s": round(res.wall_s, 3),
                 "bundle_sha256": u.get("bundle_sha256")}
        return self.write_unit(uid, profile, task, seed, pert, dest, written, t0, agent_kind="llm-agent",
                               agent_version=f"{AGENT_VERSION}:{self.model}", record_extra=extra)


def _endpoint_index(uid: str, n: int) -> int:
    """Stable endpoint of a trajectory (its requests stay on one replica: prefix caching)."""
    return int(hashlib.sha256(uid.encode()).hexdigest()[:8], 16) % max(1, n)
