"""The encode stage: trajectories → Engrams → per-profile MemoryStores → embeddings and FAISS indices.

Reads ``trajectories/index.parquet`` (ids and status only), each trajectory's ``events.json`` and ``media/`` —
never ``meta.json`` (ground truth). Two rounds of units, both on the run's executor
(:mod:`filegram_ray.stages.executors`: serial, actor pool or Ray Data — the same worker code everywhere):

1. one unit per trajectory (:class:`~filegram_ray.memory.encode_worker.EngramWorker`, ``encode_actors`` workers of
   ``encode_num_cpus`` CPUs) → ``engrams/<profile_id>/<task_id>.json``; then ``engrams/errors.parquet`` (one row per
   trajectory that failed — malformed or truncated events.json … — naming it) and ``engrams/index.parquet``;
2. in :meth:`EncodeStage.finish`, one unit per profile whose trajectories, Engrams or settings changed
   (:class:`~filegram_ray.memory.encode_worker.ProfileWorker`, ``embed_actors`` workers of ``embed_num_cpus``
   CPUs, each loading the embedding model once) → ``memory/<profile_id>/store.json`` and
   ``indices/<profile_id>/{chunks,episodes}.{faiss,json}``, ``embedder.json``.

Resumable: completion records ``_done/encode/<trajectory>`` (written by the runner; records of runs made before the
stage contract, ``_done/encode.engram/``, are read too) and ``_done/encode.profile/<profile>`` (written here from
the profile rows; it holds the trajectory set and the settings: a profile is redone when they change).
"""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from filegram_ray.errors import UserError
from filegram_ray.memory.api import (  # noqa: F401 - re-exported: callers import them from the stage module
    FileGramMemory,
    build_store_from_trajectory_dirs,
    load_engram,
    load_memory,
    load_store,
)
from filegram_ray.memory.encode_worker import MAX_REPORTED_SKIPS, EngramWorker, ProfileWorker
from filegram_ray.stages.base import Row, Stage, WorkerSpec
from filegram_ray.stages.runner import stage_function

__all__ = ["EncodeConfig", "EncodeStage", "FileGramMemory", "build_store_from_trajectory_dirs", "format_summary",
           "load_engram", "load_memory", "load_store", "run_encode"]

STAGE = "encode"
#: completion records of the per-profile units (one file per profile: its trajectory set and settings)
STAGE_PROFILE = "encode.profile"
#: where runs made before the stage contract (issue #29) keep their per-trajectory completion records
LEGACY_STAGE_ENGRAM = "encode.engram"


class EncodeConfig(BaseModel):
    """The ``encode:`` section of the pipeline config (defaults here; the lead owns conf/default.yaml)."""

    model_config = ConfigDict(extra="forbid")
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
    serial: bool = Field(False, description="run every unit in this process without Ray (the serial executor)")

    @field_validator("embedder")
    @classmethod
    def _known_embedder(cls, v: str) -> str:
        from filegram_ray.memory.embed import EMBEDDERS

        if v != "auto" and v not in EMBEDDERS:
            raise UserError(f"unknown embedder {v!r} (one of {', '.join(sorted(EMBEDDERS))}, or auto)")
        return v


def _settings(value: Any) -> Any:
    """``value`` as its completion record stores it (JSON with sorted keys, read back)."""
    return json.loads(json.dumps(value, sort_keys=True))


