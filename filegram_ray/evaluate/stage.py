"""The evaluate stage: every configured memory method answers every FileGramBench item through one backbone.

Reads ``bench/items.parquet`` (public fields + context spec) and, for scoring only, ``bench/answers_key.parquet``;
writes under ``results/``:

* ``cache/<group>/<setting>__<key>.pkl`` — a method's ingested state per context spec (ingest once, reuse;
  FileGramOS's channel ablations share FileGramOS's states);
* ``units/<backbone>/<method>/<setting>__<key>.parquet`` — the answers of one work unit (and ``contexts/…``, what
  the reader was shown); ``_done/evaluate/…`` records;
* ``results.parquet`` — one row per method × item (answer, correct, score, tokens, status, error);
* ``summary.parquet``, ``report.md`` and PNG plots (:mod:`filegram_ray.evaluate.report`).

``results.parquet`` and the report cover the configured methods and every other method whose answers an earlier
evaluate of the run left for the same items and backbone (``results/units/<backbone>/<method>/``): a second evaluate
with another ``--methods`` list adds rows to the report instead of replacing them.

How it runs (:class:`EvaluateStage` on the :mod:`stage contract <filegram_ray.stages.base>`):

* :meth:`~EvaluateStage.check` selects the bench items, reads the key, settles the multimodal content mode and the
  backbone (an HTTP backbone is probed before any item: a dead URL fails at once, naming it);
* :meth:`~EvaluateStage.items` — an item is one method × (setting, context spec) with that spec's bench items
  (:mod:`filegram_ray.evaluate.plan`), keyed by its questions; a finished one is skipped on rerun.
* On the CPU path the unfinished items of one (setting, context spec) are one task
  (:meth:`~EvaluateStage.tasks`) for a :class:`~filegram_ray.evaluate.worker.SpecWorker` on the run's executor
  (actor pool by default, 0.5 CPU each: a 2-CPU node deadlocks with whole-CPU actors, ENVIRONMENT_FACTS §1;
  ``executor: serial`` in this process), which builds the spec's views once for every method. A failing question
  is an error row of the item's answer table; a failing ingest fails its item (an error row of
  ``errors/evaluate.parquet``, retried on rerun) and its questions are reported as error rows of the results.
* A **language-model** backbone answers through a ``ray.data.llm`` processor (an OpenAI-compatible endpoint or
  vLLM engines): the items are model calls (:class:`~filegram_ray.stages.base.ModelCallSpec`,
  :mod:`filegram_ray.evaluate.answer`) — prompts built on the run's executor, answered in waves through the
  processor (on Ray whatever the executor), each item's answer table written as its last reply comes in. A
  request the server could not answer is an error row of that question, with its cause.
* The second step, ``reader checks``, answers the reader validity requests
  (:func:`~filegram_ray.evaluate.reader_validity.reader_check_items`: gold evidence, empty, wrong user, option
  order, masked format) on the same executor as the units — the CPU reader's workers, or model calls for a
  language model — each answer kept in its completion record (``_done/evaluate.reader checks/``).
* The third step, ``verdicts``, gathers every item's answers (and the validity rows) and, for an **LLM judge**,
  lists one model-call item per distinct open-ended (question, reference, answer) request: the judge's calls run
  on the model-call executor like the answers, each verdict kept in its completion record
  (``_done/evaluate.verdicts/``; a failed call is an error row, asked again on rerun). The rubric judge has no
  such items: it is a pure function of the answer.
* :meth:`~EvaluateStage.finish` scores the answers from those verdicts (no model call), writes
  ``results.parquet``, ``summary.parquet``, ``judge/verdicts.parquet`` and the report, and returns the summary
  (the runner writes it into ``run.json`` once).

Leakage guard: the worker gives the method only :class:`~filegram_ray.methods.trajectory.TrajectoryView` objects
(events.json + media/, opaque labels) and the backbone only the item's public view (no profile id, no trajectory
ids, no key). Validity rows (oracle, random) answer from the public view too; the oracle is handed the key.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import TYPE_CHECKING, Any

from filegram_ray.errors import UserError
from filegram_ray.evaluate.config import DEFAULT_METHODS, STAGE, EvaluateConfig, chat_of, make_reader
from filegram_ray.evaluate.items import (
    load_answer_key,
    load_items,
    public_view,
    retrieval_query,
    sample_items,
)
from filegram_ray.evaluate.plan import (
    content_digest,
    earlier_methods,
    plan_units,
    spec_units,
    unit_complete,
    unit_key,
)
from filegram_ray.stages.base import ModelCallSpec, Row, Stage, WorkerSpec
from filegram_ray.stages.runner import stage_function

if TYPE_CHECKING:  # polars is imported where used: `filegram evaluate --help` loads no heavy library
    import polars as pl

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_METHODS",
    "STAGE",
    "EvaluateConfig",
    "EvaluateStage",
    "format_time_by_method",
    "load_answer_key",
    "load_items",
    "public_view",
    "retrieval_query",
    "run_evaluate",
    "sample_items",
]


def time_by_method(rows: list[dict[str, Any]], plan: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
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


def bank_digest(run) -> str | None:
    """SHA-256 (first 16 hex digits) of ``bench/items.parquet``, or None without one. The bench writes the same
    bytes for the same seed and inputs, so a changed digest means a rebuilt, different item bank."""
    import hashlib

    if not run.exists("bench/items.parquet"):
        return None
    return hashlib.sha256(run.read_bytes("bench/items.parquet")).hexdigest()[:16]


def stale_results_note(run) -> str:
    """``""``, or one sentence saying that ``bench/items.parquet`` changed after the last evaluate (its recorded
    ``bank_sha256``), so the results, the report and the findings answer an earlier item bank. Runs evaluated before
    the digest was recorded give ``""``."""
    if not run.exists("run.json"):
        return ""
    try:
        from filegram_ray.schema.meta import read_manifest

        rec = (read_manifest(run).get("stages") or {}).get("evaluate") or {}
    except (OSError, ValueError, AttributeError):
        return ""
    then = rec.get("bank_sha256") if isinstance(rec, dict) else None
    if not then:
        return ""
    now = bank_digest(run)
    if now == then:
        return ""
    return ("bench/items.parquet changed after the last evaluate (the bench stage ran again): these results answer "
            "the earlier item bank; rerun the evaluate stage for the current one")


class EvaluateStage(Stage):
    """Evaluate: methods × items through one backbone → ``results/`` (see the module docstring for the flow).

    Attributes set by :meth:`check` (read by :meth:`items` and :meth:`finish`): ``bench_items`` (the selected
    items), ``n_bank``, ``key`` (the answer key), ``mm_mode`` / ``mm_tag`` (the multimodal content mode and its cache
    tag), ``chat`` (the language model's processor spec with ``constrain`` resolved; None on the CPU path),
    ``bb_info``, ``ingest_backbone`` and ``llm_ingest``; by :meth:`items`: ``by_method`` (``{method: items}``).
    """

    name = STAGE
    Config = EvaluateConfig
    #: the method × context items; the reader validity requests (``validity: true``); the LLM judge's calls on the
    #: open-ended answers (none for the rubric judge)
    steps = ("method × context units", "reader checks", "verdicts")
    #: error rows are part of the results (the report counts them); a run with no answer at all raises
    exit_on = "never"

    @classmethod
    def add_arguments(cls, p) -> None:
        """``--methods``, ``--backbone``, ``--backbone-url`` and ``--backbone-model``."""
        p.add_argument("--methods", nargs="+", default=None, help="method names (default: evaluate.methods); "
                       "`filegram methods` lists them")
        p.add_argument("--backbone", default=None, choices=("encoder", "lexical", "random"),
                       help="a reader without a language model (default: evaluate.backbone, the encoder reader; "
                       "lexical: word overlap, cannot rank; random: a validity reference); a language model: "
                       "--backbone-url, or "
                       "evaluate.backbone in the config ({kind: openai, base_url, model} or {kind: vllm_engine, …})")
        p.add_argument("--backbone-url", default=None, help="OpenAI-compatible base URL, e.g. a vLLM or llama.cpp "
                       "server (an OpenAI-compatible backbone: kind openai)")
        p.add_argument("--backbone-model", default=None, help="model name served at --backbone-url")

    @classmethod
    def from_arguments(cls, args) -> tuple[dict[str, Any], dict[str, Any]]:
        """``--methods`` / ``--backbone`` / ``--backbone-url`` (+ ``--backbone-model``) laid over ``evaluate:``."""
        backbone = args.backbone
        if args.backbone_url:
            backbone = {"kind": "openai", "base_url": args.backbone_url, "model": args.backbone_model or "local"}
        return {}, {k: v for k, v in (("methods", args.methods), ("backbone", backbone)) if v is not None}

    # -- check ------------------------------------------------------------------------------------------------
    def check(self) -> None:
        """Select the bench items (settings, sub-tasks, sample, ``max_items``), read the answer key, settle the
        multimodal content mode and the backbone (an HTTP backbone is probed: it must answer, and the probe settles
        the answer constraint it honours).

        Raises:
            UserError: ``judge: llm`` without a language model; no item selected (before anything is written: the
                last report and results stay as they were); a malformed items table or key (names the file and
                field).
            UserError: ``bench/items.parquet`` missing (names the command that writes it).
            StorageError: ``bench/answers_key.parquet`` missing or a bench table unreadable.
            ValueError: an HTTP backbone that does not answer (names the URL).
        """
        o, run = self.opts, self.run
        self.t0 = time.perf_counter()
        if o.judge == "llm" and chat_of(o.judge_model) is None:  # refused before any answer, not after them all
            raise UserError(f"evaluate.judge: 'llm' needs a language model (evaluate.judge_backbone or "
                            f"evaluate.backbone), got {o.judge_model!r}")
        if not run.exists("bench/items.parquet"):
            raise UserError(f"{run.uri}: evaluate needs the bench stage's items (bench/items.parquet is missing): "
                            f"run `filegram bench build --run-dir {run.uri}` (or the pipeline) first")
        bank = load_items(run)
        items = [it for it in bank if it["setting"] in o.settings
                 and (o.sub_tracks is None or it.get("sub_track") in o.sub_tracks)]
        self.n_bank = len(items)
        if o.sample_per_sub_task is not None:
            items = sample_items(items, o.sample_per_sub_task, self.config.seed)
        if o.max_items is not None:
            items = items[:o.max_items]
        if not items:
            raise UserError(f"evaluate: no item selected: {run.url('bench/items.parquet')} holds {len(bank)} items, "
                            f"{self.n_bank} of them in settings {o.settings} and sub-tasks {o.sub_tracks or 'all'}"
                            + (f", max_items {o.max_items}" if o.max_items is not None else ""))
        self.bench_items = items
        self.key = load_answer_key(run)
        from filegram_ray.evaluate.multimodal import DERIVATIVES_INDEX

        mm_mode = o.multimodal_content
        if mm_mode == "auto":
            mm_mode = "derivatives" if run.exists(DERIVATIVES_INDEX) else "strip"
        self.mm_mode = self.mm_tag = mm_mode
        if mm_mode == "derivatives" and o.multimodal_formats is not None:  # another view → another cache key
            self.mm_tag += "-" + hashlib.sha256(",".join(sorted(o.multimodal_formats)).encode()).hexdigest()[:8]
        from filegram_ray.llm.processors import HttpChatSpec, probe_endpoint

        chat = o.chat
        if chat is None:
            from filegram_ray.llm.reader_head import check_run

            check_run(o.backbone, run)  # a trained reader never answers the profiles or seed it was trained on
            bb = make_reader(o.backbone, self.config.seed)
            self.bb_info, self.ingest_backbone, self.llm_ingest = bb.describe(), o.backbone, bb.is_llm
        else:
            self.bb_info = {"name": chat.display(), "is_llm": True, **chat.identity()}
            self.llm_ingest = bool(o.ingest_llm and isinstance(chat, HttpChatSpec))
            self.ingest_backbone = chat if self.llm_ingest else "lexical"
            if isinstance(chat, HttpChatSpec):  # fail fast, with the URL, instead of thousands of failed requests
                chat = probe_endpoint(chat)
                self.bb_info["constrain"] = chat.constrain
        self.chat = chat
        from filegram_ray.evaluate.embedding import resolve_embedder

        self.embedder = resolve_embedder(o.embedder)

    # -- items / tasks / worker ---------------------------------------------------------------------------------
    def items(self, step: str) -> list[dict[str, Any]]:
        """Every method × (setting, context spec) item (:func:`~filegram_ray.evaluate.plan.plan_units`), keyed by
        its questions (an item answered for another sample is answered again) and the bytes of the trajectories it
        reads (:func:`~filegram_ray.evaluate.plan.content_digest`: generated again, it is answered again), and
        finished when its answer table exists too."""
        if step == "reader checks":
            return self._reader_check_items()
        if step == "verdicts":
            return self._verdict_items()
        o = self.opts
        self.content = content_digest(self.run, self.mm_mode)
        self.by_method = plan_units(self.bench_items, o.methods, self.mm_tag, o.tag, llm_ingest=self.llm_ingest,
                                    method_options=o.method_options, embedder=self.embedder, content=self.content)
        self.t_items = time.perf_counter()
        return [{**u, "key": unit_key(u), "outputs": [u["out_path"]]}
                for units in self.by_method.values() for u in units]

    def tasks(self, step: str, items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """On the CPU path the items of one (setting, context spec), largest specs first
        (:func:`~filegram_ray.evaluate.plan.spec_units`); on the language-model path one item per task. First
        the run's embedding plan (:meth:`_embed_plan`) for the unfinished items."""
        if step == "verdicts":  # one processor pass; the prepare tasks only copy each request
            return [items[i:i + 256] for i in range(0, len(items), 256)]
        if step == "reader checks":  # the requests of one memory state together (a worker loads it once)
            by_state: dict[str, list[dict[str, Any]]] = {}
            for it in items:
                by_state.setdefault(it.get("state_path") or "", []).append(it)
            n = 16 if self.chat is None else 256
            return [g[i:i + n] for g in by_state.values() for i in range(0, len(g), n)]
        todo = {u["unit_id"] for u in items}
        self.embed_plan = self._embed_plan(todo)
        if self.chat is not None:
            return super().tasks(step, items)
        by_id = {u["unit_id"]: u for u in items}
        return [[by_id[u["unit_id"]] for u in su["units"]] for su in spec_units(self.by_method, todo)]

    def _embed_plan(self, todo_ids: set[str]) -> dict[str, Any]:
        """Every text the unfinished items' methods will embed, embedded once before any of them ingests
        (:func:`~filegram_ray.evaluate.embedding.prepare_vectors`); the workers read the vectors."""
        from filegram_ray.evaluate.embedding import prepare_vectors

        o = self.opts
        return prepare_vectors(
            self.run, spec_units(self.by_method, todo_ids), kind=self.embedder, method_options=o.method_options,
            llm_ingest=self.llm_ingest, multimodal_content=self.mm_mode, multimodal_formats=o.multimodal_formats,
            num_actors=o.num_actors, num_cpus=o.num_cpus_per_actor, use_ray=self.uses_ray)

    def worker(self, step: str) -> WorkerSpec | ModelCallSpec:
        """:class:`~filegram_ray.evaluate.worker.SpecWorker`, or the language-model path's model calls
        (:mod:`filegram_ray.evaluate.answer`)."""
        from filegram_ray.evaluate.worker import UNIT_SCHEMA, SpecWorker

        o = self.opts
        if step == "reader checks":
            from functools import partial

            from filegram_ray.evaluate.answer import answer_requests
            from filegram_ray.evaluate.reader_validity import (
                ReaderCheckCollect,
                ReaderCheckPrompts,
                ReaderCheckWorker,
                memory_method,
            )

            mm = memory_method(list({**self.by_method, **self.earlier}))
            resolver = {"run_uri": self.run.uri, "storage_options": self.run.storage_options, "method": mm,
                        "method_options": o.method_options.get(mm, {}) if mm else {},
                        "backbone": self.ingest_backbone if self.chat is not None else o.backbone,
                        "seed": self.config.seed, "multimodal_content": self.mm_mode,
                        "multimodal_formats": o.multimodal_formats,
                        "max_context_chars": o.max_context_chars if self.chat is not None else None}
            if self.chat is None:
                return WorkerSpec(ReaderCheckWorker, {"backbone": o.backbone, "seed": self.config.seed,
                                                      "resolver": resolver},
                                  num_actors=o.num_actors, num_cpus=o.num_cpus_per_actor)
            return ModelCallSpec(prepare=WorkerSpec(ReaderCheckPrompts, {"spec": self.chat, "resolver": resolver},
                                                    num_actors=o.num_actors, num_cpus=o.num_cpus_per_actor),
                                 call=partial(answer_requests, spec=self.chat), collect=ReaderCheckCollect(self.chat),
                                 wave=100_000)
        if step == "verdicts":
            from functools import partial

            from filegram_ray.evaluate.scoring import JudgeRequests, collect_verdict
            from filegram_ray.llm.processors import run_chat

            return ModelCallSpec(prepare=WorkerSpec(JudgeRequests, {}, num_actors=1, num_cpus=o.num_cpus_per_actor),
                                 call=partial(run_chat, spec=self.judge.spec), collect=collect_verdict,
                                 wave=100_000)
        if self.chat is None:
            return WorkerSpec(SpecWorker, {
                "run_uri": self.run.uri, "storage_options": self.run.storage_options, "methods": o.methods,
                "method_options": o.method_options, "backbone": o.backbone, "seed": self.config.seed,
                "multimodal_content": self.mm_mode, "multimodal_formats": o.multimodal_formats,
                "embedder": self.embedder},
                num_actors=o.num_actors, num_cpus=o.num_cpus_per_actor)
        from functools import partial

        from filegram_ray.evaluate.answer import AnswerCollect, PromptBuilder, answer_requests

        chat = self.chat
        constrain = "choice" if chat.constrain == "auto" and chat.kind == "vllm_engine" else chat.constrain
        prepare = WorkerSpec(PromptBuilder, {
            "run_uri": self.run.uri, "storage_options": self.run.storage_options,
            "method_options": o.method_options, "ingest_backbone": self.ingest_backbone, "seed": self.config.seed,
            "multimodal_content": self.mm_mode, "multimodal_formats": o.multimodal_formats,
            "temperature": chat.temperature, "max_tokens": chat.max_tokens, "max_tokens_open": chat.max_tokens_open,
            "max_context_chars": o.max_context_chars, "letter_only": constrain not in ("none", "auto"),
            "embedder": self.embedder},
            num_actors=o.num_actors, num_cpus=o.num_cpus_per_actor)
        return ModelCallSpec(prepare=prepare, call=partial(answer_requests, spec=chat),
                             collect=AnswerCollect(self.run, chat, UNIT_SCHEMA), wave=o.wave_units)

    def _reader_check_items(self) -> list[dict[str, Any]]:
        """After the units: what they left (figures for the report, failed units, the methods an earlier evaluate
        answered on these items), then the reader validity requests as items
        (:func:`~filegram_ray.evaluate.reader_validity.reader_check_items`; none with ``validity: false``)."""
        from filegram_ray.evaluate.reader_validity import reader_check_items

        o = self.opts
        rows = self.rows[self.steps[0]]
        self.answering = self._answering(rows)
        self.unit_status = [r for r in rows if not r.get("skipped")]
        # methods an earlier evaluate of this run answered on these same items with this backbone: their finished
        # unit tables join the results, so a second evaluate with another --methods list adds rows
        self.earlier, self.left_out = earlier_methods(self.run, self.bench_items, o.methods, self.mm_tag, o.tag,
                                                      self.llm_ingest, o.method_options, embedder=self.embedder,
                                                      content=self.content)
        self.failed = {r.unit: r for r in self.unit_status if not r.ok}
        self.reader_items = [] if not o.validity else reader_check_items(
            self.run, self.bench_items, self.key, self.config.seed, {**self.by_method, **self.earlier}, o)
        return self.reader_items

    def _verdict_items(self) -> list[dict[str, Any]]:
        """Gather every answer (this run's units, failed ones as error rows, the earlier methods', the validity
        rows), make the judge and list its model calls — one item per distinct open-ended request
        (:meth:`~filegram_ray.evaluate.scoring.LLMJudge.request_items`); none for the rubric judge, which judges in
        :meth:`finish` without a model."""
        from filegram_ray.evaluate.scoring import LLMJudge, make_judge, open_answers, validity_requests

        o = self.opts
        self.answers = self._answers({**self.by_method, **self.earlier}, self.failed)
        self.judge = make_judge(o.judge, o.judge_model, max_tokens=o.judge_max_tokens)
        self.t_judge = time.perf_counter()
        if not isinstance(self.judge, LLMJudge):
            return []
        return self.judge.request_items(
            open_answers(self.answers, self.bench_items, self.key)
            + (validity_requests(self.bench_items, self.key, self.config.seed) if o.validity else []))

    # -- finish -----------------------------------------------------------------------------------------------
    def _print_verdict(self, summary: pl.DataFrame) -> None:
        """The report's first word on the terminal: whether the reader can rank the methods (and why not), then
        each method's multiple-choice Avg with its 95 % interval where one means something (≥ 5 profiles)."""
        import polars as pl

        from filegram_ray.evaluate.report import VALIDITY_METHODS, format_interval

        run = self.run
        if not run.exists("results/findings.json") or not summary.height or "avg" not in summary.columns:
            return
        reader = run.read_json("results/findings.json").get("reader") or {}
        if reader.get("can_rank"):
            print("evaluate: the reader passes its validity checks: differences between methods are read "
                  "(report: paired tests, findings)", flush=True)
        else:
            why = (reader.get("gate") or {}).get("why") or reader.get("why") or ""
            print("evaluate: this reader cannot rank the memory methods" + (f" ({why})" if why else "")
                  + ": the scores below are shown, not read as results", flush=True)
        ci: dict[str, tuple[float, float, int]] = {}
        if run.exists("results/intervals.parquet"):
            for r in run.read_table("results/intervals.parquet").filter(pl.col("cell") == "avg").iter_rows(
                    named=True):
                ci[r["method"]] = r
        for r in summary.iter_rows(named=True):
            if r["method"] in VALIDITY_METHODS or r.get("avg") is None:
                continue
            c = ci.get(r["method"])
            shown = format_interval({**c, "mean": r["avg"]}) if c is not None else f"{r['avg']:.1f}"
            print(f"  {r['method']:<24} Avg {shown}", flush=True)

    def _answering(self, rows: list[Row]) -> dict[str, Any]:
        """The language-model path's figures for the report, from this run's item rows: items answered, requests
        sent, failed answers, contexts cut, seconds (``prompt_s``: the items' ingest; ``answer_s``: the step)."""
        if self.chat is None:
            return {}
        now = [r for r in rows if r.ok and not r.get("skipped")]
        o = self.opts
        return {"n_units": len(now), "n_requests": sum(int(r.get("n_requests") or 0) for r in now),
                "n_errors": sum(int(r.get("n_errors") or 0) for r in now),
                "n_context_cut": sum(int(r.get("n_context_cut") or 0) for r in now),
                "prompt_s": sum(float(r.get("ingest_s") or 0.0) for r in now),
                "answer_s": time.perf_counter() - self.t_items,
                # the one context budget every method is cut to (tokens by the len // 4 rule, reference §8.1)
                "context_budget_chars": o.max_context_chars,
                "context_budget_tokens": o.max_context_chars // 4 if o.max_context_chars else None}

    def _answers(self, plan: dict[str, list[dict[str, Any]]], failed: dict[str, dict[str, Any]]) -> pl.DataFrame:
        """Every unit's answers: finished units from their tables (only this run's items of the unit: an earlier
        run may have had more), failed units as an error row per item; methods in the paper's order (added ones
        after, by name); then the validity rows."""
        import polars as pl

        from filegram_ray.evaluate.reader_validity import reader_validity_frame, validity_rows
        from filegram_ray.evaluate.worker import UNIT_SCHEMA

        run, o = self.run, self.opts
        frames = []
        paper_order = {m: i for i, m in enumerate(DEFAULT_METHODS)}
        for m, units in sorted(plan.items(), key=lambda kv: (paper_order.get(kv[0], len(paper_order)), kv[0])):
            for u in units:
                if unit_complete(run, u):
                    ids = [it["question_id"] for it in u["items"]]
                    frames.append(run.read_table(u["out_path"]).filter(pl.col("question_id").is_in(ids)))
                else:
                    r = failed.get(u["unit_id"])  # "<type>: <message>": the report's causes read the type
                    why = r.error_line if r is not None else "unit did not finish"
                    frames.append(pl.DataFrame([{
                        "method": m, "question_id": it["question_id"], "cache_key": u["cache_key"], "backbone": "",
                        "status": "error", "error": f"ingest/unit failed: {why}"[:1000], "choice": "",
                        "answer_text": "", "tokens_in_memory": 0, "tokens_out": 0, "prompt_tokens": 0,
                        "reply_tokens": 0} for it in u["items"]], schema=UNIT_SCHEMA))
        if o.validity:
            frames.append(pl.DataFrame(validity_rows(self.bench_items, self.key, self.config.seed), schema=UNIT_SCHEMA))
            frames.append(reader_validity_frame(self.reader_items, self.rows["reader checks"],
                                                self.bb_info.get("name") or o.tag))
        return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame(schema=UNIT_SCHEMA)

    def _score(self) -> tuple[pl.DataFrame, Any, pl.DataFrame | None, float]:
        """``(results, judge, judge validity rows, judge seconds)``: the answers scored, open-ended ones by the
        judge (an LLM judge reads the verdicts step's rows and calls no model here); the LLM verdicts are also
        written to ``results/judge/verdicts.parquet``."""
        from filegram_ray.evaluate.scoring import LLMJudge, judge_validity, save_judge_cache, score_rows

        judge = self.judge
        if isinstance(judge, LLMJudge):
            judge.learn(self.rows["verdicts"])
        results = score_rows(self.answers, self.bench_items, self.key, judge)
        validity = judge_validity(judge, self.bench_items, self.key, self.config.seed) if self.opts.validity else None
        if isinstance(judge, LLMJudge):
            save_judge_cache(self.run, judge.cache)
        return results, judge, validity, time.perf_counter() - self.t_judge

    def finish(self, rows: list[Row]) -> dict[str, Any]:
        """Gather every item's answers, score and judge them, write ``results.parquet``, ``summary.parquet``,
        ``judge_validity.parquet`` and the report; print where the report is and return the summary.

        Raises:
            UserError: not one answer ok for the configured methods (after the report and the error rows are
                written: 0 of N fails loudly).
        """
        import polars as pl

        from filegram_ray.evaluate.report import write_report
        from filegram_ray.evaluate.scoring import summarise

        run, o, chat = self.run, self.opts, self.chat
        answering, unit_status, earlier, left_out = self.answering, self.unit_status, self.earlier, self.left_out
        views_s = sum(float(r.get("views_s") or 0.0) for r in unit_status if r.ok)
        if earlier:
            print(f"evaluate: report also covers {', '.join(earlier)} (answered by an earlier evaluate of this run on "
                  "the same items and backbone)", flush=True)
        if left_out:
            print(f"evaluate: earlier results of {', '.join(left_out)} left out of the report (not answered on these "
                  "items with this backbone; add them to --methods to answer them)", flush=True)
        times = time_by_method(unit_status, self.by_method)
        if times:
            print(format_time_by_method(times), flush=True)
        if views_s:
            print(f"evaluate: context views built once per spec for all methods: {views_s:.1f} s", flush=True)
        failed = self.failed
        results, judge, validity, judge_s = self._score()
        if validity is not None and validity.height:
            run.write_table("results/judge_validity.parquet", validity)
            for r in validity.filter(~pl.col("ok")).iter_rows(named=True):
                log.warning("evaluate: judge %s fails its validity row %s: mean %s, expected %s–%s", r["judge"],
                            r["case"], r["mean"], r["lo"], r["hi"])
        if results.height:  # per item: which reader, at which temperature (the raw reply is answer_text)
            results = results.with_columns(pl.lit(self.bb_info.get("name"), pl.Utf8).alias("model"),
                                           pl.lit(chat.temperature if chat is not None else None, pl.Float64)
                                           .alias("temperature"))
        run.write_table("results/results.parquet", results)
        summary = summarise(results) if results.height else pl.DataFrame()
        if summary.height:
            run.write_table("results/summary.parquet", summary)
        info = self._summary(results, failed, answering, earlier, left_out, judge, validity, judge_s, times,
                             views_s)
        write_report(run, results, summary, info, plots=o.plots)
        answered = results.filter(pl.col("method").is_in(o.methods)) if results.height else results
        if answered.height and not answered.filter(pl.col("status") == "ok").height:
            first = answered.filter(pl.col("status") != "ok")["error"][0]
            raise UserError(f"evaluate: 0 of {answered.height} answers ok for methods {o.methods} "
                            f"({len(failed)} of {info['n_units']} units failed; report and error rows in "
                            f"{run.url('results/')}); first error: {first}")
        n_skipped = self.counts[self.steps[0]].skipped
        print(f"evaluate: {info['n_items']} items × {len(o.methods)} methods, {len(self.rows[self.steps[0]])} units (method × context; "
              f"{n_skipped} done earlier), {info['n_error_rows']} error rows, {info['seconds']} s")
        self._print_verdict(summary)
        if info.get("failed_methods"):
            print(f"evaluate: NO RESULT for {', '.join(info['failed_methods'])}: most of their items failed "
                  "(causes and the setting that fixes them: the report's section Failed items)")
        print(f"Report: {run.url('results/report.md')}")
        return info

    def _summary(self, results, failed, answering, earlier, left_out, judge, validity, judge_s, times,
                 views_s) -> dict[str, Any]:
        """The stage's summary: what the report prints and ``run.json`` keeps (the runner's ``units`` count the
        method × context items)."""
        import polars as pl

        from filegram_ray.evaluate.failures import failed_methods
        from filegram_ray.memory.embed import embed_dtype, make_embedder
        from filegram_ray.methods import make_method

        o, chat = self.opts, self.chat
        n_units = sum(len(u) for u in self.by_method.values())
        # one instance per method with the run's options names its row and its mode (what ran, for the report)
        emb = make_embedder(self.embedder)
        shown = {m: make_method(m, embedder=emb, **o.method_options.get(m, {})) for m in [*o.methods, *earlier]}
        return {
            "n_items": len(self.bench_items), "n_bank": self.n_bank, "sample_per_sub_task": o.sample_per_sub_task,
            "bank_sha256": bank_digest(self.run),  # which item bank these results answer (stale_results_note)
            "methods": o.methods, "earlier_methods": list(earlier), "earlier_left_out": left_out,
            "backbone": self.bb_info, "judge": judge.name,
            "method_modes": {m: getattr(shown[m], "mode", lambda llm: "")(bool(self.llm_ingest)) for m in shown},
            "method_rows": {m: str(getattr(shown[m], "row_name", lambda: "")() or getattr(shown[m], "display", m))
                            for m in shown},
            "multimodal_content": self.mm_mode,
            "embed_dtype": embed_dtype(),  # the methods' embedder dtype on this machine and why
            # the methods' sentence embedder and what the run's embedding plan did
            "embedder": {"kind": self.embedder, "label": emb.label, "requested": o.embedder},
            "embed_plan": getattr(self, "embed_plan", None) or {},
            "n_units": n_units, "n_failed_units": len(failed),
            "n_error_rows": int(results.filter(pl.col("status") != "ok").height) if results.height else 0,
            "failed_methods": failed_methods(results) if results.height else [],  # most items failed: no result
            "answering": {k: round(v, 2) if isinstance(v, float) else v for k, v in answering.items()},
            "judge_s": round(judge_s, 2), "time_by_method": times, "views_s": round(views_s, 2),
            "judge_validity": validity.to_dicts() if validity is not None else [],
            "seed": self.config.seed, "temperature": chat.temperature if chat is not None else None,
            "seconds": round(time.perf_counter() - self.t0, 2)}


run_evaluate = stage_function(EvaluateStage)
