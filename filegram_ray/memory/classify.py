"""Procedural L/M/R classification and behavioural patterns (FILEGRAM_REFERENCE §7.6).

Default: a deterministic rule set — the upstream rule classifier (``lmr_validation``) on the profile's aggregate
means, as restated in TIER_TARGETS.md's J rows, with E = curation (score = 0.7·deletes + 0.3·delete_to_create_ratio).
Category names are FileGramOS's (§7.6 table). Optional: one LLM call per profile (``llm_fn``); an unusable reply
falls back to the rules (upstream raises instead).
"""

from __future__ import annotations

from typing import Any

from filegram_ray.memory.episodes import LLMFn, parse_json_object

__all__ = ["CATEGORIES", "behavioral_patterns", "classify", "classify_rules", "render_stats"]

#: attribute → (L, M, R) category names offered by FileGramOS (§7.6 table); E is ``working_style`` (curation).
CATEGORIES: dict[str, tuple[str, str, str]] = {
    "reading_strategy": ("sequential_deep", "targeted_search", "breadth_first"),
    "output_detail": ("detailed", "balanced", "concise"),
    "directory_style": ("nested_by_topic", "by_type", "flat"),
    "edit_strategy": ("incremental_small", "balanced", "bulk_rewrite"),
    "working_style": ("selective", "pragmatic", "preservative"),
    "cross_modal_behavior": ("tables_and_references", "minimal_tables", "text_only"),
}


def _m(agg: dict[str, dict[str, Any]], attr: str, key: str) -> float:
    v = agg.get(attr, {}).get(f"{key}_mean", 0.0)
    return float(v) if isinstance(v, (int, float)) else 0.0


def _ratio(agg: dict[str, dict[str, Any]], attr: str, key: str) -> float:
    v = agg.get(attr, {}).get(f"{key}_true_ratio", 0.0)
    return float(v) if isinstance(v, (int, float)) else 0.0


def _confidence(value: float, thresholds: tuple[float, ...]) -> str:
    """HIGH / MODERATE / LOW from the relative distance of the deciding statistic to its nearest threshold
    (≥ 50 % / ≥ 20 % / below; *ours*)."""
    rel = min(abs(value - t) / max(abs(t), 1e-9) for t in thresholds)
    return "HIGH" if rel >= 0.5 else ("MODERATE" if rel >= 0.2 else "LOW")


def classify_rules(agg: dict[str, dict[str, Any]], *, upstream_quirks: bool = False) -> list[dict[str, Any]]:
    """Rule classification of the six dimensions from aggregate means (§7.6 ``lmr_validation``; TIER_TARGETS J).

    Args:
        agg: the procedural aggregate (``<key>_mean`` / ``<key>_true_ratio`` per attribute).
        upstream_quirks: F's table flag reads a key that does not exist upstream (always 0).

    Returns:
        ``[{attribute, tier ("L"|"M"|"R"), classification, confidence, evidence, source: "rules"}]`` in A–F order.
    """
    out = []

    def add(attr: str, tier: str, conf: str, evidence: str) -> None:
        idx = "LMR".index(tier)
        out.append({"attribute": attr, "tier": tier, "classification": CATEGORIES[attr][idx],
                    "confidence": conf, "evidence": evidence, "source": "rules"})

    sr, br = _m(agg, "reading_strategy", "search_ratio"), _m(agg, "reading_strategy", "browse_ratio")
    rv, nr = _m(agg, "reading_strategy", "revisit_ratio"), _m(agg, "reading_strategy", "total_reads")
    ev = f"search_ratio={sr:.3f}, browse_ratio={br:.3f}, revisit_ratio={rv:.3f}, reads/task={nr:.1f}"
    if sr >= 0.15:
        add("reading_strategy", "M", _confidence(sr, (0.15,)), ev)
    elif br >= 0.15 or (rv < 0.05 and nr < 15):
        add("reading_strategy", "R", _confidence(br if br >= 0.15 else rv, (0.15,) if br >= 0.15 else (0.05,)), ev)
    else:
        add("reading_strategy", "L", _confidence(max(sr, br), (0.15,)), ev)

    tot, avg = _m(agg, "output_detail", "total_output_chars"), _m(agg, "output_detail", "avg_output_length")
    nf = _m(agg, "output_detail", "files_created")
    ev = f"total_output_chars={tot:.0f}, avg_output_length={avg:.0f}, files/task={nf:.2f}"
    if tot >= 8000 or (avg >= 3000 and nf >= 3):
        tier = "L"
    elif tot <= 3000 or (avg <= 1500 and nf <= 1.5):
        tier = "R"
    else:
        tier = "M"
    add("output_detail", tier, _confidence(tot, (8000.0, 3000.0)), ev)

    dirs, depth = _m(agg, "directory_style", "dirs_created"), _m(agg, "directory_style", "max_dir_depth")
    ev = f"dirs/task={dirs:.2f}, max_dir_depth={depth:.2f}"
    if dirs >= 2 and depth >= 2:
        tier = "L"
    elif dirs <= 0.5 and depth <= 0.5:
        tier = "R"
    else:
        tier = "M"
    add("directory_style", tier, _confidence(dirs, (2.0, 0.5)), ev)

    ed, small = _m(agg, "edit_strategy", "total_edits"), _m(agg, "edit_strategy", "small_edit_ratio")
    lines = _m(agg, "edit_strategy", "avg_lines_changed")
    ev = f"edits/task={ed:.2f}, small_edit_ratio={small:.3f}, avg_lines_changed={lines:.1f}"
    if ed >= 3 and (small >= 0.5 or lines <= 15):
        tier = "L"
    elif ed <= 1 or lines >= 30:
        tier = "R"
    else:
        tier = "M"
    add("edit_strategy", tier, _confidence(ed, (3.0, 1.0)), ev)

    dl, dcr = _m(agg, "version_strategy", "total_deletes"), _m(agg, "version_strategy", "delete_to_create_ratio")
    score = 0.7 * dl + 0.3 * dcr
    ev = f"deletes/task={dl:.2f}, delete_to_create_ratio={dcr:.3f}, curation score={score:.3f}"
    tier = "L" if score >= 0.15 else ("R" if score <= 0.05 else "M")
    add("working_style", tier, _confidence(score, (0.15, 0.05)), ev)

    img = _m(agg, "cross_modal_behavior", "image_files_created")
    st = _m(agg, "cross_modal_behavior", "structured_files_created")
    rows = _m(agg, "cross_modal_behavior", "markdown_table_rows")
    tables = 0.0 if upstream_quirks else _ratio(agg, "output_structure", "has_markdown_tables")
    visual = img + st + (1.0 if rows > 5 else 0.0)
    ev = (f"images/task={img:.2f}, structured files/task={st:.2f}, table rows/task={rows:.1f}, "
          f"sessions with tables={tables:.0%}")
    if visual >= 1.5 or img >= 0.5:
        tier = "L"
    elif tables < 0.2 and img < 0.1 and rows <= 1:
        tier = "R"
    else:
        tier = "M"
    add("cross_modal_behavior", tier, _confidence(visual, (1.5,)), ev)
    return out


