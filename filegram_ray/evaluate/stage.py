"""The evaluate stage: every configured memory method answers every FileGramBench item through one backbone.

Reads ``bench/items.parquet`` (public fields + context spec) and, for scoring only, ``bench/answers_key.parquet``;
writes under ``results/``:

* ``cache/<group>/<setting>__<key>.pkl`` — a method's ingested state per context spec (ingest once, reuse;
  FileGramOS's channel ablations share FileGramOS's states);
* ``units/<method>/<setting>__<key>.parquet`` — the answers of one work unit; ``_done/evaluate/…`` records;
* ``results.parquet`` — one row per method × item (answer, correct, score, tokens, status, error);
* ``summary.parquet``, ``report.md`` and PNG plots (:mod:`filegram_ray.evaluate.report`).

``results.parquet`` and the report cover the configured methods and every other method whose answers an earlier
evaluate of the run left for the same items and backbone (``results/units/<backbone>/<method>/``): a second evaluate
with another ``--methods`` list adds rows to the report instead of replacing them.

Work unit = (method, setting, context spec): ingest (or load the cached state), then answer that spec's items in
order. On the CPU path the units of one (setting, context spec) travel together to a :class:`SpecWorker`, which
builds the spec's views once for every method (each method keeps its own unit record). Units run on a pool of Ray
actors through :func:`filegram_ray.runtime.map_units` (0.5 CPU each by default:
a 2-CPU node deadlocks with whole-CPU actors, ENVIRONMENT_FACTS §1) or serially. A finished unit is skipped on
rerun; a failing item becomes an error row; a failing ingest fails its unit (retried on rerun) and its items are
reported as error rows.

Leakage guard: the worker gives the method only :class:`~filegram_ray.methods.trajectory.TrajectoryView` objects
(events.json + media/, opaque labels) and the backbone only the item's public view (no profile id, no trajectory
ids, no key). Validity rows (oracle, random) answer from the public view too; the oracle is handed the key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator

from filegram_ray.config import PipelineConfig
from filegram_ray.errors import UserError
from filegram_ray.runtime import exclusive_stage, unit_counts
from filegram_ray.storage import RunDir

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_METHODS",
    "STAGE",
    "EvalWorker",
    "EvaluateConfig",
    "SpecWorker",
    "build_unit_views",
    "load_answer_key",
    "load_items",
    "public_view",
    "retrieval_query",
    "run_evaluate",
]

STAGE = "evaluate"
LETTERS = "ABCDEFGH"
#: item settings (reference §9.2) and judges of open-ended items (:func:`filegram_ray.evaluate.scoring.make_judge`)
SETTINGS = ("text", "multimodal", "real_world")
JUDGES = ("auto", "llm", "rubric")
#: Methods evaluated by default: the context baselines, FileGramOS and its three channel ablations (ref §8.4).
DEFAULT_METHODS = ["no_context", "full_context", "naive_rag", "eager_summarization", "visrag", "mem0", "zep",
                   "memos", "simplemem", "evermemos", "memu", "mma", "filegramos",
                   "filegramos_no_procedural", "filegramos_no_semantic", "filegramos_no_episodic"]


class EvaluateConfig(BaseModel):
    """The ``evaluate:`` section of the pipeline config.

    Attributes:
        methods: registered method names to evaluate.
        method_options: per-method options, e.g. ``{full_context: {cap_chars: 100000}}``.
        backbone: ``"lexical"`` (CPU default, no LLM), ``"random"``, or a language model answered through a
            ``ray.data.llm`` processor (:mod:`filegram_ray.evaluate.answer`): ``{kind: openai, base_url, model, …}``
            for any OpenAI-compatible server, ``{kind: vllm_engine, model_source, tensor_parallel_size, …}`` for
            vLLM engines on GPU workers (fields: :mod:`filegram_ray.llm.processors`).
        judge: ``auto`` | ``llm`` | ``rubric`` for open-ended items (auto = LLM judge when there is a language model).
        judge_backbone: the judge's language model (same shapes as ``backbone``); None = the answering backbone.
        ingest_llm: with an OpenAI-compatible backbone, let methods call it at ingest (Eager Summarization's
            summaries, FileGramOS consolidation); false = their non-LLM path (much faster on a CPU server).
        max_context_chars: language-model path only: cut each retrieved context to this many characters before
            it goes into the prompt (the answering model's window; None = no cut). Applies to every method alike;
            the report counts the cut prompts.
        wave_units: work units per prompt-and-answer wave of the language-model path (bounds driver memory; a unit
            is written as soon as its last answer is in).
        settings: item settings to evaluate (``text``, ``multimodal``, ``real_world``: methods ingest the events the
            caption stage read back from screen recordings, :mod:`video.realworld`).
        multimodal_content: how created-file content is shown in the multimodal setting: ``derivatives`` (text
            recovered from the rendered files), ``strip`` (removed, upstream's simulation, reference §8.3) or
            ``auto`` (derivatives when ``derivatives/index.parquet`` exists); see
            :mod:`filegram_ray.evaluate.multimodal`.
        multimodal_formats: derivative formats whose text is shown in the multimodal setting (None = all rendered
            formats, :data:`filegram_ray.evaluate.multimodal.SHOWN_FORMATS`: the ``md`` derivatives are the source
            Markdown and stay hidden).
        validity: add the oracle and random validity rows.
        sub_tracks: restrict to these sub-tasks (None = all).
        max_items: evaluate only the first N items (sorted by question id) — smoke runs.
        sample_per_sub_task: evaluate a seeded sample of at most N items per (sub-task, setting), plus the text
            twins of the sampled FileGrd items (so the Text vs Multimodal table stays paired); None = the whole
            bank. The laptop default (``conf/default.yaml``) samples, because every item has its own context spec
            and a full bank on 2 cores takes hours; the report states the sample.
        num_actors / num_cpus_per_actor / serial: execution (see :func:`filegram_ray.runtime.map_units`).
        plots: write PNG plots.
    """

    model_config = ConfigDict(extra="forbid")
    methods: list[str] = Field(default_factory=lambda: list(DEFAULT_METHODS), min_length=1)
    method_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    backbone: str | dict[str, Any] = "lexical"
    judge: str = "auto"
    judge_backbone: str | dict[str, Any] | None = None
    ingest_llm: bool = True
    max_context_chars: int | None = Field(None, ge=1)
    wave_units: int = Field(64, ge=1)
    settings: list[str] = Field(default_factory=lambda: ["text", "multimodal", "real_world"], min_length=1)
    multimodal_content: Literal["auto", "derivatives", "strip"] = "auto"
    multimodal_formats: list[str] | None = None
    validity: bool = True
    sub_tracks: list[str] | None = Field(None, min_length=1)
    max_items: int | None = Field(None, ge=0)
    sample_per_sub_task: int | None = Field(None, ge=1)
    num_actors: int = Field(2, ge=1)
    num_cpus_per_actor: float = Field(0.5, gt=0)
    serial: bool = False
    plots: bool = True

    # Names are checked here, so a wrong one is refused when the config loads (whichever stage runs), not hours
    # later when evaluate starts.
    @field_validator("methods")
    @classmethod
    def _known_methods(cls, v: list[str]) -> list[str]:
        from filegram_ray.methods import method_names

        unknown = [m for m in v if m not in method_names()]
        if unknown:
            raise UserError(f"unknown method(s) {', '.join(map(repr, unknown))} (registered: "
                             f"{', '.join(method_names())}; `filegram methods` lists them)")
        return v

    @field_validator("method_options")
    @classmethod
    def _known_method_options(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        from filegram_ray.methods import method_names

        unknown = [m for m in v if m not in method_names()]
        if unknown:
            raise UserError(f"options for unknown method(s) {', '.join(map(repr, unknown))} (registered: "
                             f"{', '.join(method_names())})")
        from filegram_ray.methods.base import check_options

        for m, opts in v.items():
            check_options(m, opts)
        return v

    @field_validator("backbone", "judge_backbone")
    @classmethod
    def _known_backbone(cls, v: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
        from filegram_ray.llm.backbones import BACKBONE_KINDS
        from filegram_ray.llm.processors import chat_spec

        if v is None:
            return v
        kind = str(v if isinstance(v, str) else v.get("kind", "openai" if "base_url" in v else "")).lower()
        if kind == "oracle":
            raise UserError("the oracle answers from the key: it is the report's validity row (evaluate.validity), "
                             "not a backbone for the methods")
        if kind not in BACKBONE_KINDS:
            raise UserError(f"unknown backbone kind {kind!r} (one of {', '.join(BACKBONE_KINDS)}; a language model "
                             "is a mapping {kind: openai, base_url: …, model: …})")
        if isinstance(v, dict) and kind not in ("lexical", "random", "oracle"):
            chat_spec(v)  # every setting of a language-model backbone (pydantic's message names a wrong one)
        return v

    @field_validator("judge")
    @classmethod
    def _known_judge(cls, v: str) -> str:
        if v not in JUDGES:
            raise UserError(f"unknown judge {v!r} (one of {', '.join(JUDGES)})")
        return v

    @field_validator("settings")
    @classmethod
    def _known_settings(cls, v: list[str]) -> list[str]:
        bad = [s for s in v if s not in SETTINGS]
        if bad:
            raise UserError(f"unknown setting(s) {', '.join(map(repr, bad))} (one of {', '.join(SETTINGS)})")
        return v

    @field_validator("sub_tracks")
    @classmethod
    def _known_sub_tracks(cls, v: list[str] | None) -> list[str] | None:
        from filegram_ray.bench.builders import check_sub_tasks

        check_sub_tasks(v or [])
        return v


# ----------------------------------------------------------------------------------------------- items


def _json_field(value: Any, default: Any, qid: str, name: str) -> Any:
    if value is None or value == "":
        return default
    if isinstance(value, (list, dict)):
        return value
    try:
        return json.loads(value)
    except (TypeError, json.JSONDecodeError) as exc:
        raise UserError(f"bench/items.parquet: item {qid}: field {name!r} is not valid JSON: {exc}") from exc


def load_items(run: RunDir) -> list[dict[str, Any]]:
    """The items of ``bench/items.parquet`` as dicts with parsed ``choices`` (list), ``context`` and ``metadata``.

    Raises:
        StorageError: the table is missing.
        ValueError: a required column is missing or a JSON field does not parse (names the item and field).
    """
    df = run.read_table("bench/items.parquet")
    need = {"question_id", "sub_track", "channel", "question", "choices", "context"}
    missing = need - set(df.columns)
    if missing:
        raise UserError(f"bench/items.parquet: missing columns {sorted(missing)}")
    items = []
    for row in df.iter_rows(named=True):
        qid = str(row["question_id"])
        item = dict(row)
        item["choices"] = [str(c) for c in _json_field(row.get("choices"), [], qid, "choices")]
        item["context"] = _json_field(row.get("context"), {}, qid, "context")
        item["metadata"] = _json_field(row.get("metadata"), {}, qid, "metadata")
        item["setting"] = row.get("setting") or "text"
        items.append(item)
    return sorted(items, key=lambda it: it["question_id"])


def load_answer_key(run: RunDir) -> dict[str, dict[str, Any]]:
    """``question_id -> {correct, correct_text, …}`` from ``bench/answers_key.parquet``."""
    df = run.read_table("bench/answers_key.parquet")
    if "question_id" not in df.columns or "correct" not in df.columns:
        raise UserError("bench/answers_key.parquet: needs columns question_id and correct")
    return {str(r["question_id"]): r for r in df.iter_rows(named=True)}


def public_view(item: Mapping[str, Any]) -> dict[str, Any]:
    """What a backbone may see: the same shape as ``bench.schema.Item.public_view`` (no profile or trajectory ids,
    no answer, no evaluator metadata)."""
    ctx = item.get("context") or {}
    return {
        "question_id": item["question_id"],
        "track": item.get("track", ""),
        "sub_track": item.get("sub_track", ""),
        "channel": item.get("channel", ""),
        "setting": item.get("setting", "text"),
        "question": item.get("question", ""),
        "choices": {LETTERS[i]: c for i, c in enumerate(item.get("choices") or [])},
        "context": {"kind": ctx.get("kind"), "labels": list(ctx.get("labels") or []),
                    "held_out": str(ctx["held_out"]).rsplit("/", 1)[-1] if ctx.get("held_out") else None},
    }


def _embed_dtype() -> dict[str, Any]:
    """The MiniLM embedder's dtype on this machine and why (:func:`filegram_ray.memory.embed.embed_dtype`)."""
    from filegram_ray.memory.embed import embed_dtype

    return embed_dtype()


def retrieval_query(item: Mapping[str, Any]) -> str:
    """The query a method retrieves with: the question followed by the option texts."""
    return " ".join([str(item.get("question", "")), *[str(c) for c in item.get("choices") or []]]).strip()


def spec_key(spec: Mapping[str, Any], setting: str) -> str:
    """16-hex cache key of a context spec under a setting (sha256 of canonical JSON)."""
    canon = json.dumps({"spec": {k: spec.get(k) for k in ("kind", "trajectories", "labels", "held_out")},
                        "setting": setting}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]


# ----------------------------------------------------------------------------------------------- worker


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:1000]


def build_unit_views(run: RunDir, unit: Mapping[str, Any], override: Any = None) -> list[Any]:
    """The :class:`~filegram_ray.methods.trajectory.TrajectoryView` list of a unit's context spec: the caption
    stage's events for ``real_world`` (:mod:`video.realworld`), else events.json + media with ``override`` applied
    in the multimodal setting."""
    from filegram_ray.methods.trajectory import build_views

    if unit["setting"] == "real_world":  # events read back from a screen recording (video.realworld)
        from video.realworld import build_recording_views

        return build_recording_views(run, unit["spec"])
    return build_views(run, unit["spec"], content_override=override if unit["setting"] == "multimodal" else None)


class EvalWorker:
    """Ray actor body: one unit = one (method, setting, spec) with its items.

    Args:
        run_uri / storage_options: the run directory.
        method / method_options: registered method name and its options.
        backbone: backbone spec for :func:`filegram_ray.llm.make_backbone`.
        seed: master seed.
        multimodal_content: see :class:`EvaluateConfig`.
    """

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None, method: str,
                 method_options: dict[str, Any] | None, backbone: Any, seed: int, multimodal_content: str = "auto",
                 multimodal_formats: list[str] | None = None):
        from filegram_ray.llm import make_backbone
        from filegram_ray.methods import make_method
        from filegram_ray.methods.embed import default_embedder, run_cache_dir

        self.run = RunDir(run_uri, storage_options)
        self.backbone = make_backbone(backbone, seed=seed)
        llm_fn = self.backbone.complete if self.backbone.is_llm else None
        options = dict(method_options or {})
        options.setdefault("embedder", default_embedder(run_cache_dir(self.run)))  # loads the model lazily
        self.method = make_method(method, llm_fn=llm_fn, **options)
        self.method_name = method
        if multimodal_content not in ("auto", "derivatives", "strip"):
            raise UserError(f"evaluate.multimodal_content={multimodal_content!r}: expected auto, derivatives or "
                             "strip")
        self.multimodal_content = multimodal_content
        self.multimodal_formats = multimodal_formats
        self._override = None
        self._load_s = self._views_s = 0.0

    def _views(self, unit: dict[str, Any]) -> list[Any]:
        """The views of a unit's context spec (multimodal: the content override; real_world: the caption stage's
        events)."""
        if unit["setting"] == "multimodal" and self._override is None:
            from filegram_ray.evaluate.multimodal import make_content_override

            self._override = make_content_override(self.run, self.multimodal_content, self.multimodal_formats)
        return build_unit_views(self.run, unit, self._override)

    def _state(self, unit: dict[str, Any], views: Callable[[], list[Any]] | None = None,
               shared: dict[str, Any] | None = None) -> tuple[Any, float, bool]:
        """``(state, ingest seconds, cached)`` of a unit: from ``shared`` (states ingested earlier in this spec unit,
        by ``cache_path``), the pickled cache, or a fresh ingest of ``views()`` (default: build the views here)."""
        path = unit["cache_path"]
        if shared is not None and path in shared:
            return shared[path], 0.0, True
        if self.run.exists(path):
            t0 = time.perf_counter()
            state = pickle.loads(self.run.read_bytes(path))
            self._load_s = time.perf_counter() - t0
            if shared is not None:
                shared[path] = state
            return state, 0.0, True
        t0 = time.perf_counter()
        views_ = views() if views is not None else self._views(unit)
        self._views_s = time.perf_counter() - t0  # ~0 when an earlier method of the spec unit built them
        t0 = time.perf_counter()
        state = self.method.ingest(views_)
        secs = time.perf_counter() - t0 + (self._views_s if views is None else 0.0)
        self.run.write_bytes(path, pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
        if shared is not None:
            shared[path] = state
        return state, secs, False

    def process(self, unit: dict[str, Any], views: Callable[[], list[Any]] | None = None,
                shared: dict[str, Any] | None = None) -> dict[str, Any]:
        """Answer one unit's items; ``views`` / ``shared``: see :meth:`_state` (:class:`SpecWorker` passes them)."""
        self._load_s = self._views_s = 0.0
        state, ingest_s, cached = self._state(unit, views, shared)
        rows, contexts = [], []
        retrieve_s = answer_s = 0.0
        for item in unit["items"]:
            base = {"method": self.method_name, "question_id": item["question_id"], "cache_key": unit["cache_key"],
                    "backbone": self.backbone.name}
            try:
                t0 = time.perf_counter()
                ctx = self.method.retrieve(state, retrieval_query(item))
                t1 = time.perf_counter()
                pv = public_view(item)
                ans = self.backbone.answer(pv, ctx.text)
                retrieve_s += t1 - t0
                answer_s += time.perf_counter() - t1
                contexts.append({"question_id": item["question_id"], "context_text": ctx.text[:CONTEXT_KEEP_CHARS],
                                 "context_chars": len(ctx.text), "context_tokens": int(ctx.tokens_out)})
                rows.append({**base, "status": "ok", "error": "", "choice": ans.choice or "",
                             "prompt_sha": prompt_sha(pv, ctx.text),
                             "answer_text": ans.text[:4000], "tokens_in_memory": int(ctx.tokens_in_memory),
                             "tokens_out": int(ctx.tokens_out), "prompt_tokens": int(ans.tokens_in),
                             "reply_tokens": int(ans.tokens_out)})
            except Exception as exc:  # noqa: BLE001 - one bad item never sinks the unit
                log.warning("evaluate: %s %s failed: %s", self.method_name, item["question_id"], exc)
                rows.append({**base, "status": "error", "error": _err(exc), "choice": "", "answer_text": "",
                             "tokens_in_memory": 0, "tokens_out": 0, "prompt_tokens": 0, "reply_tokens": 0})
        if contexts:  # what the reader was shown, for `filegram view` (written before the answers: done = both)
            self.run.write_table(context_path(unit["out_path"]), pl.DataFrame(contexts, schema=CONTEXT_SCHEMA))
        self.run.write_table(unit["out_path"], pl.DataFrame(rows, schema=_UNIT_SCHEMA))
        n_err = sum(r["status"] != "ok" for r in rows)
        times = {"ingest_s": round(ingest_s, 4), "state_load_s": round(self._load_s, 4),
                 "retrieve_s": round(retrieve_s, 4), "answer_s": round(answer_s, 4),
                 "views_s": round(self._views_s if views is not None else 0.0, 4)}
        self.run.mark_done(STAGE, unit["unit_id"], {"n_items": len(rows), "n_errors": n_err, **times,
                                                    "cached_state": cached})
        return {"unit": unit["unit_id"], "n_items": len(rows), "n_errors": n_err, "cached_state": cached, **times}


class SpecWorker:
    """Ray actor body of the CPU path: one unit = one (setting, context spec) with every method that still has to
    answer it. The spec's views are built once and handed to each method in turn (building them — events.json,
    media, the multimodal derivatives' text — cost as much as most methods' ingest, and every method used to
    rebuild them); methods of one ``state_group`` (FileGramOS and its ablations) share the state ingested first.

    Each method keeps its own unit (``_done`` record, answer table, cached state, error row): a method whose ingest
    fails fails only its own unit, which a rerun retries. Same views, same states: the answers are those of one
    :class:`EvalWorker` per method.

    Args:
        methods: the methods this actor may be asked for (method objects are made on first use).
        method_options: ``{method: options}``.
        others: as :class:`EvalWorker`.
    """

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None, methods: list[str],
                 method_options: dict[str, dict[str, Any]] | None, backbone: Any, seed: int,
                 multimodal_content: str = "auto", multimodal_formats: list[str] | None = None):
        self.run = RunDir(run_uri, storage_options)
        self.methods = list(methods)
        self.kw = {"run_uri": run_uri, "storage_options": storage_options, "backbone": backbone, "seed": seed,
                   "multimodal_content": multimodal_content, "multimodal_formats": multimodal_formats}
        self.method_options = dict(method_options or {})
        self._workers: dict[str, EvalWorker] = {}
        self._override = None

    def _worker(self, method: str) -> EvalWorker:
        if method not in self._workers:
            self._workers[method] = EvalWorker(method=method, method_options=self.method_options.get(method, {}),
                                               **self.kw)
        return self._workers[method]

    def process(self, spec_unit: dict[str, Any]) -> dict[str, Any]:
        """``{"unit", "views_s", "rows": [one :meth:`EvalWorker.process` row per method, or an error row]}``."""
        built: dict[str, Any] = {}

        def views() -> list[Any]:
            if "views" not in built:
                if "error" in built:
                    raise built["error"]
                t0 = time.perf_counter()
                try:
                    if spec_unit["setting"] == "multimodal" and self._override is None:
                        from filegram_ray.evaluate.multimodal import make_content_override

                        self._override = make_content_override(self.run, self.kw["multimodal_content"],
                                                               self.kw["multimodal_formats"])
                    built["views"] = build_unit_views(self.run, spec_unit, self._override)
                except Exception as exc:
                    built["error"] = exc
                    raise
                finally:
                    built["views_s"] = time.perf_counter() - t0
            return built["views"]

        shared: dict[str, Any] = {}
        rows = []
        for unit in spec_unit["units"]:
            try:
                row = self._worker(unit["method"]).process(unit, views=views, shared=shared)
                rows.append({"unit": unit["unit_id"], "status": "ok", **row})
            except Exception as exc:  # noqa: BLE001 - one method's failure fails its own unit only
                log.warning("evaluate: unit %s failed: %s", unit["unit_id"], exc)
                rows.append({"unit": unit["unit_id"], "status": "error", "error": _err(exc)})
        return {"unit": spec_unit["unit_id"], "views_s": round(float(built.get("views_s", 0.0)), 4), "rows": rows}


