"""Seed stage: build every task's input bundle into ``<run>/workspaces/<task_id>/`` (one Ray unit per bundle).

One item per task bundle, keyed by the seed and the speech option (a bundle built with others is built again): its
worker builds the bundle in a local temp dir and copies it into the run directory with ``RunDir.put_tree``; the
runner then writes its completion record, so a rerun skips finished bundles. At the end ``workspaces/index.parquet``
(task_id, path, kind, bytes, sha256) is written from every finished bundle's ``bundle.json`` and a summary table is
printed.

Config section ``workspace:`` (the top-level ``seed`` key is the master seed) (defaults in :class:`SeedConfig`):
num_actors, num_cpus_per_actor, executor, tts, force.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from filegram_ray.stages.base import Row, Stage, StageOptions, WorkerSpec
from filegram_ray.stages.runner import stage_function

__all__ = ["KIND_COST", "SeedConfig", "SeedStage", "SeedWorker", "bundle_cost", "longest_first", "run_seed"]

STAGE = "seed"


class SeedConfig(StageOptions):
    num_actors: int = Field(2, ge=1, description="actor pool size")
    num_cpus_per_actor: float = Field(0.5, gt=0, description="<=0.5 on a 2-CPU laptop (ENVIRONMENT_FACTS §1)")
    tts: Literal["auto", "tone"] = Field("auto", description="'auto' (piper voice if it loads) or 'tone' (synthetic "
                                                             "signal)")
    force: bool = Field(False, description="rebuild bundles that already have a completion record")


class SeedWorker:
    """Builds one bundle per item ``{"unit_id": task_id, "task": task dict}``."""

    def __init__(self, run_uri: str, storage_options: dict[str, Any], seed: int, tts: str = "auto"):
        from filegram_ray.storage import RunDir

        self.run = RunDir(run_uri, storage_options)
        self.seed, self.tts = seed, tts

    def _speech_delta(self, tts_engine: str | None) -> dict[str, int]:
        """Sentences this bundle's voice memos asked for and how many of them were synthesised (the rest came from
        the run's sentence cache), from the process's speech engine counters."""
        if tts_engine != "piper:joe-us":  # no voice memo spoken by piper in this bundle
            return {"sentences": 0, "synthesised": 0}
        from filegram_ray.speech import speech_cache_dir
        from filegram_ray.workspace.writers import _speech_engine

        eng = _speech_engine(speech_cache_dir(self.run))  # the engine build_bundle used (lru-cached per folder)
        now = (eng.sentences_total, eng.spoken) if eng is not None else (0, 0)
        before = getattr(self, "_speech_seen", (0, 0))
        self._speech_seen = now
        return {"sentences": now[0] - before[0], "synthesised": now[1] - before[1]}

    def process(self, unit: dict[str, Any]) -> dict[str, Any]:
        from filegram_ray.speech import speech_cache_dir
        from filegram_ray.workspace.bundle import build_bundle

        tid = unit["unit_id"]
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix=f"seed_{tid}_") as tmp:
            info = build_bundle(unit["task"], self.seed, Path(tmp), tts=self.tts,
                                speech_cache=speech_cache_dir(self.run))
            rel = f"workspaces/{tid}"
            self.run.remove(rel)
            self.run.put_tree(Path(tmp) / "files", f"{rel}/files")
            meta = (Path(tmp) / "bundle.json").read_bytes()
            self.run.write_bytes(f"{rel}/bundle.json", meta)
        speech = self._speech_delta(json.loads(meta).get("tts_engine"))
        return {"task_id": tid, "n_files": info.n_files, "bytes": info.total_bytes, "by_kind": info.by_kind,
                "seconds": round(time.perf_counter() - t0, 2), "seed": self.seed, "tts": self.tts,
                "speech": speech}


def _tasks(config) -> list[dict[str, Any]]:
    from filegram_ray.config import match_ids
    from filegram_ray.paths import tasks_dir
    from filegram_ray.tasks import load_tasks

    tasks = load_tasks(config.tasks_dir)
    keep = set(match_ids(config.tasks, [t.task_id for t in tasks], "tasks", str(config.tasks_dir or tasks_dir())))
    tasks = [t for t in tasks if t.task_id in keep]
    return [t.model_dump(mode="json") for t in tasks]


#: relative build cost of one planned input file per kind, for the longest-first order of :func:`bundle_cost`.
#: Source: the seed stage's completion records (``_done/seed/*.json`` ``seconds`` against the task's planned
#: inputs) of three runs on the 2-core machine, 2026-12-01/02: a bundle with piper voice memos (mp3/wav) took
#: 50+ s (T-02: 3 mp3, 7 sentences synthesised, 53 s) while text-only bundles took 0.1–13 s and video bundles
#: (T-31: 14 mp4) about 6 s. Only the order matters, not the scale.
KIND_COST: dict[str, float] = {"mp3": 10.0, "wav": 10.0, "mp4": 0.5, "pdf": 0.4, "pptx": 0.4, "docx": 0.3,
                               "xlsx": 0.3, "gif": 0.3, "png": 0.1, "jpg": 0.1}
#: cost of a planned file of any other kind (md, txt, csv, eml, ics, json: written as text)
OTHER_KIND_COST = 0.05


def bundle_cost(task: dict[str, Any]) -> float:
    """Estimated build cost of a task's bundle (arbitrary units) from its planned inputs
    (``task["workspace"]["inputs"]``: files per kind), weighted by :data:`KIND_COST`: speech files first."""
    inputs = (task.get("workspace") or {}).get("inputs") or {}
    return sum(int(n) * KIND_COST.get(kind, OTHER_KIND_COST) for kind, n in inputs.items())


def longest_first(units: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Seed units in the order they are submitted: highest :func:`bundle_cost` first, ties by task id — the same
    order on every run (so the stage's tail is not one speech-heavy bundle started last)."""
    return sorted(units, key=lambda u: (-bundle_cost(u["task"]), u["unit_id"]))


