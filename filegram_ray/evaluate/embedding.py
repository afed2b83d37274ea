"""The evaluate stage's sentence embedder and its embedding plan.

* :func:`resolve_embedder` — ``evaluate.embedder``: ``auto`` is :data:`CPU_EMBEDDER` on a machine without a GPU and
  ``minilm`` (the packaged all-MiniLM-L6-v2) where Ray or torch sees one; any registered kind may be named
  (``minilm``, ``minilm-int8``, ``minilm-static``, ``hashing`` …).
* :func:`prepare_vectors` — before any method ingests: for every (setting, context spec) still to answer, the
  spec's views are built once and each method says which texts its ingest and its retrievals (the items' queries)
  will embed (:meth:`~filegram_ray.methods.base.MemoryMethod.embedding_texts`); the union, each text once, is
  embedded in one pass (:func:`filegram_ray.methods.embed_plan.embed_texts`, on an actor pool) into the
  run's vector table, which the workers preload (:func:`filegram_ray.methods.embed_plan.planned_embedder`).

The choice of :data:`CPU_EMBEDDER` (measured, docs/measurements/2026-12-05-embed-plan.md, 2-core AMD EPYC, AVX2):
the default may change only to an embedder whose retrieval agrees with MiniLM's (recall@5 of MiniLM's top 5 on the
methods' own queries ≥ 0.90). The static MiniLM (``minilm-static``, ≈ 85× less CPU than fp32 MiniLM) agreed 0.28;
the int8 MiniLM (``minilm-int8``) agreed 0.97 but cost 1.34× the CPU of fp32 there. So ``auto`` stays MiniLM; the
static model is one setting away for a fast, less faithful run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["CPU_EMBEDDER", "EMBEDDER_CHOICES", "gpu_present", "prepare_vectors", "resolve_embedder", "spec_texts"]

#: the methods' embedder on a machine without a GPU (``evaluate.embedder: auto``)
CPU_EMBEDDER = "minilm"
#: what ``evaluate.embedder`` accepts besides the registered kinds
EMBEDDER_CHOICES = ("auto",)


def gpu_present() -> bool:
    """Whether the evaluation can run MiniLM on a GPU: the connected Ray cluster lists a GPU resource, or (no Ray
    started) torch sees a CUDA device. Importing torch is avoided when Ray answers."""
    try:
        import ray

        if ray.is_initialized():
            return float(ray.cluster_resources().get("GPU", 0)) > 0
    except ImportError:  # pragma: no cover - ray is a core dependency
        pass
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def resolve_embedder(kind: str) -> str:
    """``auto`` → ``minilm`` with a GPU (:func:`gpu_present`), else :data:`CPU_EMBEDDER`; a registered kind as is.

    Raises:
        ValueError: an unknown kind (the message lists the registered ones)."""
    from filegram_ray.memory.embed import EMBEDDERS

    if kind == "auto":
        return "minilm" if gpu_present() else CPU_EMBEDDER
    if kind not in EMBEDDERS:
        raise ValueError(f"unknown embedder {kind!r} (auto or one of {', '.join(sorted(EMBEDDERS))})")
    return kind


def _no_llm_call(*_a: Any, **_k: Any) -> str:
    raise RuntimeError("the embedding plan asks methods for their texts without calling the language model")


def spec_texts(views: Sequence[Any], methods: Mapping[str, Any], queries: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(texts, undeclared)`` of one context spec: what each method's ingest of ``views`` and its retrievals of
    ``queries`` will embed (distinct, in first-seen order), and the methods that do not say (their ingest embeds
    on its own)."""
    seen: dict[str, None] = {}
    undeclared = []
    for name, method in methods.items():
        texts = method.embedding_texts(views)
        if texts is None:
            undeclared.append(name)
            continue
        seen.update(dict.fromkeys(texts))
        for q in queries:
            seen.update(dict.fromkeys(method.query_embedding_texts(q)))
    return list(seen), undeclared


class _CollectTexts:
    """The plan's collecting worker: one spec unit in, its texts out; methods are made once per actor (FileGramOS
    keeps its Engrams between specs)."""

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None, method_options: dict[str, Any],
                 llm_ingest: bool, multimodal_content: str, multimodal_formats: list[str] | None):
        from filegram_ray.storage import RunDir

        self.run = RunDir(run_uri, storage_options)
        self.method_options = method_options
        self.llm_fn = _no_llm_call if llm_ingest else None
        self.mm = (multimodal_content, multimodal_formats)
        self._methods: dict[str, Any] = {}
        self._override = None

    def _method(self, name: str):
        from filegram_ray.methods import make_method

        if name not in self._methods:
            self._methods[name] = make_method(name, llm_fn=self.llm_fn, **self.method_options.get(name, {}))
        return self._methods[name]

    def texts(self, spec_unit: dict[str, Any]) -> tuple[list[str], list[str]]:
        """The spec's texts; a spec whose views or methods fail here plans nothing (its units fail in their
        workers, where the error becomes their error rows) and is named as ``!failed`` in the second list."""
        try:
            return self._texts(spec_unit)
        except Exception as exc:  # noqa: BLE001 - one bad spec never sinks the plan
            log.warning("embedding plan: context spec %s left to its workers: %s: %s",
                        spec_unit.get("unit_id"), type(exc).__name__, exc)
            return [], ["!failed"]

    def _texts(self, spec_unit: dict[str, Any]) -> tuple[list[str], list[str]]:
        from filegram_ray.evaluate.items import retrieval_query
        from filegram_ray.evaluate.worker import build_unit_views

        if spec_unit["setting"] == "multimodal" and self._override is None:
            from filegram_ray.evaluate.multimodal import make_content_override

            self._override = make_content_override(self.run, *self.mm)
        views = build_unit_views(self.run, spec_unit, self._override)
        methods = {u["method"]: self._method(u["method"]) for u in spec_unit["units"]}
        queries = list(dict.fromkeys(retrieval_query(it) for u in spec_unit["units"] for it in u["items"]))
        return spec_texts(views, methods, queries)

    def process(self, unit: dict[str, Any]) -> dict[str, Any]:
        t, u = self.texts(unit["spec"])
        return {"texts": t, "undeclared": u}