def _spec_units(plan: dict[str, list[dict[str, Any]]], todo: set[str]) -> list[dict[str, Any]]:
    """The ``todo`` units of ``plan`` grouped by (setting, context spec): one :class:`SpecWorker` unit each, methods
    in ``plan`` order; the largest specs first (a 2-actor pool then ends on small units, not on one 32-session
    spec)."""
    specs: dict[str, dict[str, Any]] = {}
    for units in plan.values():
        for u in units:
            if u["unit_id"] not in todo:
                continue
            su = specs.setdefault(u["spec_id"], {"unit_id": u["spec_id"], "setting": u["setting"], "spec": u["spec"], "units": []})
            su["units"].append(u)
    return sorted(specs.values(), key=lambda su: (-len(su["spec"].get("trajectories") or []), su["unit_id"]))


#: characters of each returned context kept in ``results/contexts/…``: the whole of every default context (the
#: longest, Full Context, is capped at ``FULL_CONTEXT_CAP_CHARS`` = 160,000 characters, reference §8.2); a longer one
#: is cut and ``context_chars`` keeps its full length
CONTEXT_KEEP_CHARS = 160_000
CONTEXT_SCHEMA = {"question_id": pl.Utf8, "context_text": pl.Utf8, "context_chars": pl.Int64,
                   "context_tokens": pl.Int64}


