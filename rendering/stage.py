"""The render stage: agent text outputs → multimodal derivatives (FILEGRAM_REFERENCE §10), on the Stage contract
(:mod:`filegram_ray.stages`): :class:`RenderStage` plans, :class:`rendering.worker.RenderWorker` renders, any
executor runs it.

Input: ``trajectories/outputs.parquet`` (trajectory_id, profile_id, task_id, path, file_type, bytes, sha256; ``path``
relative to ``trajectories/<profile_id>/<task_id>/outputs/``). Only text outputs (``.md``, ``.markdown``, ``.txt``
by default) are rendered; other rows are counted as ``ignored_non_text``, text outputs past ``render.limit`` as
``over_limit``.

Steps (``run_render = stage_function(RenderStage)``):

1. check — the ``render:`` options and the outputs table (missing table or columns are refused before any unit).
2. plan — in the driver, per text output: read the file, decompose it (:mod:`rendering.sections`), choose formats
   (:mod:`rendering.policy`) → one *derivative unit* per (section, format) (:func:`plan_output`). A file that cannot
   be read or decoded becomes one ``error`` row (``format`` = ``""``) naming the file. Derivative units already
   recorded as ``ok``/``skipped`` under this plan (completion records ``_done/render/*.json`` and an existing
   ``derivatives/index.parquet``) are left out: the stage is resumable and idempotent. The rest are cut into batch
   units of ≤ ``render.batch_size`` derivatives of one renderer group (``render.pools``: documents, images, tts)
   (:func:`make_batches`); the tts group's batches go first (narration is the stage's largest cost, see
   :data:`FIRST_GROUP_FORMAT`).
3. render — the executor runs :class:`~rendering.worker.RenderWorker` over the batches (actor pool by default:
   Σ per group of min(pool size, the group's batches) actors of ``num_cpus_per_actor`` ≤ 0.5 CPUs, ENVIRONMENT_FACTS
   §1); each worker loads the piper voice on its first audio unit only. Derivatives are written atomically to
   ``derivatives/<profile_id>/<task_id>/<output-stem>/s<NN>.<suffix>``; the runner then writes the batch's completion
   record ``_done/render/batch-<key>.json`` holding its ``ok``/``skipped`` rows.
4. finish — a batch whose worker died ``render.max_attempts`` times has its derivatives retried one per unit
   (a second round on the same executor, :meth:`~filegram_ray.stages.base.Stage.map`); a derivative that still
   kills its worker becomes an ``error`` row naming it (BR-23). ``derivatives/index.parquet``
   (:data:`INDEX_COLUMNS`) merges earlier rows with this run's, one row per derivative unit; render times go to
   ``derivatives/timings.parquet`` (so the index is byte-identical across same-seed runs); a summary table (counts
   per format, bytes, files/s) is printed and returned for the stage record.

Integrity (issue 13): one plan per run directory — every row carries the ``plan`` key (a digest of the seed and every
setting that decides which derivatives exist and what they hold); a rerun with other settings re-renders under the
new plan and removes the old plan's rows and files, so the index never mixes two plans
(REL-render-rerun-without-seed-mixes-derivatives).

``render.serial: true`` (or ``--serial``) runs every batch in this process without Ray (the serial executor).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import posixpath
import sys
import time
from collections import Counter, defaultdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from filegram_ray.errors import UserError
from filegram_ray.stages.base import Row, Stage, WorkerSpec
from filegram_ray.stages.runner import stage_function
from filegram_ray.storage import RunDir
from rendering.policy import PolicyParams, choose_formats
from rendering.renderers import EXTENSIONS, FORMATS, NARRATION_MAX_WORDS
from rendering.sections import SectionParams, load_document
from rendering.worker import INDEX_COLUMNS, RenderWorker, index_row

log = logging.getLogger(__name__)

__all__ = ["INDEX_COLUMNS", "INDEX_PATH", "TIMINGS_PATH", "RenderConfig", "RenderStage", "RenderWorker",
           "derivative_path", "make_batches", "plan_output", "run_render"]

STAGE = "render"
OUTPUTS_INDEX = "trajectories/outputs.parquet"
INDEX_PATH = "derivatives/index.parquet"
TIMINGS_PATH = "derivatives/timings.parquet"
#: columns of derivatives/timings.parquet (wall-clock figures live apart from the byte-stable index)
TIMING_COLUMNS: dict[str, str] = {"unit_id": "str", "format": "str", "render_s": "float"}
#: the batches of the group that renders this format are submitted first: narration (piper synthesis) is the
#: render stage's largest cost, about three fifths of its CPU seconds on the default run
#: (docs/measurements/2026-12-01-speed-and-scale.md, "Speech": ≈334 of 568.5 CPU-s), so it must not be the tail
FIRST_GROUP_FORMAT = "wav"


class PoolConfig(BaseModel):
    """One renderer group of ``render.pools``: the formats batched together and the actors the group adds to the
    stage's pool."""

    model_config = ConfigDict(extra="forbid")
    formats: list[str] = Field(description="formats of this group (a batch never mixes groups)")
    size: int = Field(1, ge=1, description="actors this group adds to the pool (at most one per batch of the group)")


