"""The generate stage's path for ``generate.agent: llm``: start or find the server, probe it, run shards on actors.

Order: (1) ``generate.llm.serve`` → start the replicas (:func:`~filegram_ray.engine.agents.serve.start_servers`),
else take ``generate.llm.base_url``; (2) probe every URL (``GET /v1/models``, ``probe_timeout_s``) — a dead server
fails the stage here, at once, with its URL (``LLMServerUnavailable``, a ``ConnectionError``: jobs print one
line and exit 2); the model name defaults to the first one served; (3) group the units into shards
(:func:`~filegram_ray.engine.agents.worker.shard_units`) and run them on ``generate.num_actors`` actors with
the run's executor (fault tolerance as for the simulator); (4) stop the servers the stage started; (5) flatten the
shard rows into one row per trajectory. If the server dies during the run, every session of a shard stops at once
(shared flag) and the trajectories not yet finished become error rows naming the URL (a rerun resumes them).
"""

from __future__ import annotations

import logging
from typing import Any

from filegram_ray.engine.agents.llm_agent import api_key, probe_endpoint

log = logging.getLogger(__name__)

__all__ = ["LLMAgentRun", "resolve_endpoints"]


def resolve_endpoints(cfg, urls: list[str]) -> tuple[str, str]:
    """Probe every URL; returns ``(model, provider)``.

    Raises:
        LLMServerUnavailable: a URL does not answer within ``probe_timeout_s``.
        ValueError: ``generate.llm.model`` is not served there.
    """
    served: list[str] = []
    for url in urls:
        ids = probe_endpoint(url, api_key(cfg), cfg.probe_timeout_s)
        if cfg.model and cfg.model not in ids:
            raise ValueError(f"config field generate.llm.model: {cfg.model!r} is not served at {url} "
                             f"(it serves: {', '.join(ids)})")
        served = served or ids
    model = cfg.model or served[0]
    if cfg.provider:
        provider = cfg.provider
    elif cfg.serve is not None:
        provider = "vllm" if cfg.serve.kind == "vllm" else "llama.cpp"
    else:
        provider = "openai-compatible"
    return model, provider


class LLMAgentRun:
    """The LLM agent's part of one generate run (module docstring): servers started (or URLs probed) on creation,
    shards planned, the worker declared, shard rows flattened, servers stopped by :meth:`close`.

    Args:
        gcfg: the validated ``generate:`` section (``agent: llm``).
        executor: the run's executor (a serial run starts the servers in this process).

    Raises:
        LLMServerUnavailable: a URL does not answer within ``probe_timeout_s``.
        ValueError: ``generate.llm.model`` is not served there.
    """

    def __init__(self, gcfg, executor):
        self.gcfg, self.cfg, self.group = gcfg, gcfg.llm, None
        cfg = gcfg.llm
        if cfg.serve is not None and not cfg.base_url:
            from filegram_ray.engine.agents.serve import start_servers

            self.group = start_servers(cfg.serve, serial=not executor.uses_ray)
            self.urls = self.group.urls
        else:
            self.urls = cfg.urls()
        try:
            if cfg.serve is not None and not cfg.model and self.group is not None:
                cfg = cfg.model_copy(update={"model": cfg.serve.served_model_name})
            self.model, self.provider = resolve_endpoints(cfg, self.urls)
        except BaseException:
            self.close()
            raise
        self.cfg = cfg
        log.info("generate: LLM agent %s (%s) at %s", self.model, self.provider, ", ".join(self.urls))
        self.shard_list: list[dict[str, Any]] = []

    def shards(self, units: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The units grouped into shards (:func:`~filegram_ray.engine.agents.worker.shard_units`)."""
        from filegram_ray.engine.agents.worker import shard_units

        self.shard_list = shard_units(units, self.cfg.shard_size or 4 * self.cfg.sessions_per_actor)
        return self.shard_list

    def worker(self, init_kwargs: dict[str, Any]):
        """The :class:`~filegram_ray.engine.agents.worker.LLMGenerateWorker` spec of a shard."""
        from filegram_ray.engine.agents.worker import LLMGenerateWorker
        from filegram_ray.stages.base import WorkerSpec

        kwargs = {**init_kwargs, "llm": self.cfg.model_dump(mode="json"), "base_urls": self.urls,
                  "model": self.model, "provider": self.provider, "api_key": api_key(self.cfg)}
        return WorkerSpec(LLMGenerateWorker, kwargs, num_actors=min(self.gcfg.num_actors, len(self.shard_list)) or 1,
                          num_cpus=self.gcfg.num_cpus_per_actor)

    def trajectory_rows(self, shard_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One row per trajectory from the shards' rows (a failed shard: an error row for each of its units)."""
        by_shard = {r.get("unit"): r for r in shard_rows}
        rows: list[dict[str, Any]] = []
        down: list[str] = []
        for sh in self.shard_list:
            r = by_shard.get(sh["unit_id"], {"status": "error", "error": "no result"})
            if r.get("status") == "ok" and "rows" in r:
                for row in r["rows"]:
                    row.setdefault("unit", row.get("trajectory_id"))
                    rows.append(row)
                    if row.get("error_type") == "LLMServerUnavailable":
                        down.append(row["unit"])
            else:  # the whole shard failed (e.g. its actor died past max_restarts)
                for u in sh["units"]:
                    rows.append({**r, "unit": u["unit_id"], "status": "error"})
        if down:
            msg = next(r.get("error") for r in rows if r.get("error_type") == "LLMServerUnavailable")
            log.error("generate: the LLM server went away; %d trajectories not generated (rerun to resume): %s",
                      len(down), msg)
        return rows

    def close(self) -> None:
        """Stop the servers this run started (idempotent)."""
        if self.group is not None:
            self.group.stop()
            self.group = None