def render_stats(agg: dict[str, dict[str, Any]]) -> str:
    """Aggregate statistics as text (§7.6 input): per attribute "(based on N trajectories)" and key: value lines."""
    parts = []
    for attr, stats in agg.items():
        lines = [f"{attr} (based on {stats.get('_n_trajectories', 0)} trajectories)"]
        for k, v in stats.items():
            if k.startswith("_"):
                continue
            lines.append(f"  {k}: {v:.3f}" if isinstance(v, float) else f"  {k}: {v}")
        parts.append("\n".join(lines))
    return "\n".join(parts)


def _llm_classify(agg: dict[str, dict[str, Any]], llm_fn: LLMFn) -> tuple[list[dict[str, Any]], list[str]] | None:
    cats = "\n".join(f"- {a}: L={c[0]} / M={c[1]} / R={c[2]}" for a, c in CATEGORIES.items())
    prompt = (f"Aggregated behaviour statistics of one user:\n{render_stats(agg)}\n\n(a) Classify each attribute "
              f"into one category with a confidence HIGH/MODERATE/LOW and cite statistics:\n{cats}\n(b) List 5-12 "
              "factual behavioural patterns quoting numbers, each prefixed with one of READING, OUTPUT, "
              "ORGANIZATION, EDITING, VERSIONING, CROSS-MODAL, STRUCTURE, CURATION.\nReply with JSON only: "
              '{"classifications": [{"attribute", "classification", "confidence", "evidence"}], "patterns": [str]}')
    try:
        obj = parse_json_object(llm_fn(prompt, system="You analyse file-system behaviour statistics."))
    except Exception:  # noqa: BLE001 - an LLM failure falls back to the rules
        return None
    if not obj or not isinstance(obj.get("classifications"), list) or not obj["classifications"]:
        return None
    out = []
    for c in obj["classifications"]:
        if not isinstance(c, dict) or c.get("attribute") not in CATEGORIES:
            continue
        names = CATEGORIES[c["attribute"]]
        label = str(c.get("classification", ""))
        tier = "LMR"[names.index(label)] if label in names else ""
        out.append({"attribute": c["attribute"], "tier": tier, "classification": label,
                    "confidence": str(c.get("confidence", "LOW")).upper(), "evidence": str(c.get("evidence", "")),
                    "source": "llm"})
    if not out:
        return None
    pats = [str(p) for p in obj.get("patterns", []) if isinstance(p, str)]
    return out, pats


def classify(agg: dict[str, dict[str, Any]], *, llm_fn: LLMFn | None = None, upstream_quirks: bool = False
             ) -> tuple[list[dict[str, Any]], list[str]]:
    """Classifications and behavioural patterns; LLM when ``llm_fn`` is given and usable, else rules.

    Returns:
        (classification dicts, pattern lines). Missing LLM dimensions are filled from the rules.
    """
    rules = classify_rules(agg, upstream_quirks=upstream_quirks)
    patterns = behavioral_patterns(agg)
    if llm_fn is not None:
        got = _llm_classify(agg, llm_fn)
        if got:
            llm_cls, llm_pats = got
            have = {c["attribute"] for c in llm_cls}
            return llm_cls + [c for c in rules if c["attribute"] not in have], llm_pats or patterns
    return rules, patterns


