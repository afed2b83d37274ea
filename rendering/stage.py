"""The render stage: agent text outputs → multimodal derivatives (FILEGRAM_REFERENCE §10), as a Ray Data pipeline.

Input: ``trajectories/outputs.parquet`` (trajectory_id, profile_id, task_id, path, file_type, bytes, sha256; ``path``
relative to ``trajectories/<profile_id>/<task_id>/outputs/``). Only text outputs (``.md``, ``.markdown``, ``.txt``
by default) are rendered; other rows are counted as ``ignored_non_text``, text outputs past ``render.limit`` as
``over_limit``.

Pipeline (``run_render``):

1. plan — ``flat_map`` over output rows: read the file, decompose it (:mod:`rendering.sections`), choose formats
   (:mod:`rendering.policy`) → one *unit* per (section, format). A file that cannot be read or decoded becomes one
   ``error`` row (``format`` = ``""``) naming the file; the batch goes on.
2. skip — units already recorded as ``ok``/``skipped`` (completion records ``_done/render/*.json`` and an existing
   ``derivatives/index.parquet``) are dropped: the stage is resumable and idempotent.
3. render — ``map_batches`` with callable classes on one actor pool per renderer group (default: documents ×2 for
   pdf/docx/md/pptx/xlsx, images ×1 for png_page/png_chart, tts ×2 for wav: each of its actors loads the piper voice
   once and runs it on one onnxruntime thread, :data:`rendering.renderers.TTS_THREADS`; narration is ≈80 % of the
   stage's CPU time, so it gets two actors to use both cores while the document pool drains). Each
   actor asks ``num_cpus`` ≤ 0.5 (ENVIRONMENT_FACTS §1: on 2 CPUs a pool at 1 CPU per actor deadlocks); when the
   pools together would ask more than 90 % of the cluster's CPUs, every actor's request is scaled down to fit.
   Derivatives are written atomically to ``derivatives/<profile_id>/<task_id>/<output-stem>/s<NN>.<suffix>``;
   after each batch one completion record holds that batch's rows.
4. index — ``derivatives/index.parquet`` (:data:`INDEX_COLUMNS`) merges earlier rows with this run's, one row per
   unit; render times go to ``derivatives/timings.parquet`` (so the index is byte-identical across same-seed runs);
   ``run.json`` gets the stage record; a summary table (counts per format, bytes, files/s) is printed.

Integrity (issue 13):

* one plan per run directory: every row carries the ``plan`` key (a digest of the seed and every setting that
  decides which derivatives exist and what they hold). A rerun with other settings re-renders under the new plan
  and removes the old plan's rows and files, so the index never mixes two plans
  (REL-render-rerun-without-seed-mixes-derivatives);
* a unit that kills its worker (a native crash or an OOM kill inside a renderer library) cannot stall the stage
  (BR-23): a batch is tried ``max_attempts`` times (bounded Ray actor-task retries; Ray Data's default is
  infinite), a batch that still fails is dropped from the first pass, its units are retried one per task, and a
  unit that still kills its worker becomes an ``error`` row naming it.

``serial=True`` runs steps 1–4 in this process without Ray (same worker code).
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
import sys
import time
from collections import Counter, defaultdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from filegram_ray.errors import UserError
from filegram_ray.runtime import Progress, exclusive_stage, unit_counts
from filegram_ray.storage import RunDir
from rendering.policy import PolicyParams, category_of, choose_formats
from rendering.renderers import (
    EXTENSIONS,
    FORMATS,
    NARRATION_MAX_WORDS,
    NotApplicable,
    TtsEngine,
    build,
    narration_script,
    text_notes,
)
from rendering.sections import Section, SectionParams, is_cjk, load_document

log = logging.getLogger(__name__)

__all__ = ["INDEX_COLUMNS", "RenderConfig", "RenderWorker", "derivative_path", "plan_output", "run_render"]

STAGE = "render"
OUTPUTS_INDEX = "trajectories/outputs.parquet"
INDEX_PATH = "derivatives/index.parquet"

#: columns of derivatives/index.parquet and their polars types
INDEX_COLUMNS: dict[str, str] = {
    "unit_id": "str", "trajectory_id": "str", "profile_id": "str", "task_id": "str", "source": "str",
    "section_index": "int", "n_sections": "int", "section_title": "str", "language": "str", "format": "str",
    "category": "str", "path": "str", "bytes": "int", "sha256": "str", "status": "str", "error": "str",
    "caption": "str", "transcript": "str", "text_chars": "int", "notes": "str", "plan": "str",
}
TIMINGS_PATH = "derivatives/timings.parquet"
#: columns of derivatives/timings.parquet (wall-clock figures live apart from the byte-stable index)
TIMING_COLUMNS: dict[str, str] = {"unit_id": "str", "format": "str", "render_s": "float"}


class PoolConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    formats: list[str]
    size: int = Field(1, ge=1, description="actors in this pool")


def _default_pools() -> dict[str, PoolConfig]:
    return {"documents": PoolConfig(formats=["pdf", "docx", "md", "pptx", "xlsx"], size=2),
            "images": PoolConfig(formats=["png_page", "png_chart"], size=1),
            "tts": PoolConfig(formats=["wav"], size=2)}


class RenderConfig(BaseModel):
    """The ``render:`` section of the pipeline config (all keys optional)."""

    model_config = ConfigDict(extra="forbid")
    formats: list[str] = Field(default_factory=lambda: list(FORMATS), description="formats the policy may pick")
    text_extensions: list[str] = Field(default_factory=lambda: [".md", ".markdown", ".txt"])
    min_chars: int = SectionParams.min_chars
    target_chars: int = SectionParams.target_chars
    max_chars: int = SectionParams.max_chars
    min_per_output: int = Field(4, description="least derivatives per output (policy step 4)")
    boost: dict[str, float] = Field(default_factory=lambda: {"spreadsheet": 4.0, "audio": 2.0})
    narration_max_words: int = Field(NARRATION_MAX_WORDS, description="words of the spoken briefing")
    pools: dict[str, PoolConfig] = Field(default_factory=_default_pools)
    num_cpus_per_actor: float = Field(0.5, gt=0, le=0.5, description="Ray CPUs per actor (≤0.5, ENV §1)")
    batch_size: int = Field(8, ge=1, description="units per map_batches call / completion record")
    limit: int | None = Field(None, ge=0, description="render only the first N text outputs (smoke runs)")
    serial: bool = Field(False, description="render in this process without Ray (same worker code)")
    max_attempts: int = Field(2, ge=1, le=10, description="tries of a batch whose worker dies before its units are "
                                                          "retried one by one (bounded; BR-23)")
    crash_on_text: str | None = Field(None, description="TEST ONLY: a worker os._exit()s on a section with this text")

    @model_validator(mode="before")
    @classmethod
    def _merge_pools(cls, data: Any) -> Any:
        """``--set render.pools.documents.size=4`` changes one key of a default pool, keeping its formats."""
        if isinstance(data, dict) and isinstance(data.get("pools"), dict):
            merged = {k: v.model_dump() for k, v in _default_pools().items()}
            for name, pool in data["pools"].items():
                merged[name] = {**merged.get(name, {}), **(pool or {})}
            data = {**data, "pools": merged}
        return data

    def plan_key(self, seed: int) -> str:
        """Digest of the seed and every setting that decides which derivatives exist and what they hold."""
        keys = ("formats", "text_extensions", "min_chars", "target_chars", "max_chars", "min_per_output", "boost",
                "narration_max_words")
        blob = json.dumps({"seed": int(seed), **self.model_dump(mode="json", include=set(keys))}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def section_params(self) -> SectionParams:
        return SectionParams(self.min_chars, self.target_chars, self.max_chars)

    def policy_params(self) -> PolicyParams:
        return PolicyParams(boost=dict(self.boost), min_per_output=self.min_per_output, formats=tuple(self.formats))

    def check(self) -> None:
        bad = sorted(set(self.formats) - set(FORMATS))
        if bad:
            raise UserError(f"render.formats: unknown format(s) {bad}; expected a subset of {list(FORMATS)}")
        pooled = [f for p in self.pools.values() for f in p.formats]
        missing = sorted(set(self.formats) - set(pooled))
        if missing:
            raise UserError(f"render.pools: no pool renders {missing}")


# ----------------------------------------------------------------------------------------------------- planning
def derivative_path(profile_id: str, task_id: str, source: str, section_index: int, fmt: str) -> str:
    """``derivatives/<profile_id>/<task_id>/<output-stem>/s<NN>.<suffix>`` (output-stem = the output's path without
    its extension, ``/`` → ``__``; suffix ``page.png`` / ``chart.png`` for the two image kinds)."""
    stem = source.rsplit(".", 1)[0] if "." in posixpath.basename(source) else source
    stem = stem.replace("/", "__")
    suffix = {"png_page": "page.png", "png_chart": "chart.png"}.get(fmt, EXTENSIONS[fmt])
    return f"derivatives/{profile_id}/{task_id}/{stem}/s{section_index:02d}.{suffix}"


def _unit_id(trajectory_id: str, source: str, section_index: int | None, fmt: str) -> str:
    return f"{trajectory_id}/{source}#" + ("plan" if section_index is None else f"{section_index:02d}.{fmt}")


def _base_row(out: dict[str, Any]) -> dict[str, Any]:
    return {"trajectory_id": str(out["trajectory_id"]), "profile_id": str(out["profile_id"]),
            "task_id": str(out["task_id"]), "source": str(out["path"])}


def plan_output(out: dict[str, Any], run: RunDir, cfg: RenderConfig, seed: int) -> list[dict[str, Any]]:
    """Units of one output row (see module doc, step 1). Never raises: a broken input gives one error row."""
    base = _base_row(out)
    rel = f"trajectories/{base['profile_id']}/{base['task_id']}/outputs/{base['source']}"
    try:
        doc = load_document(run.read_bytes(rel), rel, cfg.section_params())
        picks = choose_formats(doc.sections, seed=seed, trajectory_id=base["trajectory_id"], path=base["source"],
                               params=cfg.policy_params())
    except Exception as exc:  # noqa: BLE001 - a broken input is one error row, never a failed batch
        return [{**base, "unit_id": _unit_id(base["trajectory_id"], base["source"], None, ""), "format": "",
                 "status": "error", "error": f"{type(exc).__name__}: {exc}"[:2000], "unit_json": ""}]
    units = []
    for idx, fmt in picks:
        sec = doc.sections[idx]
        units.append({**base, "unit_id": _unit_id(base["trajectory_id"], base["source"], idx, fmt), "format": fmt,
                      "status": "planned", "error": "", "unit_json": json.dumps({
                          "section": sec.to_dict(), "n_sections": len(doc.sections),
                          "path": derivative_path(base["profile_id"], base["task_id"], base["source"], idx, fmt)},
                          ensure_ascii=False)})
    return units


# ----------------------------------------------------------------------------------------------------- rendering
def _row(unit: dict[str, Any], **kw: Any) -> dict[str, Any]:
    row = {c: None for c in INDEX_COLUMNS}
    for k in ("unit_id", "trajectory_id", "profile_id", "task_id", "source", "format", "error"):
        row[k] = unit.get(k)
    row["category"] = category_of(unit.get("format") or "") if unit.get("format") else ""
    row.update(kw)
    return row


class RenderWorker:
    """Renders batches of units and writes them to the run directory (one instance per actor, or one in process).

    Args:
        run_uri, storage_options: the run directory. narration_max_words: spoken-briefing length.
        load_tts: load the piper voice now (the TTS pool's actors); otherwise it is loaded on the first audio unit.
    """

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None = None,
                 narration_max_words: int = NARRATION_MAX_WORDS, load_tts: bool = False, plan: str = "",
                 crash_on_text: str | None = None):
        from filegram_ray.speech import speech_cache_dir

        self.run = RunDir(run_uri, storage_options)
        self.max_words = narration_max_words
        self._speech_cache = speech_cache_dir(self.run)
        self.tts: TtsEngine | None = TtsEngine(cache_dir=self._speech_cache) if load_tts else None
        self.plan, self.crash_on_text = plan, crash_on_text
        self._sentences = 0  # sentences in this batch's narrations (each prefetched once)

    def _prefetch_speech(self, units: list[dict[str, Any]]) -> None:
        """Speak each distinct sentence of the batch's narrations once, shortest first (then every WAV of the batch
        is assembled from the sentence cache)."""
        scripts = []
        for u in units:
            if u.get("format") != "wav" or u.get("status") == "error":
                continue
            try:
                script = narration_script(Section.from_dict(json.loads(u["unit_json"])["section"]), self.max_words)
            except Exception:  # noqa: BLE001 - render_unit reports it
                continue
            if len(script) >= 20 and not is_cjk(script) and any(ch.isalnum() for ch in script):
                scripts.append(script)
        if scripts:
            if self.tts is None:
                self.tts = TtsEngine(cache_dir=self._speech_cache)
            before = self.tts.sentences_total
            try:
                self.tts.prefetch(scripts)
                self._sentences += self.tts.sentences_total - before
            except Exception as exc:  # noqa: BLE001 - each unit then reports its own failure
                log.warning("render: speech prefetch failed: %s", exc)

    def render_unit(self, unit: dict[str, Any]) -> dict[str, Any]:
        row = self._render_unit(unit)
        row["plan"] = self.plan
        return row

    def _render_unit(self, unit: dict[str, Any]) -> dict[str, Any]:
        if unit.get("status") == "error":
            return _row(unit, status="error")
        t0 = time.perf_counter()
        try:
            payload = json.loads(unit["unit_json"])
            sec = Section.from_dict(payload["section"])
            if self.crash_on_text and self.crash_on_text in json.dumps(payload["section"], ensure_ascii=False):
                import os

                os._exit(1)  # test hook: a renderer that dies hard (native crash / OOM kill)
            fmt = unit["format"]
            opts: dict[str, Any] = {}
            if fmt == "wav":
                if self.tts is None:
                    self.tts = TtsEngine(cache_dir=self._speech_cache)
                opts = {"max_words": self.max_words, "tts": self.tts}
            base = {"section_index": sec.index, "n_sections": payload["n_sections"], "section_title": sec.title,
                    "language": sec.language}
            try:
                r = build(fmt, sec, **opts)
            except NotApplicable as exc:
                return _row(unit, **base, status="skipped", error=str(exc), render_s=time.perf_counter() - t0)
            self.run.write_bytes(payload["path"], r.data)
            return _row(unit, **base, path=payload["path"], bytes=r.meta["bytes"], sha256=r.meta["sha256"],
                        status="ok", error="", caption=r.meta.get("caption"), transcript=r.meta.get("transcript"),
                        text_chars=len(r.meta.get("text") or ""), render_s=round(time.perf_counter() - t0, 4),
                        notes=text_notes(r.meta))  # removed control characters, missing glyphs, cut cells
        except Exception as exc:  # noqa: BLE001 - one bad unit never sinks the batch
            return _row(unit, status="error", error=f"{type(exc).__name__}: {exc}"[:2000],
                        render_s=time.perf_counter() - t0)

    def render_batch(self, units: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self._sentences = 0
        spoken0 = self.tts.spoken if self.tts is not None else 0
        self._prefetch_speech(units)
        rows = [self.render_unit(u) for u in units]
        if rows and self._sentences:  # the batch's speech counts ride on its first row (not an index column)
            rows[0]["speech"] = {"sentences": self._sentences, "synthesised": self.tts.spoken - spoken0}
        done = [r for r in rows if r["status"] in ("ok", "skipped")]
        if done:
            key = hashlib.sha256("\n".join(sorted(r["unit_id"] for r in done)).encode()).hexdigest()[:20]
            self.run.mark_done(STAGE, f"batch-{key}", {"rows": done})
        return rows


class _RayRenderer:
    """``map_batches`` callable: a column ``unit`` of JSON units in, a column ``row`` of JSON index rows out."""

    def __init__(self, run_uri: str, storage_options: dict[str, Any], narration_max_words: int, load_tts: bool,
                 plan: str = "", crash_on_text: str | None = None):
        self.worker = RenderWorker(run_uri, storage_options, narration_max_words, load_tts, plan, crash_on_text)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        units = [json.loads(u) for u in list(batch["unit"])]
        return {"row": [json.dumps(r, ensure_ascii=False) for r in self.worker.render_batch(units)]}


class _Planner:
    """``flat_map`` callable: an output row → its units (JSON), minus those already done."""

    def __init__(self, run: RunDir, cfg: RenderConfig, seed: int, done: set[str]):
        self.run, self.cfg, self.seed, self.done = run, cfg, seed, done

    def __call__(self, out: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"unit_id": u["unit_id"], "format": u["format"], "unit": json.dumps(u, ensure_ascii=False)}
                for u in plan_output(out, self.run, self.cfg, self.seed) if u["unit_id"] not in self.done]


# ----------------------------------------------------------------------------------------------------- the stage
def _previous_rows(run: RunDir, plan: str) -> tuple[dict[str, dict[str, Any]], int]:
    """Rows of earlier runs under ``plan`` (index and completion records), by unit id; the rows, files and completion
    records of other plans are removed from the run directory. Returns (rows, number of other-plan rows removed)."""
    current: dict[str, dict[str, Any]] = {}
    stale: dict[str, dict[str, Any]] = {}

    def take(r: dict[str, Any]) -> bool:
        if (r.get("plan") or "") == plan:
            current[r["unit_id"]] = r
            return True
        stale.setdefault(r["unit_id"], r)
        return False

    if run.exists(INDEX_PATH):
        for r in run.read_table(INDEX_PATH).to_dicts():
            take(r)
    for name in run.listdir(f"_done/{STAGE}"):
        if not name.endswith(".json") or name.startswith("."):
            continue
        rec = run.read_json(f"_done/{STAGE}/{name}")
        if not [take(r) for r in rec.get("rows", [])].count(True):
            run.remove(f"_done/{STAGE}/{name}")  # a completion record of another plan only
    stale = {u: r for u, r in stale.items() if u not in current}
    for r in stale.values():
        if r.get("path"):
            run.remove(str(r["path"]))
    return current, len(stale)


def _text_outputs(run: RunDir, cfg: RenderConfig) -> tuple[list[dict[str, Any]], int, int]:
    """(text outputs to render, number of non-text outputs ignored, number of text outputs left out by
    ``render.limit``): the two counts are kept apart so a smoke run's summary does not call its limit
    "non-text"."""
    if not run.exists(OUTPUTS_INDEX):
        raise FileNotFoundError(f"{run.uri}: {OUTPUTS_INDEX} not found (run the generate stage first)")
    df = run.read_table(OUTPUTS_INDEX)
    need = {"trajectory_id", "profile_id", "task_id", "path"}
    missing = sorted(need - set(df.columns))
    if missing:
        raise UserError(f"{run.uri}: {OUTPUTS_INDEX}: missing column(s) {missing}")
    exts = tuple(e.lower() for e in cfg.text_extensions)
    rows = sorted(df.to_dicts(), key=lambda r: (str(r["trajectory_id"]), str(r["path"])))
    text = [r for r in rows if str(r["path"]).lower().endswith(exts)]
    non_text = len(rows) - len(text)
    over = 0
    if cfg.limit is not None:
        over = max(len(text) - cfg.limit, 0)
        text = text[:cfg.limit]
    return text, non_text, over


def _write_table(run: RunDir, rel: str, columns: dict[str, str], rows: dict[str, dict[str, Any]]) -> Any:
    import polars as pl

    types = {"str": pl.Utf8, "int": pl.Int64, "float": pl.Float64}
    schema = {c: types[t] for c, t in columns.items()}
    data = [{c: r.get(c) for c in columns} for _, r in sorted(rows.items())]
    df = pl.DataFrame(data, schema=schema, orient="row") if data else pl.DataFrame(schema=schema)
    run.write_table(rel, df)
    return df


def _write_index(run: RunDir, rows: dict[str, dict[str, Any]]) -> Any:
    return _write_table(run, INDEX_PATH, INDEX_COLUMNS, rows)


def _summary(rows: list[dict[str, Any]], wall: float) -> tuple[str, dict[str, Any]]:
    by: dict[str, Counter] = defaultdict(Counter)
    nbytes: Counter = Counter()
    secs: Counter = Counter()
    for r in rows:
        fmt = r.get("format") or "(input)"
        by[fmt][r["status"]] += 1
        nbytes[fmt] += int(r.get("bytes") or 0)
        secs[fmt] += float(r.get("render_s") or 0.0)
    lines = [f"{'format':10s} {'ok':>6s} {'skipped':>8s} {'error':>6s} {'MB':>8s} {'files/s':>8s}"]
    for fmt in sorted(by):
        c = by[fmt]
        rate = c["ok"] / secs[fmt] if secs[fmt] else 0.0
        lines.append(f"{fmt:10s} {c['ok']:6d} {c['skipped']:8d} {c['error']:6d} {nbytes[fmt] / 1e6:8.2f} {rate:8.1f}")
    ok = sum(c["ok"] for c in by.values())
    lines.append(f"{'total':10s} {ok:6d} {sum(c['skipped'] for c in by.values()):8d} "
                 f"{sum(c['error'] for c in by.values()):6d} {sum(nbytes.values()) / 1e6:8.2f} "
                 f"{ok / wall if wall else 0:8.1f}  (wall {wall:.1f} s)")
    stats = {"counts": {f: dict(c) for f, c in sorted(by.items())}, "bytes": dict(nbytes), "wall_s": round(wall, 3),
             "files_per_s": round(ok / wall, 3) if wall else 0.0}
    return "\n".join(lines), stats


def _previous_timings(run: RunDir, rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Render times of earlier runs, for the units still in the index."""
    if not run.exists(TIMINGS_PATH):
        return {}
    return {r["unit_id"]: r for r in run.read_table(TIMINGS_PATH).to_dicts() if r["unit_id"] in rows}


