"""The record stage: guidance videos (H.264 MP4) of a seeded sample of trajectories.

Config section ``record:`` → :class:`RecordConfig`. Input: ``trajectories/index.parquet``. A seeded sample of
trajectories (``sample``, at most one per profile while the sample is smaller than the number of profiles;
``sample: null`` = all; ``trajectories: [...]`` names them; the run's ``profiles`` / ``tasks`` select first) is
one item per trajectory, keyed by the options key: :class:`RecordWorker` renders
``recordings/<profile_id>/<task_id>.mp4`` and its ``.timeline.json`` (the GUI operation sequence). The executor
(actor pool by default, ``executor: serial`` in this process) runs the workers; a trajectory that fails is an error
row and the others go on. Resumable: a recording whose completion record holds the same options key and whose MP4
exists is skipped. ``finish`` writes ``recordings/index.parquet`` (:data:`~video.tables.RECORD_COLUMNS`: this run's
rows over the earlier ones) and prints the summary.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import time
from collections import defaultdict
from typing import Any

from pydantic import Field

from filegram_ray.config import names_id
from filegram_ray.errors import UserError
from filegram_ray.stages.base import Row, Stage, StageOptions, WorkerSpec
from filegram_ray.stages.runner import stage_function
from filegram_ray.storage import RunDir
from video.record import RecordOptions, TrajectorySource, record
from video.tables import RECORD_COLUMNS, RECORD_INDEX, cpu_seconds, error_text, table
from video.timeline import timeline_json

log = logging.getLogger(__name__)

__all__ = ["RecordConfig", "RecordStage", "RecordWorker", "previous_rows", "run_record", "sample_trajectories"]

STAGE = "record"
TRAJECTORY_INDEX = "trajectories/index.parquet"


class RecordConfig(RecordOptions, StageOptions):
    """The ``record:`` section: :class:`~video.record.RecordOptions` plus what to record and how to run."""

    sample: int | None = Field(6, ge=1, description="seeded sample of trajectories (None = all)")
    trajectories: list[str] | None = Field(None, description="record exactly these trajectory ids")
    num_actors: int = Field(2, ge=1, description="recorder actors")
    num_cpus_per_actor: float = Field(0.5, gt=0, le=1, description="Ray CPUs per actor (≤ 0.5 on 2 CPUs, ENV §1)")
    force: bool = Field(False, description="record again even when a recording with these options exists")

    def options(self) -> RecordOptions:
        """The rendering keys alone (what :meth:`RecordOptions.key` digests)."""
        return RecordOptions(**self.model_dump(include=set(RecordOptions.model_fields)))


def sample_trajectories(ids: list[str], n: int | None, seed: int) -> list[str]:
    """A seeded sample of ``n`` trajectory ids (``<profile>/<task>``): profiles in a seeded order, one
    trajectory each per round, so a sample smaller than the number of profiles has distinct users (VisGrd asks
    about a user per recording). ``n`` None = all, sorted."""
    ids = sorted(set(ids))
    if n is None or n >= len(ids):
        return ids
    from filegram_ray.seeded import rng

    r = rng(seed, "record-sample")
    by: dict[str, list[str]] = defaultdict(list)
    for t in ids:
        by[t.rsplit("/", 1)[0]].append(t)
    profiles = sorted(by)
    r.shuffle(profiles)
    for p in profiles:
        r.shuffle(by[p])
    out: list[str] = []
    k = 0
    while len(out) < n:
        for p in profiles:
            if k < len(by[p]) and len(out) < n:
                out.append(by[p][k])
        k += 1
    return sorted(out)


class RecordWorker:
    """Renders trajectories of one run directory (one instance per actor, or one in process).

    Args:
        run_uri / storage_options: the run directory.
        options: :class:`~video.record.RecordOptions` fields.
    """

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None, options: dict[str, Any]):
        self.run = RunDir(run_uri, storage_options)
        self.opts = RecordOptions(**options)
        self.key = self.opts.key()

    def process(self, unit: dict[str, Any]) -> dict[str, Any]:
        """Record ``unit["unit_id"]`` (a trajectory id); writes the timeline then the MP4 (each atomically) and
        returns its index row (:data:`~video.tables.RECORD_COLUMNS`).

        Raises:
            FileNotFoundError / ValueError: a trajectory without a readable ``events.json`` (the executor makes it
                an error row).
        """
        trajectory_id = str(unit["unit_id"])
        pid, _, task = trajectory_id.rpartition("/")
        t0, c0 = time.perf_counter(), cpu_seconds()
        res = record(TrajectorySource.from_run(self.run, trajectory_id), self.opts)
        path = f"recordings/{trajectory_id}.mp4"
        tl_path = f"recordings/{trajectory_id}.timeline.json"
        self.run.write_text(tl_path, timeline_json(res.timeline))
        self.run.write_bytes(path, res.mp4)
        return {"trajectory_id": trajectory_id, "profile_id": pid, "task_id": task, "options_key": self.key,
                "path": path, "timeline_path": tl_path, "duration_s": round(res.duration_s, 4),
                "frames": res.frames, "fps": self.opts.fps, "width": self.opts.width, "height": self.opts.height,
                "bytes": len(res.mp4), "sha256": hashlib.sha256(res.mp4).hexdigest(),
                "n_events": sum(len(g.events) for g in res.timeline.gestures),
                "n_gestures": len(res.timeline.gestures), "distinct_frames": res.drawn,
                "render_s": round(time.perf_counter() - t0, 3), "cpu_s": round(cpu_seconds() - c0, 3),
                "status": "ok", "error": ""}


def previous_rows(run: RunDir, index: str, stage: str, key: str) -> dict[str, dict[str, Any]]:
    """``{row[key]: row}`` of a stage's earlier index rows: the index table's, then each completion record's (newer:
    an item finished after the table was last written; a record of an older version holds its row under ``row``).
    A row from a completion record is ``ok``: a resumed record stage once wrote ``status: null`` for every recording
    it skipped, and caption then found no recording to caption."""
    rows: dict[str, dict[str, Any]] = {}
    if run.exists(index):
        for r in run.read_table(index).to_dicts():
            rows[r[key]] = r
    for rec in run.done_records(stage):
        r = rec["row"] if isinstance(rec.get("row"), dict) else rec
        if r.get(key):  # a completion record exists only for a finished item; the runner keeps no status in it
            rows[r[key]] = {**r, "status": r.get("status") or "ok"}
    return rows


class RecordStage(Stage):
    """Record: one item per chosen trajectory (:class:`RecordWorker`); ``finish`` writes
    ``recordings/index.parquet`` and returns the summary (see the module docstring)."""

    name = STAGE
    Config = RecordConfig
    steps = ("recordings",)

    def check(self) -> None:
        """Choose the trajectories (:func:`sample_trajectories` of the usable ones, or ``trajectories``).

        Raises:
            FileNotFoundError: no ``trajectories/index.parquet`` (the generate stage never ran).
            UserError: ``trajectories`` names an id the index does not hold.
        """
        run, cfg, config = self.run, self.opts, self.config
        if not run.exists(TRAJECTORY_INDEX):
            raise FileNotFoundError(f"{run.uri}: {TRAJECTORY_INDEX} not found (run the generate stage first)")
        idx = run.read_table(TRAJECTORY_INDEX).to_dicts()
        usable = [str(r["trajectory_id"]) for r in idx if str(r.get("status") or "ok") == "ok"]
        # the run's profile/task selection, short ids included (p1 = p1_methodical, config.names_id, the rule of
        # every stage; case REL-short-profile-ids-empty-encode-bench); an id with no usable trajectory selects nothing
        if config.profiles:
            usable = [t for t in usable if any(names_id(w, t.rsplit("/", 1)[0]) for w in config.profiles)]
        if config.tasks:
            usable = [t for t in usable if any(names_id(w, t.rsplit("/", 1)[-1]) for w in config.tasks)]
        if cfg.trajectories:
            unknown = sorted(set(cfg.trajectories) - {str(r["trajectory_id"]) for r in idx})
            if unknown:
                raise UserError(f"record.trajectories: unknown trajectory ids {unknown[:5]}")
            self.chosen = sorted(set(cfg.trajectories))
        else:
            self.chosen = sample_trajectories(usable, cfg.sample, config.seed)
        self.t0 = time.perf_counter()
        self.key = cfg.options().key()
        self.previous = previous_rows(run, RECORD_INDEX, STAGE, "trajectory_id")

    def items(self, step: str) -> list[dict[str, Any]]:
        """One item per chosen trajectory, keyed by the options key and its ``events.json``'s bytes (``inputs``:
        generated again with other content, it is recorded again); finished when its MP4 exists too."""
        return [{"unit_id": t, "key": self.key, "inputs": [f"trajectories/{t}/events.json"],
                 "outputs": [f"recordings/{t}.mp4"]} for t in self.chosen]

    def worker(self, step: str) -> WorkerSpec:
        return WorkerSpec(RecordWorker, {"run_uri": self.run.uri, "storage_options": self.run.storage_options,
                                         "options": self.opts.options().model_dump()},
                          num_actors=self.opts.num_actors, num_cpus=self.opts.num_cpus_per_actor)

    def finish(self, rows: list[Row]) -> dict[str, Any]:
        new = [r for r in rows if not r.get("skipped")]
        wall = time.perf_counter() - self.t0
        merged = dict(self.previous)
        for r in new:
            if r.ok:
                merged[r.unit] = r
            else:
                pid, _, task = r.unit.rpartition("/")
                merged[r.unit] = {"trajectory_id": r.unit, "profile_id": pid, "task_id": task,
                                  "options_key": self.key, "status": "error", "error": error_text(r)}
        self.run.write_table(RECORD_INDEX, table([merged[k] for k in sorted(merged)], RECORD_COLUMNS))
        ok = [r for r in new if r.ok]
        skipped, counts = self.counts["recordings"].skipped, self.counts["recordings"]
        video_s = sum(float(r.get("duration_s") or 0) for r in ok)
        cpu = sum(float(r.get("cpu_s") or 0) for r in ok)
        summary = {"chosen": self.chosen, "recorded": counts.done, "errors": counts.failed,
                   "already_done": skipped, "video_s": round(video_s, 2), "wall_s": round(wall, 2),
                   "worker_cpu_s": round(cpu, 2),
                   "video_s_per_wall_s": round(video_s / wall, 2) if wall and ok else None,
                   "video_s_per_cpu_s": round(video_s / cpu, 2) if cpu and ok else None,
                   "serial": not self.uses_ray, "options": self.opts.model_dump(mode="json")}
        print(f"record: {len(self.chosen)} trajectories ({skipped} already recorded): {counts.done} recorded, "
              f"{summary['errors']} errors, {video_s:.0f} s of video in {wall:.1f} s wall / {cpu:.1f} CPU-s "
              f"({summary['video_s_per_cpu_s'] or 0:.1f} s of video per CPU-second)", file=sys.stderr)
        return summary


run_record = stage_function(RecordStage)
