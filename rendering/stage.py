"""The render stage: agent text outputs → multimodal derivatives (FILEGRAM_REFERENCE §10), on the stage contract
(:mod:`filegram_ray.stages`): :class:`RenderStage` lists the derivatives, :class:`rendering.worker.RenderWorker`
renders them in batches, any executor runs it.

Input: ``trajectories/outputs.parquet`` (trajectory_id, profile_id, task_id, path, file_type, bytes, sha256; ``path``
relative to ``trajectories/<profile_id>/<task_id>/outputs/``). Only text outputs (``.md``, ``.markdown``, ``.txt``
by default) are rendered; other rows are counted as ``ignored_non_text``, text outputs past ``render.limit`` as
``over_limit``.

Steps (``run_render = stage_function(RenderStage)``):

1. check — the ``render:`` options and the outputs table (missing table or columns are refused before any item).
2. items — in the driver, per text output: read the file, decompose it (:mod:`rendering.sections`), choose formats
   (:mod:`rendering.policy`) → one item per derivative, a (section, format) pair (:func:`plan_output`), keyed by the
   plan (below); a file that cannot be read or decoded becomes one item whose worker raises the reading error
   (``format`` = ``""``), so it is an error row naming the file. The rows, files and completion records of another
   plan are removed first. The runner skips every derivative finished under this plan; the others are cut into
   batches (tasks) of ≤ ``render.batch_size`` derivatives of one renderer group (``render.pools``: documents,
   images, tts) (:func:`make_batches`); the tts group's batches go first (narration is the stage's largest cost, see
   :data:`FIRST_GROUP_FORMAT`).
3. render — the executor runs :class:`~rendering.worker.RenderWorker` over the batches (actor pool by default:
   Σ per group of min(pool size, the group's batches) actors of ``num_cpus_per_actor`` ≤ 0.5 CPUs, ENVIRONMENT_FACTS
   §1); each worker loads the piper voice on its first audio item only. Derivatives are written atomically to
   ``derivatives/<profile_id>/<task_id>/<output-stem>/s<NN>.<suffix>``; the runner then writes each finished
   derivative's completion record ``_done/render/<derivative>.json`` (its index row). A batch whose worker dies
   ``render.max_attempts`` times is split into one task per derivative; a derivative that still kills its worker is
   an error row naming it (BR-23; :mod:`filegram_ray.stages.executors`).
4. finish — ``derivatives/index.parquet`` (:data:`INDEX_COLUMNS`) merges earlier rows with this run's, one row per
   derivative; render times go to ``derivatives/timings.parquet`` (so the index is byte-identical across same-seed
   runs); a summary table (counts per format, bytes, files/s) is printed and returned for the stage record.

Integrity: one plan per run directory — every row carries the ``plan`` key (a digest of the seed and every
setting that decides which derivatives exist and what they hold); a rerun with other settings re-renders under the
new plan and removes the old plan's rows and files, so the index never mixes two plans
(REL-render-rerun-without-seed-mixes-derivatives).

``render.executor: serial`` (or ``--serial``) runs every batch in this process without Ray (the serial executor).
"""

from __future__ import annotations

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
from filegram_ray.stages.base import Row, Stage, StageOptions, WorkerSpec
from filegram_ray.stages.runner import stage_function
from filegram_ray.storage import RunDir
from rendering.policy import PolicyParams, choose_formats
from rendering.renderers import EXTENSIONS, FORMATS, NARRATION_MAX_WORDS
from rendering.sections import SectionParams, load_document
from rendering.worker import INDEX_COLUMNS, RenderWorker, UnreadableOutput, index_row

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


class RenderConfig(StageOptions):
    """The ``render:`` section of the pipeline config (all keys optional)."""

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
    batch_size: int = Field(8, ge=1, description="derivatives per batch (one worker call)")
    limit: int | None = Field(None, ge=0, description="render only the first N text outputs (smoke runs)")
    max_attempts: int = Field(2, ge=1, le=10, description="tries of a batch whose worker dies before its "
                                                          "derivatives are tried one by one, each as often (BR-23)")
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
        rows = [rec["row"]] if isinstance(rec.get("row"), dict) else rec.get("rows", [])  # an older batch record
        if not [take(r) for r in rows].count(True):
            run.remove(f"_done/{STAGE}/{name}")  # a completion record of another plan only
    stale = {u: r for u, r in stale.items() if u not in current}
    for r in stale.values():
        if r.get("path"):
            run.remove(str(r["path"]))
    return current, len(stale)