def _render_on_ray(ray, run: RunDir, cfg: RenderConfig, plan: str, units: list[dict[str, Any]], batch_size: int,
                   bar: Progress) -> dict[str, dict[str, Any]]:
    """Render ``units`` on one Ray Data actor pool per renderer group; returns the rows that came back by unit id.

    Each block holds one batch, each actor runs one batch at a time, and a batch whose worker dies is retried
    ``cfg.max_attempts - 1`` times; a batch that still fails is dropped (``DataContext.max_errored_blocks = -1``
    for this execution) and its units are missing from the result, never waited for forever (BR-23).
    """
    by_fmt: dict[str, list[dict[str, str]]] = defaultdict(list)
    for u in units:
        by_fmt[u["format"]].append({"unit": u["unit"]})
    cpus = _pool_cpus(cfg.pools, cfg.num_cpus_per_actor)
    ctx = ray.data.DataContext.get_current()  # datasets copy the context when they are created: set it first
    saved = ctx.max_errored_blocks
    ctx.max_errored_blocks = -1  # a batch that kills its worker every time is dropped, not fatal
    try:
        return _run_branches(ray, run, cfg, plan, by_fmt, batch_size, cpus, bar)
    finally:
        ctx.max_errored_blocks = saved


def _run_branches(ray, run: RunDir, cfg: RenderConfig, plan: str, by_fmt: dict[str, list[dict[str, str]]],
                  batch_size: int, cpus: float, bar: Progress) -> dict[str, dict[str, Any]]:
    import math
    import warnings

    branches = []
    for _name, pool in sorted(cfg.pools.items()):
        items = [x for f in pool.formats for x in by_fmt.get(f, [])]
        if not items:
            continue
        ds = ray.data.from_items(items, override_num_blocks=math.ceil(len(items) / batch_size))
        with warnings.catch_warnings():  # Ray 2.60 takes the actor retry limits only as (deprecated) remote args
            warnings.simplefilter("ignore", DeprecationWarning)
            branches.append(ds.map_batches(
                _RayRenderer, fn_constructor_kwargs={
                    "run_uri": run.uri, "storage_options": run.storage_options,
                    "narration_max_words": cfg.narration_max_words, "load_tts": "wav" in pool.formats,
                    "plan": plan, "crash_on_text": cfg.crash_on_text},
                batch_size=batch_size, num_cpus=cpus,
                compute=ray.data.ActorPoolStrategy(size=min(pool.size, len(items)), max_tasks_in_flight_per_actor=1),
                max_restarts=-1, max_task_retries=cfg.max_attempts - 1))
    got: dict[str, dict[str, Any]] = {}
    if not branches:
        return got
    ds = branches[0].union(*branches[1:]) if len(branches) > 1 else branches[0]
    for r in ds.iter_rows():
        row = json.loads(r["row"])
        got[row["unit_id"]] = row
        bar.update(1)
    return got


