"""Generate stage: one trajectory per (profile, task) with the persona simulator, on a pool of Ray actors.

Inputs: the profile and task sets of the config, ``workspaces/<task_id>/`` bundles from the seed stage.
Outputs (COMMON.md run layout)::

    trajectories/<profile_id>/<task_id>/{events_raw.json, events.json, media/, outputs/, summary.json, meta.json}
    trajectories/index.parquet     (trajectory_id, profile_id, task_id, status, n_events_raw, n_events, perturbed, error)
    trajectories/outputs.parquet   (trajectory_id, profile_id, task_id, path, file_type, bytes, sha256)
    _done/generate/<unit>.json     completion record per trajectory (written last: a rerun skips finished units)
    run.json                       stage record (options, counts, wall time)

Bundles: the stage reads the seed stage's ``workspaces/<task_id>/`` bundles; its door (``jobs/generate.py``,
``filegram run generate``, :func:`run_generate`) runs the seed stage first for the run's tasks (``needs`` in
:data:`~filegram_ray.stage_list.STAGES`; a finished bundle is skipped), so the run holds the bundles its
trajectories were made from. Should a bundle still be missing, the worker builds it on the fly with
``build_bundle(task, seed)`` into its own temp dir (deterministic: the same bytes) and the item goes on.

Perturbations (ref §5.7): the plan proposes 5 shifted units per profile. With
``generate.verify_perturbations`` (default on) a perturbed unit is simulated a second time without its shift
(the counterfactual) and the perturbed dimension's fingerprint features (ref §7.3) are compared. A shift that
changes none of them is a no-op: the task's other active dimensions are tried in turn
(:func:`filegram_ray.profiles.perturbation.alternatives`), and when none changes anything the unit is kept
unperturbed. ``meta.json`` ``perturbation_check`` records the status (real | replaced | dropped), the plan, what
was tried, both fingerprints and the shift; the index's ``perturbed`` column and the stage record follow what was
applied. Cost: one extra simulation per perturbed unit (≈ 16 % more work for 5 of 32).

LLM agent (``generate.agent: llm``): the same items, grouped into shards of concurrent sessions and run by
:mod:`filegram_ray.engine.agents` against an OpenAI-compatible server (``generate.llm``); same files plus
``transcript.json``. Its perturbations are applied as planned through the prompt (no counterfactual run: the
model's sampling is not reproducible).

Fault tolerance: the stage runs on the stage contract (:mod:`filegram_ray.stages`): an item is one trajectory,
keyed by its fingerprint (everything that decides its bytes, the bundle's content included); a failing item becomes
an error row, an actor that dies is restarted and its task resubmitted (the executors); the runner skips a
trajectory whose completion record holds the item's fingerprint and whose ``events.json`` exists; a trajectory is
written with atomic files and the runner writes its completion record after them, so a resubmitted or rerun item
rewrites identical bytes and is never counted twice.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections import Counter
from typing import Any, Literal

from pydantic import Field, model_validator

from filegram_ray.config import PipelineConfig, match_ids, names_id
from filegram_ray.engine.agents.llm_agent import LLMAgentConfig
from filegram_ray.engine.worker import (  # noqa: F401 - the worker's names are the stage module's public face too
    GenerateWorker,
    perturbation_shift,
    trajectory_fingerprint,
)
from filegram_ray.errors import UserError
from filegram_ray.jobargs import at_least_one
from filegram_ray.stages.base import Row, Stage, StageOptions, WorkerSpec
from filegram_ray.stages.runner import stage_function

log = logging.getLogger(__name__)

STAGE = "generate"
#: Event types kept by the post-execution filter (ref §4), in the order the summary prints them.
KEPT_TYPES = ("file_read", "cross_file_reference", "context_switch", "file_write", "file_browse", "file_edit",
              "dir_create", "file_search", "file_rename", "file_move", "file_delete", "file_copy")


class GenerateConfig(StageOptions):
    """The ``generate:`` section of the pipeline config."""

    num_actors: int = Field(2, ge=1, description="actor pool size")
    num_cpus_per_actor: float = Field(0.5, gt=0, description="≤ 0.5 on a 2-CPU laptop (ENVIRONMENT_FACTS §1)")
    perturb: bool = Field(True, description="apply the ref §5.7 perturbation plan (5 trajectories per profile)")
    verify_perturbations: bool = Field(True, description="run each perturbed unit again without its perturbation "
                                       "and keep the shift only if the dimension's features change")
    chart_format: str = Field("svg", pattern="^(svg|png)$", description="F-L chart files (engine write is text)")
    upstream_quirks: bool = Field(False, description="engine reproduces upstream quirks (ref §13)")
    force: bool = Field(False, description="redo finished units")
    agent: Literal["simulator", "llm"] = Field(
        "simulator", description="simulator = the seeded persona simulator; llm = the LLM agent (generate.llm)")
    llm: LLMAgentConfig | None = Field(None, description="the LLM agent's server and limits (agent: llm)")
    crash_on_unit: str | None = Field(None, description="TEST ONLY: os._exit() once on this unit id")
    crash_marker: str | None = Field(None, description="TEST ONLY: marker file gating crash_on_unit")

    @model_validator(mode="after")
    def _llm_section(self) -> GenerateConfig:
        if self.agent == "llm" and (self.llm is None or (not self.llm.base_url and self.llm.serve is None)):
            raise UserError("generate.agent=llm needs generate.llm.base_url (an OpenAI-compatible /v1 URL) or "
                             "generate.llm.serve (a server the stage starts)")
        return self


def _select(items: list[Any], wanted: list[str] | None, attr: str, what: str, where: str = "") -> list[Any]:
    """The items ``wanted`` names, in the order asked for (the short form ``p1`` included).

    Raises:
        ValueError: an unknown id (:func:`~filegram_ray.config.match_ids`' message, with the ids ``where`` has).
    """
    if not wanted:
        return items
    out = []
    for w in wanted:
        hit = [x for x in items if names_id(w, getattr(x, attr))]
        if not hit:
            match_ids([w], [getattr(x, attr) for x in items], what, where)  # raises, naming the known ids
        out += [h for h in hit if h not in out]
    return out


def select_sets(cfg: PipelineConfig) -> tuple[list[Any], list[Any], list[Any]]:
    """``(every profile of the set, the selected profiles, the selected tasks)`` of the config.

    Raises:
        UserError: an unknown profile or task id (naming the ids the set has)."""
    from filegram_ray.paths import profiles_dir, tasks_dir
    from filegram_ray.profiles import load_profiles
    from filegram_ray.tasks import load_tasks

    all_profiles = load_profiles(cfg.profiles_dir)
    profiles = _select(all_profiles, cfg.profiles, "profile_id", "profiles", str(cfg.profiles_dir or profiles_dir()))
    tasks = _select(load_tasks(cfg.tasks_dir), cfg.tasks, "task_id", "tasks", str(cfg.tasks_dir or tasks_dir()))
    return all_profiles, profiles, tasks


def plan_units(cfg: PipelineConfig, gcfg: GenerateConfig) -> list[dict[str, Any]]:
    """The stage's items ``{unit_id, profile, task, seed, perturbation, alternatives, verify}`` for the configured
    profile × task set (profile-major order). Profiles and tasks travel inside the item so actors on other nodes
    need no conf/."""
    all_profiles, profiles, tasks = select_sets(cfg)
    from filegram_ray.profiles.perturbation import alternatives, plan_perturbations

    plan: dict[tuple[str, str], Any] = dict(plan_perturbations(all_profiles, cfg.seed)) if gcfg.perturb else {}
    units = []
    for p in profiles:
        for t in tasks:
            pert = plan.get((p.profile_id, t.task_id))
            pdict, alts = None, []
            if pert is not None:
                pdict = _pert_dict(pert)
                if gcfg.verify_perturbations:
                    alts = [_pert_dict(a) for a in alternatives(p, t.task_id, pert, cfg.seed)]
            units.append({"unit_id": f"{p.profile_id}/{t.task_id}", "profile": p.model_dump(mode="json"),
                          "task": t.model_dump(mode="json"), "seed": int(cfg.seed), "perturbation": pdict,
                          "alternatives": alts, "verify": bool(gcfg.verify_perturbations)})
    return units


def _pert_dict(pert: Any) -> dict[str, str]:
    frm = getattr(pert, "from_", None) or getattr(pert, "from", None)
    return {"dimension": pert.dimension, "from": frm, "to": pert.to}


def bundle_sha(run, task_id: str) -> str | None:
    """:func:`~filegram_ray.workspace.bundle.bundle_content_hash` of ``workspaces/<task_id>/bundle.json`` in the
    run (None when the run has none: the worker then builds it from (task, seed), already in the fingerprint).

    Raises:
        UserError: a malformed ``bundle.json`` (names the file and field)."""
    from filegram_ray.workspace.bundle import bundle_content_hash, check_bundle_meta

    rel = f"workspaces/{task_id}/bundle.json"
    return bundle_content_hash(check_bundle_meta(run.read_bytes(rel), run.url(rel))) if run.exists(rel) else None


def simulator_fingerprint(unit: dict[str, Any], opts: GenerateConfig, sha: str | None) -> str:
    """The key of a simulator item: everything that decides the trajectory's bytes, the bundle's content (``sha``)
    included — a re-imported folder regenerates (case R2-generate-stale-trajectory-after-reimport)."""
    from filegram_ray.engine.simulator import AGENT_VERSION

    return GenerateWorker.unit_fingerprint(
        [unit["profile"], unit["task"], unit["seed"], unit.get("perturbation"), unit.get("alternatives"),
         unit.get("verify"), opts.upstream_quirks, opts.chart_format, AGENT_VERSION], sha)


class GenerateStage(Stage):
    """Generate: one item per (profile, task) — a :class:`GenerateWorker` simulates and writes the trajectory — or,
    with ``agent: llm``, the same items in shards of concurrent sessions
    (:func:`~filegram_ray.engine.agents.stage.llm_worker`; servers started in :meth:`check`, stopped in
    :meth:`close`). :meth:`finish` writes ``trajectories/index.parquet`` and ``outputs.parquet`` (merged with an
    earlier run's rows of other trajectories) and prints the summary."""

    name = STAGE
    Config = GenerateConfig
    starts_run = True
    steps = ("trajectories",)

    @classmethod
    def add_arguments(cls, parser) -> None:
        parser.add_argument("--profiles", nargs="+", default=None, help="profile ids (p1 or p1_methodical); "
                            "default: the run's set (run.json), else config 'profiles', else all")
        parser.add_argument("--tasks", nargs="+", default=None, help="task ids (T-01 …); default: the run's set "
                            "(run.json), else config 'tasks', else all")
        parser.add_argument("--profiles-dir", default=None, help="a profile set directory (new profile sets)")
        parser.add_argument("--num-actors", type=at_least_one, default=None,
                            help="actor pool size (same as --set generate.num_actors=N; ≥ 1)")

    @classmethod
    def from_arguments(cls, args) -> tuple[dict[str, Any], dict[str, Any]]:
        return ({"profiles": args.profiles, "tasks": args.tasks, "profiles_dir": args.profiles_dir},
                {"num_actors": args.num_actors} if args.num_actors is not None else {})

    def check(self) -> None:
        """Refuse unknown profile or task ids and a malformed table of an earlier run; for the LLM agent, start or
        probe its servers."""
        self.t0 = time.perf_counter()
        select_sets(self.config)  # unknown ids are refused before anything runs
        run = self.run
        # the tables of earlier runs are merged into at the end: refuse a malformed one now, not after every item
        for rel, cols in (("trajectories/index.parquet", ("trajectory_id", "profile_id", "task_id", "status",
                                                          "n_events_raw", "n_events", "perturbed", "error")),
                          ("trajectories/outputs.parquet", ("trajectory_id", "profile_id", "task_id", "path",
                                                            "file_type", "bytes", "sha256"))):
            if run.exists(rel):
                missing = [c for c in cols if c not in run.read_table(rel).columns]  # StorageError names a corrupt one
                if missing:
                    raise UserError(f"{run.url(rel)}: column(s) {', '.join(missing)} missing (move the file away to "
                                    "rebuild it from this run's items)")
        self.llm = None
        if self.opts.agent == "llm":
            from filegram_ray.engine.agents.stage import LLMAgentRun

            self.llm = LLMAgentRun(self.opts, self.uses_ray)

    def items(self, step: str) -> list[dict[str, Any]]:
        """One item per trajectory (:func:`plan_units`), keyed by its fingerprint; finished when its ``events.json``
        exists too."""
        self.units = plan_units(self.config, self.opts)
        shas: dict[str, str | None] = {}
        for u in self.units:
            tid = str(u["task"]["task_id"])
            if tid not in shas:
                shas[tid] = bundle_sha(self.run, tid)
            u["bundle_sha256"] = shas[tid]  # which bundle the trajectory is made from: its completion record says
            u["key"] = (self.llm.fingerprint(u, shas[tid]) if self.llm is not None
                        else simulator_fingerprint(u, self.opts, shas[tid]))
            u["outputs"] = [f"trajectories/{u['unit_id']}/events.json"]
        return self.units

    def tasks(self, step: str, items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """One trajectory per task; the LLM agent's shards of concurrent sessions."""
        return self.llm.shards(items) if self.llm is not None else super().tasks(step, items)

    def worker(self, step: str) -> WorkerSpec:
        opts = self.opts
        kwargs = {"run_uri": self.config.run_dir, "storage_options": self.config.storage_options,
                  "chart_format": opts.chart_format, "upstream_quirks": opts.upstream_quirks,
                  "crash_on_unit": opts.crash_on_unit, "crash_marker": opts.crash_marker,
                  "tts": str(self.config.section("workspace").get("tts", "auto"))}
        if self.llm is not None:
            return self.llm.worker(kwargs)
        return WorkerSpec(GenerateWorker, kwargs, num_actors=opts.num_actors, num_cpus=opts.num_cpus_per_actor)

    def close(self) -> None:
        if getattr(self, "llm", None) is not None:
            self.llm.close()

    def finish(self, rows: list[Row]) -> dict[str, Any]:
        import polars as pl

        config, run, units = self.config, self.run, self.units
        if self.llm is not None:
            self.llm.report(rows)
        wall = time.perf_counter() - self.t0
        by_unit = {r.get("unit") or r.get("trajectory_id"): r for r in rows}
        # what was applied (the counterfactual check can replace or drop a planned shift), else what was planned
        pert_ids = {u["unit_id"] for u in units if (by_unit.get(u["unit_id"]) or {}).get("perturbed",
                                                                                           bool(u["perturbation"]))}
        pstatus = Counter((by_unit.get(u["unit_id"]) or {}).get("perturbation_status") for u in units
                          if u["perturbation"])
        index, outs = [], []
        for u in units:
            uid = u["unit_id"]
            r = by_unit.get(uid, {"status": "error", "error": "no result"})
            pid, tid = uid.split("/", 1)
            ok = r.get("status") == "ok"
            index.append({"trajectory_id": uid, "profile_id": pid, "task_id": tid, "status": "ok" if ok else "error",
                          "n_events_raw": int(r.get("n_events_raw", 0) or 0), "n_events": int(r.get("n_events", 0) or 0),
                          "perturbed": uid in pert_ids, "error": None if ok else Row(r).error_line[:500]})
            for o in (r.get("outputs") or []) if ok else []:
                outs.append({"trajectory_id": uid, "profile_id": pid, "task_id": tid, **o})
        index_df = pl.DataFrame(index, schema={"trajectory_id": pl.Utf8, "profile_id": pl.Utf8, "task_id": pl.Utf8,
                                               "status": pl.Utf8, "n_events_raw": pl.Int64, "n_events": pl.Int64,
                                               "perturbed": pl.Boolean, "error": pl.Utf8})
        outs_df = pl.DataFrame(outs, schema={"trajectory_id": pl.Utf8, "profile_id": pl.Utf8, "task_id": pl.Utf8,
                                             "path": pl.Utf8, "file_type": pl.Utf8, "bytes": pl.Int64,
                                             "sha256": pl.Utf8})
        # When a subset is generated, keep the rows of earlier runs for the other trajectories.
        if run.exists("trajectories/index.parquet"):
            old = run.read_table("trajectories/index.parquet")
            old = old.filter(~pl.col("trajectory_id").is_in(index_df["trajectory_id"].to_list()))
            index_df = pl.concat([old.select(index_df.columns).cast(index_df.schema), index_df])
        if run.exists("trajectories/outputs.parquet"):
            old = run.read_table("trajectories/outputs.parquet")
            old = old.filter(~pl.col("trajectory_id").is_in(index_df["trajectory_id"].to_list()))
            outs_df = pl.concat([old.select(outs_df.columns).cast(outs_df.schema), outs_df])
        index_df = index_df.sort("trajectory_id")
        outs_df = outs_df.sort(["trajectory_id", "path"])
        run.write_table("trajectories/index.parquet", index_df)
        run.write_table("trajectories/outputs.parquet", outs_df)
        mix: Counter = Counter()
        for r in rows:
            if r.get("status") == "ok":
                mix.update(r.get("kept_counts") or {})
        ok_rows = [r for r in rows if r.get("status") == "ok"]
        counts = self.counts["trajectories"]
        record = {
            "ok": counts.done + counts.skipped, "error": counts.failed,
            "skipped": counts.skipped, "perturbed": len(pert_ids),
            "perturbation_check": {k: pstatus.get(k, 0) for k in ("real", "replaced", "dropped")},
            "events_raw": sum(int(r.get("n_events_raw", 0)) for r in ok_rows),
            "events_kept": sum(int(r.get("n_events", 0)) for r in ok_rows),
            "files_created": int(mix.get("file_write", 0)), "output_files": len(outs),
            "event_mix": dict(sorted(mix.items())), "wall_s": round(wall, 2),
            "options": self.opts.model_dump(exclude={"crash_on_unit", "crash_marker"}),
            # the profile/task sets this run was generated from: later stages (bench) default to them
            "profiles_dir": os.path.abspath(config.profiles_dir) if config.profiles_dir else None,
            "tasks_dir": os.path.abspath(config.tasks_dir) if config.tasks_dir else None,
            # the run's profile and task sets (None = every id of the set); job scripts given none continue with them
            **run_sets(run, units, config),
            "max_peak_rss_mb": max((float(r.get("peak_rss_mb", 0) or 0) for r in ok_rows), default=0.0),
        }
        print_summary(record, file=sys.stdout)
        return record


run_generate = stage_function(GenerateStage)


def run_sets(run, units: list[dict[str, Any]], config: PipelineConfig) -> dict[str, list[str] | None]:
    """``{"profiles": …, "tasks": …}`` of a run after this generate run: the ids of ``units`` added to those of
    the run's earlier generate record (``run.json`` → ``stages.generate``); ``None`` = every id of the set (this
    run or an earlier one selected none)."""
    prev = {}
    if run.exists("run.json"):
        from filegram_ray.schema.meta import read_manifest

        prev = ((read_manifest(run).get("stages") or {}).get(STAGE) or {})
    out: dict[str, list[str] | None] = {}
    for key, pos in (("profiles", 0), ("tasks", 1)):
        old = prev.get(key, []) if isinstance(prev, dict) else []
        if getattr(config, key) is None or old is None:
            out[key] = None
            continue
        ids = [str(i) for i in old] if isinstance(old, list) else []
        for u in units:
            i = u["unit_id"].split("/", 1)[pos]
            if i not in ids:
                ids.append(i)
        out[key] = sorted(ids)
    return out


def print_summary(rec: dict[str, Any], file=sys.stdout) -> None:
    """One-screen summary of the stage."""
    raw, kept = rec["events_raw"], rec["events_kept"]
    strip = 100.0 * (1 - kept / raw) if raw else 0.0
    print("\nGenerate summary", file=file)
    print(f"  trajectories   ok {rec['ok']}  error {rec['error']}  (skipped as done: {rec['skipped']}, "
          f"perturbed: {rec['perturbed']})", file=file)
    pc = rec.get("perturbation_check") or {}
    if any(pc.values()):
        print(f"  perturbations  counterfactual check: real {pc.get('real', 0)}, replaced by another dimension "
              f"{pc.get('replaced', 0)}, dropped (no-op) {pc.get('dropped', 0)}", file=file)
    print(f"  events         raw {raw}  kept {kept}  stripped {strip:.1f} %", file=file)
    print(f"  output files   {rec['output_files']}  (file_write events {rec['files_created']})", file=file)
    print(f"  wall time      {rec['wall_s']:.1f} s", file=file)
    n = max(rec["ok"], 1)
    print(f"  {'event type':<22}{'count':>8}{'per traj':>10}", file=file)
    for t in KEPT_TYPES:
        c = rec["event_mix"].get(t, 0)
        print(f"  {t:<22}{c:>8}{c / n:>10.2f}", file=file)