def declaring_units(spec_units: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``spec_units`` with only the method units whose method declares its texts (overrides
    :meth:`~filegram_ray.methods.base.MemoryMethod.embedding_texts`); specs left without one are dropped — a
    method that embeds nothing, or does not say what, has nothing to plan, so its specs' views are not built
    here."""
    from filegram_ray.methods.base import METHODS, MemoryMethod, _load_builtin

    _load_builtin()

    def declares(name: str) -> bool:
        cls = METHODS.get(name)
        return isinstance(cls, type) and cls.embedding_texts is not MemoryMethod.embedding_texts

    out = []
    for su in spec_units:
        units = [u for u in su["units"] if declares(u["method"])]
        if units:
            out.append({**su, "units": units})
    return out


def prepare_vectors(run, spec_units: Sequence[dict[str, Any]], *, kind: str, method_options: Mapping[str, Any],
                    llm_ingest: bool, multimodal_content: str, multimodal_formats: list[str] | None,
                    num_actors: int, num_cpus: float, use_ray: bool) -> dict[str, Any]:
    """Embed every text the methods of ``spec_units`` will embed into the run's vector table, before they ingest.

    Args:
        spec_units: the (setting, context spec) groups of the method units still to answer
            (:func:`~filegram_ray.evaluate.plan.spec_units`).
        kind: a resolved embedder kind (:func:`resolve_embedder`).
        llm_ingest: methods ingest with a language model (their LLM-made texts are not planned).
        multimodal_content / multimodal_formats: the multimodal setting's views (as the workers build them).
        num_actors / num_cpus: the collecting and embedding actor pools (the stage contract's actor-pool executor,
            :func:`~filegram_ray.stages.executors.map_units`); ``use_ray=False`` runs both in this process.

    Returns:
        the plan's record (:class:`~filegram_ray.methods.embed_plan.PlanStats` fields, ``specs``, ``texts_sent``
        — texts before dedup across specs, ``undeclared`` — methods whose ingest embeds on its own, ``collect_s``).
    """
    import time

    from filegram_ray.memory.embed import EMBEDDERS
    from filegram_ray.methods.embed_plan import embed_texts

    t0 = time.perf_counter()
    spec_units = declaring_units(spec_units)
    if not spec_units or not getattr(EMBEDDERS.get(kind), "planned", False):
        # a static model's vector is a look-up per token: collecting every spec's texts first would cost more
        # than the methods embedding as they go (measured on the default run, 2026-12-05-embed-plan.md)
        return {"planned": 0, "specs": len(spec_units), "embedder": kind,
                "skipped": "" if not spec_units else f"{kind}: no model forward pass to plan"}
    from filegram_ray.stages.executors import map_units

    init = {"run_uri": run.uri, "storage_options": run.storage_options, "method_options": dict(method_options),
            "llm_ingest": llm_ingest, "multimodal_content": multimodal_content,
            "multimodal_formats": multimodal_formats}
    # the units as the workers see them (JSON values), on the stage contract's executors; a progress line every 5 s
    # (collecting a 60-profile bank's texts is minutes of silence otherwise)
    units = [{"unit_id": f"spec-{k:05d}", "spec": json.loads(json.dumps(su, default=str))}
             for k, su in enumerate(spec_units)]
    out = map_units(_CollectTexts, units, init_kwargs=init, num_actors=max(1, num_actors),
                    num_cpus_per_actor=num_cpus, executor="actor-pool" if use_ray else "serial",
                    stage="embedding plan: collecting texts", progress=True)
    # a worker that died: its spec plans nothing (its units fail in their own workers, as a failing spec's do)
    rows = [(list(r["texts"]), list(r["undeclared"])) if r.get("status") == "ok" else ([], ["!failed"])
            for r in out]
    union: dict[str, None] = {}
    undeclared: set[str] = set()
    sent = 0
    failed = 0
    for texts, und in rows:
        sent += len(texts)
        union.update(dict.fromkeys(texts))
        failed += "!failed" in und
        undeclared.update(u for u in und if u != "!failed")
    collect_s = time.perf_counter() - t0
    print(f"evaluate: embedding plan: {len(union):,} distinct texts of {len(spec_units)} context specs "
          f"({sent:,} before dedup across specs), collected in {collect_s:.1f} s; embedder {kind}", flush=True)
    stats = embed_texts(run, union, kind, num_actors=num_actors, num_cpus=num_cpus, use_ray=use_ray,
                        progress=lambda line: print(f"evaluate: {line}", flush=True))
    print(f"evaluate: embedding plan: {stats.embedded:,} texts embedded ({stats.pieces:,} windows, "
          f"{stats.batches}/{stats.batches_planned} batches), {stats.cached:,} already in the table, "
          f"{stats.seconds:.1f} s", flush=True)
    return {**stats.as_dict(), "embedder": kind, "specs": len(spec_units), "texts_sent": sent,
            "undeclared": sorted(undeclared), "failed_specs": failed, "collect_s": round(collect_s, 2)}