def context_path(out_path: str) -> str:
    """``results/contexts/<backbone>/<method>/<unit>.parquet``: the contexts one method returned for one unit's items
    (question_id, context_text ≤ :data:`CONTEXT_KEEP_CHARS` characters, context_chars, context_tokens), beside its
    answer table ``results/units/…`` (same relative name)."""
    return out_path.replace("results/units/", "results/contexts/", 1)


_UNIT_SCHEMA = {"method": pl.Utf8, "question_id": pl.Utf8, "cache_key": pl.Utf8, "backbone": pl.Utf8,
                "status": pl.Utf8, "error": pl.Utf8, "choice": pl.Utf8, "answer_text": pl.Utf8,
                "tokens_in_memory": pl.Int64, "tokens_out": pl.Int64, "prompt_tokens": pl.Int64,
                "reply_tokens": pl.Int64, "prompt_sha": pl.Utf8}


def prompt_sha(pv: Mapping[str, Any], context: str) -> str:
    """16 hex digits of sha256 over the reader's input: the system prompt and the user prompt a language model
    gets for this public view and context (``mcq_prompt`` / ``open_prompt`` of :mod:`filegram_ray.llm.backbones`);
    the lexical reader reads the same two texts. Kept per item in ``results.parquet`` (column ``prompt_sha``)."""
    from filegram_ray.llm.backbones import SYSTEM_PROMPT, mcq_prompt, open_prompt

    user = mcq_prompt(pv, context) if pv.get("choices") else open_prompt(pv, context)
    return hashlib.sha256(f"{SYSTEM_PROMPT}\x1f{user}".encode("utf-8")).hexdigest()[:16]