def behavioral_patterns(agg: dict[str, dict[str, Any]]) -> list[str]:
    """Prefixed pattern lines from aggregate means (thresholds of the §7.6 deterministic pattern detector)."""
    p: list[str] = []
    sr, rv = _m(agg, "reading_strategy", "search_ratio"), _m(agg, "reading_strategy", "revisit_ratio")
    br = _m(agg, "reading_strategy", "browse_ratio")
    reads, uniq = _m(agg, "reading_strategy", "total_reads"), _m(agg, "reading_strategy", "unique_files_read")
    if sr < 0.05:
        p.append(f"READING: never/rarely uses search (search ratio {sr:.3f})")
    elif sr > 0.2:
        p.append(f"READING: heavy search use (search ratio {sr:.3f})")
    if rv > 0.25:
        p.append(f"READING: frequently revisits files (revisit ratio {rv:.3f})")
    elif rv < 0.05:
        p.append(f"READING: rarely revisits files (revisit ratio {rv:.3f})")
    if br > 0.3:
        p.append(f"READING: frequent directory browsing (browse ratio {br:.3f})")
    if uniq > 0:
        rpf = reads / uniq
        if rpf > 1.5:
            p.append(f"READING: deep reading, {rpf:.2f} reads per unique file")
        elif rpf < 1.1:
            p.append(f"READING: shallow reading, {rpf:.2f} reads per unique file")
    avg, nf = _m(agg, "output_detail", "avg_output_length"), _m(agg, "output_detail", "files_created")
    if avg > 3000:
        p.append(f"OUTPUT: detailed outputs ({avg:.0f} chars per file)")
    elif 0 < avg < 800:
        p.append(f"OUTPUT: concise outputs ({avg:.0f} chars per file)")
    if nf > 3:
        p.append(f"OUTPUT: many files per task ({nf:.2f})")
    elif nf <= 1.5:
        p.append(f"OUTPUT: few files per task ({nf:.2f})")
    dirs, moves = _m(agg, "directory_style", "dirs_created"), _m(agg, "directory_style", "files_moved")
    if dirs >= 3:
        p.append(f"ORGANIZATION: creates multiple directories ({dirs:.2f} per task)")
    elif dirs < 0.5:
        p.append(f"ORGANIZATION: rarely creates directories ({dirs:.2f} per task)")
    if moves > 1:
        p.append(f"ORGANIZATION: actively moves files ({moves:.2f} per task)")
    ed, small = _m(agg, "edit_strategy", "total_edits"), _m(agg, "edit_strategy", "small_edit_ratio")
    lines = _m(agg, "edit_strategy", "avg_lines_changed")
    if ed > 3 and small > 0.6:
        p.append(f"EDITING: incremental small edits ({ed:.2f} per task, small ratio {small:.3f})")
    elif ed <= 1:
        p.append(f"EDITING: rarely edits ({ed:.2f} edits per task)")
    if lines > 30:
        p.append(f"EDITING: large-scope edits ({lines:.1f} lines per edit)")
    bk, ow = _m(agg, "version_strategy", "backup_copies"), _m(agg, "version_strategy", "total_overwrites")
    if bk > 0.5:
        p.append(f"VERSIONING: keeps history with backup copies ({bk:.2f} per task)")
    elif ow > 0.5 and bk < 0.1:
        p.append(f"VERSIONING: destructive overwrites ({ow:.2f} per task) without backups")
    dl = _m(agg, "version_strategy", "total_deletes")
    if dl > 1:
        p.append(f"CURATION: active cleanup ({dl:.2f} deletes per task)")
    rows = _m(agg, "cross_modal_behavior", "markdown_table_rows")
    img = _m(agg, "cross_modal_behavior", "image_files_created")
    st = _m(agg, "cross_modal_behavior", "structured_files_created")
    if rows > 5:
        p.append(f"CROSS-MODAL: frequent tables ({rows:.1f} table rows per task)")
    if img > 0.3:
        p.append(f"CROSS-MODAL: creates images ({img:.2f} per task)")
    if st > 0.5:
        p.append(f"CROSS-MODAL: creates structured data files ({st:.2f} per task)")
    if rows < 1 and img < 0.1 and st < 0.2:
        p.append("CROSS-MODAL: text-only outputs")
    hd = _m(agg, "tone", "heading_max_depth")
    pr = _m(agg, "tone", "prose_to_structure_ratio")
    if hd >= 3:
        p.append(f"STRUCTURE: deep heading hierarchy (H{hd:.1f} on average)")
    if pr > 3:
        p.append(f"STRUCTURE: prose-heavy writing (prose/structure {pr:.2f})")
    elif pr < 0.5 and _m(agg, "tone", "heading_count") > 0:
        p.append(f"STRUCTURE: structure-heavy writing (prose/structure {pr:.2f})")
    return p