def _default_pools() -> dict[str, PoolConfig]:
    return {"documents": PoolConfig(formats=["pdf", "docx", "md", "pptx", "xlsx"], size=2),
            "images": PoolConfig(formats=["png_page", "png_chart"], size=1),
            "tts": PoolConfig(formats=["wav"], size=2)}


class RenderConfig(BaseModel):
    """The ``render:`` section of the pipeline config (all keys optional)."""

    model_config = ConfigDict(extra="forbid")
    formats: list[str] = Field(default_factory=lambda: list(FORMATS), description="formats the policy may pick")
    text_extensions: list[str] = Field(default_factory=lambda: [".md", ".markdown", ".txt"],
                                       description="outputs with these endings are rendered (case-insensitive)")
    min_chars: int = Field(SectionParams.min_chars, description="shortest section, characters (rendering.sections)")
    target_chars: int = Field(SectionParams.target_chars, description="section length aimed at, characters")
    max_chars: int = Field(SectionParams.max_chars, description="longest section, characters")
    min_per_output: int = Field(4, description="least derivatives per output (policy step 4)")
    boost: dict[str, float] = Field(default_factory=lambda: {"spreadsheet": 4.0, "audio": 2.0},
                                    description="weight multiplier per format category (rendering.policy)")
    narration_max_words: int = Field(NARRATION_MAX_WORDS, description="words of the spoken briefing")
    pools: dict[str, PoolConfig] = Field(default_factory=_default_pools,
                                         description="renderer groups: formats batched together, actors per group")
    num_cpus_per_actor: float = Field(0.5, gt=0, le=0.5, description="Ray CPUs per actor (≤0.5, ENV §1)")
    batch_size: int = Field(8, ge=1, description="derivative units per batch unit / completion record")
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
        """Raises :class:`UserError`: an unknown format; a format no pool renders, or two pools render."""
        bad = sorted(set(self.formats) - set(FORMATS))
        if bad:
            raise UserError(f"render.formats: unknown format(s) {bad}; expected a subset of {list(FORMATS)}")
        pooled = [f for p in self.pools.values() for f in p.formats]
        missing = sorted(set(self.formats) - set(pooled))
        if missing:
            raise UserError(f"render.pools: no pool renders {missing}")
        twice = sorted({f for f in pooled if pooled.count(f) > 1})
        if twice:
            raise UserError(f"render.pools: format(s) {twice} are in more than one pool; give each to one pool")

    def group_of(self) -> dict[str, str]:
        """``{format: pool name}``."""
        return {f: name for name, p in self.pools.items() for f in p.formats}


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
    """Derivative units of one output row (see the module doc, step 2), in section order. Never raises: a broken
    input gives one ``error`` unit (``format`` ``""``) naming the file."""
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



def _batch_unit(group: str, units: list[dict[str, Any]]) -> dict[str, Any]:
    """A batch unit of derivative ``units``: ``unit_id`` ``batch-<key>`` (the first 20 hex digits of the sha256 of
    its sorted derivative unit ids, the completion record's name since before the Stage contract)."""
    key = hashlib.sha256("\n".join(sorted(u["unit_id"] for u in units)).encode()).hexdigest()[:20]
    return {"unit_id": f"batch-{key}", "group": group, "units": units}


def make_batches(units: list[dict[str, Any]], cfg: RenderConfig) -> list[dict[str, Any]]:
    """Batch units (≤ ``cfg.batch_size`` derivative units of one ``render.pools`` group each) in the order they are
    submitted: the group holding :data:`FIRST_GROUP_FORMAT` first, then the others by name; within a group by the
    pool's format order, then plan order (a batch's derivatives share renderers and fonts)."""
    group_of = cfg.group_of()
    names = sorted(cfg.pools, key=lambda n: (FIRST_GROUP_FORMAT not in cfg.pools[n].formats, n))
    batches = []
    for name in names:
        rank = {f: i for i, f in enumerate(cfg.pools[name].formats)}
        mine = sorted((u for u in units if group_of.get(u["format"]) == name), key=lambda u: rank[u["format"]])
        batches += [_batch_unit(name, mine[i:i + cfg.batch_size]) for i in range(0, len(mine), cfg.batch_size)]
    return batches


