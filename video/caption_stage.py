"""The caption stage: keyframes of screen recordings → OCR or VLM captions → events read back (Real-World setting).

Config section ``caption:`` → :class:`CaptionConfig`. Input: the ``ok`` rows of ``recordings/index.parquet`` plus
any MP4 named in ``caption.inputs`` (a user's own screen recordings: paths or fsspec URIs; with ``inputs`` the
stage may start a new run directory). One item per recording, ``<captioner>/<recording_id>``, longest first
(:func:`longest_first`), keyed by the captioner settings and the recording's bytes. ``recording_id`` is the
trajectory id for our recordings and ``ext/<file stem>-<8 hex>`` for others (:func:`recording_id_of`).

* ``captioner: ocr`` — :class:`OcrCaptionWorker` on the run's executor (actor pool by default, ``executor:
  serial`` in this process): keyframes by scene change (:mod:`video.keyframes`), then one RapidOCR captioner per
  worker (:mod:`video.ocr`; a recording's keyframes stay on one worker because OCR is incremental).
* ``captioner: vlm`` — model calls (:class:`~filegram_ray.stages.base.ModelCallSpec`, the model-call executor):
  each recording's keyframes with their JPEGs (:class:`VlmKeyframeWorker`, on the run's executor), through the
  ``ray.data.llm`` processor of :mod:`video.vlm` (vLLM engine or HTTP endpoint; on Ray whatever the executor),
  then one caption table per recording as soon as its last reply is in (:func:`vlm_caption_table`). Resumable per
  recording, with the same error rows as the OCR path.

Output: ``captions/<captioner>/<recording_id>.parquet`` (one row per keyframe,
:data:`~video.tables.CAPTION_COLUMNS`), ``captions/index.parquet`` (one row per recording; a broken MP4 is an error
row). Then each captioned recording becomes events (:mod:`video.reconstruct`): ``realworld/<recording_id>/events.json``
+ ``media/blobs/`` + ``video_times.json``, ``realworld/index.parquet``; for our own recordings the recovery against
the true events is scored per event type into ``realworld/recovery.parquet`` and the stage record.
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
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field

from filegram_ray.errors import UserError
from filegram_ray.stages.base import ModelCallSpec, Row, Stage, StageOptions, WorkerSpec
from filegram_ray.stages.runner import stage_function
from filegram_ray.storage import RunDir
from video.keyframes import Keyframe, KeyframeParams, extract_keyframes
from video.ocr import OcrParams
from video.record_stage import previous_rows
from video.tables import (
    CAPTION_COLUMNS,
    CAPTION_INDEX,
    CAPTION_INDEX_COLUMNS,
    REALWORLD_COLUMNS,
    REALWORLD_INDEX,
    RECORD_INDEX,
    RECOVERY_COLUMNS,
    RECOVERY_TABLE,
    cpu_seconds,
    error_text,
    table,
)
from video.vlm import VlmConfig

log = logging.getLogger(__name__)

__all__ = ["CaptionConfig", "CaptionStage", "OcrCaptionWorker", "VlmKeyframeWorker", "caption_file", "longest_first",
           "micro_recovery", "recording_id_of", "recovery_table", "run_caption", "vlm_caption_table",
           "write_reconstruction"]

STAGE = "caption"


class CaptionConfig(StageOptions):
    """The ``caption:`` section."""

    captioner: Literal["ocr", "vlm"] = Field("ocr", description="ocr (CPU, RapidOCR) or vlm (ray.data.llm)")
    recordings: bool = Field(True, description="caption the record stage's recordings")
    inputs: list[str] = Field(default_factory=list, description="other MP4 files (paths or fsspec URIs)")
    keyframes: KeyframeParams = Field(default_factory=KeyframeParams, description="scene-change keyframe settings")
    ocr: OcrParams = Field(default_factory=OcrParams, description="RapidOCR settings (captioner: ocr)")
    vlm: VlmConfig | None = Field(None, description="VLM back end (required for captioner: vlm)")
    reconstruct: bool = Field(True, description="rebuild events from the captions (Real-World setting)")
    match_threshold: float = Field(0.9, gt=0, le=1, description="path similarity that counts as recovered")
    num_actors: int = Field(2, ge=1, description="OCR actors")
    num_cpus_per_actor: float = Field(0.5, gt=0, le=1, description="Ray CPUs per OCR actor / VLM keyframe task "
                                                                   "(≤ 0.5 on 2 CPUs, ENV §1)")
    force: bool = Field(False, description="caption again even when a caption table with these options exists")

    def key(self) -> str:
        """12-hex digest of what makes the captions (captioner, keyframe and captioner settings): a recording
        captioned with other settings is captioned again."""
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


def _keyframes(run: RunDir, item: dict[str, Any], params: KeyframeParams) -> tuple[list[Keyframe], dict[str, Any]]:
    """A recording's keyframes and its ``info`` (frames, fps, duration_s, width, height).

    Raises:
        ValueError: not a readable video, or truncated (names the file). OSError: the source cannot be read."""
    with tempfile.TemporaryDirectory(prefix="fgcap-") as tmp:
        return extract_keyframes(_fetch(run, item, tmp), params)


def caption_path(captioner: str, rid: str) -> str:
    """The caption table of recording ``rid``, relative to the run directory."""
    return f"captions/{captioner}/{rid}.parquet"


def ocr_caption_rows(captioner, item: dict[str, Any], keyframes: Iterable[Keyframe],
                     info: dict[str, Any]) -> list[dict[str, Any]]:
    """Caption rows (:data:`~video.tables.CAPTION_COLUMNS`) of one recording's keyframes, in order, read by
    ``captioner`` (a :class:`~video.ocr.OcrCaptioner`, reset first: its incremental state is per recording)."""
    captioner.reset()
    rows = []
    for k in keyframes:
        lines = [ln.to_dict() for ln in captioner.caption(k.image)]
        rows.append({"recording_id": item["recording_id"], "trajectory_id": item.get("trajectory_id") or "",
                     "captioner": "ocr", "keyframe": k.index, "frame": k.frame, "t_s": k.t_s,
                     "width": info["width"], "height": info["height"], "change": k.change,
                     "text": "\n".join(ln["text"] for ln in lines), "lines": json.dumps(lines, ensure_ascii=False),
                     "operation": "", "error": ""})
    return rows


def _index_base(item: dict[str, Any], captioner: str, key: str) -> dict[str, Any]:
    return {"recording_id": item["recording_id"], "trajectory_id": item.get("trajectory_id") or "",
            "source": item["source"], "captioner": captioner, "key": key, "sha256": item.get("sha256") or ""}


class OcrCaptionWorker:
    """Captions one recording per unit with OCR: keyframes by scene change, then one RapidOCR captioner (per
    worker) reads them in order and the recording's caption table is written.

    Args:
        run_uri / storage_options: the run directory.
        ocr / keyframes: :class:`~video.ocr.OcrParams` and :class:`~video.keyframes.KeyframeParams` fields.
        key: :meth:`CaptionConfig.key`, written into the index row.
    """

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None, ocr: dict[str, Any],
                 keyframes: dict[str, Any], key: str):
        self.run = RunDir(run_uri, storage_options)
        self.ocr, self.keyframes, self.key = OcrParams(**ocr), KeyframeParams(**keyframes), key
        self.captioner = None

    def setup(self) -> None:
        """Load the RapidOCR models (once per worker)."""
        from video.ocr import OcrCaptioner

        self.captioner = OcrCaptioner(self.ocr)

    def process(self, unit: dict[str, Any]) -> dict[str, Any]:
        """``unit["item"]`` (a recording) → its caption table, written atomically; returns its index row
        (:data:`~video.tables.CAPTION_INDEX_COLUMNS`; ``cpu_s`` counts keyframe extraction and OCR).

        Raises:
            ValueError / OSError: the recording cannot be read (the executor makes it an error row)."""
        item = unit["item"]
        t0, c0 = time.perf_counter(), cpu_seconds()
        kfs, info = _keyframes(self.run, item, self.keyframes)
        rows = ocr_caption_rows(self.captioner, item, kfs, info)
        path = caption_path("ocr", item["recording_id"])
        self.run.write_table(path, table(rows, CAPTION_COLUMNS))
        return {**_index_base(item, "ocr", self.key), "path": path, "keyframes": len(rows),
                "frames": info["frames"], "fps": info["fps"], "duration_s": info["duration_s"],
                "width": info["width"], "height": info["height"], "lines_read": self.captioner.boxes_read,
                "seconds": round(time.perf_counter() - t0, 3), "cpu_s": round(cpu_seconds() - c0, 3),
                "status": "ok", "error": ""}


# ---------------------------------------------------------------------------------------------------- VLM path
class VlmKeyframeWorker:
    """The VLM path's ``prepare``: a recording → its keyframes as request rows (``req_key``, the ids, the JPEG scaled
    to ``vlm.image_width``) and ``state`` ``{"info": frames, fps, duration_s, width, height}``.

    Raises:
        ValueError / OSError: the recording cannot be read (its error row)."""

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None, keyframes: dict[str, Any],
                 vlm: dict[str, Any]):
        self.run = RunDir(run_uri, storage_options)
        self.keyframes, self.vlm = KeyframeParams(**keyframes), VlmConfig(**vlm)

    def process(self, unit: dict[str, Any]) -> dict[str, Any]:
        from video.vlm import encode_keyframe

        item = unit["item"]
        rid = item["recording_id"]
        kfs, info = _keyframes(self.run, item, self.keyframes)
        reqs = [{"req_key": f"{rid}#{k.index}", "recording_id": rid, "trajectory_id": item.get("trajectory_id") or "",
                 "keyframe": k.index, "frame": k.frame, "t_s": k.t_s, "width": info["width"],
                 "height": info["height"], "change": k.change,
                 "jpeg": encode_keyframe(k.image, self.vlm.image_width, self.vlm.jpeg_quality)} for k in kfs]
        return {"requests": reqs, "state": {"info": info}}


def vlm_caption_table(item: dict[str, Any], replies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The caption rows (:data:`~video.tables.CAPTION_COLUMNS`) of one recording from its keyframes' VLM replies
    (:func:`video.vlm.vlm_postprocess` rows), in keyframe order."""
    rid = item["recording_id"]
    return [{"recording_id": rid, "trajectory_id": item.get("trajectory_id") or "", "captioner": "vlm",
             "keyframe": int(r["keyframe"]), "frame": int(r["frame"]), "t_s": float(r["t_s"]),
             "width": int(r["width"]), "height": int(r["height"]), "change": float(r["change"]),
             "text": r.get("text", ""), "lines": "[]", "operation": r.get("operation", ""),
             "error": r.get("error", "")} for r in sorted(replies, key=lambda r: int(r["keyframe"]))]


