"""The evaluate stage's workers: an item is one method × (setting, context spec); a task is one context spec with
every method that still has to answer it (:class:`SpecWorker`, on the stage's executor), each method answering
through its :class:`EvalWorker`.

A worker writes its items' outputs — the ingest cache ``results/cache/…``, the contexts shown
``results/contexts/…`` and, last, the answer table ``results/units/…`` — and reports one result per method item;
the stage runner writes each finished item's completion record. The language-model path's prompt builders
(:class:`~filegram_ray.evaluate.answer.PromptBuilder`) ingest and retrieve through :class:`EvalWorker` too.

Leakage guard: a method sees only :class:`~filegram_ray.methods.trajectory.TrajectoryView` objects (events.json +
media/, opaque labels) and the backbone only the item's public view (:func:`~filegram_ray.evaluate.items
.public_view`: no profile id, no trajectory ids, no key).
"""

from __future__ import annotations

import hashlib
import logging
import pickle
import time
from collections.abc import Callable, Mapping
from typing import Any

import polars as pl

from filegram_ray.evaluate.items import public_view, retrieval_query
from filegram_ray.llm.parsing import no_choice_error
from filegram_ray.storage import RunDir

log = logging.getLogger(__name__)

__all__ = ["CONTEXT_KEEP_CHARS", "CONTEXT_SCHEMA", "UNIT_SCHEMA", "EvalWorker", "SpecWorker", "build_unit_views",
           "context_path", "error_text", "prompt_sha"]


def error_text(exc: BaseException) -> str:
    """``Type: message`` of an exception, at most 1,000 characters (an error row's ``error``)."""
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
    """One method's answering: one unit = one (method, setting, context spec) with its items.

    Args:
        run_uri / storage_options: the run directory.
        method / method_options: registered method name and its options.
        backbone: a validated backbone value (:func:`~filegram_ray.evaluate.config.validate_backbone`): the
            reader (:func:`~filegram_ray.evaluate.config.make_reader`), whose ``complete`` methods may call at
            ingest when it is a language model.
        seed: master seed.
        multimodal_content / multimodal_formats: see :class:`~filegram_ray.evaluate.config.EvaluateConfig`
            (``auto`` resolved by the stage).
        embedder: the methods' sentence embedder, a resolved kind (:func:`~filegram_ray.evaluate.embedding
            .resolve_embedder`); it reads the vectors of the run's embedding plan
            (:func:`~filegram_ray.methods.embed_plan.planned_embedder`) and embeds only what the plan left out.
    """

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None, method: str,
                 method_options: dict[str, Any] | None, backbone: Any, seed: int, multimodal_content: str = "auto",
                 multimodal_formats: list[str] | None = None, embedder: str = "minilm"):
        from filegram_ray.evaluate.config import make_reader
        from filegram_ray.methods import make_method
        from filegram_ray.methods.embed import run_cache_dir
        from filegram_ray.methods.embed_plan import planned_embedder

        self.run = RunDir(run_uri, storage_options)
        self.backbone = make_reader(backbone, seed)
        llm_fn = self.backbone.complete if self.backbone.is_llm else None
        options = dict(method_options or {})
        # the embedding plan's vectors preloaded; the model loads lazily, only for a text the plan left out
        options.setdefault("embedder", planned_embedder(self.run, embedder, run_cache_dir(self.run)))
        self.method = make_method(method, llm_fn=llm_fn, **options)
        self.method_name = method
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
        """Answer one unit's items and write its answer table (and the contexts shown); ``views`` / ``shared``: see
        :meth:`_state` (:class:`SpecWorker` passes them). Returns the unit's completion fields: ``unit``,
        ``n_items``, ``n_errors``, ``cached_state`` and the seconds ``ingest_s``, ``state_load_s``, ``retrieve_s``,
        ``answer_s``, ``views_s``."""
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
                # a multiple-choice reply that states no single option is an error row, never a guess
                unread = no_choice_error(ans.text, len(pv["choices"]), list(pv["choices"].values())) \
                    if pv.get("choices") and not ans.choice else ""
                rows.append({**base, "status": "error" if unread else "ok", "error": unread,
                             "choice": ans.choice or "",
                             "prompt_sha": prompt_sha(pv, ctx.text),
                             "answer_text": ans.text[:4000], "tokens_in_memory": int(ctx.tokens_in_memory),
                             "tokens_out": int(ctx.tokens_out), "prompt_tokens": int(ans.tokens_in),
                             "reply_tokens": int(ans.tokens_out)})
            except Exception as exc:  # noqa: BLE001 - one bad item never sinks the unit
                log.warning("evaluate: %s %s failed: %s", self.method_name, item["question_id"], exc)
                rows.append({**base, "status": "error", "error": error_text(exc), "choice": "", "answer_text": "",
                             "tokens_in_memory": 0, "tokens_out": 0, "prompt_tokens": 0, "reply_tokens": 0})
        if contexts:  # what the reader was shown, for `filegram view` (written before the answers: done = both)
            self.run.write_table(context_path(unit["out_path"]), pl.DataFrame(contexts, schema=CONTEXT_SCHEMA))
        self.run.write_table(unit["out_path"], pl.DataFrame(rows, schema=UNIT_SCHEMA))
        n_err = sum(r["status"] != "ok" for r in rows)
        times = {"ingest_s": round(ingest_s, 4), "state_load_s": round(self._load_s, 4),
                 "retrieve_s": round(retrieve_s, 4), "answer_s": round(answer_s, 4),
                 "views_s": round(self._views_s if views is not None else 0.0, 4)}
        return {"unit": unit["unit_id"], "n_items": len(rows), "n_errors": n_err, "cached_state": cached, **times}


