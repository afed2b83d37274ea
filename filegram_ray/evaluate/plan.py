"""The evaluate stage's work plan: which (method, setting, context spec) units this run asks for, how they are
named and cached, which are finished, and how the CPU path groups them by context spec.

A **unit** is one method × setting × context spec with that spec's items: ``unit_id``
``<backbone tag>/<method>/<setting tag>__<spec key><options tag>``, its answer table ``results/units/…``, its ingest
cache ``results/cache/<state group>/…`` (FileGramOS's channel ablations share FileGramOS's states) and its
completion record ``_done/evaluate/…``. A unit is finished when that record exists and its answer table covers
every item the unit has in this run (:func:`unit_complete`). With a content digest (:func:`content_digest`) a unit
is also tied to the bytes of the trajectories it reads: generated again with other content, it is ingested and
answered again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from filegram_ray.evaluate.config import STAGE
from filegram_ray.storage import RunDir

__all__ = ["content_digest", "earlier_methods", "embedder_suffix", "options_tag", "plan_units", "spec_key", "spec_units",
           "unit_complete", "unit_key"]


def spec_key(spec: Mapping[str, Any], setting: str) -> str:
    """16-hex cache key of a context spec under a setting (sha256 of canonical JSON)."""
    canon = json.dumps({"spec": {k: spec.get(k) for k in ("kind", "trajectories", "labels", "held_out")},
                        "setting": setting}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]


def options_tag(options: Mapping[str, Any] | None) -> str:
    """``""`` for no options, else ``~`` + 8 hex digits of the options' canonical JSON: part of a unit's id, answer
    table and ingest cache, so answers made with other ``method_options`` (VisRAG with OCR or with the drawn text,
    another ``top_k`` …) are never reused under this run's options and row name."""
    if not options:
        return ""
    return "~" + hashlib.sha256(json.dumps(options, sort_keys=True, default=str).encode()).hexdigest()[:8]


def embedder_suffix(embedder: str) -> str:
    """``""`` for the methods' historical embedder (``minilm``), else ``~<kind>``: part of every unit's id, answer
    table and ingest cache, so states and answers made with one sentence embedder are never reused under
    another."""
    return "" if embedder == "minilm" else f"~{embedder}"