class _VlmCollect:
    """The VLM path's ``collect``: a recording's replies → its caption table (written atomically) and index row."""

    def __init__(self, run: RunDir, key: str):
        self.run, self.key = run, key
        self.t0 = time.perf_counter()

    def __call__(self, unit: dict[str, Any], state: dict[str, Any], requests: list[dict[str, Any]],
                 replies: list[dict[str, Any]]) -> dict[str, Any]:
        item = unit["item"]
        caps = vlm_caption_table(item, replies)
        path = caption_path("vlm", item["recording_id"])
        self.run.write_table(path, table(caps, CAPTION_COLUMNS))
        info = state.get("info") or {}
        return {**_index_base(item, "vlm", self.key), "path": path, "keyframes": len(caps),
                "frames": info.get("frames"), "fps": info.get("fps"), "duration_s": info.get("duration_s"),
                "width": info.get("width"), "height": info.get("height"), "lines_read": 0,
                "seconds": round(time.perf_counter() - self.t0, 3), "status": "ok",
                "error": next((c["error"] for c in caps if c["error"]), "")}


# ---------------------------------------------------------------------------------------------------- stage
def longest_first(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recordings in the order they are captioned: longest first (``duration_s`` of the record stage's row, else
    0), ties by recording id — deterministic, and the stage's tail is a short recording, not the longest one
    started last. Each recording's outputs do not depend on the order."""
    return sorted(items, key=lambda it: (-float(it.get("duration_s") or 0.0), it["recording_id"]))


def _caption_items(run: RunDir, cfg: CaptionConfig) -> list[dict[str, Any]]:
    """The recordings to caption: the record stage's ok rows (``recordings: true``), then ``inputs``; a recording
    id named twice is captioned once."""
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
    seen: set[str] = set()
    return [it for it in items if not (it["recording_id"] in seen or seen.add(it["recording_id"]))]


def write_reconstruction(run: RunDir, rid: str, captioner: str, rows: list[dict[str, Any]],
                         duration_s: float | None) -> dict[str, Any]:
    """Reconstruct one recording's events from its caption rows and write ``realworld/<rid>/`` (``events.json``,
    ``media/blobs/`` + ``manifest.json``, ``video_times.json``); returns ``events_path``, ``n_events``, ``events``."""
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


def micro_recovery(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per event type, true / recovered / matched summed over recordings, with precision and recall (None when
    nothing was recovered / nothing was true); ``all`` last."""
    acc: dict[str, dict[str, int]] = defaultdict(lambda: {"true": 0, "recovered": 0, "matched": 0})
    for r in rows:
        a = acc[r["event_type"]]
        for k in ("true", "recovered", "matched"):
            a[k] += int(r.get(k) or 0)
    return {t: {**a, "precision": round(a["matched"] / a["recovered"], 4) if a["recovered"] else None,
                "recall": round(a["matched"] / a["true"], 4) if a["true"] else None}
            for t, a in sorted(acc.items(), key=lambda kv: (kv[0] == "all", kv[0]))}


def recovery_table(micro: dict[str, dict[str, Any]]) -> str:
    """A printable precision/recall table of :func:`micro_recovery` figures."""
    f = lambda x: "   -" if x is None else f"{x:.2f}"  # noqa: E731
    lines = [f"{'event type':<22} {'true':>5} {'found':>6} {'match':>6} {'prec':>5} {'recall':>6}"]
    for t, a in micro.items():
        lines.append(f"{t:<22} {a['true']:>5} {a['recovered']:>6} {a['matched']:>6} {f(a['precision']):>5} "
                     f"{f(a['recall']):>6}")
    return "\n".join(lines)


class CaptionStage(Stage):
    """Caption: one item per recording (see the module docstring): OCR items on :class:`OcrCaptionWorker`, VLM items
    as model calls through the ``ray.data.llm`` processor. ``finish`` writes ``captions/index.parquet``, rebuilds the
    events (``realworld/``) and returns the summary."""

    name = STAGE
    Config = CaptionConfig
    #: captioning MP4 files of one's own (``caption.inputs``) may start a new run directory
    starts_run = "inputs"
    steps = ("recordings",)

    def check(self) -> None:
        """Collect the recordings and what earlier runs captioned.

        Raises:
            UserError: ``captioner: vlm`` without ``caption.vlm``; the run's recordings asked for and the record
                stage never ran (no ``recordings/index.parquet``) and no ``inputs``. A record stage that made no
                video (all error rows) is a printed note and an empty record, not an error.
        """
        cfg, run = self.opts, self.run
        if cfg.captioner == "vlm" and cfg.vlm is None:
            raise UserError("caption.vlm: required when caption.captioner is 'vlm'")
        self.recordings = _caption_items(run, cfg)
        if not self.recordings and cfg.recordings and not cfg.inputs and not run.exists(RECORD_INDEX):
            raise UserError(f"caption: {run.url(RECORD_INDEX)} does not exist — run the record stage first "
                            "(python jobs/record.py), or caption MP4 files of your own with caption.inputs")
        self.t0 = time.perf_counter()
        self.key = cfg.key()
        self.previous = previous_rows(run, CAPTION_INDEX, STAGE, "recording_id")

    def items(self, step: str) -> list[dict[str, Any]]:
        """One item per recording, longest first, keyed by the captioner settings and the recording's bytes
        (``sha256`` of the record stage's row); finished when its caption table exists too."""
        cap = self.opts.captioner
        return [{"unit_id": f"{cap}/{it['recording_id']}", "item": it, "key": f"{self.key}/{it['sha256']}",
                 "outputs": [caption_path(cap, it["recording_id"])]} for it in longest_first(self.recordings)]

    def worker(self, step: str) -> WorkerSpec | ModelCallSpec:
        """The OCR worker, or the VLM's model calls (keyframes prepared on the run's executor, the processor of
        ``caption.vlm``, each recording's table written as its replies are in)."""
        from functools import partial

        cfg, run = self.opts, self.run
        if cfg.captioner == "ocr":
            return WorkerSpec(OcrCaptionWorker, {"run_uri": run.uri, "storage_options": run.storage_options,
                                                 "ocr": cfg.ocr.model_dump(), "keyframes": cfg.keyframes.model_dump(),
                                                 "key": self.key},
                              num_actors=cfg.num_actors, num_cpus=cfg.num_cpus_per_actor)
        from video.vlm import run_vlm

        prepare = WorkerSpec(VlmKeyframeWorker, {"run_uri": run.uri, "storage_options": run.storage_options,
                                                 "keyframes": cfg.keyframes.model_dump(), "vlm": cfg.vlm.model_dump()},
                             num_actors=cfg.num_actors, num_cpus=cfg.num_cpus_per_actor)
        return ModelCallSpec(prepare=prepare, call=partial(run_vlm, cfg=cfg.vlm), collect=_VlmCollect(run, self.key),
                             wave=max(1, cfg.num_actors))

    def _index_rows(self, rows: list[Row]) -> list[dict[str, Any]]:
        """This run's index rows (error rows with the recording's fields)."""
        items = {f"{self.opts.captioner}/{it['recording_id']}": it for it in self.recordings}
        return [r if r.ok else {**_index_base(items[r.unit], self.opts.captioner, self.key),
                                "status": "error", "error": error_text(r)}
                for r in rows if not r.get("skipped")]

    def _reconstruct(self, merged: dict[str, dict[str, Any]]) -> tuple[list[dict], list[dict]]:
        """``realworld/`` of every recording of this run: events from its caption table and, for our own
        recordings, their recovery against the true events (``trajectories/<id>/events.json``)."""
        from video.reconstruct import score_recovery

        run, cfg = self.run, self.opts
        rw_rows, recovery_rows = [], []
        for it in self.recordings:
            rid, tid = it["recording_id"], it.get("trajectory_id") or ""
            base = {"recording_id": rid, "trajectory_id": tid, "captioner": cfg.captioner}
            r = merged.get(rid)
            if not r or r.get("status") != "ok" or r.get("captioner") != cfg.captioner:
                rw_rows.append({**base, "status": "error", "error": (r or {}).get("error") or "not captioned"})
                continue
            try:
                caps = run.read_table(r["path"]).to_dicts()
                out = write_reconstruction(run, rid, cfg.captioner, caps, r.get("duration_s"))
                rw_rows.append({**base, "events_path": out["events_path"], "n_events": out["n_events"],
                                "duration_s": r.get("duration_s"), "status": "ok", "error": ""})
                if tid and run.exists(f"trajectories/{tid}/events.json"):
                    true = run.read_json(f"trajectories/{tid}/events.json")
                    for etype, s in score_recovery(true, out["events"], cfg.match_threshold).items():
                        recovery_rows.append({**base, "event_type": etype, **s})
            except Exception as exc:  # noqa: BLE001 - one bad caption table is one error row
                rw_rows.append({**base, "status": "error", "error": f"{type(exc).__name__}: {exc}"[:2000]})
        run.write_table(REALWORLD_INDEX, table(rw_rows, REALWORLD_COLUMNS))
        run.write_table(RECOVERY_TABLE, table(recovery_rows, RECOVERY_COLUMNS))
        return rw_rows, recovery_rows

    def finish(self, rows: list[Row]) -> dict[str, Any]:
        cfg, run = self.opts, self.run
        if not self.recordings:  # not an error of the pipeline: the record stage may have made no video (all error rows)
            msg = f"{run.uri}: nothing to caption (no ok rows in {RECORD_INDEX} and no caption.inputs)"
            print(f"caption: {msg}", file=sys.stderr)
            return {"captioner": cfg.captioner, "recordings": 0, "captioned": 0, "errors": 0, "already_done": 0,
                    "keyframes": 0, "wall_s": 0.0, "recovery": {}, "note": msg}
        counts = self.counts["recordings"]
        skipped = counts.skipped
        new_rows = self._index_rows(rows)
        cap_wall = time.perf_counter() - self.t0
        merged = dict(self.previous)
        for r in new_rows:
            merged[r["recording_id"]] = r
        run.write_table(CAPTION_INDEX, table([merged[k] for k in sorted(merged)], CAPTION_INDEX_COLUMNS))
        rw_rows, recovery_rows = self._reconstruct(merged) if cfg.reconstruct else ([], [])
        wall = time.perf_counter() - self.t0
        micro = micro_recovery(recovery_rows)
        ok_new = [r for r in new_rows if r.get("status") == "ok"]
        errors = counts.failed
        kf = sum(int(r.get("keyframes") or 0) for r in ok_new)
        cpu = sum(float(r.get("cpu_s") or 0) for r in ok_new)
        summary = {"captioner": cfg.captioner, "recordings": len(self.recordings), "captioned": counts.done,
                   "errors": errors, "already_done": skipped, "keyframes": kf, "caption_wall_s": round(cap_wall, 2),
                   "wall_s": round(wall, 2), "worker_cpu_s": round(cpu, 2),
                   "keyframes_per_s": round(kf / cap_wall, 3) if kf and cap_wall else None,
                   "keyframes_per_cpu_s": round(kf / cpu, 3) if kf and cpu else None,
                   "reconstructed": sum(r["status"] == "ok" for r in rw_rows), "recovery": micro,
                   "serial": not self.uses_ray, "options": cfg.model_dump(mode="json")}
        print(f"caption ({cfg.captioner}): {len(self.recordings)} recordings ({skipped} already captioned): "
              f"{counts.done} captioned, {errors} errors, {kf} keyframes in {cap_wall:.1f} s wall"
              + (f" / {cpu:.1f} CPU-s ({kf / cpu:.2f} keyframes per CPU-second)" if cpu else ""), file=sys.stderr)
        if micro:
            print(recovery_table(micro), file=sys.stderr)
        return summary


run_caption = stage_function(CaptionStage)


def caption_file(path: str, captioner: str = "ocr", keyframes: KeyframeParams | None = None,
                 ocr: OcrParams | None = None, vlm: VlmConfig | None = None) -> list[dict[str, Any]]:
    """``filegram video caption``: caption rows (:data:`~video.tables.CAPTION_COLUMNS`) of one local video (no run
    directory; no Ray for OCR, a local Ray for the VLM processor).

    Raises:
        UserError: the file is not a readable video, or ``captioner`` is ``vlm`` without ``vlm``.
    """
    src = os.path.abspath(path)
    rid = recording_id_of(src)
    item = {"recording_id": rid, "trajectory_id": "", "source": src, "in_run": False, "sha256": ""}
    params = keyframes or KeyframeParams()
    if captioner == "ocr":
        from video.ocr import OcrCaptioner

        try:
            kfs, info = _keyframes(RunDir(tempfile.gettempdir()), item, params)
        except (ValueError, OSError) as exc:
            raise UserError(f"{type(exc).__name__}: {exc}") from exc
        return ocr_caption_rows(OcrCaptioner(ocr), item, kfs, info)
    if vlm is None:
        raise UserError("a VLM configuration (--vlm-url or --vlm-model-source) is needed for captioner 'vlm'")
    from filegram_ray.runtime import init_ray
    from video.vlm import run_vlm

    init_ray()
    worker = VlmKeyframeWorker(tempfile.gettempdir(), None, params.model_dump(), vlm.model_dump())
    try:
        prepared = worker.process({"item": item})
    except (ValueError, OSError) as exc:
        raise UserError(f"{type(exc).__name__}: {exc}") from exc
    return vlm_caption_table(item, list(run_vlm(prepared["requests"], vlm)))
