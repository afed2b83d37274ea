"""Content overrides for the Multimodal setting (reference §9.2: same event logs, outputs given as rendered files).

In that setting a method must not read the agent's created text directly. Two modes:

* ``derivatives`` — the created file's content is replaced by the text recovered from its rendered derivatives
  (``derivatives/index.parquet`` + :func:`rendering.recover.recover_bytes`: PDF/DOCX/PPTX/XLSX readers, the stored
  caption of a PNG, the stored transcript of a WAV), concatenated in section order, each part headed
  ``[rendered <format>]``. An output that has no derivative keeps no content (it was not shown as text either).
* ``strip`` — all created content removed (upstream's ``strip-content`` simulation, reference §8.3).

``auto`` picks ``derivatives`` when the render stage's index exists, else ``strip``.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from filegram_ray.methods.trajectory import ContentOverride, anonymize_path, strip_content_override
from filegram_ray.storage import RunDir

log = logging.getLogger(__name__)

__all__ = ["DERIVATIVES_INDEX", "DerivativeText", "make_content_override"]

DERIVATIVES_INDEX = "derivatives/index.parquet"


class DerivativeText:
    """``override(trajectory_id, event)``: recovered derivative text of the event's file ("" when none).

    Args:
        run: the run directory holding ``derivatives/index.parquet``.

    Raises:
        StorageError: the index is missing.
    """

    def __init__(self, run: RunDir):
        self.run = run
        df = run.read_table(DERIVATIVES_INDEX)
        self._rows: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in df.iter_rows(named=True):
            if r.get("status") not in ("ok", None) or not r.get("path"):
                continue
            self._rows[(str(r["trajectory_id"]), anonymize_path(str(r["source"])))].append(r)
        self._cache: dict[tuple[str, str], str] = {}

    def __reduce__(self):
        return (DerivativeText, (self.run,))

    def _recover(self, rows: list[dict[str, Any]]) -> str:
        from rendering.recover import recover_bytes

        parts = []
        for r in sorted(rows, key=lambda r: (int(r.get("section_index") or 0), str(r.get("format")))):
            ext = str(r["path"]).rsplit(".", 1)[-1]
            try:
                text = recover_bytes(self.run.read_bytes(r["path"]), ext, r["path"], r.get("caption") or None,
                                     r.get("transcript") or None)
            except Exception as exc:  # noqa: BLE001 - one unreadable derivative leaves a gap, not a failure
                log.warning("multimodal: cannot recover %s: %s", r["path"], exc)
                continue
            parts.append(f"[rendered {r.get('format', ext)}]\n{text.strip()}")
        return "\n\n".join(parts)

    def __call__(self, trajectory_id: str, event: dict[str, Any]) -> str:
        key = (trajectory_id, anonymize_path(str(event.get("file_path", ""))))
        if key not in self._cache:
            self._cache[key] = self._recover(self._rows.get(key, []))
        return self._cache[key]


def make_content_override(run: RunDir, mode: str) -> ContentOverride:
    """The override for ``mode`` ∈ auto | derivatives | strip.

    Raises:
        ValueError: unknown mode. StorageError: ``derivatives`` requested but the render index is missing.
    """
    if mode == "auto":
        mode = "derivatives" if run.exists(DERIVATIVES_INDEX) else "strip"
    if mode == "strip":
        return strip_content_override
    if mode == "derivatives":
        return DerivativeText(run)
    raise ValueError(f"evaluate.multimodal_content={mode!r}: expected auto, derivatives or strip")
