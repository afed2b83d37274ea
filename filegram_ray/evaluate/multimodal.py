"""Content overrides for the Multimodal setting (reference §9.2: same event logs, outputs given as rendered files).

In that setting a method must not read the agent's created text directly. Two modes:

* ``derivatives`` — the created file's content is replaced by the text recovered from its rendered derivatives
  (``derivatives/index.parquet`` + :func:`rendering.recover.recover_bytes`: PDF/DOCX/PPTX/XLSX readers, the stored
  caption of a PNG, the stored transcript of a WAV), concatenated in section order, each part headed
  ``[rendered <format>]``. Only :data:`SHOWN_FORMATS` are used by default: the ``md`` derivatives (the Markdown
  share of the project page's mix, reference §0) are the section's source Markdown, byte for byte, so showing them
  would hand the method the very text this setting withholds (reference §9.1 T4: "outputs given as rendered
  PDFs/images"). An output, or a section, without a shown derivative keeps no content (it was not shown as text
  either).
* ``strip`` — all created content removed (upstream's ``strip-content`` simulation, reference §8.3).

``auto`` picks ``derivatives`` when the render stage's index exists, else ``strip``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict
from typing import Any

from filegram_ray.methods.trajectory import ContentOverride, anonymize_path, strip_content_override
from filegram_ray.storage import RunDir

log = logging.getLogger(__name__)

__all__ = ["DERIVATIVES_INDEX", "SHOWN_FORMATS", "DerivativeText", "make_content_override", "text_twins"]

DERIVATIVES_INDEX = "derivatives/index.parquet"
#: recovered text per derivative (SHA-1 of its bytes, format, caption, transcript): every actor and every rerun of
#: the evaluate stage reads a PDF/DOCX/PPTX/XLSX once per run instead of once per process
RECOVERED_CACHE = "cache/recovered"
RECOVERED_VERSION = "1"  # bump when rendering.recover changes what it reads back
#: derivative formats whose recovered text a method sees in the Multimodal setting (all rendered ones; not ``md``)
SHOWN_FORMATS: tuple[str, ...] = ("pdf", "docx", "pptx", "xlsx", "png_page", "png_chart", "wav")


class DerivativeText:
    """``override(trajectory_id, event)``: recovered derivative text of the event's file ("" when none). A file
    moved or renamed after the event is found under its final path (the trajectory's own events.json).

    Args:
        run: the run directory holding ``derivatives/index.parquet``.
        formats: derivative formats shown (default :data:`SHOWN_FORMATS`).

    Raises:
        StorageError: the index is missing.
    """

    def __init__(self, run: RunDir, formats: tuple[str, ...] | list[str] | None = None):
        self.run = run
        self.formats = tuple(formats) if formats is not None else SHOWN_FORMATS
        df = run.read_table(DERIVATIVES_INDEX)
        self._rows: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in df.iter_rows(named=True):
            if r.get("status") not in ("ok", None) or not r.get("path"):
                continue
            if str(r.get("format") or "") not in self.formats:
                continue
            self._rows[(str(r["trajectory_id"]), anonymize_path(str(r["source"])))].append(r)
        self._cache: dict[tuple[str, str], str] = {}
        self._moves_cache: dict[str, list[tuple[float, str, str]]] = {}

    def __reduce__(self):
        return (DerivativeText, (self.run, self.formats))

    def _recover(self, rows: list[dict[str, Any]]) -> str:
        from rendering.recover import recover_bytes

        parts = []
        for r in sorted(rows, key=lambda r: (int(r.get("section_index") or 0), str(r.get("format")))):
            ext = str(r["path"]).rsplit(".", 1)[-1]
            try:
                data = self.run.read_bytes(r["path"])
                caption, transcript = r.get("caption") or None, r.get("transcript") or None
                key = hashlib.sha1(b"\x1f".join([RECOVERED_VERSION.encode(), ext.encode(), data,
                                                  str(caption).encode(), str(transcript).encode()])).hexdigest()
                cached = f"{RECOVERED_CACHE}/{key[:2]}/{key}.txt"
                if self.run.exists(cached):
                    text = self.run.read_bytes(cached).decode("utf-8")
                else:
                    text = recover_bytes(data, ext, r["path"], caption, transcript)
                    self.run.write_bytes(cached, text.encode("utf-8"))
            except Exception as exc:  # noqa: BLE001 - one unreadable derivative leaves a gap, not a failure
                log.warning("multimodal: cannot recover %s: %s", r["path"], exc)
                continue
            parts.append(f"[rendered {r.get('format', ext)}]\n{text.strip()}")
        return "\n\n".join(parts)

    def _moves(self, trajectory_id: str) -> list[tuple[float, str, str]]:
        """``(timestamp, old path, new path)`` of the trajectory's file_move / file_rename events, in order."""
        if trajectory_id not in self._moves_cache:
            out = []
            try:
                events = self.run.read_json(f"trajectories/{trajectory_id}/events.json")
            except Exception:  # noqa: BLE001 - no move list: paths are looked up as written
                events = []
            for ev in events if isinstance(events, list) else []:
                if isinstance(ev, dict) and ev.get("event_type") in ("file_move", "file_rename") \
                        and ev.get("old_path") and ev.get("new_path"):
                    out.append((float(ev.get("timestamp") or 0.0), anonymize_path(str(ev["old_path"])),
                                anonymize_path(str(ev["new_path"]))))
            self._moves_cache[trajectory_id] = out
        return self._moves_cache[trajectory_id]

    def final_path(self, trajectory_id: str, path: str, timestamp: float) -> str:
        """Where the file written at ``path`` at ``timestamp`` ended up: later moves/renames of it followed in order
        (outputs are rendered under their final path, ``trajectories/outputs.parquet``)."""
        cur, t = path, timestamp
        for _ in range(len(self._moves(trajectory_id))):
            nxt = next(((ts, new) for ts, old, new in self._moves(trajectory_id) if ts >= t and old == cur), None)
            if nxt is None:
                break
            t, cur = nxt
        return cur

    def __call__(self, trajectory_id: str, event: dict[str, Any]) -> str:
        path = anonymize_path(str(event.get("file_path", "")))
        key = (trajectory_id, path)
        if key not in self._rows:  # written, then moved or renamed: the derivatives sit under the final path
            key = (trajectory_id, self.final_path(trajectory_id, path, float(event.get("timestamp") or 0.0)))
        if key not in self._cache:
            self._cache[key] = self._recover(self._rows.get(key, []))
        return self._cache[key]


def make_content_override(run: RunDir, mode: str, formats: list[str] | None = None) -> ContentOverride:
    """The override for ``mode`` ∈ auto | derivatives | strip (``formats``: see :class:`DerivativeText`).

    Raises:
        ValueError: unknown mode. StorageError: ``derivatives`` requested but the render index is missing.
    """
    if mode == "auto":
        mode = "derivatives" if run.exists(DERIVATIVES_INDEX) else "strip"
    if mode == "strip":
        return strip_content_override
    if mode == "derivatives":
        return DerivativeText(run, formats)
    raise ValueError(f"evaluate.multimodal_content={mode!r}: expected auto, derivatives or strip")


def text_twins(items: list[dict[str, Any]]) -> dict[str, str]:
    """``multimodal question id -> text question id`` of the same question (a FileGrd item and the T1–T3 item it
    re-issues, reference §9.1 T4): ``metadata.text_twin`` written by the bench stage, else the text item with the
    same source sub-task, question, context spec and option set. Twins absent from ``items`` are left out.
    """
    def sig(it: dict[str, Any], sub: str) -> str:
        ctx = it.get("context") or {}
        return json.dumps([sub, it.get("question", ""), sorted(str(c) for c in it.get("choices") or []),
                           {k: ctx.get(k) for k in ("kind", "trajectories", "labels", "held_out")}],
                          sort_keys=True, ensure_ascii=False)

    text = {it["question_id"]: it for it in items if it.get("setting", "text") == "text"}
    by_sig = {sig(it, str(it.get("sub_track", ""))): q for q, it in text.items()}
    out: dict[str, str] = {}
    for it in items:
        if it.get("setting") != "multimodal":
            continue
        meta = it.get("metadata") or {}
        twin = meta.get("text_twin")
        if not twin:
            src = meta.get("source_sub_task") or str(it.get("sub_class", "")).split("/", 1)[0]
            twin = by_sig.get(sig(it, str(src)))
        if twin and twin in text:
            out[it["question_id"]] = str(twin)
    return out