def _died_row(unit: dict[str, Any], batch_row: Row, plan: str) -> dict[str, Any]:
    """The index row of derivative ``unit`` whose worker never returned (the executor's error row of its batch of
    one, e.g. "the worker process died N times while processing …")."""
    msg = f"{batch_row.get('error_type')}: {batch_row.get('error')}"
    return {**index_row(unit, status="error", error=msg[:2000]), "plan": plan}


class RenderStage(Stage):
    """Render: derivative units planned in the driver, rendered in batch units by :class:`RenderWorker` (see the
    module docstring); ``finish`` retries the derivatives of batches whose worker died, writes the index and the
    timings tables and prints the summary table."""

    name = STAGE
    Config = RenderConfig
    extras = ()

    def check(self) -> None:
        """Refuses a bad ``render:`` section (:meth:`RenderConfig.check`, UserError) and a missing or malformed
        ``trajectories/outputs.parquet`` (FileNotFoundError / UserError naming it) before any unit."""
        self.t0 = time.perf_counter()
        self.opts.check()
        self.outputs, self.ignored, self.over_limit = _text_outputs(self.run, self.opts)

    def plan(self) -> list[dict[str, Any]]:
        """Batch units of every derivative unit not yet ``ok``/``skipped`` under this plan; removes the rows,
        files and completion records of another plan first (module docstring, "Integrity")."""
        cfg, run = self.opts, self.run
        self.plan_key = cfg.plan_key(self.config.seed)
        self.previous, self.dropped = _previous_rows(run, self.plan_key)
        if self.dropped:
            log.warning("render: the render settings or seed changed since the last render: %d derivatives of the "
                        "earlier plan removed, rendering under plan %s", self.dropped, self.plan_key)
        self.done = {u for u, r in self.previous.items() if r.get("status") in ("ok", "skipped")}
        units = [u for out in self.outputs for u in plan_output(out, run, cfg, self.config.seed)
                 if u["unit_id"] not in self.done]
        self.n_planned = len(units)
        # plan errors (format "") need no renderer: they are index rows already
        self.plan_errors = [{**index_row(u, status="error"), "plan": self.plan_key} for u in units if not u["format"]]
        self.batches = make_batches([u for u in units if u["format"]], cfg)
        return self.batches

    def finished(self, unit: dict[str, Any]) -> Row | None:  # noqa: ARG002 - plan() already left finished work out
        """Never: :meth:`plan` already left out every derivative an earlier run finished under this plan, so every
        planned batch is to be rendered."""
        return None

    def worker(self) -> WorkerSpec:
        """:class:`RenderWorker` on Σ per group of min(pool size, the group's batches) actors (every actor renders
        any group; a unit whose worker dies is run ``max_attempts`` times in all). Each actor asks
        ``num_cpus_per_actor`` CPUs, scaled down so that the actors together fit the connected Ray cluster's CPUs
        (the default 5 actors × 0.5 on a 2-CPU laptop ask 0.4 each instead of losing an actor)."""
        per_group = Counter(b["group"] for b in self.batches)
        actors = max(1, sum(min(self.opts.pools[g].size, n) for g, n in per_group.items()))
        return WorkerSpec(RenderWorker, {"run_uri": self.run.uri, "storage_options": self.run.storage_options,
                                         "narration_max_words": self.opts.narration_max_words,
                                         "plan": self.plan_key, "crash_on_text": self.opts.crash_on_text},
                          num_actors=actors, num_cpus=self._cpus_per_actor(actors),
                          max_restarts=self.opts.max_attempts - 1, unit_noun="batches of derivatives")

    def _cpus_per_actor(self, actors: int) -> float:
        """``render.num_cpus_per_actor``, lowered to cluster CPUs / ``actors`` when Ray is up (rounded down to 3
        decimals, so that the actors still fit)."""
        cpus = self.opts.num_cpus_per_actor
        if self.executor.uses_ray:
            import ray

            if ray.is_initialized():
                cpus = min(cpus, float(ray.cluster_resources().get("CPU", cpus * actors)) / actors)
        return math.floor(cpus * 1000) / 1000

    def done_record(self, row: Row) -> dict[str, Any] | None:
        """``{"rows": [the batch's ok / skipped index rows]}``; none when every derivative of it failed."""
        done = [r for r in row.get("rows") or [] if r.get("status") in ("ok", "skipped")]
        return {"rows": done} if done else None

    def _retry_spec(self, n_units: int) -> WorkerSpec:
        """The worker of the second round: one actor per unit as far as the cluster holds actors of
        ``num_cpus_per_actor`` CPUs (at least the first round's), so that a derivative that kills its worker takes
        no other unit's attempts with it (an actor that dies hands the unit queued behind it a failed attempt)."""
        spec = self.worker()
        if not self.executor.uses_ray:
            return spec
        from filegram_ray.runtime import pool_capacity

        n = max(spec.num_actors, min(n_units, pool_capacity(self.opts.num_cpus_per_actor)))
        return dataclasses.replace(spec, num_actors=n, num_cpus=self._cpus_per_actor(n))

    def _retry_one_by_one(self, failed: list[Row]) -> list[Row]:
        """Second round (BR-23): the derivatives of batches whose worker never returned, one per batch unit, on the
        same executor; returns one row per derivative (batch rows, or error rows of the executor)."""
        by_id = {b["unit_id"]: b for b in self.batches}
        singles = [_batch_unit(by_id[r.unit]["group"], [u]) for r in failed for u in by_id[r.unit]["units"]]
        log.warning("render: %d derivative units were in batches whose worker died or failed (%d attempts); "
                    "retrying them one by one", len(singles), self.opts.max_attempts)

        def on_row(row: Row) -> None:
            rec = self.done_record(row) if row.ok else None
            if rec is not None:
                self.run.mark_done(self.name, row.unit, rec)

        spec = self._retry_spec(len(singles))
        rows = {r.unit: r for r in self.map(spec, singles, on_row=on_row, label=f"{self.name} retry")}
        out = []
        for s in singles:
            row = rows[s["unit_id"]]
            out.append(row if row.ok else Row.of(s["unit_id"], {"rows": [_died_row(s["units"][0], row,
                                                                                   self.plan_key)]}))
        return out

    def finish(self, rows: list[Row]) -> dict[str, Any]:
        run, cfg = self.run, self.opts
        failed = [r for r in rows if not r.ok]
        batch_rows = [r for r in rows if r.ok] + (self._retry_one_by_one(failed) if failed else [])
        new_rows = list(self.plan_errors)
        speech: Counter = Counter()
        for r in batch_rows:
            new_rows += r["rows"]
            speech.update(r.get("speech") or {})
        wall = time.perf_counter() - self.t0
        merged = dict(self.previous)
        for r in new_rows:
            merged[r["unit_id"]] = r
        _write_index(run, merged)
        timings = _previous_timings(run, merged)
        timings.update({r["unit_id"]: r for r in new_rows if r.get("render_s") is not None})
        _write_table(run, TIMINGS_PATH, TIMING_COLUMNS, timings)
        table, stats = _summary(new_rows, wall)
        stats["speech"] = {"sentences": speech["sentences"], "synthesised": speech["synthesised"],
                           "reused": speech["sentences"] - speech["synthesised"]}
        n_done = len(self.done)
        limited = f"{self.over_limit} over render.limit={cfg.limit}, " if self.over_limit else ""
        print(f"render: {len(self.outputs)} text outputs ({limited}{self.ignored} non-text ignored), "
              f"{self.n_planned} derivatives planned in {len(self.batches)} batches, {n_done} already done\n{table}",
              file=sys.stderr)
        # units are derivative units (the runner's are batches): planned now + finished earlier
        return {**stats, "outputs": len(self.outputs), "ignored_non_text": self.ignored,
                "over_limit": self.over_limit, "units_planned": self.n_planned, "units_already_done": n_done,
                "index_rows": len(merged), "plan": self.plan_key, "rows_of_other_plans_removed": self.dropped,
                "options": cfg.model_dump(mode="json"),
                "units": {"planned": self.n_planned + n_done, "skipped": n_done,
                          "done": sum(1 for r in new_rows if r.get("status") in ("ok", "skipped")),
                          "failed": sum(1 for r in new_rows if r.get("status") == "error")}}


#: ``run_render(config, executor=None, **overrides)``: the render stage on ``config``'s run directory (overrides
#: are laid over the ``render:`` section, e.g. ``serial=True``); returns the stage record (counts per format and
#: status, bytes, wall time, files/s, planned / already-done units). Raises FileNotFoundError (no
#: ``trajectories/outputs.parquet``) and UserError (a bad ``render:`` section or outputs table).
run_render = stage_function(RenderStage)
