"""Drawing screens (:class:`video.timeline.Screen`) with OpenCV: a desktop file-manager look.

Layout (proportions of the frame; every size scales with the frame height, 720 px = 1.0): a dark title bar with
the window title and the session clock, a toolbar with the breadcrumb and the search box, the file tree on the
left (28 % of the width), tabs and the main pane (preview / editor / diff / folder listing / search results, or two
panes side by side) on the right, a status line at the bottom; context menus and dialogs are drawn over it.

Text uses OpenCV's TrueType renderer (``cv2.FontFace``, OpenCV ≥ 5) with the built-in ``sans`` face or a
``.ttf``/``.otf`` path (``font``). A character that face has no glyph for (OpenCV draws ``?`` instead) is drawn with
the first font of :func:`rendering.glyphs.font_chain` that covers it — the Noto Sans CJK files of the
``justmytype-intl-cjk`` wheel for Chinese — so Chinese paths and content are readable without any system font.
OpenCV 5.0's wheel embedded a Unicode face behind ``sans``; 5.1's does not (``会议纪要`` came out as ``????``), which
is why coverage is probed per character instead of assumed. On OpenCV 4 (no ``FontFace``) the Hershey vector fonts
are used and characters outside ASCII are drawn as ``?`` — the video is still made, with a warning.
"""

from __future__ import annotations

import itertools
import logging
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from filegram_ray.errors import UserError
from video.timeline import Pane, Screen

log = logging.getLogger(__name__)

__all__ = ["FrameRenderer", "Layout", "layout"]

# colours (BGR)
BG = (250, 250, 250)
TITLE_BG = (54, 47, 43)
TOOL_BG = (243, 242, 240)
TREE_BG = (238, 236, 234)
TAB_BG = (226, 224, 222)
BORDER = (200, 198, 196)
TEXT = (34, 34, 34)
MUTED = (120, 120, 120)
WHITE = (255, 255, 255)
SELECT = (215, 120, 0)
FOLDER = (70, 180, 235)
ADD_BG = (214, 242, 214)
DEL_BG = (222, 222, 250)
HUNK_BG = (245, 232, 220)
STATUS_BG = (228, 228, 228)