def plan_units(items: list[dict[str, Any]], methods: list[str], mm_mode: str, bb_tag: str = "lexical",
                llm_ingest: bool = False, method_options: Mapping[str, Mapping[str, Any]] | None = None,
                embedder: str = "minilm", content: Callable[[Mapping[str, Any], str], str] | None = None
                ) -> dict[str, list[dict[str, Any]]]:
    """Units per method; the multimodal content mode is part of the cache key (``multimodal-strip`` …) and the
    backbone is part of every unit (its answers) and, when the backbone is an LLM that methods use at ingest
    (``llm_ingest``), of the ingest cache too; a method's options (``method_options``) are part of its units, answer
    tables and ingest cache (:func:`options_tag`), and so is the methods' sentence embedder (:func:`embedder_suffix`:
    a resolved kind, ``minilm`` by default).

    ``content(spec, setting)``: a digest of the files a spec's views are built from
    (:func:`content_digest`); a unit then carries it as ``content``, in its ingest cache's name and ``cache_key``,
    so a state ingested from trajectories that were generated again since is never reused."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for it in items:
        tag = it["setting"] if it["setting"] == "text" else f"{it['setting']}-{mm_mode}"
        key = spec_key(it["context"], tag)
        g = groups.setdefault((tag, key, it["setting"]), {"spec": it["context"], "items": []})
        g["items"].append(it)
    from filegram_ray.methods import make_method

    # one content digest per (setting, context spec), shared by every method's unit of it
    digests = {gk: content(g["spec"], gk[2])[:8] for gk, g in groups.items()} if content is not None else {}
    plan: dict[str, list[dict[str, Any]]] = {}
    for m in methods:
        group = make_method(m).group  # cheap: methods load models lazily
        opt = options_tag((method_options or {}).get(m)) + embedder_suffix(embedder)
        units = []
        for (tag, key, setting), g in sorted(groups.items()):
            uid = f"{bb_tag}/{m}/{tag}__{key}{opt}"
            cache_group = f"{group}@{bb_tag}" if llm_ingest else group
            digest = digests.get((tag, key, setting), "")
            pinned = f"{key}-{digest}" if digest else key
            units.append({"unit_id": uid, "method": m, "setting": setting, "cache_key": pinned, "spec": g["spec"],
                          "spec_id": f"{bb_tag}/{tag}__{key}", "content": digest,
                          "items": g["items"], "cache_path": f"results/cache/{cache_group}/{tag}__{pinned}{opt}.pkl",
                          "out_path": f"results/units/{bb_tag}/{m}/{tag}__{key}{opt}.parquet"})
        plan[m] = units
    return plan


def earlier_methods(run: RunDir, items: list[dict[str, Any]], methods: list[str], mm_tag: str, bb_tag: str,
                     llm_ingest: bool, method_options: Mapping[str, Mapping[str, Any]] | None = None,
                     embedder: str = "minilm", content: Callable[[Mapping[str, Any], str], str] | None = None
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
    plan = plan_units(items, found, mm_tag, bb_tag, llm_ingest=llm_ingest, method_options=method_options,
                      embedder=embedder, content=content)
    full = {m: units for m, units in plan.items() if all(unit_complete(run, u) for u in units)}
    return full, [m for m in found if m not in full]


def unit_complete(run: RunDir, unit: dict[str, Any]) -> bool:
    """A unit counts as done when its completion record exists and its answer table covers every item the unit
    has in this run (a unit answered under a smaller sample is answered again) and, for a unit with ``content``,
    was answered on the same content (its completion record's key ends with it: :func:`unit_key`)."""
    if not (run.is_done(STAGE, unit["unit_id"]) and run.exists(unit["out_path"])):
        return False
    if unit.get("content"):
        from filegram_ray.storage import safe_unit_name

        rec = run.read_json(f"_done/{STAGE}/{safe_unit_name(unit['unit_id'])}.json")
        if not str(rec.get("item_key", "")).endswith(f":{unit['content']}"):
            return False
    have = set(run.read_table(unit["out_path"])["question_id"].to_list())
    return all(it["question_id"] in have for it in unit["items"])


def unit_key(unit: Mapping[str, Any]) -> str:
    """A unit's key for the runner: 16 hex digits of sha256 over its question ids (a unit answered for another
    sample is answered again), then ``:<content>`` when the unit carries a content digest."""
    ids = "\n".join(sorted(it["question_id"] for it in unit["items"]))
    key = hashlib.sha256(ids.encode()).hexdigest()[:16]
    return f"{key}:{unit['content']}" if unit.get("content") else key


def content_digest(run: RunDir, multimodal_content: str = "derivatives", memo: dict[str, str] | None = None
                   ) -> Callable[[Mapping[str, Any], str], str]:
    """``content(spec, setting)`` for :func:`plan_units`: a digest (:func:`~filegram_ray.stages.runner.
    input_digest`) of what the spec's views are built from: its trajectories' ``events.json`` files; in the
    multimodal setting with ``multimodal_content: derivatives`` also the rendered derivatives of those trajectories
    (their rows of ``derivatives/index.parquet``: unit id and sha256 of every ``ok`` one, so a render of other
    trajectories changes nothing here); in the real-world setting each recording's events read back
    (``realworld/<recording>/events.json`` and ``video_times.json``). Each file is read once (``memo``)."""
    from filegram_ray.evaluate.multimodal import DERIVATIVES_INDEX
    from filegram_ray.stages.runner import input_digest

    memo = {} if memo is None else memo
    rendered: dict[str, str] | None = None

    def derivatives() -> dict[str, str]:
        nonlocal rendered
        if rendered is None:
            rows: dict[str, list[str]] = {}
            if run.exists(DERIVATIVES_INDEX):
                for r in run.read_table(DERIVATIVES_INDEX).to_dicts():
                    if r.get("status") == "ok":
                        rows.setdefault(str(r.get("trajectory_id")), []).append(f"{r.get('unit_id')}\0{r.get('sha256')}")
            rendered = {t: hashlib.sha256("\n".join(sorted(v)).encode()).hexdigest()[:16] for t, v in rows.items()}
        return rendered

    def content(spec: Mapping[str, Any], setting: str) -> str:
        ids = [str(t) for t in spec.get("trajectories") or []]
        if setting == "real_world":  # the events read back from each recording (video.realworld)
            return input_digest(run, [f"realworld/{r}/{f}" for r in ids for f in ("events.json", "video_times.json")],
                                memo)
        digest = input_digest(run, [f"trajectories/{t}/events.json" for t in ids], memo)
        if setting == "multimodal" and multimodal_content == "derivatives":
            der = derivatives()
            blob = "\n".join([digest, *(f"{t}\0{der.get(t, '-')}" for t in sorted(ids))])
            digest = hashlib.sha256(blob.encode()).hexdigest()[:16]
        return digest

    return content


def spec_units(plan: dict[str, list[dict[str, Any]]], todo: set[str]) -> list[dict[str, Any]]:
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
