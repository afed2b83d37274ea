"""Stage 3 of FileGramOS: render a :class:`~filegram_ray.memory.consolidate.MemoryStore` as Markdown context
(FILEGRAM_REFERENCE §7.11). No cross-channel re-ranking; sections in a fixed order; any channel can be disabled.

The context shows only what the memory derived from events: never the profile id, and task ids instead of
trajectory ids. Token counts use tiktoken's ``cl100k_base`` when tiktoken is installed, else ⌈chars / 4⌉
(:data:`TOKENIZER` says which).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from filegram_ray.memory import constants as C
from filegram_ray.memory.semantic import cjk_ratio

__all__ = ["TOKENIZER", "RetrievedContext", "count_tokens", "retrieve"]

try:  # pragma: no cover - depends on the installation
    import tiktoken

    _ENC = tiktoken.get_encoding("cl100k_base")
    TOKENIZER = "tiktoken:cl100k_base"
except Exception:  # noqa: BLE001 - tiktoken missing or its encoding unavailable offline
    _ENC = None
    TOKENIZER = "chars/4"

CHANNELS = ("procedural", "semantic", "episodic")


def count_tokens(text: str) -> int:
    """Tokens of ``text`` with :data:`TOKENIZER`."""
    if _ENC is not None:
        return len(_ENC.encode(text, disallowed_special=()))
    return math.ceil(len(text) / 4)


@dataclass
class RetrievedContext:
    """Retrieved context: ``text`` (Markdown), ``tokens_memory`` (tokens of the stored memory: the store's JSON
    without vectors), ``tokens_context`` (tokens of ``text``), ``tokenizer``."""

    text: str
    tokens_memory: int
    tokens_context: int
    tokenizer: str = TOKENIZER


def _mean(agg, attr: str, key: str) -> float:
    v = agg.get(attr, {}).get(f"{key}_mean", 0.0)
    return float(v) if isinstance(v, (int, float)) else 0.0


def _ratio(agg, attr: str, key: str) -> float:
    """``<key>_true_ratio`` (0 when absent — always the case with upstream quirks, §7.5)."""
    v = agg.get(attr, {}).get(f"{key}_true_ratio", 0.0)
    return float(v) if isinstance(v, (int, float)) else 0.0


def _bool_share(agg, attr: str, key: str) -> float:
    a = agg.get(attr, {})
    v = a.get(f"{key}_true_ratio", a.get(f"{key}_mean", 0.0))
    return float(v) if isinstance(v, (int, float)) else 0.0


def _base(p: str) -> str:
    return p.rstrip("/").rsplit("/", 1)[-1] if p else ""


def _flat(s: str, n: int) -> str:
    return re.sub(r"\s+", " ", s).strip()[:n]


_DIM_ROWS = (("A. Consumption", "reading_strategy"), ("B. Production", "output_detail"),
             ("C. Organization", "directory_style"), ("D. Iteration", "edit_strategy"),
             ("E. Curation", "working_style"), ("F. Cross-Modal", "cross_modal_behavior"))


def _dim_sentences(store) -> dict[str, str]:
    agg, q = store.procedural_aggregate, store.upstream_quirks
    sr, rv = _mean(agg, "reading_strategy", "search_ratio"), _mean(agg, "reading_strategy", "revisit_ratio")
    br, nr = _mean(agg, "reading_strategy", "browse_ratio"), _mean(agg, "reading_strategy", "total_reads")
    a = f"{nr:.1f} reads/task, " + ("no search tools used" if sr <= 0.01 else f"search ratio {sr:.0%}") + \
        f", revisit {rv:.0%}, browse {br:.0%}."
    b = (f"avg {_mean(agg, 'output_detail', 'avg_output_length'):,.0f} chars × "
         f"{_mean(agg, 'output_detail', 'files_created'):.1f} files/task, headings to "
         f"H{_mean(agg, 'tone', 'heading_max_depth'):.0f}.")
    mv = _mean(agg, "directory_style", "files_moved")
    c = (f"{_mean(agg, 'directory_style', 'dirs_created'):.1f} dirs/task, depth "
         f"{_mean(agg, 'directory_style', 'max_dir_depth'):.1f}" + (f", {mv:.1f} moves/task" if mv > 0.1 else "")
         + f", filenames {_mean(agg, 'naming', 'avg_filename_length'):.0f} chars on average.")
    bk = _ratio(agg, "version_strategy", "has_backup_behavior")
    dl = _mean(agg, "version_strategy", "total_deletes")
    d = (f"{_mean(agg, 'edit_strategy', 'total_edits'):.1f} edits/task, "
         f"{_mean(agg, 'edit_strategy', 'avg_lines_changed'):.1f} lines/edit, "
         + (f"backups in {bk:.0%} of sessions" if bk > 0 else "no backup behavior")
         + (f", {dl:.1f} deletions/task" if dl > 0.1 else "") + ".")
    csr = _mean(agg, "reading_strategy", "context_switch_rate")
    if q:
        e = f"context-switch rate {csr:.2f}."
    else:
        e = (f"{dl:.2f} deletes/task, delete-to-create ratio "
             f"{_mean(agg, 'version_strategy', 'delete_to_create_ratio'):.2f}, context-switch rate {csr:.2f}.")
    if q:  # upstream reads keys that never exist (§7.5 quirk)
        tb, im = _ratio(agg, "cross_modal_behavior", "has_tables"), _ratio(agg, "cross_modal_behavior",
                                                                            "creates_image_files")
    else:
        tb, im = _ratio(agg, "output_structure", "has_markdown_tables"), _ratio(agg, "cross_modal_behavior",
                                                                                "has_images")
    f = (f"tables in {tb:.0%} of sessions, images in {im:.0%}" if (tb or im) else "no tables or images created") \
        + f"; {_mean(agg, 'cross_modal_behavior', 'structured_files_created'):.1f} data files/task."
    return dict(zip([r[1] for r in _DIM_ROWS], [a, b, c, d, e, f], strict=True))


def _procedural_section(store, semantic_on: bool) -> str:
    lines = ["### Channel 1: Procedural Patterns"]
    labels = {c["attribute"]: c["classification"] for c in store.dimension_classifications}
    sents = _dim_sentences(store)
    for name, attr in _DIM_ROWS:
        if semantic_on:
            lines.append(f"**{name} — {labels.get(attr, 'unclassified')}**: {sents[attr]}")
        else:
            lines.append(f"**{name}**: {sents[attr]}")
    if semantic_on:
        phases: Counter[str] = Counter()
        doms: Counter[str] = Counter()
        for e in store.engrams:
            phases.update(e.sequence_features.get("phase_counts", {}))
            dt = e.sequence_features.get("dominant_transition", "")
            if dt:
                doms[re.sub(r"\s*\(\d+\)$", "", dt)] += 1
        if phases:
            lines.append("Workflow phases: " + ", ".join(f"{k} ×{v}" for k, v in phases.most_common()))
        if doms:
            lines.append(f"Dominant transition: {doms.most_common(1)[0][0]}")
    if store.behavioral_patterns:
        lines.append("Patterns:")
        lines.extend(f"- {p}" for p in store.behavioral_patterns)
    return "\n".join(lines)


def _semantic_section(store, query: str | None, q_vec, chunk_index) -> str:
    agg = store.procedural_aggregate
    lines = ["### Channel 2: Semantic Content"]
    names = store.all_filenames
    if names:
        share = sum(1 for n in names if cjk_ratio(n) > 0) / len(names)
        lang = ("Chinese primary" if share > C.LANGUAGE_RATIO_DOMINANT else
                "mixed Chinese/English" if share > C.LANGUAGE_RATIO_MIXED else "English primary")
        lines.append(f"Language (from filenames): {lang}")
    if _bool_share(agg, "naming", "has_date_prefix") > C.NAMING_PATTERN_THRESHOLD:
        naming = "date prefixes"
    elif _bool_share(agg, "naming", "has_numeric_prefix") > C.NAMING_PATTERN_THRESHOLD:
        naming = "numeric prefixes"
    elif _bool_share(agg, "naming", "has_underscores") > C.NAMING_UNDERSCORE_THRESHOLD:
        naming = "underscore-separated"
    else:
        naming = "descriptive names"
    lines.append(f"Naming: {naming}")
    if store.upstream_quirks:  # upstream counts the 2:1-weighted duplicates
        types = agg.get("output_structure", {}).get("file_types_created_merged", {})
    else:
        types = Counter()
        for e in store.engrams:
            types.update(e.procedural.get("output_structure", {}).get("file_types_created", {}))
    if types:
        top = sorted(types.items(), key=lambda kv: (-kv[1], kv[0]))[:4]
        lines.append("File types: " + ", ".join(f"{k} ({v})" for k, v in top))
    shown = [n for n in dict.fromkeys(names) if n != "README.md"][:C.MAX_FILES_SHOWN]
    if names:
        cut = [n if len(n) <= C.FILENAME_DISPLAY_CHARS else n[:C.FILENAME_DISPLAY_CHARS] + "…" for n in shown]
        lines.append(f"Files ({len(names)} total): " + ", ".join(cut))
    if store.dir_structure_union:
        lines.append("Directories: " + ", ".join(store.dir_structure_union[:6]))
    if store.representative_samples:
        lines.append("Content samples:")
        for s in store.representative_samples[:C.MAX_SAMPLES_SHOWN]:
            lines.append(f"- {_base(s['path'])} ({s['content_length'] / 1000:.1f}K): "
                         f"{_flat(s['preview'], C.RETRIEVER_DISPLAY_CHARS)}")
    if store.content_profile:
        lines.append(f"Content profile: {store.content_profile}")
    fields = (("writing_style", "Writing style", 6, 4), ("content_structure", "Content structure", 4, 3),
              ("detail_level", "Detail level", 4, 3), ("work_approach", "Work approach", 4, 3),
              ("notable_habits", "Notable habits", 6, 4))
    for key, title, cap, show in fields:
        vals: list[str] = []
        for n in store.llm_narratives:
            v = n["descriptor"].get(key)
            for item in (v if isinstance(v, list) else [v]):
                if isinstance(item, str) and item and len(item) < 150 and item not in vals and len(vals) < cap:
                    vals.append(item)
        if vals:
            lines.append(f"{title}: " + " | ".join(vals[:show]))
    if query is not None and q_vec is not None and chunk_index is not None:
        # identical chunk texts (a note re-created in every session) fill one slot, not several (BR-30);
        # upstream_quirks keeps the original's one slot per copy
        hits = chunk_index.search(q_vec, C.CHUNK_TOP_K, distinct=None if store.upstream_quirks else "text")
        if hits:
            lines.append("Relevant content:")
            for sim, c in hits:
                copies = f", {c['copies']} copies" if c.get("copies", 1) > 1 else ""
                lines.append(f"- [{c['chunk_type']}] {_base(c['path'])} (sim={sim:.3f}{copies}): "
                             f"{_flat(c['text'], C.RETRIEVER_DISPLAY_CHARS)}")
    return "\n".join(lines)


def _episode_line(ep: dict[str, Any], rel: float | None = None) -> str:
    tail = f" ({rel:.2f})" if rel is not None else ""
    return (f"- [{ep['task_id']}] [{ep['start_idx']}–{ep['end_idx']}] ({ep['event_count']} events) — "
            f"{ep.get('title', '')}{tail}\n  {ep.get('content') or ep.get('summary', '')}")


def _episodic_section(store, query: str | None, q_vec, ep_index) -> str:
    lines = ["### Channel 3: Episodic Consistency"]
    by_id = {ep["episode_id"]: ep for ep in store.episodes()}
    if query is not None and q_vec is not None and ep_index is not None:
        hits = ep_index.search(q_vec, C.EPISODE_TOP_K)
        if hits:
            lines.append("Relevant episodes:")
            lines.extend(_episode_line(by_id.get(m["episode_id"], m), s) for s, m in hits)
    else:
        shown = []
        for cl in store.episode_clusters[:5]:
            eps = [by_id[i] for i in cl["episode_ids"] if i in by_id]
            picked, seen = [], set()
            for ep in sorted(eps, key=lambda x: -x["event_count"]):
                if ep["trajectory_id"] not in seen:
                    picked.append(ep)
                    seen.add(ep["trajectory_id"])
                if len(picked) == 3:
                    break
            if picked:
                shown.append(f"Theme ({cl['size']} episodes): {cl['theme']}")
                shown.extend(_episode_line(ep) for ep in picked)
        if shown:
            lines.append("Episode clusters:")
            lines.extend(shown)
    cf = store.consistency_flags
    stable = [C.FRIENDLY_METRIC_NAMES.get(k, k) for k, v in cf.items() if v["stable"]][:6]
    var = [f"{C.FRIENDLY_METRIC_NAMES.get(k, k)} (CV={v['cv']:.2f})" for k, v in cf.items()
           if v["cv"] > C.CV_VARIABLE_DISPLAY_THRESHOLD][:6]
    if stable:
        lines.append("Stable: " + ", ".join(stable))
    if var:
        lines.append("Variable: " + ", ".join(var))
    if store.absence_flags:
        lines.append("Never observed: " + "; ".join(store.absence_flags))
    if store.behavioral_clusters:
        lines.append("Behavioral clusters: " + "; ".join(
            f"{c['size']} sessions ({', '.join(c['task_ids'])})" for c in store.behavioral_clusters))
    task_of = {e.trajectory_id: e.task_id for e in store.engrams}
    anomalies = []
    for tid, det in store.deviation_details.items():
        if not det:
            continue
        top = det[0]
        anomalies.append(f"- {task_of.get(tid, '?')}: shifted in {top['dimension']} ({top['feature']}, "
                         f"δ={top['delta']:.1f}) [{store.llm_deviation_analysis.get(tid, 'uncertain')}]")
    if anomalies:
        lines.append("Anomalous sessions:")
        lines.extend(anomalies)
    return "\n".join(lines)


def _evidence_section(store, semantic_on: bool) -> str:
    lines = ["### Session Evidence"]
    for e in store.engrams:
        p = e.procedural
        rs, od, ds = p["reading_strategy"], p["output_detail"], p["directory_style"]
        es, vs, cm, tn = p["edit_strategy"], p["version_strategy"], p["cross_modal_behavior"], p["tone"]
        star = "*" if store.deviation_flags.get(e.trajectory_id) else ""
        parts = [f"**[{e.task_id}]**{star}",
                 (f"reads={rs['total_reads']}, search={rs['search_ratio']:.0%}, browse={rs['browse_ratio']:.0%}, "
                 f"revisit={rs['revisit_ratio']:.0%}"),
                 (f"output={od['avg_output_length']:.0f}×{od['files_created']}files, H{tn['heading_max_depth']}, "
                 f"{cm['markdown_table_rows']}table-rows"),
                 f"dirs={ds['dirs_created']}/d{ds['max_dir_depth']}, moves={ds['files_moved']}",
                 (f"edits={es['total_edits']}×{es['avg_lines_changed']:.0f}lines, backups={vs['backup_copies']}, "
                 f"overwrites={vs['total_overwrites']}"),
                 f"deletes={vs['total_deletes']}", f"images={cm['image_files_created']}"]
        if semantic_on:
            names = [n[:35] for n in e.semantic.get("created_filenames", [])[:3]]
            parts.append("files: " + (", ".join(names) if names else "-"))
        lines.append(" | ".join(parts))
    return "\n".join(lines)


def _memory_tokens(store) -> int:
    return count_tokens(store.model_dump_json())


def retrieve(store, query: str | None = None, *, channels=CHANNELS, indices=None, embedder=None
             ) -> RetrievedContext:
    """Render the retrieved context of a MemoryStore (§7.11).

    Args:
        store: a MemoryStore.
        query: optional query text; enables "Relevant content" (top-5 chunks) and "Relevant episodes" (top-5).
        channels: enabled channels, any subset of ("procedural", "semantic", "episodic") — the ablation switches.
        indices: :class:`~filegram_ray.memory.index.ProfileIndices` (e.g. from ``load_indices``); without them and
            with an ``embedder``, chunks and episodes are embedded on the fly.
        embedder: encodes the query (required for query-based sections).

    Returns:
        :class:`RetrievedContext`.

    Raises:
        ValueError: an unknown channel name.
        EmbedderMismatchError: ``embedder`` is not the embedder ``indices`` were built with.
    """
    on = set(channels)
    bad = on - set(CHANNELS)
    if bad:
        raise ValueError(f"retrieve: unknown channel(s) {sorted(bad)}; expected a subset of {CHANNELS}")
    q_vec = chunk_index = ep_index = None
    if query is not None and embedder is not None and on & {"semantic", "episodic"}:
        if indices is not None:
            indices.check_embedder(embedder)  # a foreign query embedder is refused before any search (BR-11)
        q_vec = np.asarray(embedder.encode_query(query), dtype=np.float32)
        if indices is None:
            from filegram_ray.memory.index import (
                ProfileIndices,
                build_index,
                chunk_texts,
                episode_texts,
                window_rows,
            )

            ct, cm = chunk_texts(store) if "semantic" in on else ([], [])
            et, em = episode_texts(store) if "episodic" in on else ([], [])
            indices = ProfileIndices(build_index(*window_rows(embedder, ct, cm), embedder),
                                     build_index(*window_rows(embedder, et, em), embedder))
        chunk_index, ep_index = indices.chunks, indices.episodes
    n = store.n_sessions
    k = sum(1 for v in store.deviation_flags.values() if v)
    header = f"## Behavioral Memory Profile ({n} sessions" + (f", {k} anomalous)" if "episodic" in on else ")")
    sections = [header]
    if "procedural" in on:
        sections.append(_procedural_section(store, "semantic" in on))
    if "semantic" in on:
        sections.append(_semantic_section(store, query, q_vec, chunk_index))
    if "episodic" in on:
        sections.append(_episodic_section(store, query, q_vec, ep_index))
    if "procedural" in on and "episodic" in on:
        sections.append(_evidence_section(store, "semantic" in on))
    text = "\n\n".join(sections)
    return RetrievedContext(text=text, tokens_memory=_memory_tokens(store), tokens_context=count_tokens(text))