# ----------------------------------------------------------------------------------------------- stage


def backbone_tag(spec: Any) -> str:
    """A short, stable identity of a backbone spec (``lexical``, ``openai-3f2a9c1e`` …): answers and completion
    records are kept per backbone, so changing the backbone never reuses another backbone's answers."""
    from filegram_ray.llm.processors import chat_spec, is_llm_spec

    if isinstance(spec, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", spec):
        return spec
    kind = spec.get("kind", "openai") if isinstance(spec, dict) else "backbone"
    if is_llm_spec(spec):  # only what changes the answers: batch size, concurrency, retries keep the answers
        cs = chat_spec(spec)
        spec, kind = cs.identity(), cs.kind
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:8]
    return f"{kind}-{digest}"


def options_tag(options: Mapping[str, Any] | None) -> str:
    """``""`` for no options, else ``~`` + 8 hex digits of the options' canonical JSON: part of a unit's id, answer
    table and ingest cache, so answers made with other ``method_options`` (VisRAG with OCR or with the drawn text,
    another ``top_k`` …) are never reused under this run's options and row name."""
    if not options:
        return ""
    return "~" + hashlib.sha256(json.dumps(options, sort_keys=True, default=str).encode()).hexdigest()[:8]


def _plan_units(items: list[dict[str, Any]], methods: list[str], mm_mode: str, bb_tag: str = "lexical",
                llm_ingest: bool = False, method_options: Mapping[str, Mapping[str, Any]] | None = None
                ) -> dict[str, list[dict[str, Any]]]:
    """Units per method; the multimodal content mode is part of the cache key (``multimodal-strip`` …) and the
    backbone is part of every unit (its answers) and, when the backbone is an LLM that methods use at ingest
    (``llm_ingest``), of the ingest cache too; a method's options (``method_options``) are part of its units, answer
    tables and ingest cache (:func:`options_tag`)."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for it in items:
        tag = it["setting"] if it["setting"] == "text" else f"{it['setting']}-{mm_mode}"
        key = spec_key(it["context"], tag)
        g = groups.setdefault((tag, key, it["setting"]), {"spec": it["context"], "items": []})
        g["items"].append(it)
    from filegram_ray.methods import make_method

    plan: dict[str, list[dict[str, Any]]] = {}
    for m in methods:
        group = make_method(m).group  # cheap: methods load models lazily
        opt = options_tag((method_options or {}).get(m))
        units = []
        for (tag, key, setting), g in sorted(groups.items()):
            uid = f"{bb_tag}/{m}/{tag}__{key}{opt}"
            cache_group = f"{group}@{bb_tag}" if llm_ingest else group
            units.append({"unit_id": uid, "method": m, "setting": setting, "cache_key": key, "spec": g["spec"],
                          "spec_id": f"{bb_tag}/{tag}__{key}",
                          "items": g["items"], "cache_path": f"results/cache/{cache_group}/{tag}__{key}{opt}.pkl",
                          "out_path": f"results/units/{bb_tag}/{m}/{tag}__{key}{opt}.parquet"})
        plan[m] = units
    return plan


def _earlier_methods(run: RunDir, items: list[dict[str, Any]], methods: list[str], mm_tag: str, bb_tag: str,
                     llm_ingest: bool, method_options: Mapping[str, Mapping[str, Any]] | None = None
                     ) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """``(plan, left_out)``: the units of registered methods not in ``methods`` that an earlier evaluate of this run
    answered under ``results/units/<bb_tag>/<method>/``, for the methods whose every unit of this item selection is
    complete (their rows join the results: what ``--methods`` with them added would give, without answering
    anything); ``left_out`` = the other methods with answers there (another sample, setting, bank or
    ``method_options``: a method's units are those of this run's options for it)."""
    from filegram_ray.methods import method_names

    found = [m for m in method_names() if m not in methods and run.listdir(f"results/units/{bb_tag}/{m}")]
    if not found or not items:
        return {}, []
    plan = _plan_units(items, found, mm_tag, bb_tag, llm_ingest=llm_ingest, method_options=method_options)
    full = {m: units for m, units in plan.items() if all(_unit_complete(run, u) for u in units)}
    return full, [m for m in found if m not in full]


def _time_by_method(rows: list[dict[str, Any]], plan: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Where each method's time went in this run (units answered now): ``{method: {units, items, ingests,
    ingest_s, state_loads, state_load_s, retrieve_s, answer_s, views_s}}`` — views = building a spec's views (once per
    spec for all methods, booked on the first method that ingests it), ingest = building a context spec's state (or
    loading it from the shared cache), answer = the method's retrieval plus the backbone's reply."""
    method_of = {u["unit_id"]: m for m, units in plan.items() for u in units}
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        m = method_of.get(str(r.get("unit")))
        if m is None or r.get("status") == "error":
            continue
        t = out.setdefault(m, {"units": 0, "items": 0, "ingests": 0, "ingest_s": 0.0, "state_loads": 0,
                               "state_load_s": 0.0, "retrieve_s": 0.0, "answer_s": 0.0, "views_s": 0.0})
        t["units"] += 1
        t["items"] += int(r.get("n_items") or 0)
        t["ingests" if not r.get("cached_state") else "state_loads"] += 1
        for k in ("ingest_s", "state_load_s", "retrieve_s", "answer_s", "views_s"):
            t[k] += float(r.get(k) or 0.0)
    return {m: {k: round(v, 2) if isinstance(v, float) else v for k, v in t.items()} for m, t in out.items()}