class EncodeStage(Stage):
    """Encode: one unit per trajectory (:class:`~filegram_ray.memory.encode_worker.EngramWorker`); ``finish``
    writes the Engram tables, then runs one unit per changed profile
    (:class:`~filegram_ray.memory.encode_worker.ProfileWorker`) on the same executor and prints the summary."""

    name = STAGE
    Config = EncodeConfig
    extras = ()

    @classmethod
    def exit_code(cls, record: dict[str, Any]) -> int:
        """1 only when no trajectory could be encoded (a malformed trajectory is an error row, not a failed job:
        the memory of the others is built)."""
        return 1 if record.get("errors") and record.get("errors") == record.get("trajectories") else 0

    def check(self) -> None:
        """Read the trajectory index and the selection; refuse what would fail every unit.

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
        if self.executor.uses_ray:
            import ray

            from filegram_ray.runtime import check_cpu_request

            if ray.is_initialized():  # fail fast, never wait forever (BR-08)
                check_cpu_request(cfg.encode_num_cpus, "encode.encode_num_cpus")
                check_cpu_request(cfg.embed_num_cpus, "encode.embed_num_cpus")

    def plan(self) -> list[dict[str, Any]]:
        if self.opts.force:  # a unit that fails now must not pass as finished on the next run
            for stage in (STAGE, LEGACY_STAGE_ENGRAM, STAGE_PROFILE):
                self.run.clear_done(stage)
        self.units = {f"{r['profile_id']}/{r['task_id']}": r for r in self.selected}
        self._t_units = time.perf_counter()
        return [{"unit_id": tid, "profile_id": r["profile_id"], "task_id": r["task_id"]}
                for tid, r in self.units.items()]

    def _engram_record(self, tid: str) -> dict[str, Any] | None:
        """The completion record of trajectory ``tid`` (this stage's, else a pre-contract run's), or None."""
        for stage in (STAGE, LEGACY_STAGE_ENGRAM):
            rel = f"_done/{stage}/{self._done_name(tid)}.json"
            if self.run.exists(rel):
                return self.run.read_json(rel)
        return None

    def finished(self, unit: dict[str, Any]) -> Row | None:
        """An Engram is finished when its completion record was made with this run's ``upstream_quirks`` (a record
        without it counts as the default) and the Engram exists; else it is redone (never two plans mixed)."""
        tid = unit["unit_id"]
        rec = None if self.opts.force else self._engram_record(tid)
        if rec is None or bool(rec.get("upstream_quirks", False)) != self.opts.upstream_quirks or \
                not self.run.exists(f"engrams/{unit['profile_id']}/{unit['task_id']}.json"):
            return None
        return Row({**rec, "unit": tid, "status": "ok", "skipped": True})

    def worker(self) -> WorkerSpec:
        return WorkerSpec(EngramWorker, {"run_uri": self.run.uri, "storage_options": self.config.storage_options,
                                         "upstream_quirks": self.opts.upstream_quirks},
                          num_actors=self.opts.encode_actors, num_cpus=self.opts.encode_num_cpus)

    def done_record(self, row: Row) -> dict[str, Any]:
        return {"events": row.get("events"), "skipped_events": row.get("skipped_events"),
                "upstream_quirks": bool(row.get("upstream_quirks"))}

    # -- second round: profiles ------------------------------------------------------------------------------
    def _profile_worker(self) -> WorkerSpec:
        from filegram_ray.memory.embed import omp_env, run_cache_dir

        cfg = self.opts
        actors = 1
        if self.executor.uses_ray:
            import ray

            from filegram_ray.runtime import pool_capacity

            if ray.is_initialized():  # the pool the executor will place (it shrinks a pool that cannot fit)
                actors = max(1, min(cfg.embed_actors, pool_capacity(cfg.embed_num_cpus)))
        return WorkerSpec(ProfileWorker, {"run_uri": self.run.uri, "storage_options": self.config.storage_options,
                                          "embedder": cfg.embedder, "consolidate": self.ccfg,
                                          "batch_size": cfg.embed_batch_size, "cache_dir": run_cache_dir(self.run),
                                          "threads": cfg.embed_threads, "actors": actors},
                          num_actors=cfg.embed_actors, num_cpus=cfg.embed_num_cpus, env_vars=omp_env())

    def _profile_current(self, pid: str, tids: list[str], redone: set[str], want: dict[str, Any]) -> bool:
        """Same trajectories, none of their Engrams redone now, same embedder and consolidation settings."""
        rel = f"_done/{STAGE_PROFILE}/{self._done_name(pid)}.json"  # one file per profile
        done = self.run.read_json(rel) if self.run.exists(rel) else None
        return bool(done) and sorted(done.get("tasks", [])) == sorted(tids) and \
            not redone & {f"{pid}/{t}" for t in tids} and \
            all(done.get(k, "minilm" if k == "embedder_setting" else None) == v for k, v in want.items())

    def _profile_round(self, by_profile: dict[str, list[str]], redone: set[str]) -> list[Row]:
        """Run :class:`~filegram_ray.memory.encode_worker.ProfileWorker` over the profiles that are not current;
        each ok row's completion record is written as it arrives."""
        from filegram_ray.memory.embed import make_embedder

        cfg = self.opts
        # what a finished profile must have been made with: the embedder setting (its identity, for a fixed kind)
        # and the consolidation config, as its completion record stores them
        want = _settings({"embedder_setting": cfg.embedder, "consolidate": self.ccfg})
        if cfg.embedder != "auto":
            want["embedder"] = _settings(make_embedder(cfg.embedder).identity())
        pending = [{"unit_id": pid, "profile_id": pid, "task_ids": sorted(tids)}
                   for pid, tids in sorted(by_profile.items()) if not self._profile_current(pid, tids, redone, want)]
        if not pending:
            return []

        def record(row: Row) -> None:
            if row.ok:
                self.run.mark_done(STAGE_PROFILE, row.unit, {
                    **_settings({k: row[k] for k in ("embedder", "embedder_setting", "consolidate")}),
                    "tasks": row["tasks"], "chunks": row["chunks"], "episodes": row["episodes"], "kind": row["kind"]})

        return self.map(self._profile_worker(), pending, on_row=record, label=STAGE_PROFILE)

    def finish(self, rows: list[Row]) -> dict[str, Any]:
        """Write ``engrams/errors.parquet`` and ``engrams/index.parquet``, run the profile round, print the summary.

        Raises:
            UserError: no trajectory has an Engram after the stage (0 of N; ``engrams/errors.parquet`` is written
                first and the message names the first error).
        """
        import polars as pl

        t_engram = time.perf_counter() - self._t_units
        run = self.run
        new = [r for r in rows if not r.get("skipped")]
        errors = [r for r in rows if not r.ok]
        err_schema = {"trajectory_id": pl.Utf8, "profile_id": pl.Utf8, "task_id": pl.Utf8, "error_type": pl.Utf8,
                      "error": pl.Utf8}
        err_rows = [{"trajectory_id": e.unit, "profile_id": self.units[e.unit]["profile_id"],
                     "task_id": self.units[e.unit]["task_id"], "error_type": e.get("error_type"),
                     "error": f"{e.unit}: {e.get('error')}"[:2000]} for e in errors]
        run.write_table("engrams/errors.parquet", pl.DataFrame(err_rows, schema=err_schema))

        by_profile: dict[str, list[str]] = {}
        for r in rows:
            if r.ok:
                u = self.units[r.unit]
                by_profile.setdefault(u["profile_id"], []).append(u["task_id"])
        eng_index = [{"trajectory_id": f"{p}/{t}", "profile_id": p, "task_id": t}
                     for p, ts in sorted(by_profile.items()) for t in sorted(ts)]
        run.write_table("engrams/index.parquet", pl.DataFrame(
            eng_index, schema={"trajectory_id": pl.Utf8, "profile_id": pl.Utf8, "task_id": pl.Utf8}))
        if not by_profile:  # 0 of N: a stage that leaves no Engram at all must not look like a success
            first = f"; first error: {err_rows[0]['error']}" if err_rows else ""
            raise UserError(f"encode: 0 of {len(rows)} trajectories encoded (see engrams/errors.parquet){first}")

        t2 = time.perf_counter()
        profiles = self._profile_round(by_profile, {r.unit for r in new if r.ok})
        done = [p for p in profiles if p.ok]
        kinds: dict[str, int] = {}
        for p in done:
            kinds[str(p["kind"])] = kinds.get(str(p["kind"]), 0) + 1
        from filegram_ray.memory.embed import embed_dtype

        summary = {
            "trajectories": len(rows), "encoded_now": len(new) - len(errors), "skipped_done": len(rows) - len(new),
            "errors": len(errors), "error_ids": [e.unit for e in errors],
            "events_skipped": sum(int(r.get("skipped_events") or 0) for r in new),
            "skipped_event_examples": [m for r in new for m in (r.get("skipped_examples") or [])][:MAX_REPORTED_SKIPS],
            "profiles": len(by_profile), "profiles_consolidated_now": len(done),
            "profile_errors": [f"{p.unit}: {p.get('error')}" for p in profiles if not p.ok],
            "texts_embedded": sum(int(p.get("texts") or 0) for p in done),
            "embedder": self.opts.embedder, "embedder_by_profile": kinds, "upstream_quirks": self.opts.upstream_quirks,
            "embed_dtype": embed_dtype(),  # the torch embedder's dtype on this machine and why (issue 31)
            "step_seconds": {"engrams": round(t_engram, 3), "profiles": round(time.perf_counter() - t2, 3),
                             **{k: round(sum(float((p.get("seconds") or {}).get(k) or 0) for p in done), 3)
                                for k in ("consolidate", "embed_index")}},
        }
        print(format_summary(summary, self.executor.name), flush=True)
        return summary


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


#: ``run_encode(config, executor=None, **overrides)`` — e.g. ``run_encode(cfg, serial=True)``; returns the stage
#: record (the summary above plus the runner's measurements and unit counts)
run_encode = stage_function(EncodeStage)