def _pool_cpus(pools: dict[str, PoolConfig], requested: float) -> float:
    import ray

    total_cpu = float(ray.cluster_resources().get("CPU", 1.0))
    n = sum(p.size for p in pools.values())
    return round(min(requested, 0.9 * total_cpu / max(n, 1)), 3)


@exclusive_stage(STAGE)
def run_render(config, *, serial: bool | None = None, address: str | None = None, progress: bool = True
               ) -> dict[str, Any]:
    """Run the render stage on ``config``'s run directory.

    Args:
        config: a :class:`~filegram_ray.config.PipelineConfig` (its ``render:`` section → :class:`RenderConfig`).
        serial / address: overrides of ``render.serial`` (run in this process without Ray) and ``ray.address``
            for callers that predate the one stage contract; the pipeline and the job scripts set them in the config.

    Returns:
        The stage record: counts per format and status, bytes, wall time, files/s, planned/skipped units.

    Raises:
        FileNotFoundError: no ``trajectories/outputs.parquet``. ValueError: bad ``render:`` section or index columns.
    """
    try:
        cfg = RenderConfig.model_validate(config.section(STAGE))
    except Exception as exc:
        raise UserError(f"config section 'render': {exc}") from exc
    cfg.check()
    serial = cfg.serial if serial is None else bool(serial)
    run = config.run()
    t0 = time.perf_counter()
    outputs, ignored, over_limit = _text_outputs(run, cfg)
    plan = cfg.plan_key(config.seed)
    previous, dropped = _previous_rows(run, plan)
    if dropped:
        log.warning("render: the render settings or seed changed since the last render: %d derivatives of the "
                    "earlier plan removed, rendering under plan %s", dropped, plan)
    done = {u for u, r in previous.items() if r.get("status") in ("ok", "skipped")}
    new_rows: list[dict[str, Any]] = []
    n_planned = 0
    if serial:
        planner = _Planner(run, cfg, config.seed, done)
        units = [json.loads(u["unit"]) for out in outputs for u in planner(out)]
        n_planned = len(units)
        bar = Progress(len(units), STAGE, enabled=progress)
        worker = RenderWorker(run.uri, run.storage_options, cfg.narration_max_words, plan=plan)
        for i in range(0, len(units), cfg.batch_size):
            rows = worker.render_batch(units[i:i + cfg.batch_size])
            new_rows.extend(rows)
            bar.update(len(rows))
        bar.close()
    elif outputs:
        import ray

        from filegram_ray.runtime import check_cpu_request, init_ray

        init_ray(address or config.ray.address, num_cpus=config.ray.num_cpus)
        check_cpu_request(cfg.num_cpus_per_actor, "render.num_cpus_per_actor")
        planned = (ray.data.from_items(outputs)
                   .flat_map(_Planner(run, cfg, config.seed, done), num_cpus=cfg.num_cpus_per_actor)
                   .take_all())
        n_planned = len(planned)
        # plan errors (format "") need no renderer: they are index rows already
        new_rows.extend({**_row(json.loads(u["unit"]), status="error"), "plan": plan}
                        for u in planned if not u["format"])
        bar = Progress(n_planned, STAGE, enabled=progress)
        todo = [u for u in planned if u["format"]]
        got = _render_on_ray(ray, run, cfg, plan, todo, cfg.batch_size, bar)
        missing = [u for u in todo if u["unit_id"] not in got]
        if missing:  # batches whose worker kept dying: isolate the unit that kills it
            log.warning("render: %d units were in batches whose worker died %d times; retrying them one by one",
                        len(missing), cfg.max_attempts)
            got.update(_render_on_ray(ray, run, cfg, plan, missing, 1, bar))
        bar.close()
        for u in todo:
            r = got.get(u["unit_id"])
            if r is None:
                r = {**_row(json.loads(u["unit"]), status="error", error=(
                    f"the renderer's worker process died {cfg.max_attempts} times on this unit (a native crash or "
                    "an out-of-memory kill?)")), "plan": plan}
            new_rows.append(r)
    wall = time.perf_counter() - t0
    merged = dict(previous)
    for r in new_rows:
        merged[r["unit_id"]] = r
    _write_index(run, merged)
    timings = _previous_timings(run, merged)
    timings.update({r["unit_id"]: r for r in new_rows if r.get("render_s") is not None})
    _write_table(run, TIMINGS_PATH, TIMING_COLUMNS, timings)
    table, stats = _summary(new_rows, wall)
    speech = Counter()
    for r in new_rows:
        speech.update(r.get("speech") or {})
    stats["speech"] = {"sentences": speech["sentences"], "synthesised": speech["synthesised"],
                       "reused": speech["sentences"] - speech["synthesised"]}
    record = {**stats, "outputs": len(outputs), "ignored_non_text": ignored, "over_limit": over_limit,
              "units_planned": n_planned,
              "units_already_done": len(done), "index_rows": len(merged), "serial": serial, "plan": plan,
              "rows_of_other_plans_removed": dropped, "options": cfg.model_dump(mode="json"),
              "units": unit_counts(planned=n_planned + len(done), skipped=len(done),
                                   done=sum(1 for r in new_rows if r.get("status") in ("ok", "skipped")),
                                   failed=sum(1 for r in new_rows if r.get("status") == "error"))}
    try:
        from filegram_ray.schema.meta import record_stage

        record_stage(run, STAGE, record)
    except Exception as exc:  # noqa: BLE001 - outputs are written; a bad run.json must not hide them
        log.warning("render: could not update run.json: %s", exc)
    if progress:
        limited = f"{over_limit} over render.limit={cfg.limit}, " if over_limit else ""
        print(f"render: {len(outputs)} text outputs ({limited}{ignored} non-text ignored), {n_planned} units planned, "
              f"{len(done)} already done\n{table}", file=sys.stderr)
    return record


# -- transitional (issue #29 port in progress): the stage's class for the registry; run_stage calls the legacy
# function until the stage is ported onto plan/worker/finish
from filegram_ray.stages.base import Stage as _Stage  # noqa: E402


class RenderStage(_Stage):
    name = 'render'
    Config = RenderConfig
    legacy = staticmethod(run_render)
