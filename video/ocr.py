"""OCR captioner on CPU: RapidOCR 3 (its PP-OCR detection and recognition models ship in the wheel, nothing is
downloaded; ENVIRONMENT_FACTS §6) turns each keyframe into timestamped text lines with boxes.

Settings chosen for screens (all in :class:`OcrParams`):

* no text-direction classifier (screen text is upright);
* detection on the frame scaled so that its longer side is at most ``det_side`` pixels, never enlarged (RapidOCR's
  default enlarges the *shorter* side to 736 px, which turns a 40-px strip into a 2000-px one);
* one onnxruntime thread per captioner (``threads``): the stage runs one captioner per core instead;
* incremental: a keyframe is compared with the previous one and only the changed regions are read again, widened
  to the previous lines they touch, so a line is always read whole; lines elsewhere are carried over. A screen
  recording changes locally (a pane, a status line), so this reads a fraction of each frame. When more than
  ``full_fraction`` of the frame changed, the whole frame is read;
* a line cache (``line_cache``): detection runs on what is read, but a detected line whose pixels (the exact crop
  the recogniser would get) were already recognised in this recording takes that text instead of a second
  recognition — a file tree, a title bar or a pane that moves back into view is recognised once. Recognition is
  ~90 % of the OCR time on our screens (measured: 0.44 CPU-s detection vs 5.2 CPU-s recognition of a 87-line
  1280 x 720 keyframe), so this is where the time goes. The cache is per recording (:meth:`OcrCaptioner.reset`),
  so a recording's captions never depend on which recordings an actor read before;
* one line per recognition call and no padding to RapidOCR's 320-px minimum width (``rec_batch`` 1,
  ``rec_min_width`` 48): a batch is padded to its widest line, and a line number or a short file name padded to
  320 px costs as much as a long line (measured on 469 lines of 8 keyframes: 23.8 CPU-s at batch 8 / 320 px, 17.2
  at batch 1 / 48 px; the texts differ only in trailing dots of elided names and box glyphs).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:  # numpy is imported where images are read (a stage's --help loads none)
    import numpy as np

log = logging.getLogger(__name__)

__all__ = ["OcrCaptioner", "OcrLine", "OcrParams"]


class OcrParams(BaseModel):
    """RapidOCR settings for screen captures (see module doc)."""

    model_config = ConfigDict(extra="forbid")
    det_side: int = Field(1280, ge=320, description="longest side the detector sees, pixels (never enlarged)")
    threads: int = Field(1, ge=1, description="onnxruntime intra-op threads per captioner")
    min_score: float = Field(0.5, ge=0, le=1, description="drop recognised lines below this confidence")
    incremental: bool = Field(True, description="read only the regions that changed since the previous keyframe")
    full_fraction: float = Field(0.45, gt=0, le=1, description="changed share of the frame above which all of it "
                                                                "is read again")
    rec_batch: int = Field(1, ge=1, description="text lines recognised per model call (a batch is padded to its "
                                                 "widest line)")
    rec_min_width: int = Field(48, ge=16, description="narrowest input of the recogniser, pixels at its 48-px height "
                                                     "(RapidOCR's default pads every line to 320)")
    line_cache: bool = Field(True, description="recognise a line's exact pixels once per recording")


@dataclass(frozen=True)
class OcrLine:
    """A recognised line: ``text``, ``box`` = (x0, y0, x1, y1) in frame pixels, recognition ``score``."""

    text: str
    box: tuple[int, int, int, int]
    score: float

    def to_dict(self) -> dict:
        return {"text": self.text, "box": list(self.box), "score": round(self.score, 4)}


def _intersects(a, b, pad: int = 0) -> bool:
    return not (a[2] + pad < b[0] or b[2] + pad < a[0] or a[3] + pad < b[1] or b[3] + pad < a[1])


def _union(a, b):
    return (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))


def _merge(rects: list[tuple[int, int, int, int]], pad: int = 2) -> list[tuple[int, int, int, int]]:
    rects = list(rects)
    changed = True
    while changed:
        changed = False
        out: list[tuple[int, int, int, int]] = []
        for r in rects:
            for k, o in enumerate(out):
                if _intersects(r, o, pad):
                    out[k] = _union(r, o)
                    changed = True
                    break
            else:
                out.append(r)
        rects = out
    return rects


def reading_order(lines: list[OcrLine]) -> list[OcrLine]:
    """Lines top to bottom, left to right (rows grouped by the box centre's y within half a line height)."""
    def key(ln: OcrLine):
        h = max(1, ln.box[3] - ln.box[1])
        return (round(((ln.box[1] + ln.box[3]) / 2) / max(8, h)), ln.box[0])

    return sorted(lines, key=key)


class OcrCaptioner:
    """Reads keyframes with RapidOCR; keeps the previous keyframe to read only what changed.

    Args:
        params: :class:`OcrParams`.

    Raises:
        ImportError: ``rapidocr`` is not installed (``pip install rapidocr``).
    """

    name = "ocr"

    def __init__(self, params: OcrParams | None = None):
        from rapidocr import RapidOCR

        self.p = params or OcrParams()
        self.engine = RapidOCR(params={
            "Global.use_cls": False, "Global.log_level": "error",
            "Det.limit_type": "max", "Det.limit_side_len": self.p.det_side,
            "Rec.rec_batch_num": self.p.rec_batch, "Rec.rec_img_shape": [3, 48, self.p.rec_min_width],
            "EngineConfig.onnxruntime.intra_op_num_threads": self.p.threads,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        })
        import rapidocr

        self.version = f"rapidocr-{getattr(rapidocr, '__version__', '3')}"
        self.reset()

    def reset(self) -> None:
        """Forget the previous keyframe (call between recordings)."""
        self._prev: np.ndarray | None = None
        self._lines: list[OcrLine] = []
        self.boxes_read = 0
        self.pixels_read = 0
        self.lines_recognised = 0  # lines sent to the recogniser (boxes_read - lines_recognised came from the cache)
        self._texts: dict[bytes, tuple[str, float]] = {}

    def _read(self, img: np.ndarray, x0: int = 0, y0: int = 0) -> list[OcrLine]:
        import numpy as np
        from rapidocr.utils.process_img import get_rotate_crop_image  # the crop RapidOCR's own pipeline makes

        h, w = img.shape[:2]
        if h < 8 or w < 8:
            return []
        pad_y = max(0, 40 - h) // 2  # the detector needs some height around a single line
        if pad_y:
            img = np.pad(img, ((pad_y, pad_y), (0, 0), (0, 0)), mode="edge")
        det = self.engine(img, use_det=True, use_cls=False, use_rec=False)
        self.pixels_read += h * w
        out: list[OcrLine] = []
        if getattr(det, "boxes", None) is None or not len(det.boxes):
            return out
        boxes = [np.asarray(b, dtype=np.float32) for b in det.boxes]
        crops = [get_rotate_crop_image(img, b.copy()) for b in boxes]
        keys = [hashlib.blake2b(c.tobytes(), digest_size=16, person=str(c.shape).encode()[:16]).digest()
                for c in crops]
        todo = [i for i, k in enumerate(keys) if k not in self._texts] if self.p.line_cache else list(range(len(keys)))
        got: dict[int, tuple[str, float]] = {}
        if todo:
            rec = self.engine.recognize_txt([crops[i] for i in todo])
            self.lines_recognised += len(todo)
            for i, txt, sc in zip(todo, rec.txts, rec.scores):
                got[i] = (str(txt), float(sc))
                if self.p.line_cache:
                    self._texts[keys[i]] = got[i]
        for i, b in enumerate(boxes):
            txt, sc = got[i] if i in got else self._texts[keys[i]]
            if sc < self.p.min_score or not txt.strip():
                continue
            bx = (int(b[:, 0].min()) + int(x0), int(b[:, 1].min()) - pad_y + int(y0),
                  int(b[:, 0].max()) + int(x0), int(b[:, 1].max()) - pad_y + int(y0))
            out.append(OcrLine(txt.strip(), bx, sc))
        self.boxes_read += len(out)
        return out

    def _changed_rects(self, prev: np.ndarray, img: np.ndarray) -> list[tuple[int, int, int, int]]:
        import cv2
        import numpy as np

        h, w = img.shape[:2]
        f = 2 if w >= 640 else 1
        a = cv2.resize(prev, (w // f, h // f), interpolation=cv2.INTER_AREA) if f > 1 else prev
        b = cv2.resize(img, (w // f, h // f), interpolation=cv2.INTER_AREA) if f > 1 else img
        mask = (cv2.absdiff(a, b).max(axis=2) > 30).astype(np.uint8)
        if not mask.any():
            return []
        mask = cv2.dilate(mask, np.ones((5, 13), np.uint8))
        n, _, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
        pad = 6
        rects = []
        for k in range(1, n):
            x, y, ww, hh, _ = stats[k]
            rects.append((int(max(0, x * f - pad)), int(max(0, y * f - pad)), int(min(w, (x + ww) * f + pad)),
                          int(min(h, (y + hh) * f + pad))))
        return _merge(rects)

    def caption(self, image: np.ndarray) -> list[OcrLine]:
        """Text lines of one keyframe (BGR), in reading order."""
        h, w = image.shape[:2]
        if self._prev is None or not self.p.incremental or self._prev.shape != image.shape:
            lines = self._read(image)
        else:
            rects = self._changed_rects(self._prev, image)
            # widen to the old lines a change touches, so every line is read whole
            grown = True
            while grown and rects:
                grown = False
                for ln in self._lines:
                    for k, r in enumerate(rects):
                        if _intersects(ln.box, r) and _union(ln.box, r) != r:
                            rects[k] = _union(ln.box, r)
                            grown = True
                rects = _merge(rects)
            area = sum((r[2] - r[0]) * (r[3] - r[1]) for r in rects)
            if area > self.p.full_fraction * h * w:
                lines = self._read(image)
            else:
                kept = [ln for ln in self._lines if not any(_intersects(ln.box, r) for r in rects)]
                new: list[OcrLine] = []
                for r in rects:
                    new.extend(self._read(image[r[1]:r[3], r[0]:r[2]], r[0], r[1]))
                lines = kept + new
        lines = reading_order(lines)
        self._prev, self._lines = image, lines
        return lines
