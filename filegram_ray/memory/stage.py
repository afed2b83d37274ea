"""The encode stage: trajectories → Engrams → per-profile MemoryStores → embeddings and FAISS indices.

Reads ``trajectories/index.parquet`` (ids and status only), each trajectory's ``events.json`` and ``media/`` —
never ``meta.json`` (ground truth). Two steps of items, both on the run's executor
(:mod:`filegram_ray.stages.executors`: serial, actor pool or Ray Data — the same worker code everywhere):

1. ``trajectories`` — one item per trajectory (:class:`~filegram_ray.memory.encode_worker.EngramWorker`,
   ``encode_actors`` workers of ``encode_num_cpus`` CPUs) → ``engrams/<profile_id>/<task_id>.json``, keyed by
   ``upstream_quirks``; a trajectory that fails (malformed or truncated events.json …) is an error row of
   ``errors/encode.parquet`` naming it;
2. ``profiles`` — one item per profile with an Engram (:class:`~filegram_ray.memory.encode_worker.ProfileWorker`,
   ``embed_actors`` workers of ``embed_num_cpus`` CPUs, each loading the embedding model once) →
   ``memory/<profile_id>/store.json`` and ``indices/<profile_id>/{chunks,episodes}.{faiss,json}``,
   ``embedder.json``, keyed by its trajectory set and the embedder and consolidation settings (a profile is
   consolidated again when they change).

Resumable: completion records ``_done/encode/<trajectory>`` and ``_done/encode.profiles/<profile>`` (written by the
runner). ``finish`` writes ``engrams/index.parquet`` and prints the summary.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from pydantic import Field, field_validator

from filegram_ray.errors import UserError
from filegram_ray.stages.base import Row, Stage, StageOptions, WorkerSpec
from filegram_ray.stages.runner import stage_function

__all__ = ["EncodeConfig", "EncodeStage", "format_summary", "run_encode"]

STAGE = "encode"


class EncodeConfig(StageOptions):
    """The ``encode:`` section of the pipeline config (defaults here; the lead owns conf/default.yaml)."""

    embedder: str = Field("minilm", description="an embedder kind (filegram_ray.memory.embed.EMBEDDERS: 'minilm', "
                          "'minilm-int8', 'e5-small', 'hashing') or 'auto' (per profile: e5-small for mostly-CJK "
                          "texts, else minilm)")
    embed_batch_size: int = Field(64, ge=1, description="texts per forward pass of an embedder that batches")
    embed_actors: int = Field(2, ge=1, description="profile workers (each loads the embedding model once) on Ray; "
                              "2 on 2 cores: each runs its texts one per forward pass (batch-invariant vectors, "
                              "BR2-16) on one thread, which a single worker's two threads parallelise poorly "
                              "(docs/measurements/2026-12-02-pipeline.md)")
    embed_num_cpus: float = Field(0.5, gt=0, description="Ray CPUs per profile worker (≤ 0.5 on 2 CPUs, "
                                  "ENVIRONMENT_FACTS §1)")
    embed_threads: int | None = Field(None, ge=1, description="intra-op threads per profile worker; None = the "
                                      "process's CPUs / embed_actors (filegram_ray.memory.embed.default_threads)")
    encode_actors: int = Field(2, ge=1, description="Engram workers on Ray (one trajectory per unit)")
    encode_num_cpus: float = Field(0.25, gt=0, description="Ray CPUs per Engram worker (small, so it never "
                                   "deadlocks on 2 CPUs, ENVIRONMENT_FACTS §1)")
    upstream_quirks: bool = Field(False, description="reproduce upstream quirks (FILEGRAM_REFERENCE §13)")
    consolidate: dict[str, Any] = Field(default_factory=dict, description="ConsolidateConfig overrides")
    force: bool = Field(False, description="ignore completion records and redo everything")

    @field_validator("embedder")
    @classmethod
    def _known_embedder(cls, v: str) -> str:
        from filegram_ray.memory.embed import EMBEDDERS

        if v != "auto" and v not in EMBEDDERS:
            raise UserError(f"unknown embedder {v!r} (one of {', '.join(sorted(EMBEDDERS))}, or auto)")
        return v


class EncodeStage(Stage):
    """Encode: one item per trajectory (:class:`~filegram_ray.memory.encode_worker.EngramWorker`), then one item per
    profile with an Engram (:class:`~filegram_ray.memory.encode_worker.ProfileWorker`); ``finish`` writes the Engram
    index and prints the summary."""

    name = STAGE
    Config = EncodeConfig
    steps = ("trajectories", "profiles")
    #: a malformed trajectory is an error row, not a failed job: the memory of the others is built
    exit_on = "all"

    def check(self) -> None:
        """Read the trajectory index and the selection; refuse what would fail every item.

        Raises:
            StorageError: ``trajectories/index.parquet`` is missing or unreadable.
            UserError: the index lacks ``profile_id`` / ``task_id``; ``profiles`` / ``tasks`` name an id the index
                lacks (short ids such as ``p1`` match ``p1_methodical``, as in generate); the selection holds no
                trajectory generated without error.
            ResourceRequestError: ``encode_num_cpus`` / ``embed_num_cpus`` above the largest node (on Ray).
            pydantic.ValidationError: a bad ``consolidate`` override.
        """
        from filegram_ray.config import match_ids
        from filegram_ray.memory.consolidate import ConsolidateConfig

        cfg, run, config = self.opts, self.run, self.config
        self.ccfg = ConsolidateConfig.model_validate({"upstream_quirks": cfg.upstream_quirks,
                                                      **cfg.consolidate}).model_dump()
        where = "trajectories/index.parquet"
        index = run.read_table(where)
        missing = [c for c in ("profile_id", "task_id") if c not in index.columns]
        if missing:
            raise UserError(f"{run.url(where)}: column(s) {', '.join(missing)} missing")
        # the configured sets are resolved against every trajectory of the index (short ids as in generate) ...
        keep_p = set(match_ids(config.profiles, sorted(set(index["profile_id"].to_list())), "profiles", where))
        keep_t = set(match_ids(config.tasks, sorted(set(index["task_id"].to_list())), "tasks", where))
        n_selected = sum(1 for p, t in zip(index["profile_id"].to_list(), index["task_id"].to_list())
                         if p in keep_p and t in keep_t)
        # ... and only the ones generated without error are encoded
        if "status" in index.columns:
            index = index.filter(index["status"] == "ok")
        self.selected = [r for r in index.select(["profile_id", "task_id"]).sort(["profile_id", "task_id"]).to_dicts()
                         if r["profile_id"] in keep_p and r["task_id"] in keep_t]
        if not self.selected:  # 0 of N: nothing to encode is a failure, not an empty success
            raise UserError(f"encode: no trajectory to encode: {where} has {n_selected} trajectories for the "
                            f"configured profiles {config.profiles or 'all'} x tasks {config.tasks or 'all'}, none "
                            "with status ok")
        if self.uses_ray:
            import ray

            from filegram_ray.runtime import check_cpu_request

            if ray.is_initialized():  # fail fast, never wait forever (BR-08)
                check_cpu_request(cfg.encode_num_cpus, "encode.encode_num_cpus")
                check_cpu_request(cfg.embed_num_cpus, "encode.embed_num_cpus")
        self.times: dict[str, float] = {"start": time.perf_counter()}

    def items(self, step: str) -> list[dict[str, Any]]:
        """``trajectories``: one item per selected trajectory, keyed by ``upstream_quirks`` and its ``events.json``'s
        bytes (``inputs``: a trajectory generated again with other content is encoded again); ``profiles``: one item
        per profile with an Engram now, keyed by its trajectory set, the settings its memory is made with and its
        Engrams' bytes."""
        self.times[step] = time.perf_counter()
        if step == "trajectories":
            key = f"upstream_quirks={self.opts.upstream_quirks}"
            return [{"unit_id": f"{r['profile_id']}/{r['task_id']}", "profile_id": r["profile_id"],
                     "task_id": r["task_id"], "key": key,
                     "inputs": [f"trajectories/{r['profile_id']}/{r['task_id']}/events.json"],
                     "outputs": [f"engrams/{r['profile_id']}/{r['task_id']}.json"]} for r in self.selected]
        by_profile = self._engrams()
        want = self._settings()
        return [{"unit_id": pid, "profile_id": pid, "task_ids": tids,
                 "key": _key({**want, "tasks": tids}), "inputs": [f"engrams/{pid}/{t}.json" for t in tids],
                 "outputs": [f"memory/{pid}/store.json"]}
                for pid, tids in sorted(by_profile.items())]

    def _engrams(self) -> dict[str, list[str]]:
        """``{profile: its task ids with an Engram}`` from the trajectory step's rows, sorted."""
        by_profile: dict[str, list[str]] = {}
        for r in self.rows.get("trajectories", []):
            if r.ok:
                pid, _, task = r.unit.partition("/")
                by_profile.setdefault(pid, []).append(task)
        return {p: sorted(ts) for p, ts in by_profile.items()}

    def _settings(self) -> dict[str, Any]:
        """What a profile's memory is made with: the embedder setting (and, for a fixed kind, its identity) and the
        consolidation config."""
        from filegram_ray.memory.embed import make_embedder

        want: dict[str, Any] = {"embedder_setting": self.opts.embedder, "consolidate": self.ccfg}
        if self.opts.embedder != "auto":
            want["embedder"] = make_embedder(self.opts.embedder).identity()
        return want

    def worker(self, step: str) -> WorkerSpec:
        from filegram_ray.memory.embed import omp_env, run_cache_dir
        from filegram_ray.memory.encode_worker import EngramWorker, ProfileWorker

        cfg = self.opts
        if step == "trajectories":
            return WorkerSpec(EngramWorker, {"run_uri": self.run.uri, "storage_options": self.config.storage_options,
                                             "upstream_quirks": cfg.upstream_quirks},
                              num_actors=cfg.encode_actors, num_cpus=cfg.encode_num_cpus)
        actors = 1
        if self.uses_ray:
            import ray

            from filegram_ray.runtime import pool_capacity

            if ray.is_initialized():  # the pool the executor will place (it shrinks a pool that cannot fit)
                actors = max(1, min(cfg.embed_actors, pool_capacity(cfg.embed_num_cpus)))
        return WorkerSpec(ProfileWorker, {"run_uri": self.run.uri, "storage_options": self.config.storage_options,
                                          "embedder": cfg.embedder, "consolidate": self.ccfg,
                                          "batch_size": cfg.embed_batch_size, "cache_dir": run_cache_dir(self.run),
                                          "threads": cfg.embed_threads, "actors": actors},
                          num_actors=cfg.embed_actors, num_cpus=cfg.embed_num_cpus, env_vars=omp_env())

    def finish(self, rows: list[Row]) -> dict[str, Any]:
        """Write ``engrams/index.parquet`` and print the summary.

        Raises:
            UserError: no trajectory has an Engram after the stage (0 of N; the message names the first error row
                of ``errors/encode.parquet``).
        """
        import polars as pl

        from filegram_ray.memory.encode_worker import MAX_REPORTED_SKIPS

        run = self.run
        trajs, profiles = self.rows["trajectories"], self.rows["profiles"]
        new = [r for r in trajs if not r.get("skipped")]
        errors = [r for r in trajs if not r.ok]
        by_profile = self._engrams()
        eng_index = [{"trajectory_id": f"{p}/{t}", "profile_id": p, "task_id": t}
                     for p, ts in sorted(by_profile.items()) for t in ts]
        run.write_table("engrams/index.parquet", pl.DataFrame(
            eng_index, schema={"trajectory_id": pl.Utf8, "profile_id": pl.Utf8, "task_id": pl.Utf8}))
        if not by_profile:  # 0 of N: a stage that leaves no Engram at all must not look like a success
            first = f"; first error: {errors[0].unit}: {errors[0].get('error')}" if errors else ""
            raise UserError(f"encode: 0 of {len(trajs)} trajectories encoded (see errors/encode.parquet){first}")
        done = [p for p in profiles if p.ok and not p.get("skipped")]
        kinds: dict[str, int] = {}
        for p in done:
            kinds[str(p["kind"])] = kinds.get(str(p["kind"]), 0) + 1
        from filegram_ray.memory.embed import embed_dtype

        t = self.times
        summary = {
            "trajectories": self.counts["trajectories"].planned, "encoded_now": self.counts["trajectories"].done,
            "skipped_done": self.counts["trajectories"].skipped, "errors": self.counts["trajectories"].failed,
            "error_ids": [e.unit for e in errors],
            "events_skipped": sum(int(r.get("skipped_events") or 0) for r in new),
            "skipped_event_examples": [m for r in new for m in (r.get("skipped_examples") or [])][:MAX_REPORTED_SKIPS],
            "profiles": len(by_profile), "profiles_consolidated_now": self.counts["profiles"].done,
            "profile_errors": [f"{p.unit}: {p.get('error')}" for p in profiles if not p.ok],
            "texts_embedded": sum(int(p.get("texts") or 0) for p in done),
            "embedder": self.opts.embedder, "embedder_by_profile": kinds, "upstream_quirks": self.opts.upstream_quirks,
            "embed_dtype": embed_dtype(),  # the torch embedder's dtype on this machine and why
            "step_seconds": {"engrams": round(t["profiles"] - t["trajectories"], 3),
                             "profiles": round(time.perf_counter() - t["profiles"], 3),
                             **{k: round(sum(float((p.get("seconds") or {}).get(k) or 0) for p in done), 3)
                                for k in ("consolidate", "embed_index")}},
        }
        print(format_summary(summary, "serial" if not self.uses_ray else self.opts.executor), flush=True)
        return summary