def _drop_superseded(run: RunDir, previous: dict[str, dict[str, Any]], units: list[dict[str, Any]]) -> int:
    """Remove from ``previous`` (and the run: the derivative's file, its completion record) every earlier row of an
    output this plan renders that this plan no longer has: the output was written again with other sections, and
    its old derivatives must not stand beside the new ones in the index. Outputs not planned now (``render.limit``)
    keep their rows. Returns how many were removed."""
    from filegram_ray.storage import safe_unit_name

    planned = {u["unit_id"] for u in units}
    sources = {(u["trajectory_id"], u["source"]) for u in units}
    gone = [uid for uid, r in previous.items()
            if uid not in planned and (str(r.get("trajectory_id")), str(r.get("source"))) in sources]
    for uid in gone:
        r = previous.pop(uid)
        if r.get("path"):
            run.remove(str(r["path"]))
        run.remove(f"_done/{STAGE}/{safe_unit_name(uid)}.json", recursive=False)
    return len(gone)


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



def make_batches(units: list[dict[str, Any]], cfg: RenderConfig) -> list[list[dict[str, Any]]]:
    """Batches (tasks of ≤ ``cfg.batch_size`` derivatives of one ``render.pools`` group each) in the order they are
    submitted: the group holding :data:`FIRST_GROUP_FORMAT` first, then the others by name; within a group by the
    pool's format order, then plan order (a batch's derivatives share renderers and fonts). An item of an output that
    could not be read (``format`` ``""``) is a batch of its own, last."""
    group_of = cfg.group_of()
    names = sorted(cfg.pools, key=lambda n: (FIRST_GROUP_FORMAT not in cfg.pools[n].formats, n))
    batches = []
    for name in names:
        rank = {f: i for i, f in enumerate(cfg.pools[name].formats)}
        mine = sorted((u for u in units if group_of.get(u["format"]) == name), key=lambda u: rank[u["format"]])
        batches += [mine[i:i + cfg.batch_size] for i in range(0, len(mine), cfg.batch_size)]
    return batches + [[u] for u in units if not u["format"]]


def _index_error(row: Row) -> str:
    """The ``error`` column of a derivative's error row: ``"<type>: <message>"``; an output that could not be read
    keeps its reading error as it was (``UnicodeDecodeError: …``)."""
    if row.get("error_type") == UnreadableOutput.__name__:
        return str(row.get("error"))[:2000]
    return Row(row).error_line