def format_time_by_method(t: dict[str, dict[str, Any]]) -> str:
    """The per-method time table printed at the end of the evaluate stage."""
    lines = [f"{'method':28s} {'units':>6s} {'items':>6s} {'ingests':>8s} {'ingest s':>9s} {'loads':>6s} "
             f"{'load s':>7s} {'retrieve s':>10s} {'answer s':>9s} {'views s':>8s}"]
    for m, r in sorted(t.items()):
        lines.append(f"{m:28s} {r['units']:6d} {r['items']:6d} {r['ingests']:8d} {r['ingest_s']:9.1f} "
                     f"{r['state_loads']:6d} {r['state_load_s']:7.1f} {r['retrieve_s']:10.1f} {r['answer_s']:9.1f} "
                     f"{r.get('views_s', 0.0):8.1f}")
    lines.append("views s: building a context spec's views, once per spec for all its methods (paid by the first "
                 "method that ingests it); ingest s: the method's own ingest")
    return "\n".join(lines)


def _validity_rows(items: list[dict[str, Any]], key: dict[str, dict[str, Any]], seed: int) -> list[dict]:
    from filegram_ray.llm import OracleBackbone, RandomBackbone

    oracle = OracleBackbone({q: (k.get("correct") if _is_letter(k.get("correct")) else
                                 k.get("correct_text") or k.get("correct")) for q, k in key.items()})
    out = []
    for name, bb in (("oracle", oracle), ("random", RandomBackbone(seed))):
        for it in items:
            pv = public_view(it)
            base = {"method": name, "question_id": it["question_id"], "cache_key": "", "backbone": name}
            try:
                ans = bb.answer(pv, "")
                out.append({**base, "status": "ok", "error": "", "choice": ans.choice or "",
                            "answer_text": ans.text, "tokens_in_memory": 0, "tokens_out": 0, "prompt_tokens": 0,
                            "reply_tokens": 0})
            except Exception as exc:  # noqa: BLE001 - a validity row failure is an error row
                out.append({**base, "status": "error", "error": _err(exc), "choice": "", "answer_text": "",
                            "tokens_in_memory": 0, "tokens_out": 0, "prompt_tokens": 0, "reply_tokens": 0})
    return out


def _reader_validity_frame(run: RunDir, items: list[dict[str, Any]], key: dict[str, dict[str, Any]], seed: int,
                           plan: dict[str, list[dict[str, Any]]], ecfg: EvaluateConfig, spec: Any,
                           ingest_backbone: Any, mm_mode: str) -> pl.DataFrame:
    """The reader validity rows (:mod:`filegram_ray.evaluate.reader_validity`: empty memory when No Context is not
    evaluated, gold evidence, wrong user, option order), answered by this run's backbone. ``wrong_user`` and
    ``order`` use the memory method's finished units and cached states (nothing is ingested for them)."""
    from filegram_ray.evaluate.reader_validity import answer_requests, memory_method, reader_requests
    from filegram_ray.llm import make_backbone

    mm = memory_method(list(plan))
    units = [u for u in plan.get(mm, []) if _unit_complete(run, u) and run.exists(u["cache_path"])] if mm else []
    worker = None
    if units:
        worker = EvalWorker(run.uri, run.storage_options, method=mm, method_options=ecfg.method_options.get(mm, {}),
                            backbone=ingest_backbone if spec is not None else ecfg.backbone, seed=seed,
                            multimodal_content=mm_mode, multimodal_formats=ecfg.multimodal_formats)
    cut = ecfg.max_context_chars if spec is not None else None

    def retrieve(state: Any, item: Mapping[str, Any]) -> str:
        text = worker.method.retrieve(state, retrieval_query(item)).text
        return text[:cut] + "\n[… context cut to fit the model]" if cut and len(text) > cut else text

    reqs = reader_requests(items, key, seed, units=units, load_state=lambda u: worker._state(u)[0],
                           retrieve=retrieve, with_empty="no_context" not in plan)
    # answers of earlier evaluates with this backbone, by (row, item, prompt hash): a rerun asks nothing again
    schema = {**_UNIT_SCHEMA, "shown_choice": pl.Utf8, "shift": pl.Int64}
    cache_path = f"results/reader/{backbone_tag(ecfg.backbone)}.parquet"
    cached = {(r["method"], r["question_id"], r["prompt_sha"]): r
              for r in (run.read_table(cache_path).iter_rows(named=True) if run.exists(cache_path) else [])}
    keys = [(q["row"], q["item"]["question_id"], prompt_sha(q["pv"], q["context"])) for q in reqs]
    todo = [q for q, k in zip(reqs, keys) if k not in cached]
    fresh = {(r["method"], r["question_id"], r["prompt_sha"]): r for r in answer_requests(
        todo, backbone=make_backbone(ecfg.backbone, seed=seed) if spec is None else None, spec=spec)}
    rows = [cached.get(k) or fresh[k] for k in keys]
    if todo:
        keep = {**cached, **{k: r for k, r in fresh.items() if r["status"] == "ok"}}  # failures are asked again
        run.write_table(cache_path, pl.DataFrame(list(keep.values()), schema=schema))
    return pl.DataFrame(rows, schema=schema)


