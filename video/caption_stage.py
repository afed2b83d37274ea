"""The caption stage: keyframes of screen recordings → OCR or VLM captions → events read back (Real-World setting).

Config section ``caption:`` → :class:`CaptionConfig`. Input: the ``ok`` rows of ``recordings/index.parquet`` plus
any MP4 named in ``caption.inputs`` (a user's own screen recordings: paths or fsspec URIs; with ``inputs`` the
stage may start a new run directory). One unit per recording, ``<captioner>/<recording_id>``, longest first
(:func:`longest_first`). ``recording_id`` is the trajectory id for our recordings and ``ext/<file stem>-<8 hex>``
for others (:func:`recording_id_of`).

* ``captioner: ocr`` — :class:`OcrCaptionWorker` on the run's executor (actor pool by default, ``serial: true``
  in this process): keyframes by scene change (:mod:`video.keyframes`), then one RapidOCR captioner per worker
  (:mod:`video.ocr`; a recording's keyframes stay on one worker because OCR is incremental).
* ``captioner: vlm`` — a Ray Data pipeline the executors do not cover, so it stays in this stage
  (:meth:`CaptionStage.finish` → :func:`caption_vlm`): keyframes of each recording (``flat_map`` tasks, one row
  per keyframe with its JPEG) through the ``ray.data.llm`` processor of :mod:`video.vlm` (vLLM engine or HTTP
  endpoint), then one caption table per recording. It always runs on Ray (``serial`` does not apply); its
  completion records are written there, after each recording's table.

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

from pydantic import BaseModel, ConfigDict, Field

from filegram_ray.errors import UserError
from filegram_ray.stages.base import Row, Stage, WorkerSpec
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

__all__ = ["CaptionConfig", "CaptionStage", "OcrCaptionWorker", "caption_file", "caption_vlm", "longest_first",
           "micro_recovery", "recording_id_of", "recovery_table", "run_caption", "write_reconstruction"]

STAGE = "caption"


class CaptionConfig(BaseModel):
    """The ``caption:`` section."""

    model_config = ConfigDict(extra="forbid")
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
    serial: bool = Field(False, description="caption in this process without Ray (OCR only; VLM uses Ray Data)")

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
def vlm_keyframe_rows(row: dict[str, Any], run_uri: str, storage_options: dict[str, Any] | None,
                      keyframes: dict[str, Any], vlm: dict[str, Any]) -> list[dict[str, Any]]:
    """``flat_map`` of the VLM path: a recording (``row["item"]``, JSON) → one ``info`` row (or one ``error`` row:
    an unreadable recording) plus one row per keyframe with its JPEG (scaled to ``vlm.image_width``)."""
    from video.vlm import encode_keyframe

    cfg = VlmConfig(**vlm)
    item = json.loads(row["item"])
    rid = item["recording_id"]
    try:
        kfs, info = _keyframes(RunDir(run_uri, storage_options), item, KeyframeParams(**keyframes))
    except Exception as exc:  # noqa: BLE001 - a broken recording is one error row of the index
        return [{"recording_id": rid, "kind": "error", "error": f"{type(exc).__name__}: {exc}"[:2000], "info": "{}"}]
    text = json.dumps(info)
    out = [{"recording_id": rid, "kind": "info", "error": "", "info": text}]
    for k in kfs:
        out.append({"recording_id": rid, "trajectory_id": item.get("trajectory_id") or "", "kind": "keyframe",
                    "keyframe": k.index, "frame": k.frame, "t_s": k.t_s, "width": info["width"],
                    "height": info["height"], "change": k.change, "info": text,
                    "jpeg": encode_keyframe(k.image, cfg.image_width, cfg.jpeg_quality)})
    return out


def caption_vlm(run: RunDir, items: list[dict[str, Any]], kf_rows, vlm: VlmConfig, key: str
                ) -> list[dict[str, Any]]:
    """The VLM captioner: keyframe rows (a Ray Dataset of :func:`vlm_keyframe_rows`) through the ``ray.data.llm``
    processor (:func:`video.vlm.build_vlm_processor`), then one caption table (written atomically) and one index
    row per recording of ``items``, sorted by recording id; ``seconds`` is the whole call's wall time."""
    import ray

    from video.vlm import build_vlm_processor

    t0 = time.perf_counter()
    by: dict[str, dict[str, Any]] = {it["recording_id"]: {"item": it, "info": {}, "error": "", "kf": []}
                                     for it in items}
    frames = []
    for r in kf_rows.take_all():
        g = by[r["recording_id"]]
        if r["kind"] == "error":
            g["error"] = r["error"]
        elif r["kind"] == "info":
            g["info"] = json.loads(r["info"])
        else:
            frames.append({k: v for k, v in r.items() if k not in ("kind", "info", "error")})
    if frames:
        for r in build_vlm_processor(vlm)(ray.data.from_items(frames)).take_all():
            by[r["recording_id"]]["kf"].append(r)
    out = []
    for rid, g in sorted(by.items()):
        base = _index_base(g["item"], "vlm", key)
        if g["error"]:
            out.append({**base, "status": "error", "error": g["error"]})
            continue
        caps = [{"recording_id": rid, "trajectory_id": base["trajectory_id"], "captioner": "vlm",
                 "keyframe": int(r["keyframe"]), "frame": int(r["frame"]), "t_s": float(r["t_s"]),
                 "width": int(r["width"]), "height": int(r["height"]), "change": float(r["change"]),
                 "text": r.get("text", ""), "lines": "[]", "operation": r.get("operation", ""),
                 "error": r.get("error", "")} for r in sorted(g["kf"], key=lambda r: int(r["keyframe"]))]
        path = caption_path("vlm", rid)
        run.write_table(path, table(caps, CAPTION_COLUMNS))
        info = g["info"]
        out.append({**base, "path": path, "keyframes": len(caps), "frames": info.get("frames"),
                    "fps": info.get("fps"), "duration_s": info.get("duration_s"), "width": info.get("width"),
                    "height": info.get("height"), "lines_read": 0, "seconds": round(time.perf_counter() - t0, 3),
                    "status": "ok", "error": next((c["error"] for c in caps if c["error"]), "")})
    return out


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
    """Caption: one unit per recording (see the module docstring). OCR units run on the executor
    (:class:`OcrCaptionWorker`); VLM units run in :meth:`finish` through the ``ray.data.llm`` processor. ``finish``
    writes ``captions/index.parquet``, rebuilds the events (``realworld/``) and returns the summary."""

    name = STAGE
    Config = CaptionConfig
    extras = ()

    @classmethod
    def may_start_run(cls, config) -> bool:
        """Captioning MP4 files of one's own (``caption.inputs``) may start a new run directory."""
        return bool(config.section(cls.section_name()).get("inputs"))

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
        self.items = _caption_items(run, cfg)
        if not self.items and cfg.recordings and not cfg.inputs and not run.exists(RECORD_INDEX):
            raise UserError(f"caption: {run.url(RECORD_INDEX)} does not exist — run the record stage first "
                            "(python jobs/record.py), or caption MP4 files of your own with caption.inputs")
        self.t0 = time.perf_counter()
        self.key = cfg.key()
        self.previous = previous_rows(run, CAPTION_INDEX, STAGE, "recording_id")

    def plan(self) -> list[dict[str, Any]]:
        self.units = [{"unit_id": f"{self.opts.captioner}/{it['recording_id']}", "item": it}
                      for it in longest_first(self.items)]
        return self.units

    def finished(self, unit: dict[str, Any]) -> Row | None:
        """A recording is finished when an earlier ok row has this captioner and options key, its caption table
        exists and the recording's bytes are the same (``sha256`` of the record stage's row)."""
        it, cfg = unit["item"], self.opts
        p = self.previous.get(it["recording_id"])
        if not (p and p.get("status") == "ok" and p.get("key") == self.key and p.get("captioner") == cfg.captioner
                and not cfg.force and self.run.exists(str(p.get("path") or ""))
                and (p.get("sha256") or "") == it["sha256"]):
            return None
        return Row({**p, "unit": unit["unit_id"], "status": "ok", "skipped": True})

    def worker(self) -> WorkerSpec | None:
        """The OCR worker; None for the VLM captioner (its units run in :meth:`finish`)."""
        if self.opts.captioner != "ocr":
            return None
        return WorkerSpec(OcrCaptionWorker, {"run_uri": self.run.uri, "storage_options": self.run.storage_options,
                                             "ocr": self.opts.ocr.model_dump(),
                                             "keyframes": self.opts.keyframes.model_dump(), "key": self.key},
                          num_actors=self.opts.num_actors, num_cpus=self.opts.num_cpus_per_actor)

    def done_record(self, row: Row) -> dict[str, Any]:
        """``{"row": <index row>}``: what the next run reads back as an earlier caption."""
        return {"row": {c: row.get(c) for c in CAPTION_INDEX_COLUMNS}}

    def _vlm_units(self, units: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Caption ``units`` with the VLM (:func:`caption_vlm` on a Ray Data pipeline: ``flat_map`` keyframe
        tasks of ``num_cpus_per_actor`` CPUs, capped to fit beside the processor) and write each ok recording's
        completion record after its table; returns the index rows."""
        import ray

        from filegram_ray.runtime import init_ray

        cfg, run = self.opts, self.run
        init_ray(self.config.ray.address, self.config.ray.num_cpus)
        n = min(cfg.num_actors, len(units))
        total = float(ray.cluster_resources().get("CPU", 1.0))
        cpus = round(min(cfg.num_cpus_per_actor, 0.9 * total / (n + 1)), 3)
        kf_kwargs = {"run_uri": run.uri, "storage_options": run.storage_options,
                     "keyframes": cfg.keyframes.model_dump(), "vlm": cfg.vlm.model_dump()}
        # one recording per block, so the keyframe tasks take recordings one at a time
        ds = ray.data.from_items([{"item": json.dumps(u["item"], ensure_ascii=False)} for u in units],
                                 override_num_blocks=len(units))
        out = caption_vlm(run, [u["item"] for u in units],
                          ds.flat_map(vlm_keyframe_rows, fn_kwargs=kf_kwargs, num_cpus=cpus), cfg.vlm, self.key)
        for r in out:
            if r["status"] == "ok":
                run.mark_done(STAGE, f"vlm/{r['recording_id']}", self.done_record(Row(r)))
        return out

    def _index_rows(self, rows: list[Row]) -> list[dict[str, Any]]:
        """This run's index rows (error rows with the recording's fields), and for the VLM captioner its units."""
        items = {u["unit_id"]: u["item"] for u in self.units}
        out = []
        for r in rows:
            if r.get("skipped"):
                continue
            out.append(r if r.ok else {**_index_base(items[r.unit], self.opts.captioner, self.key),
                                       "status": "error", "error": error_text(r)})
        if self.opts.captioner == "vlm":
            seen = {r.unit for r in rows}
            todo = [u for u in self.units if u["unit_id"] not in seen]
            if todo:
                out += self._vlm_units(todo)
        return out

    def _reconstruct(self, merged: dict[str, dict[str, Any]]) -> tuple[list[dict], list[dict]]:
        """``realworld/`` of every recording of this run: events from its caption table and, for our own
        recordings, their recovery against the true events (``trajectories/<id>/events.json``)."""
        from video.reconstruct import score_recovery

        run, cfg = self.run, self.opts
        rw_rows, recovery_rows = [], []
        for it in self.items:
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
        if not self.items:  # not an error of the pipeline: the record stage may have made no video (all error rows)
            msg = f"{run.uri}: nothing to caption (no ok rows in {RECORD_INDEX} and no caption.inputs)"
            print(f"caption: {msg}", file=sys.stderr)
            return {"captioner": cfg.captioner, "recordings": 0, "captioned": 0, "errors": 0, "already_done": 0,
                    "keyframes": 0, "wall_s": 0.0, "recovery": {}, "note": msg}
        skipped = sum(1 for r in rows if r.get("skipped"))
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
        errors = len(new_rows) - len(ok_new)
        kf = sum(int(r.get("keyframes") or 0) for r in ok_new)
        cpu = sum(float(r.get("cpu_s") or 0) for r in ok_new)
        summary = {"captioner": cfg.captioner, "recordings": len(self.items), "captioned": len(ok_new),
                   "errors": errors, "already_done": skipped, "keyframes": kf, "caption_wall_s": round(cap_wall, 2),
                   "wall_s": round(wall, 2), "worker_cpu_s": round(cpu, 2),
                   "keyframes_per_s": round(kf / cap_wall, 3) if kf and cap_wall else None,
                   "keyframes_per_cpu_s": round(kf / cpu, 3) if kf and cpu else None,
                   "reconstructed": sum(r["status"] == "ok" for r in rw_rows), "recovery": micro,
                   "serial": not self.executor.uses_ray and cfg.captioner == "ocr",
                   "options": cfg.model_dump(mode="json")}
        if cfg.captioner == "vlm":  # its units ran here, not on the executor: the runner did not count them
            summary["units"] = {"planned": len(self.items), "done": len(ok_new), "skipped": skipped,
                                "failed": errors}
        print(f"caption ({cfg.captioner}): {len(self.items)} recordings ({skipped} already captioned): "
              f"{len(ok_new)} captioned, {errors} errors, {kf} keyframes in {cap_wall:.1f} s wall"
              + (f" / {cpu:.1f} CPU-s ({kf / cpu:.2f} keyframes per CPU-second)" if cpu else ""), file=sys.stderr)
        if cfg.captioner == "vlm":  # the runner printed the OCR error rows; the VLM's are this stage's own
            for r in new_rows:
                if r.get("status") != "ok":
                    print(f"  error {r['recording_id']}: {str(r.get('error'))[:200]}", file=sys.stderr)
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
    import ray

    from filegram_ray.runtime import init_ray

    init_ray()
    rows = vlm_keyframe_rows({"item": json.dumps(item)}, tempfile.gettempdir(), None, params.model_dump(),
                             vlm.model_dump())
    if rows[0]["kind"] == "error":
        raise UserError(rows[0]["error"])
    tmp = tempfile.mkdtemp(prefix="fgcap-")
    try:
        scratch = RunDir(tmp)
        out = caption_vlm(scratch, [item], ray.data.from_items(rows), vlm, "cli")
        if out[0].get("status") == "error":
            raise UserError(out[0]["error"])
        return scratch.read_table(out[0]["path"]).to_dicts()
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