class RenderStage(Stage):
    """Render: one item per derivative, rendered in batches by :class:`RenderWorker` (see the module docstring);
    ``finish`` writes the index and the timings tables and prints the summary table."""

    name = STAGE
    Config = RenderConfig
    steps = ("derivatives",)

    def check(self) -> None:
        """Refuses a bad ``render:`` section (:meth:`RenderConfig.check`, UserError) and a missing or malformed
        ``trajectories/outputs.parquet`` (FileNotFoundError / UserError naming it) before any item."""
        self.t0 = time.perf_counter()
        self.opts.check()
        self.outputs, self.ignored, self.over_limit = _text_outputs(self.run, self.opts)

    def items(self, step: str) -> list[dict[str, Any]]:
        """Every derivative of this plan, keyed by the plan and its section's content; removes the rows, files and completion records of
        another plan first (module docstring, "Integrity")."""
        cfg, run = self.opts, self.run
        self.plan_key = cfg.plan_key(self.config.seed)
        self.previous, self.dropped = _previous_rows(run, self.plan_key)
        if self.dropped:
            log.warning("render: the render settings or seed changed since the last render: %d derivatives of the "
                        "earlier plan removed, rendering under plan %s", self.dropped, self.plan_key)
        units = [u for out in self.outputs for u in plan_output(out, run, cfg, self.config.seed)]
        for u in units:  # the plan and the section it renders: an output written again with other text is rendered again
            u["key"] = f"{self.plan_key}:{hashlib.sha256(u['unit_json'].encode()).hexdigest()[:12]}"
        self.superseded = _drop_superseded(run, self.previous, units)
        if self.superseded:
            log.info("render: %d derivatives of outputs written again since are no longer planned: removed",
                     self.superseded)
        return units

    def tasks(self, step: str, items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        self.batches = make_batches(items, self.opts)
        return self.batches

    def worker(self, step: str) -> WorkerSpec:
        """:class:`RenderWorker` on Σ per group of min(pool size, the group's batches) actors (every actor renders
        any group; a batch whose worker dies is run ``max_attempts`` times in all, then its derivatives one by one).
        Each actor asks ``num_cpus_per_actor`` CPUs, scaled down so that the actors together fit the connected Ray
        cluster's CPUs (the default 5 actors × 0.5 on a 2-CPU laptop ask 0.4 each instead of losing an actor)."""
        group_of = self.opts.group_of()
        per_group = Counter(group_of.get(b[0]["format"], "") for b in self.batches)
        actors = max(1, sum(min(self.opts.pools[g].size if g else 1, n) for g, n in per_group.items()))
        return WorkerSpec(RenderWorker, {"run_uri": self.run.uri, "storage_options": self.run.storage_options,
                                         "narration_max_words": self.opts.narration_max_words,
                                         "plan": self.plan_key, "crash_on_text": self.opts.crash_on_text},
                          num_actors=actors, num_cpus=self._cpus_per_actor(actors),
                          max_restarts=self.opts.max_attempts - 1)

    def _cpus_per_actor(self, actors: int) -> float:
        """``render.num_cpus_per_actor``, lowered to cluster CPUs / ``actors`` when Ray is up (rounded down to 3
        decimals, so that the actors still fit)."""
        cpus = self.opts.num_cpus_per_actor
        if self.uses_ray:
            import ray

            if ray.is_initialized():
                cpus = min(cpus, float(ray.cluster_resources().get("CPU", cpus * actors)) / actors)
        return math.floor(cpus * 1000) / 1000

    def finish(self, rows: list[Row]) -> dict[str, Any]:
        run, cfg = self.run, self.opts
        by_id = {u["unit_id"]: u for b in getattr(self, "batches", []) for u in b}
        new = [r for r in rows if not r.get("skipped")]
        new_rows = [r["row"] if r.ok else {**index_row(by_id.get(r.unit, {"unit_id": r.unit}), status="error",
                                                       error=_index_error(r)), "plan": self.plan_key}
                    for r in new]
        speech: Counter = Counter()
        for r in new:
            speech.update(r.get("speech") or {})
        wall = time.perf_counter() - self.t0
        merged = dict(self.previous)
        for r in [r["row"] for r in rows if r.get("skipped") and isinstance(r.get("row"), dict)] + new_rows:
            merged[r["unit_id"]] = r
        _write_index(run, merged)
        timings = _previous_timings(run, merged)
        timings.update({r["unit_id"]: r for r in new_rows if r.get("render_s") is not None})
        _write_table(run, TIMINGS_PATH, TIMING_COLUMNS, timings)
        table, stats = _summary(new_rows, wall)
        stats["speech"] = {"sentences": speech["sentences"], "synthesised": speech["synthesised"],
                           "reused": speech["sentences"] - speech["synthesised"]}
        n_done = len(rows) - len(new)
        limited = f"{self.over_limit} over render.limit={cfg.limit}, " if self.over_limit else ""
        print(f"render: {len(self.outputs)} text outputs ({limited}{self.ignored} non-text ignored), "
              f"{len(new)} derivatives planned in {len(getattr(self, 'batches', []))} batches, {n_done} already done"
              f"\n{table}", file=sys.stderr)
        return {**stats, "outputs": len(self.outputs), "ignored_non_text": self.ignored,
                "over_limit": self.over_limit, "index_rows": len(merged), "plan": self.plan_key,
                "rows_of_other_plans_removed": self.dropped,
                "rows_of_rewritten_outputs_removed": getattr(self, "superseded", 0),
                "options": cfg.model_dump(mode="json")}


#: ``run_render(config, **overrides)``: the render stage on ``config``'s run directory (overrides are laid over the
#: ``render:`` section, e.g. ``executor="serial"``); returns the stage record (counts per format and status, bytes,
#: wall time, files/s; ``units``: derivatives planned, done, already done, failed). Raises FileNotFoundError (no
#: ``trajectories/outputs.parquet``) and UserError (a bad ``render:`` section or outputs table).
run_render = stage_function(RenderStage)
