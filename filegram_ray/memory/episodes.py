"""Episode segmentation and narratives (FILEGRAM_REFERENCE §7.10).

Default: a deterministic segmenter — boundaries where the phase (exploration / production / organisation, §7.8
windows) changes; if there is none, where production moves on to a file set not touched by earlier production
(*ours*: the reference's "file set change" made concrete). At most 4 boundaries (≤ 5 episodes), segments other than
the first with fewer than 3 events merge into the previous, fewer than 3 events or no boundary → one episode.
Narratives are templates built from the events ({title, content, summary}).

Optional: an LLM through ``llm_fn(prompt, system=None) -> str`` finds the boundaries and writes the narratives as in
upstream (one boundary call, one narrative call per segment); any failure falls back to the deterministic result.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from filegram_ray.limits import load_json
from filegram_ray.memory.constants import (
    EPISODE_FILES_INVOLVED_MAX,
    EPISODE_MAX_PER_TRAJECTORY,
    EPISODE_MIN_EVENTS,
)
from filegram_ray.memory.normalize import NormalizedEvent
from filegram_ray.memory.sequence import detect_phases, phase_of

__all__ = [
    "LLMFn",
    "event_paths",
    "parse_json_object",
    "segment_boundaries",
    "segment_episodes",
    "segments_from_boundaries",
    "template_narrative",
]

LLMFn = Callable[..., str]


def parse_json_object(text: str) -> dict[str, Any] | None:
    """Parse the outermost ``{...}`` of an LLM reply (code fences and trailing commas tolerated); None on failure."""
    if not isinstance(text, str):
        return None
    text = re.sub(r"```(?:json)?", "", text)
    i, j = text.find("{"), text.rfind("}")
    if i < 0 or j <= i:
        return None
    body = re.sub(r",\s*([}\]])", r"\1", text[i:j + 1])
    try:
        obj = load_json(body, "reply", duplicates=True)  # bounded nesting: a reply is outside input
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def event_paths(e: NormalizedEvent) -> list[str]:
    """All (anonymised) paths an event touches."""
    return [p for p in (e.file_path, e.old_path, e.new_path, e.dir_path, e.directory_path, e.source_file,
                        e.target_file) if p and p != "."]


def _basename(p: str) -> str:
    return p.rstrip("/").rsplit("/", 1)[-1] if p else ""


def segment_boundaries(events: list[NormalizedEvent]) -> list[int]:
    """Deterministic episode boundaries (indices where a new episode starts, excluding 0), sorted, ≤ 4."""
    n = len(events)
    if n < EPISODE_MIN_EVENTS:
        return []
    phases = detect_phases([e.event_type for e in events])
    bounds = [p["start_idx"] for p in phases[1:]]
    if not bounds:
        seen: set[str] = set()
        n_prod = 0
        for i, e in enumerate(events):
            if phase_of(e.event_type) != "production" or not e.file_path:
                continue
            if seen and e.file_path not in seen and n_prod >= EPISODE_MIN_EVENTS and i <= n - EPISODE_MIN_EVENTS:
                bounds = [i]
                break
            seen.add(e.file_path)
            n_prod += 1
    return sorted({b for b in bounds if 0 < b < n})[:EPISODE_MAX_PER_TRAJECTORY - 1]


def segments_from_boundaries(n: int, bounds: list[int]) -> list[tuple[int, int]]:
    """Segments ``[(start, end_inclusive)]`` from boundaries; short segments (< 3 events) after the first merge
    into the previous one (§7.10)."""
    if n == 0:
        return []
    cuts = [0] + [b for b in bounds if 0 < b < n] + [n]
    segs: list[list[int]] = []
    for a, b in itertools.pairwise(cuts):
        if segs and b - a < EPISODE_MIN_EVENTS:
            segs[-1][1] = b - 1
        else:
            segs.append([a, b - 1])
    return [(a, b) for a, b in segs]


def _fmt_files(paths: list[str], k: int = 4) -> str:
    names = [_basename(p) for p in paths]
    out = ", ".join(names[:k])
    return out + (f" and {len(names) - k} more" if len(names) > k else "")


def template_narrative(events: list[NormalizedEvent], ordinal: int) -> dict[str, str]:
    """A factual {title, content, summary} for one segment, built from its events (no LLM)."""
    by: dict[str, list[NormalizedEvent]] = {}
    for e in events:
        by.setdefault(e.event_type, []).append(e)
    sents: list[str] = []
    reads = by.get("file_read", [])
    if reads:
        uniq = list(dict.fromkeys(e.file_path for e in reads))
        re_reads = sum(1 for e in reads if e.view_count > 1)
        chars = sum(e.content_length for e in reads)
        s = f"Read {len(uniq)} file(s) ({_fmt_files(uniq)}) in {len(reads)} read(s) totalling {chars:,} chars"
        sents.append(s + (f", {re_reads} of them revisits." if re_reads else "."))
    if by.get("file_search"):
        kinds = Counter(e.search_type or "search" for e in by["file_search"])
        sents.append("Searched files " + ", ".join(f"{n}× by {k}" for k, n in sorted(kinds.items())) + ".")
    if by.get("file_browse"):
        sents.append(f"Listed {len(by['file_browse'])} directory view(s).")
    writes = by.get("file_write", [])
    for op, verb in (("create", "Created"), ("overwrite", "Overwrote")):
        ws = [e for e in writes if e.operation == op]
        if ws:
            items = ", ".join(f"{_basename(e.file_path)} ({e.content_length:,} chars)" for e in ws[:5])
            sents.append(f"{verb} {len(ws)} file(s): {items}" + (" and more." if len(ws) > 5 else "."))
    edits = by.get("file_edit", [])
    if edits:
        per = Counter(e.file_path for e in edits)
        add = sum(e.lines_added for e in edits)
        dele = sum(e.lines_deleted for e in edits)
        sents.append(f"Made {len(edits)} edit(s) to {_fmt_files(list(per))} (+{add}/-{dele} lines in total).")
    if by.get("dir_create"):
        ds = by["dir_create"]
        sents.append(f"Created {len(ds)} director(ies): " + ", ".join(
            f"{e.dir_path or '?'} (depth {e.depth})" for e in ds[:4]) + ".")
    for et, verb in (("file_move", "Moved"), ("file_rename", "Renamed")):
        for e in by.get(et, [])[:3]:
            sents.append(f"{verb} {e.old_path or '?'} to {e.new_path or '?'}.")
    for e in by.get("file_copy", [])[:3]:
        sents.append(f"Copied {e.source_file or '?'} to {e.target_file or '?'}"
                     + (" as a backup." if e.is_backup else "."))
    if by.get("file_delete"):
        sents.append(f"Deleted {_fmt_files([e.file_path for e in by['file_delete']])}.")
    if not sents:
        sents.append(f"{len(events)} navigation event(s) (context switches / cross-file references).")
    counts = Counter(phase_of(e.event_type) for e in events)
    counts.pop("other", None)
    focus = counts.most_common(1)[0][0] if counts else "navigation"
    files = list(dict.fromkeys(p for e in events for p in event_paths(e)))
    title = (f"Episode {ordinal}: {focus} over {len(events)} events touching {len(files)} file(s)"
             + (f" such as {_basename(files[0])}" if files else ""))
    return {"title": title, "content": " ".join(sents), "summary": f"{focus.capitalize()} episode: {sents[0]}"}


def _timeline(events: list[NormalizedEvent]) -> str:
    lines = []
    for i, e in enumerate(events):
        line = f"[{i}] {e.event_type} {_basename(e.file_path or e.new_path or e.dir_path)[:30]}"
        if e.event_type == "file_write":
            line += f" ({e.operation}, {e.content_length}ch)"
        elif e.event_type == "file_edit":
            line += f" (+{e.lines_added}/-{e.lines_deleted})"
        elif e.event_type == "file_read":
            line += f" ({e.content_length}ch)"
        lines.append(line)
    return "\n".join(lines)


def _llm_boundaries(events: list[NormalizedEvent], llm_fn: LLMFn) -> list[int] | None:
    n = len(events)
    prompt = (f"Below is a timeline of {n} file-system events of one work session.\n{_timeline(events)}\n\n"
              "Find 2-5 points where the focus shifts (reading -> writing, a change of the file set, creating -> "
              "organising). Reply with JSON only: {\"boundaries\": [indices where a new episode starts, "
              "excluding 0]}")
    try:
        obj = parse_json_object(llm_fn(prompt, system="You segment work sessions into episodes."))
    except Exception:  # noqa: BLE001 - an LLM failure falls back to the rules
        return None
    if not obj or not isinstance(obj.get("boundaries"), list):
        return None
    b = sorted({int(x) for x in obj["boundaries"] if isinstance(x, (int, float)) and 0 < int(x) < n})
    return b[:EPISODE_MAX_PER_TRAJECTORY - 1] or None


def _llm_narrative(events: list[NormalizedEvent], ordinal: int, llm_fn: LLMFn) -> dict[str, str] | None:
    prompt = ("Events of one work episode:\n" + _timeline(events) + "\n\nWrite JSON only: {\"title\": 10-20 "
              "words, \"content\": 3-8 factual third-person sentences naming files and operations, \"summary\": "
              "one sentence}")
    try:
        obj = parse_json_object(llm_fn(prompt, system="You narrate work episodes factually."))
    except Exception:  # noqa: BLE001 - an LLM failure falls back to the rules
        return None
    if not obj or not all(isinstance(obj.get(k), str) and obj.get(k) for k in ("title", "content", "summary")):
        return None
    return {k: obj[k] for k in ("title", "content", "summary")}


def segment_episodes(events: list[NormalizedEvent], trajectory_id: str, task_id: str, *,
                     llm_fn: LLMFn | None = None) -> list[dict[str, Any]]:
    """Episodes of one trajectory (§7.10).

    Args:
        events: behavioural events in order.
        trajectory_id, task_id: copied into each record.
        llm_fn: optional ``llm_fn(prompt, system=None) -> str`` for boundaries and narratives.

    Returns:
        Episode records ``{episode_id, trajectory_id, task_id, start_idx, end_idx (inclusive), event_count,
        title, content, summary, dominant_actions, files_involved, segmenter}``; ``episode_id`` is the first 8 hex
        chars of SHA-256 over (trajectory_id, start_idx) — deterministic, unlike upstream's UUID4.
    """
    n = len(events)
    if n == 0:
        return []
    bounds = None
    segmenter = "rules"
    if llm_fn is not None and n >= EPISODE_MIN_EVENTS:
        bounds = _llm_boundaries(events, llm_fn)
        segmenter = "llm" if bounds else "rules (llm fallback)"
    if bounds is None:
        bounds = segment_boundaries(events)
    out = []
    for k, (a, b) in enumerate(segments_from_boundaries(n, bounds)):
        seg = events[a:b + 1]
        narr = (_llm_narrative(seg, k + 1, llm_fn) if llm_fn is not None else None) or template_narrative(seg, k + 1)
        files = list(dict.fromkeys(p for e in seg for p in event_paths(e)))[:EPISODE_FILES_INVOLVED_MAX]
        out.append({
            "episode_id": hashlib.sha256(f"{trajectory_id}\x00{a}".encode()).hexdigest()[:8],
            "trajectory_id": trajectory_id,
            "task_id": task_id,
            "start_idx": a,
            "end_idx": b,
            "event_count": b - a + 1,
            "dominant_actions": dict(Counter(e.event_type for e in seg).most_common()),
            "files_involved": files,
            "segmenter": segmenter,
            **narr,
        })
    if n < EPISODE_MIN_EVENTS and out:
        out[0]["summary"] = "full trajectory as single episode"
    return out