def _imported(run, task_id: str) -> bool:
    """Whether ``workspaces/<task_id>/`` holds an imported folder (its ``bundle.json`` says ``source: imported``)."""
    rel = f"workspaces/{task_id}/bundle.json"
    if not run.exists(rel):
        return False
    try:
        return run.read_json(rel).get("source") == "imported"
    except Exception:  # noqa: BLE001 - a malformed bundle.json is rebuilt (generate names a bad one it reads)
        return False


class SeedStage(Stage):
    """Seed: one item per task bundle (:class:`SeedWorker`), longest first, keyed by the seed and the speech
    option; ``finish`` writes ``workspaces/index.parquet`` from every finished bundle's ``bundle.json`` and prints
    the summary table."""

    name = STAGE
    Config = SeedConfig
    starts_run = True
    steps = ("bundles",)

    @classmethod
    def add_arguments(cls, parser) -> None:
        parser.add_argument("--tasks", nargs="+", default=None,
                            help="task ids (default: the run's set (run.json), else config 'tasks', else all)")

    @classmethod
    def from_arguments(cls, args) -> tuple[dict[str, Any], dict[str, Any]]:
        return {"tasks": args.tasks}, {}

    def check(self) -> None:
        """Refuse unknown task ids before any unit; say which tasks name a scenario without a domain of its own
        (their bundle is built from the generic business domain, :data:`~filegram_ray.workspace.scenarios.
        SCENARIO_DOMAIN`), so that a misspelt ``workspace.scenario`` is not silently a different bundle."""
        import difflib

        from filegram_ray.workspace.scenarios import SCENARIO_DOMAIN

        self.task_list = _tasks(self.config)
        for t in self.task_list:
            ws = t.get("workspace") or {}
            sc = ws.get("scenario") or ""
            if sc and not ws.get("empty") and sc not in SCENARIO_DOMAIN:
                near = difflib.get_close_matches(sc, list(SCENARIO_DOMAIN), n=1, cutoff=0.8)
                print(f"warning: task {t['task_id']}: field 'workspace.scenario': unknown scenario {sc!r}"
                      + (f" (did you mean {near[0]!r}?)" if near else "")
                      + "; its bundle is built from the generic business domain", file=sys.stderr)

    def items(self, step: str) -> list[dict[str, Any]]:
        """One item per task bundle, keyed by the seed and the speech option; a task whose workspace was imported
        (``filegram workspace import`` / ``run``: ``bundle.json`` ``source: imported``) is no item — the stage never
        builds over a folder of one's own."""
        key = f"seed={self.config.seed} tts={self.opts.tts}"
        return longest_first([{"unit_id": t["task_id"], "task": t, "key": key,
                               "outputs": [f"workspaces/{t['task_id']}/bundle.json"]} for t in self.task_list
                              if not _imported(self.run, t["task_id"])])

    def worker(self, step: str) -> WorkerSpec:
        return WorkerSpec(SeedWorker, {"run_uri": self.run.uri, "storage_options": self.config.storage_options,
                                       "seed": self.config.seed, "tts": self.opts.tts},
                          num_actors=self.opts.num_actors, num_cpus=self.opts.num_cpus_per_actor)

    def finish(self, rows: list[Row]) -> dict[str, Any]:
        import polars as pl

        run, tasks = self.run, self.task_list
        new = [r for r in rows if not r.get("skipped")]
        counts = self.counts["bundles"]  # the failed bundles' error rows: errors/seed.parquet (the runner's)
        sentences = sum(int((r.get("speech") or {}).get("sentences") or 0) for r in new)
        synthesised = sum(int((r.get("speech") or {}).get("synthesised") or 0) for r in new)
        index = []
        # every bundle the run holds, not only this run's tasks: seeding a subset (or generate seeding the bundles
        # it lacks) must not drop the other bundles' rows
        own_ids = {t["task_id"] for t in tasks}
        for tid in sorted(own_ids | set(run.listdir("workspaces"))):
            if not run.exists(f"workspaces/{tid}/bundle.json"):
                continue
            try:
                meta = run.read_json(f"workspaces/{tid}/bundle.json")
                index += [{"task_id": tid, "path": f["path"], "kind": f["kind"], "bytes": int(f["bytes"]),
                           "sha256": f["sha256"]} for f in meta["files"]]
            except Exception as exc:  # noqa: BLE001 - another bundle's malformed bundle.json is named, not fatal
                if tid in own_ids:
                    raise
                print(f"warning: workspaces/{tid}/bundle.json left out of workspaces/index.parquet: {exc}")
        schema = {"task_id": pl.String, "path": pl.String, "kind": pl.String, "bytes": pl.Int64, "sha256": pl.String}
        df = pl.DataFrame(index, schema=schema)
        run.write_table("workspaces/index.parquet", df)
        by_kind = {r["kind"]: r["n"] for r in df.group_by("kind").agg(pl.len().alias("n")).sort("kind").to_dicts()}
        n_bundles = sum(1 for t in tasks if run.exists(f"workspaces/{t['task_id']}/bundle.json"))
        skipped = counts.skipped
        summary = {"bundles": n_bundles, "non_empty": df["task_id"].n_unique() if len(df) else 0,
                   "built": counts.done, "skipped": skipped, "files": len(df),
                   "bytes": int(df["bytes"].sum() or 0), "by_kind": by_kind,
                   "speech": {"sentences": sentences, "synthesised": synthesised,
                              "reused": sentences - synthesised}}
        print(f"\nseed: {summary['bundles']} bundles ({summary['built']} built now, {skipped} already done; "
              f"{summary['bundles'] - summary['non_empty']} empty by design), "
              f"{summary['files']} files, {summary['bytes'] / 1e6:.1f} MB")
        print(f"{'kind':<6} {'files':>6} {'MB':>8}")
        for kind, n in by_kind.items():
            mb = df.filter(pl.col("kind") == kind)["bytes"].sum() / 1e6
            print(f"{kind:<6} {n:>6} {mb:>8.2f}")
        return summary


run_seed = stage_function(SeedStage)
