"""The record and caption stages (Ray Data), and the Real-World setting's reconstructed events.

``record`` (:func:`run_record`, config section ``record:`` → :class:`RecordConfig`)
    Input: ``trajectories/index.parquet``. A seeded sample of trajectories (``sample``, at most one per profile
    while the sample is smaller than the number of profiles; ``sample: null`` = all; ``trajectories: [...]``
    names them) is rendered by a Ray Data actor pool (``map_batches``, one trajectory per call) into
    ``recordings/<profile_id>/<task_id>.mp4`` + ``.timeline.json`` (the GUI operation sequence). A trajectory
    that fails becomes an error row; the others go on. Resumable: a recording whose completion record carries the
    same options is skipped. Index: ``recordings/index.parquet`` (:data:`RECORD_COLUMNS`).

``caption`` (:func:`run_caption`, section ``caption:`` → :class:`CaptionConfig`)
    Input: the ``ok`` rows of ``recordings/index.parquet`` plus any MP4 named in ``caption.inputs`` (a user's own
    screen recordings: paths or fsspec URIs). Two Ray Data stages: keyframes by scene change (``map`` tasks,
    :func:`keyframes_of`, :mod:`video.keyframes`; PNG-encoded in the row), then

    * ``captioner: ocr`` — an actor pool (``map_batches``), one RapidOCR captioner per actor (:mod:`video.ocr`;
      the keyframes of one recording stay together because OCR is incremental);
    * ``captioner: vlm`` — one row per keyframe (``flat_map``) through a ``ray.data.llm`` processor
      (:mod:`video.vlm`).

    Output: ``captions/<captioner>/<recording_id>.parquet`` (one row per keyframe, :data:`CAPTION_COLUMNS`),
    ``captions/index.parquet`` (one row per recording; a broken MP4 is an error row). Then each captioned recording
    becomes events (:mod:`video.reconstruct`): ``realworld/<recording_id>/events.json`` + ``media/blobs/`` +
    ``video_times.json``, ``realworld/index.parquet``; for our own recordings the recovery against the true events is
    scored per event type into ``realworld/recovery.parquet`` and the stage record.

``recording_id`` is the trajectory id for our recordings and ``ext/<file stem>-<8 hex>`` for others.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import posixpath
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from filegram_ray.config import names_id
from filegram_ray.errors import UserError
from filegram_ray.runtime import Progress, exclusive_stage, unit_counts
from filegram_ray.storage import RunDir
from video.keyframes import KeyframeParams, extract_keyframes
from video.ocr import OcrParams
from video.record import RecordOptions, TrajectorySource, record
from video.timeline import timeline_json
from video.vlm import VlmConfig

log = logging.getLogger(__name__)

__all__ = ["CAPTION_COLUMNS", "RECORD_COLUMNS", "CaptionConfig", "RecordConfig", "caption_file",
           "recording_id_of", "run_caption", "run_record", "sample_trajectories"]

RECORD_STAGE, CAPTION_STAGE = "record", "caption"
RECORD_INDEX = "recordings/index.parquet"
CAPTION_INDEX = "captions/index.parquet"
REALWORLD_INDEX = "realworld/index.parquet"
RECOVERY_TABLE = "realworld/recovery.parquet"

#: columns of recordings/index.parquet
RECORD_COLUMNS: dict[str, str] = {
    "trajectory_id": "str", "profile_id": "str", "task_id": "str", "path": "str", "timeline_path": "str",
    "duration_s": "float", "frames": "int", "fps": "int", "width": "int", "height": "int", "bytes": "int",
    "sha256": "str", "n_events": "int", "n_gestures": "int", "distinct_frames": "int", "render_s": "float",
    "cpu_s": "float", "options_key": "str", "status": "str", "error": "str",
}
#: columns of captions/<captioner>/<recording_id>.parquet (one row per keyframe; same for OCR and VLM)
CAPTION_COLUMNS: dict[str, str] = {
    "recording_id": "str", "trajectory_id": "str", "captioner": "str", "keyframe": "int", "frame": "int",
    "t_s": "float", "width": "int", "height": "int", "change": "float", "text": "str", "lines": "str",
    "operation": "str", "error": "str",
}
#: columns of captions/index.parquet
CAPTION_INDEX_COLUMNS: dict[str, str] = {
    "recording_id": "str", "trajectory_id": "str", "source": "str", "captioner": "str", "path": "str",
    "keyframes": "int", "frames": "int", "fps": "float", "duration_s": "float", "width": "int", "height": "int",
    "lines_read": "int", "seconds": "float", "cpu_s": "float", "key": "str", "sha256": "str", "status": "str",
    "error": "str",
}
REALWORLD_COLUMNS: dict[str, str] = {
    "recording_id": "str", "trajectory_id": "str", "captioner": "str", "events_path": "str", "n_events": "int",
    "duration_s": "float", "status": "str", "error": "str",
}
RECOVERY_COLUMNS: dict[str, str] = {
    "recording_id": "str", "trajectory_id": "str", "captioner": "str", "event_type": "str", "true": "int",
    "recovered": "int", "matched": "int", "precision": "float", "recall": "float",
}


def _table(rows: list[dict[str, Any]], columns: dict[str, str]):
    import polars as pl

    types = {"str": pl.Utf8, "int": pl.Int64, "float": pl.Float64}
    schema = {c: types[t] for c, t in columns.items()}
    data = [{c: r.get(c) for c in columns} for r in rows]
    return pl.DataFrame(data, schema=schema, orient="row") if data else pl.DataFrame(schema=schema)


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def _pool_cpus(n: int, requested: float) -> float:
    import ray

    total = float(ray.cluster_resources().get("CPU", 1.0))
    return round(min(requested, 0.9 * total / max(n, 1)), 3)


def _pool_strategy(ray, n: int):
    """The actor pool of the record and caption stages: exactly ``n`` actors, one unit in flight per actor.

    With Ray Data's default (several tasks queued per actor), the first actor to start takes most of a small
    stage's units (6 recordings) while the second is still loading, and the stage then runs on one actor for
    most of its time (issue #31 item 3: caption ran one OCR actor on 2 cores). Together with one unit per block
    (``from_items(..., override_num_blocks=len(units))``), an idle actor takes the next unit."""
    return ray.data.ActorPoolStrategy(size=n, max_tasks_in_flight_per_actor=1)


def _cpu_s() -> float:
    """CPU seconds used so far by this process and its finished children (ffmpeg), user + system: the stages'
    speed per core does not depend on how busy the machine is."""
    import resource

    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _record_stage(run: RunDir, stage: str, record_: dict[str, Any]) -> None:
    try:
        from filegram_ray.schema.meta import record_stage

        record_stage(run, stage, record_)
    except Exception as exc:  # noqa: BLE001 - outputs are written; a bad run.json must not hide them
        log.warning("%s: could not update run.json: %s", stage, exc)


class _PoolCall:
    """``map_batches`` callable of an actor pool: column ``item`` (JSON units) in, column ``row`` (JSON index rows)
    out, through ``worker_cls(**kwargs).process(unit)`` (loaded once per actor)."""

    def __init__(self, worker_cls: type, kwargs: dict[str, Any]):
        self.worker = worker_cls(**kwargs)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        return {"row": [json.dumps(self.worker.process(json.loads(x)), ensure_ascii=False) for x in batch["item"]]}


def _map_pool(worker_cls: type, kwargs: dict[str, Any], units: list[dict[str, Any]], *, serial: bool,
              num_actors: int, num_cpus: float, address: str | None, config, stage: str,
              progress: bool) -> list[dict[str, Any]]:
    """Rows of ``worker.process(unit)`` for every unit: in this process (``serial``) or on a Ray Data actor pool of
    ``num_actors`` (one unit per call; ``num_cpus`` per actor, scaled down to fit the cluster)."""
    rows: list[dict[str, Any]] = []
    bar = Progress(len(units), stage, enabled=progress)
    if serial or not units:
        worker = worker_cls(**kwargs) if units else None
        for u in units:
            rows.append(worker.process(u))
            bar.update(1, rows[-1].get("status", ""))
    else:
        import ray

        from filegram_ray.runtime import init_ray

        init_ray(address or config.ray.address, num_cpus=config.ray.num_cpus)
        n = min(num_actors, len(units))
        ds = ray.data.from_items([{"item": json.dumps(u, ensure_ascii=False)} for u in units],
                                 override_num_blocks=len(units)).map_batches(
            _PoolCall, fn_constructor_kwargs={"worker_cls": worker_cls, "kwargs": kwargs}, batch_size=1,
            compute=_pool_strategy(ray, n), num_cpus=_pool_cpus(n, num_cpus))
        for r in ds.iter_rows():
            rows.append(json.loads(r["row"]))
            bar.update(1, rows[-1].get("status", ""))
    bar.close()
    return rows


# ============================================================================================== record
class RecordConfig(RecordOptions):
    """The ``record:`` section: :class:`~video.record.RecordOptions` plus what to record and how to run."""

    sample: int | None = Field(6, ge=1, description="seeded sample of trajectories (None = all)")
    trajectories: list[str] | None = Field(None, description="record exactly these trajectory ids")
    num_actors: int = Field(2, ge=1, description="recorder actors")
    num_cpus_per_actor: float = Field(0.5, gt=0, le=1, description="Ray CPUs per actor (≤ 0.5 on 2 CPUs, ENV §1)")
    force: bool = Field(False, description="record again even when a recording with these options exists")
    serial: bool = Field(False, description="record in this process without Ray (same worker code)")

    def options(self) -> RecordOptions:
        return RecordOptions(**self.model_dump(include=set(RecordOptions.model_fields)))


def sample_trajectories(ids: list[str], n: int | None, seed: int) -> list[str]:
    """A seeded sample of ``n`` trajectory ids (``<profile>/<task>``): profiles in a seeded order, one
    trajectory each per round, so a sample smaller than the number of profiles has distinct users (VisGrd asks
    about a user per recording). ``n`` None = all, sorted."""
    ids = sorted(set(ids))
    if n is None or n >= len(ids):
        return ids
    from filegram_ray.bench.common import rng

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
    """Renders trajectories of one run directory (one instance per actor, or one in process)."""

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None, options: dict[str, Any]):
        self.run = RunDir(run_uri, storage_options)
        self.opts = RecordOptions(**options)
        self.key = self.opts.key()

    def process(self, unit: dict[str, Any]) -> dict[str, Any]:
        """Record ``unit["trajectory_id"]``; returns its index row (``status`` ok or error)."""
        trajectory_id = str(unit["trajectory_id"])
        pid, _, task = trajectory_id.rpartition("/")
        base = {"trajectory_id": trajectory_id, "profile_id": pid, "task_id": task, "options_key": self.key}
        t0, c0 = time.perf_counter(), _cpu_s()
        try:
            src = TrajectorySource.from_run(self.run, trajectory_id)
            res = record(src, self.opts)
            path = f"recordings/{trajectory_id}.mp4"
            tl_path = f"recordings/{trajectory_id}.timeline.json"
            self.run.write_text(tl_path, timeline_json(res.timeline))
            self.run.write_bytes(path, res.mp4)
            row = {**base, "path": path, "timeline_path": tl_path, "duration_s": round(res.duration_s, 4),
                   "frames": res.frames, "fps": self.opts.fps, "width": self.opts.width, "height": self.opts.height,
                   "bytes": len(res.mp4), "sha256": hashlib.sha256(res.mp4).hexdigest(),
                   "n_events": sum(len(g.events) for g in res.timeline.gestures),
                   "n_gestures": len(res.timeline.gestures), "distinct_frames": res.drawn,
                   "render_s": round(time.perf_counter() - t0, 3), "cpu_s": round(_cpu_s() - c0, 3),
                   "status": "ok", "error": ""}
            self.run.mark_done(RECORD_STAGE, trajectory_id, {"row": row})
            return row
        except Exception as exc:  # noqa: BLE001 - one broken trajectory is one error row
            log.warning("record: %s failed: %s", trajectory_id, exc)
            return {**base, "status": "error", "error": _err(exc), "render_s": round(time.perf_counter() - t0, 3)}


def _previous(run: RunDir, index: str, stage: str, key: str) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    if run.exists(index):
        for r in run.read_table(index).to_dicts():
            rows[r[key]] = r
    for rec in run.done_records(stage):
        r = rec.get("row")
        if isinstance(r, dict) and r.get(key):
            rows[r[key]] = r
    return rows


@exclusive_stage(RECORD_STAGE)
def run_record(config, *, serial: bool | None = None, address: str | None = None, progress: bool = True
               ) -> dict[str, Any]:
    """Render guidance videos for the configured trajectories.

    Args:
        config: a :class:`~filegram_ray.config.PipelineConfig` (section ``record:`` → :class:`RecordConfig`).
        serial / address: overrides of ``record.serial`` (run in this process without Ray) and ``ray.address``
            for direct callers; the pipeline and the job scripts set them in the config.

    Returns:
        The stage record: ``units`` (planned/done/skipped/failed), counts, seconds of video, wall time, video seconds per wall second, the ids recorded.

    Raises:
        FileNotFoundError: no ``trajectories/index.parquet``. ValueError: bad ``record:`` section or unknown
        trajectory ids.
    """
    try:
        cfg = RecordConfig.model_validate(config.section(RECORD_STAGE))
    except Exception as exc:
        raise UserError(f"config section 'record': {exc}") from exc
    serial = cfg.serial if serial is None else bool(serial)
    run = config.run()
    if not run.exists("trajectories/index.parquet"):
        raise FileNotFoundError(f"{run.uri}: trajectories/index.parquet not found (run the generate stage first)")
    idx = run.read_table("trajectories/index.parquet").to_dicts()
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
        chosen = sorted(set(cfg.trajectories))
    else:
        chosen = sample_trajectories(usable, cfg.sample, config.seed)
    t0 = time.perf_counter()
    opts = cfg.options()
    key = opts.key()
    previous = _previous(run, RECORD_INDEX, RECORD_STAGE, "trajectory_id")
    done = {t for t, r in previous.items() if r.get("status") == "ok" and r.get("options_key") == key
            and not cfg.force and run.exists(str(r.get("path") or "")) and t in chosen}
    todo = [t for t in chosen if t not in done]
    new_rows = _map_pool(RecordWorker, {"run_uri": run.uri, "storage_options": run.storage_options,
                                        "options": opts.model_dump()}, [{"trajectory_id": t} for t in todo],
                         serial=serial, num_actors=cfg.num_actors, num_cpus=cfg.num_cpus_per_actor, address=address,
                         config=config, stage=RECORD_STAGE, progress=progress)
    wall = time.perf_counter() - t0
    merged = dict(previous)
    for r in new_rows:
        merged[r["trajectory_id"]] = r
    run.write_table(RECORD_INDEX, _table([merged[k] for k in sorted(merged)], RECORD_COLUMNS))
    ok = [r for r in new_rows if r["status"] == "ok"]
    video_s = sum(float(r.get("duration_s") or 0) for r in ok)
    cpu = sum(float(r.get("cpu_s") or 0) for r in ok)
    rec = {"units": unit_counts(planned=len(chosen), done=len(ok), skipped=len(done), failed=len(new_rows) - len(ok)),
           "chosen": chosen, "recorded": len(ok), "errors": len(new_rows) - len(ok), "already_done": len(done),
           "video_s": round(video_s, 2), "wall_s": round(wall, 2), "worker_cpu_s": round(cpu, 2),
           "video_s_per_wall_s": round(video_s / wall, 2) if wall and ok else None,
           "video_s_per_cpu_s": round(video_s / cpu, 2) if cpu and ok else None, "serial": serial,
           "options": cfg.model_dump(mode="json")}
    _record_stage(run, RECORD_STAGE, rec)
    if progress:
        print(f"record: {len(chosen)} trajectories ({len(done)} already recorded): {len(ok)} recorded, "
              f"{rec['errors']} errors, {video_s:.0f} s of video in {wall:.1f} s wall / {cpu:.1f} CPU-s "
              f"({rec['video_s_per_cpu_s'] or 0:.1f} s of video per CPU-second)", file=sys.stderr)
        for r in new_rows:
            if r["status"] != "ok":
                print(f"  error {r['trajectory_id']}: {r['error'][:200]}", file=sys.stderr)
    return rec


# ============================================================================================== caption
class CaptionConfig(BaseModel):
    """The ``caption:`` section."""

    model_config = ConfigDict(extra="forbid")
    captioner: Literal["ocr", "vlm"] = Field("ocr", description="ocr (CPU, RapidOCR) or vlm (ray.data.llm)")
    recordings: bool = Field(True, description="caption the record stage's recordings")
    inputs: list[str] = Field(default_factory=list, description="other MP4 files (paths or fsspec URIs)")
    keyframes: KeyframeParams = Field(default_factory=KeyframeParams)
    ocr: OcrParams = Field(default_factory=OcrParams)
    vlm: VlmConfig | None = Field(None, description="VLM back end (required for captioner: vlm)")
    reconstruct: bool = Field(True, description="rebuild events from the captions (Real-World setting)")
    match_threshold: float = Field(0.9, gt=0, le=1, description="path similarity that counts as recovered")
    num_actors: int = Field(2, ge=1, description="OCR actors")
    num_cpus_per_actor: float = Field(0.5, gt=0, le=1)
    force: bool = False
    serial: bool = Field(False, description="caption in this process without Ray (OCR only; VLM uses Ray Data)")

    def key(self) -> str:
        parts = {"captioner": self.captioner, "keyframes": self.keyframes.model_dump(),
                 "ocr": self.ocr.model_dump() if self.captioner == "ocr" else None,
                 "vlm": self.vlm.model_dump() if self.captioner == "vlm" and self.vlm else None}
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]


def recording_id_of(source: str) -> str:
    """``ext/<stem>-<8 hex of the source string>``: the id of a recording that is not ours."""
    stem = posixpath.splitext(posixpath.basename(source.rstrip("/")))[0] or "recording"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)[:60]
    return f"ext/{safe}-{hashlib.sha256(source.encode()).hexdigest()[:8]}"


def _fetch(run: RunDir, item: dict[str, Any], tmp: str) -> str:
    """A local copy (or the local path) of a recording."""
    src = item["source"]
    if item.get("in_run"):
        if run.is_local:
            return run.full(src)
        local = os.path.join(tmp, "in.mp4")
        with open(local, "wb") as fh:
            fh.write(run.read_bytes(src))
        return local
    if os.path.exists(src):
        return src
    import fsspec

    local = os.path.join(tmp, "in.mp4")
    with fsspec.open(src, "rb") as fi, open(local, "wb") as fo:
        fo.write(fi.read())
    return local


def _caption_path(captioner: str, rid: str) -> str:
    return f"captions/{captioner}/{rid}.parquet"


def keyframes_of(row: dict[str, Any], run_uri: str, storage_options: dict[str, Any] | None,
                 keyframes: dict[str, Any]) -> dict[str, Any]:
    """Stage 1 of captioning (Ray Data ``map`` task): a recording (``row["item"]``, JSON) → its keyframes.

    Returns the row with ``keyframes`` (pickled list of ``(index, frame, t_s, change, png bytes)``), ``info``
    (JSON: frames, fps, duration_s, width, height), ``kf_cpu_s`` and ``error`` ("" or why the file could not be
    read: the next stage turns it into an error row).
    """
    import pickle

    import cv2

    item = json.loads(row["item"])
    c0 = _cpu_s()
    out = {"item": row["item"], "keyframes": b"", "info": "{}", "error": "", "kf_cpu_s": 0.0}
    try:
        run = RunDir(run_uri, storage_options)
        with tempfile.TemporaryDirectory(prefix="fgcap-") as tmp:
            kfs, info = extract_keyframes(_fetch(run, item, tmp), KeyframeParams(**keyframes))
        packed = [(k.index, k.frame, k.t_s, k.change, cv2.imencode(".png", k.image)[1].tobytes()) for k in kfs]
        out.update(keyframes=pickle.dumps(packed, protocol=pickle.HIGHEST_PROTOCOL), info=json.dumps(info))
    except Exception as exc:  # noqa: BLE001 - a broken recording is one error row
        out["error"] = _err(exc)
    out["kf_cpu_s"] = round(_cpu_s() - c0, 3)
    return out


def _unpack(row: dict[str, Any]) -> list[tuple[int, int, float, float, np.ndarray]]:
    import pickle

    import cv2

    return [(i, f, t, c, cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR))
            for i, f, t, c, png in (pickle.loads(row["keyframes"]) if row["keyframes"] else [])]


class OcrCaptionWorker:
    """Stage 2 of captioning with OCR: one RapidOCR captioner (per actor) reads a recording's keyframes in order
    (incremental OCR needs them on one worker) and writes its caption table."""

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None, ocr: dict[str, Any], key: str):
        from video.ocr import OcrCaptioner

        self.run = RunDir(run_uri, storage_options)
        self.captioner = OcrCaptioner(OcrParams(**ocr))
        self.key = key

    def process(self, row: dict[str, Any]) -> dict[str, Any]:
        """A :func:`keyframes_of` row → the recording's index row (``status`` ok or error)."""
        item = json.loads(row["item"])
        rid = item["recording_id"]
        base = {"recording_id": rid, "trajectory_id": item.get("trajectory_id") or "", "source": item["source"],
                "captioner": "ocr", "key": self.key, "sha256": item.get("sha256") or ""}
        t0, c0 = time.perf_counter(), _cpu_s()
        if row["error"]:
            log.warning("caption: %s failed: %s", rid, row["error"])
            return {**base, "status": "error", "error": row["error"]}
        try:
            info = json.loads(row["info"])
            self.captioner.reset()
            rows = []
            for index, frame, t_s, change, image in _unpack(row):
                lines = [ln.to_dict() for ln in self.captioner.caption(image)]
                rows.append({"recording_id": rid, "trajectory_id": base["trajectory_id"], "captioner": "ocr",
                             "keyframe": index, "frame": frame, "t_s": t_s, "width": info["width"],
                             "height": info["height"], "change": change,
                             "text": "\n".join(ln["text"] for ln in lines),
                             "lines": json.dumps(lines, ensure_ascii=False), "operation": "", "error": ""})
            path = _caption_path("ocr", rid)
            self.run.write_table(path, _table(rows, CAPTION_COLUMNS))
            out = {**base, "path": path, "keyframes": len(rows), "frames": info["frames"], "fps": info["fps"],
                   "duration_s": info["duration_s"], "width": info["width"], "height": info["height"],
                   "lines_read": self.captioner.boxes_read, "seconds": round(time.perf_counter() - t0, 3),
                   "cpu_s": round(_cpu_s() - c0 + float(row.get("kf_cpu_s") or 0.0), 3), "status": "ok",
                   "error": ""}
            self.run.mark_done(CAPTION_STAGE, f"ocr/{rid}", {"row": out})
            return out
        except Exception as exc:  # noqa: BLE001 - one bad recording is one error row
            log.warning("caption: %s failed: %s", rid, exc)
            return {**base, "status": "error", "error": _err(exc), "seconds": round(time.perf_counter() - t0, 3)}


class _OcrStage:
    """``map_batches`` callable (actor pool) around :class:`OcrCaptionWorker`: one recording per call."""

    def __init__(self, **kwargs):
        self.worker = OcrCaptionWorker(**kwargs)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        rows = [{k: batch[k][i] for k in ("item", "keyframes", "info", "error", "kf_cpu_s")}
                for i in range(len(batch["item"]))]
        return {"row": [json.dumps(self.worker.process(r), ensure_ascii=False) for r in rows]}


def _vlm_rows(row: dict[str, Any], vlm: dict[str, Any]) -> list[dict[str, Any]]:
    """``flat_map`` of the VLM path: a :func:`keyframes_of` row → one ``info``/``error`` row plus one row per
    keyframe with its JPEG (scaled to ``vlm.image_width``)."""
    from video.vlm import encode_keyframe

    cfg = VlmConfig(**vlm)
    item = json.loads(row["item"])
    rid = item["recording_id"]
    if row["error"]:
        return [{"recording_id": rid, "kind": "error", "error": row["error"], "info": "{}"}]
    info = json.loads(row["info"])
    out = [{"recording_id": rid, "kind": "info", "error": "", "info": row["info"]}]
    for index, frame, t_s, change, image in _unpack(row):
        out.append({"recording_id": rid, "trajectory_id": item.get("trajectory_id") or "", "kind": "keyframe",
                    "keyframe": index, "frame": frame, "t_s": t_s, "width": info["width"], "height": info["height"],
                    "change": change, "info": row["info"],
                    "jpeg": encode_keyframe(image, cfg.image_width, cfg.jpeg_quality)})
    return out


def _longest_first(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recordings in the order they are captioned: longest first (``duration_s`` of the record stage's row, else
    0), ties by recording id — deterministic, and the stage's tail is a short recording, not the longest one
    started last. Each recording's outputs do not depend on the order."""
    return sorted(items, key=lambda it: (-float(it.get("duration_s") or 0.0), it["recording_id"]))


def _caption(run: RunDir, items: list[dict[str, Any]], cfg: CaptionConfig, key: str, *, serial: bool,
             address: str | None, config, progress: bool) -> list[dict[str, Any]]:
    """Caption ``items``: keyframes (stage 1, :func:`keyframes_of`) then the captioner (stage 2); one index row per
    recording. On Ray: ``map`` tasks → an OCR actor pool (``map_batches``) or ``flat_map`` → the ``ray.data.llm``
    processor; ``serial``: both stages in this process (OCR only)."""
    kf_kwargs = {"run_uri": run.uri, "storage_options": run.storage_options, "keyframes": cfg.keyframes.model_dump()}
    ocr_kwargs = {"run_uri": run.uri, "storage_options": run.storage_options, "ocr": cfg.ocr.model_dump(), "key": key}
    units = [{"item": json.dumps(it, ensure_ascii=False)} for it in _longest_first(items)]
    rows: list[dict[str, Any]] = []
    bar = Progress(len(units), CAPTION_STAGE, enabled=progress)
    if serial:
        worker = OcrCaptionWorker(**ocr_kwargs)
        for u in units:
            rows.append(worker.process(keyframes_of(u, **kf_kwargs)))
            bar.update(1, rows[-1]["status"])
        bar.close()
        return rows
    import ray

    from filegram_ray.runtime import init_ray

    init_ray(address or config.ray.address, num_cpus=config.ray.num_cpus)
    n = min(cfg.num_actors, len(units))
    cpus = _pool_cpus(n + 1, cfg.num_cpus_per_actor)  # n captioner actors + keyframe tasks
    # one recording per block, so the keyframe tasks and the actors take recordings one at a time
    ds = ray.data.from_items(units, override_num_blocks=len(units)).map(keyframes_of, fn_kwargs=kf_kwargs,
                                                                        num_cpus=cpus)
    if cfg.captioner == "ocr":
        ds = ds.map_batches(_OcrStage, fn_constructor_kwargs=ocr_kwargs, batch_size=1,
                            compute=_pool_strategy(ray, n), num_cpus=cpus)
        for r in ds.iter_rows():
            rows.append(json.loads(r["row"]))
            bar.update(1, rows[-1]["status"])
        bar.close()
        return rows
    bar.close()
    return _caption_vlm(run, items, ds.flat_map(_vlm_rows, fn_kwargs={"vlm": cfg.vlm.model_dump()}, num_cpus=cpus),
                        cfg, key)


def _caption_vlm(run: RunDir, items: list[dict[str, Any]], kf_rows, cfg: CaptionConfig, key: str
                 ) -> list[dict[str, Any]]:
    """The VLM stage: keyframe rows (a dataset of :func:`_vlm_rows`) through the ``ray.data.llm`` processor, then
    one caption table and index row per recording."""
    import ray

    from video.vlm import build_vlm_processor

    t0 = time.perf_counter()
    rows = kf_rows.take_all()
    by: dict[str, dict[str, Any]] = {it["recording_id"]: {"item": it, "info": {}, "error": "", "kf": []}
                                     for it in items}
    frames = []
    for r in rows:
        g = by[r["recording_id"]]
        if r["kind"] == "error":
            g["error"] = r["error"]
        elif r["kind"] == "info":
            g["info"] = json.loads(r["info"])
        else:
            frames.append({k: v for k, v in r.items() if k not in ("kind", "info", "error")})
    if frames:
        for r in build_vlm_processor(cfg.vlm)(ray.data.from_items(frames)).take_all():
            by[r["recording_id"]]["kf"].append(r)
    out = []
    for rid, g in sorted(by.items()):
        it = g["item"]
        base = {"recording_id": rid, "trajectory_id": it.get("trajectory_id") or "", "source": it["source"],
                "captioner": "vlm", "key": key, "sha256": it.get("sha256") or ""}
        if g["error"]:
            out.append({**base, "status": "error", "error": g["error"]})
            continue
        caps = [{"recording_id": rid, "trajectory_id": base["trajectory_id"], "captioner": "vlm",
                 "keyframe": int(r["keyframe"]), "frame": int(r["frame"]), "t_s": float(r["t_s"]),
                 "width": int(r["width"]), "height": int(r["height"]), "change": float(r["change"]),
                 "text": r.get("text", ""), "lines": "[]", "operation": r.get("operation", ""),
                 "error": r.get("error", "")} for r in sorted(g["kf"], key=lambda r: int(r["keyframe"]))]
        path = _caption_path("vlm", rid)
        run.write_table(path, _table(caps, CAPTION_COLUMNS))
        info = g["info"]
        row = {**base, "path": path, "keyframes": len(caps), "frames": info.get("frames"), "fps": info.get("fps"),
               "duration_s": info.get("duration_s"), "width": info.get("width"), "height": info.get("height"),
               "lines_read": 0, "seconds": round(time.perf_counter() - t0, 3), "status": "ok",
               "error": next((c["error"] for c in caps if c["error"]), "")}
        run.mark_done(CAPTION_STAGE, f"vlm/{rid}", {"row": row})
        out.append(row)
    return out


def _caption_items(run: RunDir, cfg: CaptionConfig) -> list[dict[str, Any]]:
    items = []
    if cfg.recordings and run.exists(RECORD_INDEX):
        for r in run.read_table(RECORD_INDEX).to_dicts():
            if r.get("status") == "ok" and r.get("path"):
                items.append({"recording_id": r["trajectory_id"], "trajectory_id": r["trajectory_id"],
                              "source": r["path"], "in_run": True, "sha256": r.get("sha256") or "",
                              "duration_s": float(r.get("duration_s") or 0.0)})
    for src in cfg.inputs:
        items.append({"recording_id": recording_id_of(src), "trajectory_id": "", "source": src, "in_run": False,
                      "sha256": ""})
    return items


def write_reconstruction(run: RunDir, rid: str, captioner: str, rows: list[dict[str, Any]],
                         duration_s: float | None) -> dict[str, Any]:
    """Reconstruct one recording's events from its caption rows and write ``realworld/<rid>/``."""
    from video.reconstruct import reconstruct

    rec = reconstruct(rows, rid, captioner)
    base = f"realworld/{rid}"
    entries = {}
    for rel, text in sorted(rec.blobs.items()):
        run.write_text(f"{base}/media/{rel}", text)
        h = rel.rsplit("/", 1)[-1].split(".")[0]
        entries[h] = {"type": "blob", "original_path": "(seen on screen)", "size_bytes": len(text.encode()),
                      "references": 1}
    run.write_json(f"{base}/media/manifest.json", {"version": 1, "entries": entries, "stats": {
        "total_blobs": len(entries), "total_diffs": 0, "total_bytes": sum(e["size_bytes"] for e in entries.values()),
        "deduplicated_saves": 0}})
    run.write_json(f"{base}/video_times.json", {"duration_s": duration_s, "video_t_s": rec.video_t_s})
    run.write_text(f"{base}/events.json", json.dumps(rec.events, ensure_ascii=False, indent=2))
    return {"events_path": f"{base}/events.json", "n_events": len(rec.events), "events": rec.events}


@exclusive_stage(CAPTION_STAGE, starts_run=lambda config: bool(config.section(CAPTION_STAGE).get("inputs")))
def run_caption(config, *, serial: bool | None = None, address: str | None = None, progress: bool = True
                ) -> dict[str, Any]:
    """Caption recordings and rebuild their events (see module doc).

    Args:
        config: pipeline config (section ``caption:`` → :class:`CaptionConfig`).
        serial / address: overrides of ``caption.serial`` (run in this process without Ray; OCR only, the VLM path
            always uses Ray Data) and ``ray.address`` for direct callers.

    Returns:
        The stage record: ``units`` (planned/done/skipped/failed), counts, keyframes, OCR frames/s, recovery per event type (micro-averaged over our
        recordings).

    Raises:
        ValueError: bad ``caption:`` section; the run's recordings asked for and the record stage never ran (no
            ``recordings/index.parquet``). A record stage that made no video (all error rows) is a warning and an
            empty record, not an error.
    """
    try:
        cfg = CaptionConfig.model_validate(config.section(CAPTION_STAGE))
    except Exception as exc:
        raise UserError(f"config section 'caption': {exc}") from exc
    if cfg.captioner == "vlm" and cfg.vlm is None:
        raise UserError("caption.vlm: required when caption.captioner is 'vlm'")
    serial = cfg.serial if serial is None else bool(serial)
    run = config.run()
    items = _caption_items(run, cfg)
    if not items and cfg.recordings and not cfg.inputs and not run.exists(RECORD_INDEX):
        raise UserError(f"caption: {run.url(RECORD_INDEX)} does not exist — run the record stage first "
                         "(python jobs/record.py), or caption MP4 files of your own with caption.inputs")
    if not items:  # not an error of the pipeline: the record stage may have made no video (all error rows)
        msg = f"{run.uri}: nothing to caption (no ok rows in {RECORD_INDEX} and no caption.inputs)"
        if progress:
            print(f"caption: {msg}", file=sys.stderr)
        else:
            log.warning("caption: %s", msg)
        rec = {"units": unit_counts(0, 0, 0, 0), "captioner": cfg.captioner, "recordings": 0, "captioned": 0, "errors": 0, "already_done": 0,
               "keyframes": 0, "wall_s": 0.0, "recovery": {}, "note": msg}
        _record_stage(run, CAPTION_STAGE, rec)
        return rec
    t0 = time.perf_counter()
    key = cfg.key()
    previous = {r["recording_id"]: r for r in (run.read_table(CAPTION_INDEX).to_dicts()
                                               if run.exists(CAPTION_INDEX) else [])}
    for rec in run.done_records(CAPTION_STAGE):
        if isinstance(rec.get("row"), dict):
            previous[rec["row"]["recording_id"]] = rec["row"]

    def fresh(it: dict[str, Any]) -> bool:
        p = previous.get(it["recording_id"])
        return bool(p and p.get("status") == "ok" and p.get("key") == key and p.get("captioner") == cfg.captioner
                    and not cfg.force and run.exists(str(p.get("path") or ""))
                    and (p.get("sha256") or "") == it["sha256"])

    done = [it for it in items if fresh(it)]
    todo = [it for it in items if not fresh(it)]
    new_rows: list[dict[str, Any]] = []
    new_rows = _caption(run, todo, cfg, key, serial=serial and cfg.captioner == "ocr", address=address,
                        config=config, progress=progress) if todo else []
    cap_wall = time.perf_counter() - t0
    merged = dict(previous)
    for r in new_rows:
        merged[r["recording_id"]] = r
    run.write_table(CAPTION_INDEX, _table([merged[k] for k in sorted(merged)], CAPTION_INDEX_COLUMNS))
    # ---- recording → events, and recovery against the true events
    rw_rows, recovery_rows = [], []
    if cfg.reconstruct:
        from video.reconstruct import score_recovery

        for it in items:
            r = merged.get(it["recording_id"])
            if not r or r.get("status") != "ok" or r.get("captioner") != cfg.captioner:
                rw_rows.append({"recording_id": it["recording_id"], "trajectory_id": it.get("trajectory_id") or "",
                                "captioner": cfg.captioner, "status": "error",
                                "error": (r or {}).get("error") or "not captioned"})
                continue
            rid = it["recording_id"]
            try:
                caps = run.read_table(r["path"]).to_dicts()
                out = write_reconstruction(run, rid, cfg.captioner, caps, r.get("duration_s"))
                rw_rows.append({"recording_id": rid, "trajectory_id": it.get("trajectory_id") or "",
                                "captioner": cfg.captioner, "events_path": out["events_path"],
                                "n_events": out["n_events"], "duration_s": r.get("duration_s"), "status": "ok",
                                "error": ""})
                tid = it.get("trajectory_id")
                if tid and run.exists(f"trajectories/{tid}/events.json"):
                    true = run.read_json(f"trajectories/{tid}/events.json")
                    for etype, s in score_recovery(true, out["events"], cfg.match_threshold).items():
                        recovery_rows.append({"recording_id": rid, "trajectory_id": tid, "captioner": cfg.captioner,
                                              "event_type": etype, **s})
            except Exception as exc:  # noqa: BLE001 - one bad caption table is one error row
                rw_rows.append({"recording_id": rid, "trajectory_id": it.get("trajectory_id") or "",
                                "captioner": cfg.captioner, "status": "error", "error": _err(exc)})
        run.write_table(REALWORLD_INDEX, _table(rw_rows, REALWORLD_COLUMNS))
        run.write_table(RECOVERY_TABLE, _table(recovery_rows, RECOVERY_COLUMNS))
    wall = time.perf_counter() - t0
    micro = _micro(recovery_rows)
    ok_new = [r for r in new_rows if r.get("status") == "ok"]
    kf = sum(int(r.get("keyframes") or 0) for r in ok_new)
    cpu = sum(float(r.get("cpu_s") or 0) for r in ok_new)
    rec = {"units": unit_counts(planned=len(items), done=len(ok_new), skipped=len(done),
                                failed=len(new_rows) - len(ok_new)),
           "captioner": cfg.captioner, "recordings": len(items), "captioned": len(ok_new),
           "errors": len(new_rows) - len(ok_new), "already_done": len(done), "keyframes": kf,
           "caption_wall_s": round(cap_wall, 2), "wall_s": round(wall, 2), "worker_cpu_s": round(cpu, 2),
           "keyframes_per_s": round(kf / cap_wall, 3) if kf and cap_wall else None,
           "keyframes_per_cpu_s": round(kf / cpu, 3) if kf and cpu else None,
           "reconstructed": sum(r["status"] == "ok" for r in rw_rows), "recovery": micro, "serial": serial,
           "options": cfg.model_dump(mode="json")}
    _record_stage(run, CAPTION_STAGE, rec)
    if progress:
        print(f"caption ({cfg.captioner}): {len(items)} recordings ({len(done)} already captioned): "
              f"{len(ok_new)} captioned, {rec['errors']} errors, {kf} keyframes in {cap_wall:.1f} s wall"
              + (f" / {cpu:.1f} CPU-s ({kf / cpu:.2f} keyframes per CPU-second)" if cpu else ""), file=sys.stderr)
        for r in new_rows:
            if r.get("status") != "ok":
                print(f"  error {r['recording_id']}: {str(r.get('error'))[:200]}", file=sys.stderr)
        if micro:
            print(recovery_table(micro), file=sys.stderr)
    return rec


def _micro(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per event type, true / recovered / matched summed over recordings, with precision and recall."""
    acc: dict[str, dict[str, int]] = defaultdict(lambda: {"true": 0, "recovered": 0, "matched": 0})
    for r in rows:
        a = acc[r["event_type"]]
        for k in ("true", "recovered", "matched"):
            a[k] += int(r.get(k) or 0)
    return {t: {**a, "precision": round(a["matched"] / a["recovered"], 4) if a["recovered"] else None,
                "recall": round(a["matched"] / a["true"], 4) if a["true"] else None}
            for t, a in sorted(acc.items(), key=lambda kv: (kv[0] == "all", kv[0]))}


def recovery_table(micro: dict[str, dict[str, Any]]) -> str:
    """A printable precision/recall table of :func:`_micro` figures."""
    f = lambda x: "   -" if x is None else f"{x:.2f}"  # noqa: E731
    lines = [f"{'event type':<22} {'true':>5} {'found':>6} {'match':>6} {'prec':>5} {'recall':>6}"]
    for t, a in micro.items():
        lines.append(f"{t:<22} {a['true']:>5} {a['recovered']:>6} {a['matched']:>6} {f(a['precision']):>5} "
                     f"{f(a['recall']):>6}")
    return "\n".join(lines)


def caption_file(path: str, captioner: str = "ocr", keyframes: KeyframeParams | None = None,
                 ocr: OcrParams | None = None, vlm: VlmConfig | None = None) -> list[dict[str, Any]]:
    """``filegram video caption``: caption rows of one local video (no run directory; no Ray for OCR, a local Ray
    for the VLM processor).

    Raises:
        ValueError: the file is not a readable video, or ``captioner`` is ``vlm`` without ``vlm``.
    """
    src = os.path.abspath(path)
    rid = recording_id_of(src)
    item = {"recording_id": rid, "trajectory_id": "", "source": src, "in_run": False, "sha256": ""}
    row = keyframes_of({"item": json.dumps(item)}, tempfile.gettempdir(), None,
                       (keyframes or KeyframeParams()).model_dump())
    if row["error"]:
        raise UserError(row["error"])
    info = json.loads(row["info"])
    if captioner == "ocr":
        from video.ocr import OcrCaptioner

        cap = OcrCaptioner(ocr)
        rows = []
        for index, frame, t_s, change, image in _unpack(row):
            lines = [ln.to_dict() for ln in cap.caption(image)]
            rows.append({"recording_id": rid, "trajectory_id": "", "captioner": "ocr", "keyframe": index,
                         "frame": frame, "t_s": t_s, "width": info["width"], "height": info["height"],
                         "change": change, "text": "\n".join(ln["text"] for ln in lines),
                         "lines": json.dumps(lines, ensure_ascii=False), "operation": "", "error": ""})
        return rows
    if vlm is None:
        raise UserError("a VLM configuration (--vlm-url or --vlm-model-source) is needed for captioner 'vlm'")
    import ray

    from filegram_ray.runtime import init_ray

    init_ray()
    cfg = CaptionConfig(captioner="vlm", vlm=vlm)
    tmp = tempfile.mkdtemp(prefix="fgcap-")
    try:
        scratch = RunDir(tmp)
        out = _caption_vlm(scratch, [item], ray.data.from_items(_vlm_rows(row, vlm.model_dump())), cfg, "cli")
        if out[0].get("status") == "error":
            raise UserError(out[0]["error"])
        return scratch.read_table(out[0]["path"]).to_dicts()
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


# -- transitional (issue #29 port in progress): the stage's class for the registry; run_stage calls the legacy
# function until the stage is ported onto plan/worker/finish
from filegram_ray.stages.base import Stage as _Stage  # noqa: E402


class RecordStage(_Stage):
    name = 'record'
    Config = RecordConfig
    legacy = staticmethod(run_record)


class CaptionStage(_Stage):
    name = 'caption'
    Config = CaptionConfig
    legacy = staticmethod(run_caption)