def _is_letter(x: Any) -> bool:
    return isinstance(x, str) and len(x.strip()) == 1 and x.strip().upper() in LETTERS


def _unit_complete(run: RunDir, unit: dict[str, Any]) -> bool:
    """A unit counts as done when its completion record exists and its answer table covers every item the unit
    has in this run (a unit answered under a smaller sample is answered again)."""
    if not (run.is_done(STAGE, unit["unit_id"]) and run.exists(unit["out_path"])):
        return False
    have = set(run.read_table(unit["out_path"])["question_id"].to_list())
    return all(it["question_id"] in have for it in unit["items"])


def sample_items(items: list[dict[str, Any]], per_sub_task: int, seed: int) -> list[dict[str, Any]]:
    """A seeded sample of at most ``per_sub_task`` items per (sub-task, setting), in question-id order, plus the
    text twins of sampled multimodal items. Same seed and bank → the same sample."""
    import hashlib
    import random

    from filegram_ray.evaluate.multimodal import text_twins

    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for it in items:
        groups.setdefault((str(it.get("sub_track", "")), str(it.get("setting", "text"))), []).append(it)
    keep: set[str] = set()
    for (sub, setting), grp in sorted(groups.items()):
        ids = sorted(it["question_id"] for it in grp)
        sub_seed = int(hashlib.sha256(f"{seed}:evaluate-sample:{sub}:{setting}".encode()).hexdigest()[:16], 16)
        keep.update(random.Random(sub_seed).sample(ids, min(per_sub_task, len(ids))))
    twins = text_twins(items)
    keep.update(twins[q] for q in list(keep) if q in twins)
    return [it for it in items if it["question_id"] in keep]


def score_rows(answers: pl.DataFrame, items: list[dict[str, Any]], key: dict[str, dict[str, Any]],
               judge) -> pl.DataFrame:
    """Join answers with item fields and the key; add ``correct`` (letter / reference), ``is_correct``,
    ``score`` (0–100; see :mod:`filegram_ray.evaluate.scoring`) and ``text_twin`` (a multimodal item's text
    counterpart, :func:`filegram_ray.evaluate.multimodal.text_twins`; "" otherwise). The open-ended rows are judged
    in one batch (``judge.judge_many``: one Ray Dataset for an LLM judge)."""
    from filegram_ray.evaluate.multimodal import text_twins
    from filegram_ray.evaluate.scoring import likert_to_100, score_mcq
    from filegram_ray.evaluate.stats import item_profile

    by_id = {it["question_id"]: it for it in items}
    twins = text_twins(items)
    out = []
    to_judge: list[int] = []
    for r in answers.iter_rows(named=True):
        it = by_id[r["question_id"]]
        k = key.get(r["question_id"], {})
        correct = str(k.get("correct", ""))
        is_open = not it.get("choices")
        row = {**r, "track": it.get("track", ""), "sub_track": it.get("sub_track", ""),
               "sub_class": it.get("sub_class", ""), "channel": it.get("channel", ""),
               "setting": it.get("setting", "text"), "is_open": is_open, "correct": correct,
               "n_choices": len(it.get("choices") or []), "likert": None, "profile": item_profile(it),
               "text_twin": twins.get(r["question_id"], "")}
        if not k:
            row.update(is_correct=None, score=None, status="error",
                       error=(r["error"] + "; " if r["error"] else "") + "no answer key entry")
        elif r["status"] != "ok":
            row.update(is_correct=False if not is_open else None, score=0.0 if not is_open else None)
        elif is_open:
            row.update(score=None, is_correct=None)
            to_judge.append(len(out))
        else:
            sc = score_mcq(r["choice"], correct)
            row.update(score=sc, is_correct=sc == 100.0)
        out.append(row)
    if to_judge:
        reqs = []
        for i in to_judge:
            k = key[out[i]["question_id"]]
            reqs.append((by_id[out[i]["question_id"]], str(k.get("correct_text") or k.get("correct") or ""),
                         out[i]["answer_text"]))
        try:
            verdicts = judge.judge_many(reqs)
        except Exception as exc:  # noqa: BLE001 - a judge failure leaves the items unscored, the report still comes
            log.warning("evaluate: judge %s failed: %s", getattr(judge, "name", judge), exc)
            verdicts = [(None, f"judge failed: {_err(exc)}")] * len(reqs)
        for i, (s, note) in zip(to_judge, verdicts):
            out[i].update(likert=s, score=likert_to_100(s))
            if note and s is None:
                out[i].update(status="error", error=note[:1000])
    return pl.DataFrame(out, infer_schema_length=None)


def _open_answers(answers: pl.DataFrame, items: list[dict[str, Any]],
                  key: dict[str, dict[str, Any]]) -> list[tuple[dict[str, Any], str, str]]:
    """``(item, reference, answer)`` of the answered open-ended rows (what :func:`score_rows` will judge)."""
    by_id = {it["question_id"]: it for it in items}
    out = []
    for r in answers.filter(pl.col("status") == "ok").iter_rows(named=True):
        it, k = by_id.get(r["question_id"]), key.get(r["question_id"])
        if it is not None and k and not it.get("choices"):
            out.append((it, str(k.get("correct_text") or k.get("correct") or ""), r["answer_text"]))
    return out


_JUDGE_CACHE = "results/judge/verdicts.parquet"


def _load_judge_cache(run: RunDir) -> dict[str, int | None]:
    """Earlier LLM-judge verdicts of this run directory (``key -> likert``)."""
    if not run.exists(_JUDGE_CACHE):
        return {}
    df = run.read_table(_JUDGE_CACHE)
    return dict(zip(df["key"].to_list(), df["likert"].to_list()))


def _save_judge_cache(run: RunDir, cache: dict[str, int | None]) -> None:
    if cache:
        run.write_table(_JUDGE_CACHE, pl.DataFrame({"key": list(cache), "likert": list(cache.values())},
                                                   schema={"key": pl.Utf8, "likert": pl.Int64}))


