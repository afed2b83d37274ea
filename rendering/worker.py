"""The render stage's worker: one batch of derivatives → the derivatives written to the run directory, one index
row each (:class:`RenderWorker`, run by any executor of :mod:`filegram_ray.stages.executors`).

A batch (:func:`rendering.stage.make_batches`) is a task of derivative items; a derivative is one (section, format)
pair planned by :func:`rendering.stage.plan_output` (its ``unit_json`` holds the section, the section count and the
derivative's path). Renderers are created lazily: the piper voice is loaded on the first audio item a worker gets,
so a worker that only renders documents never pays for it. A derivative that fails raises (its error row); one
whose format does not fit its section is a ``skipped`` index row.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

from filegram_ray.storage import RunDir
from rendering.policy import category_of
from rendering.renderers import (
    NARRATION_MAX_WORDS,
    NotApplicable,
    TtsEngine,
    build,
    narration_script,
    text_notes,
)
from rendering.sections import Section, is_cjk

log = logging.getLogger(__name__)

__all__ = ["INDEX_COLUMNS", "RenderWorker", "UnreadableOutput", "index_row"]

#: columns of derivatives/index.parquet and their polars types
INDEX_COLUMNS: dict[str, str] = {
    "unit_id": "str", "trajectory_id": "str", "profile_id": "str", "task_id": "str", "source": "str",
    "section_index": "int", "n_sections": "int", "section_title": "str", "language": "str", "format": "str",
    "category": "str", "path": "str", "bytes": "int", "sha256": "str", "status": "str", "error": "str",
    "caption": "str", "transcript": "str", "text_chars": "int", "notes": "str", "plan": "str",
}

class UnreadableOutput(Exception):
    """An output that could not be read or decomposed when the stage listed its derivatives; the message is that
    error (``"UnicodeDecodeError: …"``), kept as the derivative's error row."""


#: a narration shorter than this many characters is not spoken ahead (the renderer reports it as skipped)
MIN_SPOKEN_CHARS = 20


def index_row(unit: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """One index row (every :data:`INDEX_COLUMNS` key, None where unknown) of derivative ``unit``, updated with
    ``kw`` (non-index keys such as ``render_s`` ride along for the timings table and the completion record)."""
    row = {c: None for c in INDEX_COLUMNS}
    for k in ("unit_id", "trajectory_id", "profile_id", "task_id", "source", "format", "error"):
        row[k] = unit.get(k)
    row["category"] = category_of(unit.get("format") or "") if unit.get("format") else ""
    row.update(kw)
    return row


class RenderWorker:
    """Renders batches of derivative units and writes each derivative to the run directory (one instance per
    actor, or one in the driver with the serial executor).

    Args:
        run_uri, storage_options: the run directory.
        narration_max_words: spoken-briefing length (``render.narration_max_words``).
        plan: the render plan key every row carries (:meth:`rendering.stage.RenderConfig.plan_key`).
        crash_on_text: TEST ONLY — ``os._exit(1)`` on a section holding this text (a renderer that dies hard).
    """

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None = None,
                 narration_max_words: int = NARRATION_MAX_WORDS, plan: str = "", crash_on_text: str | None = None):
        from filegram_ray.speech import speech_cache_dir

        self.run = RunDir(run_uri, storage_options)
        self.max_words = narration_max_words
        self._speech_cache = speech_cache_dir(self.run)
        self.tts: TtsEngine | None = None  # the piper voice, loaded on the first audio unit
        self.plan, self.crash_on_text = plan, crash_on_text

    def _voice(self) -> TtsEngine:
        if self.tts is None:
            self.tts = TtsEngine(cache_dir=self._speech_cache)
        return self.tts

    def process_task(self, units: list[dict[str, Any]]):
        """A batch → ``(unit_id, {"row": index row, "speech": {...}} or the exception)`` per derivative. The batch's
        narration sentences are spoken once up front (``speech``, on the batch's first derivative reported: narration
        sentences of its WAVs, and how many of them piper spoke now; the rest came from the run's sentence cache).
        Each derivative is written before it is reported."""
        spoken0 = self.tts.spoken if self.tts is not None else 0
        sentences = self._prefetch_speech(units)
        synthesised = self.tts.spoken - spoken0 if self.tts is not None else 0
        speech = {"sentences": sentences, "synthesised": synthesised}
        for u in units:
            try:
                out = {"row": self.render_unit(u)}
            except Exception as exc:  # noqa: BLE001 - the derivative's error row; the batch goes on
                yield u["unit_id"], exc
                continue
            if speech:
                out["speech"], speech = speech, {}
            yield u["unit_id"], out

    def _prefetch_speech(self, units: list[dict[str, Any]]) -> int:
        """Speak each distinct sentence of the batch's narrations once, shortest first (then every WAV of the batch
        is assembled from the sentence cache); returns the number of sentences in those narrations."""
        scripts = []
        for u in units:
            if u.get("format") != "wav" or u.get("status") == "error":
                continue
            try:
                script = narration_script(Section.from_dict(json.loads(u["unit_json"])["section"]), self.max_words)
            except Exception:  # noqa: BLE001 - render_unit reports it
                continue
            if len(script) >= MIN_SPOKEN_CHARS and not is_cjk(script) and any(ch.isalnum() for ch in script):
                scripts.append(script)
        if not scripts:
            return 0
        try:
            tts = self._voice()
            before = tts.sentences_total
            tts.prefetch(scripts)
            return tts.sentences_total - before
        except Exception as exc:  # noqa: BLE001 - each unit then reports its own failure
            log.warning("render: speech prefetch failed: %s", exc)
            return 0

    def render_unit(self, unit: dict[str, Any]) -> dict[str, Any]:
        """One derivative → its index row (plus ``render_s``, wall seconds), the file written atomically.

        Raises:
            UnreadableOutput: the output could not be read when the derivatives were listed. Any renderer error.
        """
        row = self._render_unit(unit)
        row["plan"] = self.plan
        return row

    def _render_unit(self, unit: dict[str, Any]) -> dict[str, Any]:
        if unit.get("status") == "error":
            raise UnreadableOutput(unit.get("error") or "the output could not be read")
        t0 = time.perf_counter()
        payload = json.loads(unit["unit_json"])
        sec = Section.from_dict(payload["section"])
        if self.crash_on_text and self.crash_on_text in json.dumps(payload["section"], ensure_ascii=False):
            os._exit(1)  # test hook: a renderer that dies hard (native crash / OOM kill)
        fmt = unit["format"]
        opts: dict[str, Any] = {"max_words": self.max_words, "tts": self._voice()} if fmt == "wav" else {}
        base = {"section_index": sec.index, "n_sections": payload["n_sections"], "section_title": sec.title,
                "language": sec.language}
        try:
            r = build(fmt, sec, **opts)
        except NotApplicable as exc:
            return index_row(unit, **base, status="skipped", error=str(exc), render_s=time.perf_counter() - t0)
        self.run.write_bytes(payload["path"], r.data)
        return index_row(unit, **base, path=payload["path"], bytes=r.meta["bytes"], sha256=r.meta["sha256"],
                         status="ok", error="", caption=r.meta.get("caption"), transcript=r.meta.get("transcript"),
                         text_chars=len(r.meta.get("text") or ""), render_s=round(time.perf_counter() - t0, 4),
                         notes=text_notes(r.meta))  # removed control characters, missing glyphs, cut cells
