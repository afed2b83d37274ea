"""The generate stage's path for ``generate.agent: llm``: start or find the server, probe it, run shards on actors.

Order: (1) ``generate.llm.serve`` → start the replicas (:func:`~filegram_ray.engine.agents.serve.start_servers`),
else take ``generate.llm.base_url``; (2) probe every URL (``GET /v1/models``, ``probe_timeout_s``) — a dead server
fails the stage here, at once, with its URL (``LLMServerUnavailable``, a ``ConnectionError``: jobs print one
line and exit 2); the model name defaults to the first one served; (3) group the trajectory items into shards
(:func:`~filegram_ray.engine.agents.worker.shard_units`), one task each, run on ``generate.num_actors`` actors
with the run's executor (fault tolerance as for the simulator); (4) stop the servers the stage started. If the
server dies during the run, every session of a shard stops at once (shared flag) and the trajectories not yet
finished become error rows naming the URL (a rerun resumes them).
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
    items keyed, shards planned, the worker declared, servers stopped by :meth:`close`.

    Args:
        gcfg: the validated ``generate:`` section (``agent: llm``).
        uses_ray: whether the run's items run on Ray (else the servers start in this process).

    Raises:
        LLMServerUnavailable: a URL does not answer within ``probe_timeout_s``.
        ValueError: ``generate.llm.model`` is not served there.
    """

    def __init__(self, gcfg, uses_ray: bool):
        self.gcfg, self.cfg, self.group = gcfg, gcfg.llm, None
        cfg = gcfg.llm
        if cfg.serve is not None and not cfg.base_url:
            from filegram_ray.engine.agents.serve import start_servers

            self.group = start_servers(cfg.serve, serial=not uses_ray)
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
        self.n_shards = 0

    def fingerprint(self, unit: dict[str, Any], bundle_sha: str | None) -> str:
        """The key of an LLM trajectory: what decides it besides the server's sampling (the endpoint URL is not
        part of it: the same model may move)."""
        from filegram_ray.engine.agents.llm_agent import AGENT_VERSION
        from filegram_ray.engine.worker import GenerateWorker

        return GenerateWorker.unit_fingerprint(
            [unit["profile"], unit["task"], unit["seed"], unit.get("perturbation"), self.gcfg.upstream_quirks,
             AGENT_VERSION, self.model, self.cfg.behaviour_key()], bundle_sha)

    def shards(self, units: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """The items grouped into shards (:func:`~filegram_ray.engine.agents.worker.shard_units`)."""
        from filegram_ray.engine.agents.worker import shard_units

        shards = shard_units(units, self.cfg.shard_size or 4 * self.cfg.sessions_per_actor)
        self.n_shards = len(shards)
        return shards

    def worker(self, init_kwargs: dict[str, Any]):
        """The :class:`~filegram_ray.engine.agents.worker.LLMGenerateWorker` spec of a shard."""
        from filegram_ray.engine.agents.worker import LLMGenerateWorker
        from filegram_ray.stages.base import WorkerSpec

        kwargs = {**init_kwargs, "llm": self.cfg.model_dump(mode="json"), "base_urls": self.urls,
                  "model": self.model, "provider": self.provider, "api_key": api_key(self.cfg)}
        return WorkerSpec(LLMGenerateWorker, kwargs, num_actors=min(self.gcfg.num_actors, self.n_shards) or 1,
                          num_cpus=self.gcfg.num_cpus_per_actor)

    def report(self, rows: list[dict[str, Any]]) -> None:
        """Log how many trajectories a server that went away left undone (their error rows name it)."""
        down = [r["unit"] for r in rows if r.get("error_type") == "LLMServerUnavailable"]
        if down:
            msg = next(r.get("error") for r in rows if r.get("error_type") == "LLMServerUnavailable")
            log.error("generate: the LLM server went away; %d trajectories not generated (rerun to resume): %s",
                      len(down), msg)

    def close(self) -> None:
        """Stop the servers this run started (idempotent)."""
        if self.group is not None:
            self.group.stop()
            self.group = None