def _probe(spec):
    """The endpoint answers a short request (else ValueError naming the URL) and which answer constraint it honours:
    the spec with ``constrain`` resolved (:func:`filegram_ray.llm.processors.probe_endpoint`)."""
    from filegram_ray.llm.processors import probe_endpoint

    return probe_endpoint(spec)


@exclusive_stage(STAGE)
def run_evaluate(config: PipelineConfig, *, methods: list[str] | None = None,
                 backbone: str | dict[str, Any] | None = None, serial: bool | None = None) -> dict[str, Any]:
    """Run the evaluate stage on ``config.run_dir``; returns a one-screen summary dict.

    Args:
        config: pipeline config; the ``evaluate:`` section is validated by :class:`EvaluateConfig`.
        methods / backbone / serial: override the section's values (job-script flags).

    Raises:
        ValueError: invalid section (unknown method or option, empty selection lists …), bad items table; no item
            selected (before anything is written: the last report stays); not one answer ok (0 of N fails loudly,
            after the report and the error rows are written).
        StorageError: ``bench/items.parquet`` or ``bench/answers_key.parquet`` missing.
    """
    from pydantic import ValidationError

    from filegram_ray.evaluate.report import write_report
    from filegram_ray.evaluate.scoring import judge_validity, make_judge, summarise, validity_requests
    from filegram_ray.llm import make_backbone
    from filegram_ray.runtime import init_ray, map_units

    section = config.section("evaluate")  # the call's own choices go through the same checks as the config's
    section.update({k: v for k, v in (("methods", list(methods) if methods else None), ("backbone", backbone),
                                      ("serial", serial)) if v is not None})
    try:
        ecfg = EvaluateConfig.model_validate(section)
    except ValidationError as exc:
        raise UserError("; ".join(f"evaluate.{'.'.join(map(str, e['loc']))}: {e['msg'].removeprefix('Value error, ')}"
                                   for e in exc.errors())) from exc
    run = config.run()
    t0 = time.perf_counter()
    bank = load_items(run)
    items = [it for it in bank if it["setting"] in ecfg.settings
             and (ecfg.sub_tracks is None or it.get("sub_track") in ecfg.sub_tracks)]
    n_bank = len(items)
    if ecfg.sample_per_sub_task is not None:
        items = sample_items(items, ecfg.sample_per_sub_task, config.seed)
    if ecfg.max_items is not None:
        items = items[:ecfg.max_items]
    if not items:  # 0 of N: refused before anything is written (the last report and results stay as they were)
        raise UserError(f"evaluate: no item selected: {run.url('bench/items.parquet')} holds {len(bank)} items, "
                         f"{n_bank} of them in settings {ecfg.settings} and sub-tasks {ecfg.sub_tracks or 'all'}"
                         + (f", max_items {ecfg.max_items}" if ecfg.max_items is not None else ""))
    key = load_answer_key(run)
    from filegram_ray.evaluate.multimodal import DERIVATIVES_INDEX

    mm_mode = ecfg.multimodal_content
    if mm_mode == "auto":
        mm_mode = "derivatives" if run.exists(DERIVATIVES_INDEX) else "strip"
    mm_tag = mm_mode
    if mm_mode == "derivatives" and ecfg.multimodal_formats is not None:  # another view → another cache key
        mm_tag += "-" + hashlib.sha256(",".join(sorted(ecfg.multimodal_formats)).encode()).hexdigest()[:8]
    from filegram_ray.llm.processors import HttpChatSpec, chat_spec, is_llm_spec

    spec = chat_spec(ecfg.backbone) if is_llm_spec(ecfg.backbone) else None
    if spec is None:
        bb = make_backbone(ecfg.backbone, seed=config.seed)
        bb_info, ingest_backbone, llm_ingest = bb.describe(), ecfg.backbone, bb.is_llm
    else:
        bb_info = {"name": spec.display(), "is_llm": True, **spec.identity()}
        llm_ingest = bool(ecfg.ingest_llm and isinstance(spec, HttpChatSpec))
        ingest_backbone = {"kind": "openai", **spec.backbone_kwargs()} if llm_ingest else "lexical"
        if isinstance(spec, HttpChatSpec):  # fail fast, with the URL, instead of thousands of failed requests
            spec = _probe(spec)
            bb_info["constrain"] = spec.constrain
    plan = _plan_units(items, ecfg.methods, mm_tag, backbone_tag(ecfg.backbone), llm_ingest=llm_ingest,
                       method_options=ecfg.method_options)
    if not ecfg.serial or spec is not None:  # the ray.data.llm processor always runs on Ray
        init_ray(config.ray.address, config.ray.num_cpus)
    unit_status: list[dict[str, Any]] = []
    answering: dict[str, Any] = {}
    if spec is not None:
        from filegram_ray.evaluate.answer import answer_units

        todo = [u for units in plan.values() for u in units if not _unit_complete(run, u)]
        log.info("evaluate: %d units to answer with %s (%d already done)", len(todo), spec.display(),
                 sum(len(u) for u in plan.values()) - len(todo))
        answering = answer_units(
            run, todo, spec=spec, stage=STAGE, unit_schema=_UNIT_SCHEMA, method_options=ecfg.method_options,
            ingest_backbone=ingest_backbone, seed=config.seed, multimodal_content=mm_mode,
            multimodal_formats=ecfg.multimodal_formats, num_actors=ecfg.num_actors,
            num_cpus_per_actor=ecfg.num_cpus_per_actor, wave_units=ecfg.wave_units,
            max_context_chars=ecfg.max_context_chars)
    views_s = 0.0
    if spec is None:
        todo: set[str] = set()
        for m, units in plan.items():
            left = [u["unit_id"] for u in units if not _unit_complete(run, u)]
            log.info("evaluate: %s: %d units (%d already done)", m, len(units), len(units) - len(left))
            todo.update(left)
        spec_units = _spec_units(plan, todo)
        rows = map_units(SpecWorker, spec_units, init_kwargs={
            "run_uri": run.uri, "storage_options": run.storage_options, "methods": ecfg.methods,
            "method_options": ecfg.method_options, "backbone": ecfg.backbone, "seed": config.seed,
            "multimodal_content": mm_mode, "multimodal_formats": ecfg.multimodal_formats},
            num_actors=ecfg.num_actors, num_cpus_per_actor=ecfg.num_cpus_per_actor, serial=ecfg.serial,
            stage=STAGE)
        by_id = {su["unit_id"]: su for su in spec_units}
        for r in rows:
            if "rows" in r:
                unit_status.extend(r["rows"])
                views_s += float(r.get("views_s") or 0.0)
            else:  # the actor itself failed (died past its restarts): every method unit of the spec failed
                unit_status.extend({"unit": u["unit_id"], "status": "error", "error": r.get("error", "")}
                                   for u in by_id.get(r.get("unit"), {}).get("units", []))
    # methods an earlier evaluate of this run answered on these same items with this backbone: their finished unit
    # tables join the results, so a second evaluate with another --methods list adds rows instead of replacing them
    earlier, left_out = _earlier_methods(run, items, ecfg.methods, mm_tag, backbone_tag(ecfg.backbone), llm_ingest,
                                         ecfg.method_options)
    if earlier:
        print(f"evaluate: report also covers {', '.join(earlier)} (answered by an earlier evaluate of this run on "
              "the same items and backbone)", flush=True)
    if left_out:
        print(f"evaluate: earlier results of {', '.join(left_out)} left out of the report (not answered on these "
              "items with this backbone; add them to --methods to answer them)", flush=True)
    time_by_method = _time_by_method(unit_status, plan)
    if time_by_method:
        print(format_time_by_method(time_by_method), flush=True)
    if views_s:
        print(f"evaluate: context views built once per spec for all methods: {views_s:.1f} s", flush=True)
    # gather answers: finished units from their tables, failed units as error rows for each of their items
    frames = []
    failed = {r["unit"]: r for r in unit_status if r.get("status") == "error"}
    paper_order = {m: i for i, m in enumerate(DEFAULT_METHODS)}  # rows in the paper's order, added ones included
    for m, units in sorted([*plan.items(), *earlier.items()], key=lambda kv: (paper_order.get(kv[0], len(paper_order)),
                                                                             kv[0])):
        for u in units:
            if _unit_complete(run, u):  # only this run's items of the unit (an earlier run may have had more)
                ids = [it["question_id"] for it in u["items"]]
                frames.append(run.read_table(u["out_path"]).filter(pl.col("question_id").is_in(ids)))
            else:
                why = failed.get(u["unit_id"], {}).get("error", "unit did not finish")
                frames.append(pl.DataFrame([{
                    "method": m, "question_id": it["question_id"], "cache_key": u["cache_key"], "backbone": "",
                    "status": "error", "error": f"ingest/unit failed: {why}"[:1000], "choice": "",
                    "answer_text": "", "tokens_in_memory": 0, "tokens_out": 0, "prompt_tokens": 0,
                    "reply_tokens": 0} for it in u["items"]], schema=_UNIT_SCHEMA))
    if ecfg.validity:
        frames.append(pl.DataFrame(_validity_rows(items, key, config.seed), schema=_UNIT_SCHEMA))
        frames.append(_reader_validity_frame(run, items, key, config.seed, {**plan, **earlier}, ecfg, spec,
                                             ingest_backbone, mm_mode))
    answers = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame(schema=_UNIT_SCHEMA)
    judge_spec = ecfg.judge_backbone if ecfg.judge_backbone is not None else ecfg.backbone
    cache = _load_judge_cache(run)
    judge = make_judge(ecfg.judge, judge_spec, cache=cache)
    t_judge = time.perf_counter()
    if hasattr(judge, "prefetch"):  # one processor pass for the answers' verdicts and the validity rows
        judge.prefetch(_open_answers(answers, items, key) + (validity_requests(items, key, config.seed)
                                                             if ecfg.validity else []))
    results = score_rows(answers, items, key, judge)
    validity = judge_validity(judge, items, key, config.seed) if ecfg.validity else None
    _save_judge_cache(run, cache)
    judge_s = time.perf_counter() - t_judge
    if validity is not None and validity.height:
        run.write_table("results/judge_validity.parquet", validity)
        for r in validity.filter(~pl.col("ok")).iter_rows(named=True):
            log.warning("evaluate: judge %s fails its validity row %s: mean %s, expected %s–%s", r["judge"],
                        r["case"], r["mean"], r["lo"], r["hi"])
    if results.height:  # per item: which reader, at which temperature (the raw reply is answer_text)
        results = results.with_columns(pl.lit(bb_info.get("name"), pl.Utf8).alias("model"),
                                       pl.lit(spec.temperature if spec is not None else None, pl.Float64)
                                       .alias("temperature"))
    run.write_table("results/results.parquet", results)
    summary = summarise(results) if results.height else pl.DataFrame()
    if summary.height:
        run.write_table("results/summary.parquet", summary)
    from filegram_ray.methods import make_method

    # one instance per method with the run's options names its row and its mode (what ran, for the report)
    shown = {m: make_method(m, **ecfg.method_options.get(m, {})) for m in [*ecfg.methods, *earlier]}
    info = {"n_items": len(items), "n_bank": n_bank, "sample_per_sub_task": ecfg.sample_per_sub_task,
            "methods": ecfg.methods, "earlier_methods": list(earlier), "earlier_left_out": left_out,
            "backbone": bb_info, "judge": judge.name,
            "method_modes": {m: getattr(shown[m], "mode", lambda llm: "")(bool(llm_ingest)) for m in shown},
            "method_rows": {m: str(getattr(shown[m], "row_name", lambda: "")() or getattr(shown[m], "display", m))
                            for m in shown},
            "multimodal_content": mm_mode,
            "embed_dtype": _embed_dtype(),  # the methods' embedder dtype on this machine and why (issue 31)
            "n_units": sum(len(u) for u in plan.values()), "n_failed_units": len(failed),
            "units": unit_counts(planned=sum(len(u) for u in plan.values()),
                                 done=sum(1 for r in unit_status if r.get("status") != "error")
                                 + int(answering.get("n_units") or 0),
                                 skipped=sum(len(u) for u in plan.values()) - len(unit_status)
                                 - int(answering.get("n_units") or 0),
                                 failed=len(failed)),
            "n_error_rows": int(results.filter(pl.col("status") != "ok").height) if results.height else 0,
            "answering": {k: round(v, 2) if isinstance(v, float) else v for k, v in answering.items()},
            "judge_s": round(judge_s, 2), "time_by_method": time_by_method, "views_s": round(views_s, 2),
            "judge_validity": validity.to_dicts() if validity is not None else [],
            "seed": config.seed, "temperature": spec.temperature if spec is not None else None,
            "seconds": round(time.perf_counter() - t0, 2)}
    write_report(run, results, summary, info, plots=ecfg.plots)
    from filegram_ray.schema.meta import record_stage

    try:
        record_stage(run, STAGE, info, config.model_dump(mode="json"))
    except Exception as exc:  # noqa: BLE001 - the manifest is informative; never fail the stage on it
        log.warning("evaluate: could not record the stage in run.json: %s", exc)
    answered = results.filter(pl.col("method").is_in(ecfg.methods)) if results.height else results
    if answered.height and not answered.filter(pl.col("status") == "ok").height:
        first = answered.filter(pl.col("status") != "ok")["error"][0]
        raise UserError(f"evaluate: 0 of {answered.height} answers ok for methods {ecfg.methods} "
                         f"({len(failed)} of {info['n_units']} units failed; report and error rows in "
                         f"{run.url('results/')}); first error: {first}")
    return info


# -- transitional (issue #29 port in progress): the stage's class for the registry; run_stage calls the legacy
# function until the stage is ported onto plan/worker/finish
from filegram_ray.stages.base import Stage as _Stage  # noqa: E402


class EvaluateStage(_Stage):
    name = 'evaluate'
    Config = EvaluateConfig
    legacy = staticmethod(run_evaluate)