@dataclass(frozen=True)
class Layout:
    """Pixel geometry for one frame size (all ints)."""

    width: int
    height: int
    scale: float
    font_px: int
    title_h: int
    tool_h: int
    status_h: int
    tree_w: int
    tab_h: int
    head_h: int
    line_h: int
    row_h: int

    @property
    def body_top(self) -> int:
        return self.title_h + self.tool_h + self.tab_h + self.head_h

    @property
    def body_bottom(self) -> int:
        return self.height - self.status_h

    @property
    def visible_lines(self) -> int:
        return max(1, (self.body_bottom - self.body_top - 6) // self.line_h)

    @property
    def tree_rows(self) -> int:
        return max(1, (self.body_bottom - self.title_h - self.tool_h - 8) // self.row_h)


def layout(width: int, height: int, font_px: int = 15) -> Layout:
    """Geometry of a ``width`` × ``height`` frame; ``font_px`` is the body text size at 720 p (scaled with height).

    Raises:
        ValueError: odd or too small dimensions (H.264 4:2:0 needs even sizes; below 320 × 180 nothing is legible).
    """
    if width % 2 or height % 2:
        raise UserError(f"frame size {width}x{height}: width and height must be even (yuv420p)")
    if width < 320 or height < 180:
        raise UserError(f"frame size {width}x{height}: at least 320x180")
    s = height / 720.0
    fp = max(8, int(round(font_px * s)))
    return Layout(width=width, height=height, scale=s, font_px=fp, title_h=int(34 * s), tool_h=int(40 * s),
                  status_h=2 * int(round(fp * 1.5)) + int(6 * s), tree_w=int(width * 0.28), tab_h=int(32 * s), head_h=int(30 * s),
                  line_h=int(round(fp * 1.45)), row_h=int(round(fp * 1.6)))


class _Text:
    """Text drawing and measuring with one font (TrueType when OpenCV has it, Hershey otherwise); characters the font
    lacks are drawn in runs with the first font of :func:`rendering.glyphs.font_chain` that has them."""

    def __init__(self, font: str = "sans"):
        import cv2

        self.cv2 = cv2
        self.face = None
        if hasattr(cv2, "FontFace"):
            self.face = cv2.FontFace(font)
        else:  # pragma: no cover - OpenCV 4
            log.warning("OpenCV %s has no TrueType text (cv2.FontFace); non-ASCII text is drawn as '?'",
                        cv2.__version__)
        self._w: dict[tuple[str, int, int], int] = {}
        self._has: dict[str, bool] = {}
        self._fallback: dict[int, object] = {}   # font_chain index -> cv2.FontFace
        self._run_cache: dict[str, list[tuple[object, str]]] = {}

    def _face_has(self, ch: str) -> bool:
        """Whether the main face draws ``ch`` itself: OpenCV draws a missing glyph as ``?``, so a character whose
        pixels equal those of ``?`` is missing (``?`` itself and blanks count as present)."""
        got = self._has.get(ch)
        if got is None:
            if ch.isascii() or ch.isspace():
                got = True
            else:
                def ink(t: str) -> np.ndarray:
                    im = np.zeros((48, 48), np.uint8)
                    self.cv2.putText(im, t, (4, 36), 255, self.face, 32, 400)
                    return im

                got = not np.array_equal(ink(ch), ink("?"))
            self._has[ch] = got
        return got

    def _face_of(self, ch: str):
        """The face that draws ``ch``: the main face when it has the glyph, else the face of the first chain font
        that covers ``ch`` (loaded once), else the main face (OpenCV then draws ``?``)."""
        if self._face_has(ch):
            return self.face
        from rendering.glyphs import font_chain, font_for

        i = font_for(ch)
        if i is None:
            return self.face
        face = self._fallback.get(i)
        if face is None:
            face = self._fallback[i] = self.cv2.FontFace(font_chain()[i].path)
        return face

    def _runs(self, text: str) -> list[tuple[object, str]]:
        """``text`` split into (face, run) pairs of consecutive characters drawn by one face (:meth:`_face_of`)."""
        if text.isascii() or self.face is None:
            return [(self.face, text)]
        runs = self._run_cache.get(text)
        if runs is None:
            runs = [(face, "".join(chars)) for face, chars in itertools.groupby(text, key=self._face_of)]
            if len(self._run_cache) > 20000:
                self._run_cache.clear()
            self._run_cache[text] = runs
        return runs

    def _run_width(self, face, text: str, size: int, weight: int) -> int:
        r = self.cv2.getTextSize((4096, 256), text, (0, size), face, size, weight)
        return int(r[2])

    def width(self, text: str, size: int, weight: int = 400) -> int:
        key = (text, size, weight)
        w = self._w.get(key)
        if w is None:
            if self.face is not None:
                w = sum(self._run_width(face, run, size, weight) for face, run in self._runs(text))
            else:  # pragma: no cover
                (w, _), _ = self.cv2.getTextSize(_ascii(text), self.cv2.FONT_HERSHEY_SIMPLEX, size / 30.0, 1)
            if len(self._w) > 20000:
                self._w.clear()
            self._w[key] = w
        return w

    def fit(self, text: str, size: int, max_w: int, weight: int = 400) -> str:
        """``text`` cut (with an ellipsis) to ``max_w`` pixels."""
        if max_w <= 0:
            return ""
        if self.width(text, size, weight) <= max_w:
            return text
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.width(text[:mid] + "...", size, weight) <= max_w:
                lo = mid
            else:
                hi = mid - 1
        return text[:lo] + "..." if lo else ""

    def draw(self, img: np.ndarray, text: str, x: int, y_top: int, size: int, color, weight: int = 400,
             max_w: int | None = None) -> None:
        """Draw ``text`` with its line box starting at ``y_top`` (baseline ≈ 0.8 × size below)."""
        if not text:
            return
        if max_w is not None:
            text = self.fit(text, size, max_w, weight)
        base = y_top + int(round(size * 0.82))
        if self.face is not None:
            x = int(x)
            runs = self._runs(text)
            for face, run in runs:
                self.cv2.putText(img, run, (x, base), color, face, size, weight)
                if len(runs) > 1:
                    x += self._run_width(face, run, size, weight)
        else:  # pragma: no cover
            self.cv2.putText(img, _ascii(text), (int(x), base), self.cv2.FONT_HERSHEY_SIMPLEX, size / 30.0, color,
                             1, self.cv2.LINE_AA)


def _ascii(text: str) -> str:
    return "".join(c if 32 <= ord(c) < 127 else "?" for c in text)


class FrameRenderer:
    """Draws :class:`~video.timeline.Screen` states as BGR frames of shape ``(height, width, 3)``, uint8.

    Identical screens are drawn once: the last ``cache_size`` drawn frames are kept by screen value.

    Args:
        width, height: frame size in pixels (even).
        font: ``"sans"`` (OpenCV's built-in face; characters it lacks come from the font chain) or a font file path.
        font_px: body text size at 720 p.
        cache_size: frames kept for reuse.
    """

    def __init__(self, width: int = 1280, height: int = 720, font: str = "sans", font_px: int = 15,
                 cache_size: int = 8):
        import cv2

        self.cv2 = cv2
        self.L = layout(width, height, font_px)
        self.t = _Text(font)
        self._cache: OrderedDict[Screen, np.ndarray] = OrderedDict()
        self.cache_size = cache_size
        self.drawn = 0

    # ------------------------------------------------------------------ public
    def render(self, screen: Screen) -> np.ndarray:
        """The frame of ``screen`` (a cached array: do not modify it)."""
        hit = self._cache.get(screen)
        if hit is not None:
            self._cache.move_to_end(screen)
            return hit
        img = self._draw(screen)
        self.drawn += 1
        self._cache[screen] = img
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return img

    # ------------------------------------------------------------------ drawing
    def _rect(self, img, x0, y0, x1, y1, color, thickness=-1):
        self.cv2.rectangle(img, (int(x0), int(y0)), (int(x1), int(y1)), color, thickness)

    def _draw(self, sc: Screen) -> np.ndarray:
        L, s = self.L, self.L.scale
        img = np.empty((L.height, L.width, 3), np.uint8)
        self._rect(img, 0, 0, L.width, L.height, BG)  # 0.5 ms; np.full / broadcasting a colour tuple take ~20 ms
        fp = L.font_px
        # title bar: window title + session clock
        self._rect(img, 0, 0, L.width, L.title_h, TITLE_BG)
        ty = (L.title_h - fp) // 2
        self.t.draw(img, f"Files - {sc.title}", int(14 * s), ty, fp, WHITE, 600, max_w=L.width // 2)
        cw = self.t.width(sc.clock, fp)
        self.t.draw(img, sc.clock, L.width - cw - int(16 * s), ty, fp, WHITE)
        # toolbar: breadcrumb + search box
        y0 = L.title_h
        self._rect(img, 0, y0, L.width, y0 + L.tool_h, TOOL_BG)
        self.cv2.line(img, (0, y0 + L.tool_h - 1), (L.width, y0 + L.tool_h - 1), BORDER, 1)
        crumb = "Workspace" + ("" if sc.cwd in ("", ".") else " / " + sc.cwd.replace("/", " / "))
        sw = int(320 * s)
        self.t.draw(img, crumb, int(14 * s), y0 + (L.tool_h - fp) // 2, fp, TEXT,
                    max_w=L.width - sw - int(50 * s))
        bx0, by0 = L.width - sw - int(14 * s), y0 + int(7 * s)
        self._rect(img, bx0, by0, bx0 + sw, y0 + L.tool_h - int(7 * s), WHITE)
        self._rect(img, bx0, by0, bx0 + sw, y0 + L.tool_h - int(7 * s), BORDER, 1)
        if sc.search:
            self.t.draw(img, sc.search, bx0 + int(10 * s), y0 + (L.tool_h - fp) // 2, fp, TEXT, max_w=sw - int(20 * s))
        else:
            self.t.draw(img, "Search files", bx0 + int(10 * s), y0 + (L.tool_h - fp) // 2, fp, MUTED)
        top = y0 + L.tool_h
        self._tree(img, sc, top)
        self._tabs(img, sc, top)
        # main pane(s)
        x0 = L.tree_w + 1
        if sc.right is None:
            self._pane(img, sc.body, x0, L.width)
        else:
            mid = (x0 + L.width) // 2
            self._pane(img, sc.body, x0, mid - 1)
            self.cv2.line(img, (mid, top + L.tab_h), (mid, L.body_bottom), BORDER, 2)
            self._pane(img, sc.right, mid + 2, L.width)
        # status line
        self._rect(img, 0, L.body_bottom, L.width, L.height, STATUS_BG)
        self.cv2.line(img, (0, L.body_bottom), (L.width, L.body_bottom), BORDER, 1)
        lh = int(round(fp * 1.5))
        for k, part in enumerate(self._wrap(sc.status, fp, L.width - int(28 * s), 2)):
            self.t.draw(img, part, int(14 * s), L.body_bottom + int(3 * s) + k * lh + (lh - fp) // 2, fp, TEXT,
                        max_w=L.width - int(28 * s))
        if sc.menu is not None:
            self._menu(img, sc, top)
        if sc.dialog is not None:
            self._dialog(img, sc)
        return img

    def _wrap(self, text: str, size: int, max_w: int, max_lines: int) -> list[str]:
        """``text`` broken at spaces into at most ``max_lines`` lines of ``max_w`` pixels (the last one cut)."""
        lines: list[str] = []
        rest = text
        while rest and len(lines) < max_lines - 1 and self.t.width(rest, size) > max_w:
            words = rest.split(" ")
            k = len(words) - 1
            while k > 1 and self.t.width(" ".join(words[:k]), size) > max_w:
                k -= 1
            lines.append(" ".join(words[:k]))
            rest = " ".join(words[k:])
        if rest:
            lines.append(rest)
        return lines

    def _tree_window(self, sc: Screen) -> tuple[int, list]:
        start = max(0, sc.tree_top)
        return start, list(sc.tree[start:start + self.L.tree_rows])

    def _tree(self, img, sc: Screen, top: int) -> None:
        L, s, fp = self.L, self.L.scale, self.L.font_px
        self._rect(img, 0, top, L.tree_w, L.body_bottom, TREE_BG)
        self.cv2.line(img, (L.tree_w, top), (L.tree_w, L.body_bottom), BORDER, 1)
        _, rows = self._tree_window(sc)
        y = top + int(6 * s)
        for r in rows:
            x = int(12 * s) + int(r.depth * 16 * s)
            sel = r.path == sc.selected
            if sel:
                self._rect(img, 2, y, L.tree_w - 2, y + L.row_h - 1, SELECT)
            color = WHITE if sel else TEXT
            cy = y + L.row_h // 2
            if r.is_dir:
                tri = int(4 * s) + 1
                if r.expanded:
                    pts = np.array([[x, cy - tri // 2], [x + 2 * tri, cy - tri // 2], [x + tri, cy + tri]], np.int32)
                else:
                    pts = np.array([[x, cy - tri], [x + tri + 2, cy], [x, cy + tri]], np.int32)
                self.cv2.fillPoly(img, [pts], color)
                ix = x + int(12 * s)
                self._rect(img, ix, cy - int(5 * s), ix + int(14 * s), cy + int(6 * s), FOLDER)
            else:
                ix = x + int(12 * s)
                self._rect(img, ix + 1, cy - int(7 * s), ix + int(11 * s), cy + int(7 * s), WHITE)
                self._rect(img, ix + 1, cy - int(7 * s), ix + int(11 * s), cy + int(7 * s), MUTED, 1)
            tx = ix + int(20 * s)
            self.t.draw(img, r.name, tx, y + (L.row_h - fp) // 2, fp, color, max_w=L.tree_w - tx - int(8 * s))
            y += L.row_h

    def _row_y(self, sc: Screen, path: str, top: int) -> int:
        start, rows = self._tree_window(sc)
        for i, r in enumerate(rows):
            if r.path == path:
                return top + int(6 * self.L.scale) + i * self.L.row_h
        return top + int(6 * self.L.scale)

    def _tabs(self, img, sc: Screen, top: int) -> None:
        L, s, fp = self.L, self.L.scale, self.L.font_px
        x = L.tree_w + 1
        self._rect(img, x, top, L.width, top + L.tab_h, TAB_BG)
        tw = int(180 * s)
        for i, name in enumerate(sc.tabs):
            x0, x1 = x + i * tw, x + (i + 1) * tw - 2
            if x1 > L.width:
                break
            active = i == sc.active_tab
            self._rect(img, x0, top + 2, x1, top + L.tab_h, WHITE if active else (234, 232, 230))
            if active:
                self._rect(img, x0, top + 2, x1, top + 2 + max(2, int(3 * s)), SELECT)
            self.t.draw(img, name, x0 + int(10 * s), top + (L.tab_h - fp) // 2 + 1, fp, TEXT if active else MUTED,
                        max_w=tw - int(20 * s))

    def _pane(self, img, p: Pane, x0: int, x1: int) -> None:
        L, s, fp = self.L, self.L.scale, self.L.font_px
        htop = L.title_h + L.tool_h + L.tab_h
        self._rect(img, x0, htop, x1, htop + L.head_h, (246, 246, 246))
        self.cv2.line(img, (x0, htop + L.head_h - 1), (x1, htop + L.head_h - 1), BORDER, 1)
        self.t.draw(img, p.title, x0 + int(12 * s), htop + (L.head_h - fp) // 2, fp, TEXT, 600,
                    max_w=x1 - x0 - int(24 * s))
        y = L.body_top + int(4 * s)
        gutter = int(46 * s) if p.first_line else 0
        for i, line in enumerate(p.lines):
            if y + L.line_h > L.body_bottom:
                break
            style = p.styles[i] if i < len(p.styles) else ""
            bg = {"+": ADD_BG, "-": DEL_BG, "@": HUNK_BG}.get(style)
            if bg is not None:
                self._rect(img, x0, y, x1, y + L.line_h - 1, bg)
            if gutter:
                num = str(p.first_line + i)
                self.t.draw(img, num, x0 + gutter - int(10 * s) - self.t.width(num, fp), y + (L.line_h - fp) // 2,
                            fp, MUTED)
            tx = x0 + int(12 * s) + gutter
            self.t.draw(img, line.expandtabs(4), tx, y + (L.line_h - fp) // 2, fp, TEXT, max_w=x1 - tx - int(8 * s))
            y += L.line_h

    def _menu(self, img, sc: Screen, top: int) -> None:
        L, s, fp = self.L, self.L.scale, self.L.font_px
        m = sc.menu
        ih = int(fp * 1.7)
        w = int(190 * s)
        x0 = int(L.tree_w * 0.45)
        y0 = min(self._row_y(sc, m.path, top) + L.row_h, L.body_bottom - ih * len(m.items) - 6)
        self._rect(img, x0 + 4, y0 + 4, x0 + w + 4, y0 + ih * len(m.items) + 8, (190, 190, 190))
        self._rect(img, x0, y0, x0 + w, y0 + ih * len(m.items) + 4, WHITE)
        self._rect(img, x0, y0, x0 + w, y0 + ih * len(m.items) + 4, BORDER, 1)
        for i, item in enumerate(m.items):
            yy = y0 + 2 + i * ih
            act = item == m.active
            if act:
                self._rect(img, x0 + 2, yy, x0 + w - 2, yy + ih - 1, SELECT)
            self.t.draw(img, item, x0 + int(14 * s), yy + (ih - fp) // 2, fp, WHITE if act else TEXT)

    def _dialog(self, img, sc: Screen) -> None:
        L, s, fp = self.L, self.L.scale, self.L.font_px
        d = sc.dialog
        w, lh = int(560 * s), int(fp * 1.8)
        h = int(38 * s) + lh * len(d.lines) + int(56 * s)
        x0, y0 = (L.width - w) // 2, (L.height - h) // 2
        # dim the window behind the dialog
        self.cv2.convertScaleAbs(img, img, 0.75, 0)
        self._rect(img, x0, y0, x0 + w, y0 + h, WHITE)
        self._rect(img, x0, y0, x0 + w, y0 + int(38 * s), (236, 236, 236))
        self._rect(img, x0, y0, x0 + w, y0 + h, BORDER, 1)
        self.t.draw(img, d.title, x0 + int(16 * s), y0 + (int(38 * s) - fp) // 2, fp, TEXT, 600)
        y = y0 + int(38 * s) + int(8 * s)
        for line in d.lines:
            self.t.draw(img, line, x0 + int(16 * s), y, fp, TEXT, max_w=w - int(32 * s))
            y += lh
        bw, bh = int(110 * s), int(30 * s)
        bx = x0 + w - int(16 * s)
        for i, b in enumerate(reversed(d.buttons)):
            bx0 = bx - bw
            default = i == 0
            self._rect(img, bx0, y0 + h - bh - int(12 * s), bx, y0 + h - int(12 * s), SELECT if default else TOOL_BG)
            tw = self.t.width(b, fp)
            self.t.draw(img, b, bx0 + (bw - tw) // 2, y0 + h - bh - int(12 * s) + (bh - fp) // 2, fp,
                        WHITE if default else TEXT)
            bx = bx0 - int(10 * s)