class SpecWorker:
    """The stage's worker (CPU path): one task = one (setting, context spec) with the items of every method that
    still has to answer it. The spec's views are built once and handed to each method in turn (building them —
    events.json, media, the multimodal derivatives' text — cost as much as most methods' ingest, and every method
    used to rebuild them); methods of one ``state_group`` (FileGramOS and its ablations) share the state ingested
    first.

    Each method keeps its own item (answer table, cached state, completion record, error row): a method whose
    ingest fails fails only its own item, which a rerun retries. Same views, same states: the answers are those of
    one :class:`EvalWorker` per method.

    Args:
        methods: the methods this actor may be asked for (method objects are made on first use).
        method_options: ``{method: options}``.
        others: as :class:`EvalWorker`.
    """

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None, methods: list[str],
                 method_options: dict[str, dict[str, Any]] | None, backbone: Any, seed: int,
                 multimodal_content: str = "auto", multimodal_formats: list[str] | None = None,
                 embedder: str = "minilm"):
        self.run = RunDir(run_uri, storage_options)
        self.methods = list(methods)
        self.kw = {"run_uri": run_uri, "storage_options": storage_options, "backbone": backbone, "seed": seed,
                   "multimodal_content": multimodal_content, "multimodal_formats": multimodal_formats,
                   "embedder": embedder}
        self.method_options = dict(method_options or {})
        self._workers: dict[str, EvalWorker] = {}
        self._override = None

    def _worker(self, method: str) -> EvalWorker:
        if method not in self._workers:
            self._workers[method] = EvalWorker(method=method, method_options=self.method_options.get(method, {}),
                                               **self.kw)
        return self._workers[method]

    def process_task(self, units: list[dict[str, Any]]):
        """The method items of one context spec → ``(unit_id, fields or exception)`` each: :meth:`EvalWorker.process`
        fields (``views_s``: building the spec's views, on the item that built them)."""
        first = units[0]
        built: dict[str, Any] = {}

        def views() -> list[Any]:
            if "views" not in built:
                if "error" in built:
                    raise built["error"]
                t0 = time.perf_counter()
                try:
                    if first["setting"] == "multimodal" and self._override is None:
                        from filegram_ray.evaluate.multimodal import make_content_override

                        self._override = make_content_override(self.run, self.kw["multimodal_content"],
                                                               self.kw["multimodal_formats"])
                    built["views"] = build_unit_views(self.run, first, self._override)
                except Exception as exc:
                    built["error"] = exc
                    raise
                finally:
                    built["views_s"] = time.perf_counter() - t0
            return built["views"]

        shared: dict[str, Any] = {}
        for unit in units:
            try:
                yield unit["unit_id"], self._worker(unit["method"]).process(unit, views=views, shared=shared)
            except Exception as exc:  # noqa: BLE001 - one method's failure fails its own item only
                log.warning("evaluate: unit %s failed: %s", unit["unit_id"], exc)
                yield unit["unit_id"], exc


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


UNIT_SCHEMA = {"method": pl.Utf8, "question_id": pl.Utf8, "cache_key": pl.Utf8, "backbone": pl.Utf8,
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