def _key(value: Any) -> str:
    """A 16-hex digest of ``value`` (JSON with sorted keys): a profile item's key."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def format_summary(s: dict[str, Any], executor: str = "") -> str:
    """A one-screen summary of the encode stage's result (``executor``: where its units ran)."""
    lines = [(f"encode: {s['trajectories']} trajectories ({s['encoded_now']} encoded now, {s['skipped_done']} "
             f"already done, {s['errors']} errors), {s['profiles']} profiles ({s['profiles_consolidated_now']} "
             f"consolidated now), {s['texts_embedded']} texts embedded with {s['embedder']}"),
             f"seconds{f' ({executor})' if executor else ''}: "
             + ", ".join(f"{k}={v}" for k, v in s["step_seconds"].items())]
    if s.get("events_skipped"):
        lines.append(f"events skipped (invalid, left out of their Engram): {s['events_skipped']}")
        lines += [f"  skipped: {m}" for m in s.get("skipped_event_examples", [])]
    lines += [f"  error: {e}" for e in s["error_ids"][:10]]
    lines += [f"  profile error: {e}" for e in s["profile_errors"][:10]]
    return "\n".join(lines)


#: ``run_encode(config, **overrides)`` — e.g. ``run_encode(cfg, executor="serial")``; returns the stage
#: record (the summary above plus the runner's measurements and unit counts)
run_encode = stage_function(EncodeStage)
