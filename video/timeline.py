"""GUI operation sequences: a trajectory's kept events → timed on-screen gestures → screen states.

The event → gesture table follows reference §11 (the authors' replay recorder):

============================  =======================================================================
event (kept, reference §4)    gesture on screen
============================  =======================================================================
``file_read``                 click the file in the tree, its tab opens, the preview shows the read lines
                              (scrolled so the last line of ``view_range`` is visible)
``file_write``                an editor tab appears and the content is typed in, then saved
``file_edit``                 a diff view of the change (``-``/``+`` lines from the unified diff)
``file_move`` / ``file_copy``   context menu Cut / Copy on the file, context menu Paste on the destination folder
``file_rename``               context menu Rename, a rename dialog with the old and new name
``file_delete``               context menu Delete, a confirmation dialog
``file_search``               the query is typed into the search box, the result list appears
``file_browse``               the folder expands in the tree, its listing fills the main pane
``dir_create``                context menu New Folder on the parent, a name dialog, the folder appears
``context_switch``            tab switch (the read's tab becomes the active one)
``cross_file_reference``      side-by-side view: the source file on the left, the target on the right
============================  =======================================================================

A ``context_switch`` / ``cross_file_reference`` is emitted by the engine just before the read or edit that caused
it, at the same timestamp (reference §3.3); they are folded into that gesture (tab switch + side-by-side final
view) so one gesture shows one user action. Orphans become gestures of their own.

Timing (the recorder's speed factor, reference §11): a gesture starts at the video time of its event; its length is
the gap to the next event's timestamp divided by ``speed``, clamped to ``[min_gesture_s, max_gesture_s]`` (the
clamp keeps long think-pauses from filling the video and makes every gesture long enough to read and to be picked
as a keyframe). Within a gesture, transient states (menus, dialogs, typing) get fixed short times and the final
state — which always carries everything needed to read the operation back: status line, clock, panes — gets the
rest. Every screen shows the session clock (the event's timestamp, UTC) in the title bar.

Everything here is deterministic: same events, same timeline, same screens.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from filegram_ray.errors import UserError

__all__ = [
    "Dialog",
    "Gesture",
    "Menu",
    "Pane",
    "Screen",
    "Step",
    "Timeline",
    "TimingParams",
    "TreeRow",
    "build_timeline",
    "group_events",
    "status_text",
]

#: Kept event types (reference §4); anything else in an events list is ignored.
KEPT = frozenset({"file_read", "file_write", "file_edit", "file_search", "file_browse", "file_rename", "file_move",
                  "dir_create", "file_delete", "file_copy", "context_switch", "cross_file_reference"})
#: Gesture kind of each event type (reference §11 table; context_switch/cross_file_reference fold into reads/edits).
GESTURE_OF = {"file_read": "read", "file_write": "write", "file_edit": "edit", "file_search": "search",
              "file_browse": "browse", "file_rename": "rename", "file_move": "move", "dir_create": "dir_create",
              "file_delete": "delete", "file_copy": "copy", "context_switch": "tab_switch",
              "cross_file_reference": "side_by_side"}
#: Context menu of a tree row (what a desktop file manager offers); the highlighted item is the gesture's action.
MENU_ITEMS = ("Open", "New Folder", "New File", "Rename", "Copy", "Cut", "Paste", "Delete")
#: Transient-state lengths in seconds (menus, dialogs, one typing step): short, so the final state dominates.
MENU_S, DIALOG_S, TYPE_STEP_S = 0.35, 0.35, 0.15
#: Lines of the referenced (left) file in a side-by-side view.
SIDE_LINES = 8
#: Open tabs at most.
MAX_TABS = 6
#: Version of the gesture timeline and the screens: part of a recording's options key, so a rerun of the record
#: stage after a change of the look re-records instead of keeping videos made the old way.
TIMELINE_VERSION = 4


@dataclass(frozen=True)
class TimingParams:
    """Gesture timing (reference §11: the replay recorder plays at the events' offsets times a speed factor).

    Attributes:
        speed: playback speed factor (1.0 = real time, as the authors' recorder; larger = faster).
        min_gesture_s / max_gesture_s: clamp of one gesture's length in seconds.
        lead_in_s / tail_s: the idle workspace shown before the first and after the last gesture, seconds.
    """

    speed: float = 4.0
    min_gesture_s: float = 1.4
    max_gesture_s: float = 4.0
    lead_in_s: float = 1.0
    tail_s: float = 1.0

    def __post_init__(self):
        if self.speed <= 0:
            raise UserError(f"speed must be > 0, got {self.speed}")
        if not 0 < self.min_gesture_s <= self.max_gesture_s:
            raise UserError(f"need 0 < min_gesture_s <= max_gesture_s, got {self.min_gesture_s}, "
                             f"{self.max_gesture_s}")


# ------------------------------------------------------------------------------------------------ screen states
@dataclass(frozen=True)
class TreeRow:
    """One row of the file tree: ``depth`` (0 = top level), display ``name``, ``path`` (relative), folder flags."""

    depth: int
    name: str
    path: str
    is_dir: bool
    expanded: bool = False


@dataclass(frozen=True)
class Pane:
    """The main (right) pane.

    Attributes:
        kind: ``empty`` | ``preview`` | ``editor`` | ``diff`` | ``folder`` | ``results``.
        title: the pane's header line.
        lines: body lines (already cut to what is visible).
        first_line: number of the first line for a numbered gutter (preview); 0 = no gutter.
        styles: per line ``""`` or a diff marker ``"+"``, ``"-"``, ``"@"``.
    """

    kind: str = "empty"
    title: str = ""
    lines: tuple[str, ...] = ()
    first_line: int = 0
    styles: tuple[str, ...] = ()


@dataclass(frozen=True)
class Menu:
    """A context menu opened on the tree row of ``path`` with item ``active`` highlighted."""

    path: str
    active: str
    items: tuple[str, ...] = MENU_ITEMS


@dataclass(frozen=True)
class Dialog:
    """A modal dialog: ``title``, body ``lines`` and ``buttons`` (the last one is the default)."""

    title: str
    lines: tuple[str, ...]
    buttons: tuple[str, ...] = ("Cancel", "OK")


@dataclass(frozen=True)
class Screen:
    """Everything drawn in one frame; hashable, so identical screens are drawn once.

    ``right`` is the right half of a side-by-side view (then ``body`` is the left half); ``tree_top`` is the first
    tree row shown (the tree scrolls only when the selection leaves the visible rows).
    """

    title: str
    clock: str
    cwd: str
    search: str
    tree: tuple[TreeRow, ...]
    selected: str
    tabs: tuple[str, ...]
    active_tab: int
    body: Pane
    right: Pane | None = None
    menu: Menu | None = None
    dialog: Dialog | None = None
    status: str = ""
    tree_top: int = 0


@dataclass(frozen=True)
class Step:
    """One screen state held for ``frames`` frames; ``action`` names the GUI action that produced it."""

    screen: Screen
    frames: int
    action: str


@dataclass
class Gesture:
    """One on-screen operation: its events (indices into the kept-event list), kind, video time span and the
    session timestamp (epoch ms) it shows."""

    kind: str
    events: list[int]
    start_s: float
    duration_s: float
    timestamp_ms: float
    actions: list[str] = field(default_factory=list)
    summary: str = ""


@dataclass
class Timeline:
    """The GUI operation sequence of one trajectory.

    Attributes:
        gestures: in order; ``steps`` hold the screens, ``frames`` their total (``sum(s.frames)``).
        fps: frames per second the step lengths were computed for.
    """

    gestures: list[Gesture]
    steps: list[Step]
    fps: int

    @property
    def frames(self) -> int:
        return sum(s.frames for s in self.steps)

    @property
    def duration_s(self) -> float:
        return self.frames / self.fps

    def to_json(self) -> dict[str, Any]:
        """The operation sequence as JSON (gestures with their actions; no pixels)."""
        return {"fps": self.fps, "frames": self.frames, "duration_s": round(self.duration_s, 3),
                "gestures": [asdict(g) for g in self.gestures]}


# ------------------------------------------------------------------------------------------------ file system model
class _Fs:
    """The workspace as the user sees it: files (with where their content comes from) and folders."""

    def __init__(self, files: Sequence[str]):
        self.files: dict[str, tuple[str, str]] = {}  # path -> ("origin", original path) | ("text", content)
        self.dirs: set[str] = set()
        for f in files:
            f = f.strip("/")
            if f:
                self.files[f] = ("origin", f)
                self._add_parents(f)

    def _add_parents(self, path: str) -> None:
        d = posixpath.dirname(path)
        while d and d not in self.dirs:
            self.dirs.add(d)
            d = posixpath.dirname(d)

    def is_dir(self, path: str) -> bool:
        return path in self.dirs

    def add_file(self, path: str, source: tuple[str, str]) -> None:
        self.files[path] = source
        self._add_parents(path)

    def add_dir(self, path: str) -> None:
        if path and path != ".":
            self.dirs.add(path)
            self._add_parents(path)

    def move(self, old: str, new: str, copy: bool = False) -> None:
        if old in self.dirs or any(f.startswith(old + "/") for f in self.files):
            for f in [f for f in self.files if f.startswith(old + "/")]:
                src = self.files[f]
                if not copy:
                    del self.files[f]
                self.add_file(new + f[len(old):], src)
            for d in [d for d in self.dirs if d == old or d.startswith(old + "/")]:
                if not copy:
                    self.dirs.discard(d)
                self.add_dir(new + d[len(old):])
            return
        src = self.files.get(old, ("origin", old))
        if not copy:
            self.files.pop(old, None)
        self.add_file(new, src)

    def delete(self, path: str) -> None:
        self.files.pop(path, None)
        for f in [f for f in self.files if f.startswith(path + "/")]:
            del self.files[f]
        for d in [d for d in self.dirs if d == path or d.startswith(path + "/")]:
            self.dirs.discard(d)

    def children(self, folder: str) -> list[tuple[str, bool]]:
        """``(path, is_dir)`` directly under ``folder`` ("" = top level): folders first, then files, by name."""
        pre = "" if folder in ("", ".") else folder + "/"
        dirs = sorted(d for d in self.dirs if d.startswith(pre) and "/" not in d[len(pre):])
        files = sorted(f for f in self.files if f.startswith(pre) and "/" not in f[len(pre):])
        return [(d, True) for d in dirs] + [(f, False) for f in files]

    def rows(self, expanded: set[str]) -> tuple[TreeRow, ...]:
        out: list[TreeRow] = []

        def walk(folder: str, depth: int) -> None:
            for path, is_dir in self.children(folder):
                exp = is_dir and path in expanded
                out.append(TreeRow(depth, posixpath.basename(path), path, is_dir, exp))
                if exp:
                    walk(path, depth + 1)

        walk("", 0)
        return tuple(out)


# ------------------------------------------------------------------------------------------------ helpers
def _ancestors(path: str) -> list[str]:
    out, d = [], posixpath.dirname(path)
    while d:
        out.append(d)
        d = posixpath.dirname(d)
    return out


def _clock(ts_ms: float) -> str:
    """``YYYY-MM-DD HH:MM:SS`` (UTC) of an epoch-ms timestamp."""
    return datetime.fromtimestamp(ts_ms / 1000.0, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _lines(text: str | None) -> list[str]:
    if not text:
        return []
    return [ln.rstrip() for ln in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]


def _diff_lines(diff: str | None, before: str | None, after: str | None) -> tuple[list[str], list[str]]:
    """Diff body lines and their styles: the unified diff without its ``---``/``+++`` header, or a whole-text
    replacement when only the two versions are known."""
    rows, styles = [], []
    if diff:
        for ln in _lines(diff):
            if ln.startswith(("---", "+++")):
                continue
            mark = ln[:1] if ln[:1] in "+-@" else ""
            rows.append(ln)
            styles.append(mark)
    elif before is not None or after is not None:
        for ln in _lines(before):
            rows.append("-" + ln)
            styles.append("-")
        for ln in _lines(after):
            rows.append("+" + ln)
            styles.append("+")
    return rows, styles


def status_text(kind: str, ev: dict[str, Any]) -> str:
    """The status-line message of a gesture's final state (what the operation did, in file-manager words).

    This line and the title-bar clock are what :mod:`video.reconstruct` reads back; the grammar is fixed:

    ``Opened PATH, lines A-B[, view N]`` · ``Saved new file PATH, N chars`` · ``Saved PATH, N chars (replaced)`` ·
    ``Saved PATH, +A -D lines`` · ``Search "Q": N matches (grep|glob)`` · ``Opened folder PATH, N items`` ·
    ``Created folder PATH`` · ``Moved OLD to NEW`` · ``Renamed OLD to NEW`` · ``Copied OLD to NEW`` ·
    ``Deleted PATH`` · ``Switched to PATH`` · ``Side by side: SRC | DST``; a read or edit shown next to the file
    it refers to (``cross_file_reference``) adds ``, side by side with SRC``.
    """
    g = ev.get
    if kind == "read":
        vr = g("view_range") or [1, 1]
        s = f"Opened {g('file_path', '')}, lines {int(vr[0])}-{int(vr[-1])}"
        if int(g("view_count") or 1) > 1:
            s += f", view {int(g('view_count'))}"
        return s
    if kind == "write":
        if g("operation") == "overwrite":
            return f"Saved {g('file_path', '')}, {int(g('content_length') or 0)} chars (replaced)"
        return f"Saved new file {g('file_path', '')}, {int(g('content_length') or 0)} chars"
    if kind == "edit":
        return f"Saved {g('file_path', '')}, +{int(g('lines_added') or 0)} -{int(g('lines_deleted') or 0)} lines"
    if kind == "search":
        return f"Search \"{g('query', '')}\": {int(g('files_matched') or 0)} matches ({g('search_type') or 'grep'})"
    if kind == "browse":
        return f"Opened folder {g('directory_path') or '.'}, {int(g('files_listed') or 0)} items"
    if kind == "dir_create":
        return f"Created folder {g('dir_path', '')}"
    if kind in ("move", "rename"):
        return f"{'Moved' if kind == 'move' else 'Renamed'} {g('old_path', '')} to {g('new_path', '')}"
    if kind == "copy":
        return f"Copied {g('source_path', '')} to {g('dest_path', '')}"
    if kind == "delete":
        return f"Deleted {g('file_path', '')}"
    if kind == "tab_switch":
        return f"Switched to {g('to_file', '')}"
    if kind == "side_by_side":
        return f"Side by side: {g('source_file', '')} | {g('target_file', '')}"
    return ""


def group_events(events: Sequence[dict[str, Any]]) -> list[list[int]]:
    """Indices of the kept events grouped per gesture: a ``context_switch`` / ``cross_file_reference`` joins the
    read or edit that follows it at the same timestamp (± 1 ms) on its target file; other events stand alone."""
    groups: list[list[int]] = []
    pending: list[int] = []
    for i, ev in enumerate(events):
        t = ev.get("event_type")
        if t not in KEPT:
            continue
        if t in ("context_switch", "cross_file_reference"):
            pending.append(i)
            continue
        if t in ("file_read", "file_edit") and pending:
            ts, path = float(ev.get("timestamp") or 0.0), ev.get("file_path")
            attach = [j for j in pending if abs(float(events[j].get("timestamp") or 0.0) - ts) <= 1.0
                      and (events[j].get("to_file") or events[j].get("target_file")) == path]
            groups.extend([j] for j in pending if j not in attach)
            groups.append(attach + [i])
        else:
            groups.extend([j] for j in pending)
            groups.append([i])
        pending = []
    groups.extend([j] for j in pending)
    return groups


# ------------------------------------------------------------------------------------------------ the director
class _Director:
    """Walks the gestures, keeps the UI state (tree, tabs, selection, search box) and emits screens."""

    def __init__(self, title: str, files: Sequence[str], text_of: Callable[[str], str | None],
                 media_of: Callable[[Any], str | None], fps: int, visible_lines: int, tree_rows: int):
        self.fs = _Fs(files)
        self.text_of, self.media_of = text_of, media_of
        self.title, self.fps = title, fps
        self.visible, self.tree_rows = visible_lines, tree_rows
        self.expanded: set[str] = set()
        self.selected = ""
        self.tabs: list[str] = []
        self.active = -1
        self._used: dict[str, int] = {}
        self._tick = 0
        self.tree_top = 0
        self.search = ""
        self.clock = ""
        self.cwd = "."
        self.body = Pane("empty", "")
        self.status = "Ready"
        self._cache: dict[str, list[str]] = {}

    # ---- content
    def content(self, path: str) -> list[str]:
        src = self.fs.files.get(path)
        if src is None:
            return []
        kind, val = src
        if kind == "text":
            return _lines(val)
        if val not in self._cache:
            try:
                self._cache[val] = _lines(self.text_of(val))
            except Exception:  # noqa: BLE001 - a file we cannot show is shown empty, never a failed video
                self._cache[val] = []
        return self._cache[val]

    # ---- state updates
    def select(self, path: str) -> None:
        self.selected = path
        self.expanded.update(_ancestors(path))
        self.cwd = posixpath.dirname(path) or "."

    def open_tab(self, path: str) -> None:
        """Activate the tab of ``path``, opening it in a free slot or in place of the least recently used tab (the
        other tabs keep their places, as in editors that recycle preview tabs)."""
        name = posixpath.basename(path)
        self._tick += 1
        if name in self.tabs:
            self.active = self.tabs.index(name)
        elif len(self.tabs) < MAX_TABS:
            self.tabs.append(name)
            self.active = len(self.tabs) - 1
        else:
            self.active = min(range(len(self.tabs)), key=lambda i: self._used.get(self.tabs[i], 0))
            self._used.pop(self.tabs[self.active], None)
            self.tabs[self.active] = name
        self._used[name] = self._tick

    def screen(self, *, body: Pane | None = None, right: Pane | None = None, menu: Menu | None = None,
               dialog: Dialog | None = None, status: str | None = None, search: str | None = None) -> Screen:
        rows = self.fs.rows(self.expanded)
        n = self.tree_rows
        idx = next((i for i, r in enumerate(rows) if r.path == self.selected), None)
        if idx is not None and not self.tree_top <= idx < self.tree_top + n:  # scroll a page, keeping context
            self.tree_top = idx - 2 if idx < self.tree_top else idx - n + 3
        self.tree_top = max(0, min(self.tree_top, len(rows) - n))
        return Screen(title=self.title, clock=self.clock, cwd=self.cwd,
                      search=self.search if search is None else search, tree=rows,
                      selected=self.selected, tabs=tuple(self.tabs), active_tab=self.active,
                      body=self.body if body is None else body, right=right, menu=menu, dialog=dialog,
                      status=self.status if status is None else status, tree_top=self.tree_top)

    def preview(self, path: str, view_range: Sequence[int] | None) -> Pane:
        lines = self.content(path)
        a, b = (int(view_range[0]), int(view_range[-1])) if view_range else (1, max(1, len(lines)))
        a = max(1, a)
        # scrolled so that the last read line is on screen (reference §11: read = preview + scroll)
        first = max(a, b - self.visible + 1)
        shown = tuple(lines[first - 1:first - 1 + self.visible])
        if not lines:
            shown = ("(no preview available)",)
            first = 0
        return Pane("preview", f"{path}  -  lines {a}-{b}", shown, first)

    def side_pane(self, path: str) -> Pane:
        """The referenced file in a side-by-side view: its first :data:`SIDE_LINES` lines (the reader glances at
        it; the file being read or edited gets the full pane)."""
        p = self.preview(path, None)
        return replace(p, title=path, lines=p.lines[:SIDE_LINES])

    # ---- gestures → steps
    def steps_for(self, kind: str, evs: list[dict[str, Any]], total: int) -> list[tuple[Screen, int, str]]:
        """Screens of one gesture; the frame counts sum to ``total`` (the final state takes what is left)."""
        main = evs[-1]
        fr = lambda s: max(1, int(round(s * self.fps)))  # noqa: E731
        # every gesture begins with the pointer's click: the status line says the application is busy. So two
        # identical operations in a row (a folder listed twice) are two visible changes, never one still picture.
        out: list[tuple[Screen, int, str]] = [(self.screen(status="Working..."), fr(TYPE_STEP_S), "click")]
        if kind == "read":
            path = main.get("file_path", "")
            cross = next((e for e in evs if e.get("event_type") == "cross_file_reference"), None)
            switched = any(e.get("event_type") == "context_switch" for e in evs)
            self.select(path)
            self.open_tab(path)
            pane = self.preview(path, main.get("view_range"))
            self.status = status_text("read", main)
            if cross is not None:
                src = cross.get("source_file", "")
                self.status += f", side by side with {src}"
                left = self.side_pane(src)
                out.append((self.screen(body=pane), fr(0.3), "tab_switch" if switched else "open"))
                self.body = pane
                out.append((self.screen(body=left, right=pane), 0, "side_by_side"))
            else:
                self.body = pane
                out.append((self.screen(), 0, "tab_switch+preview" if switched else "click+preview"))
        elif kind == "write":
            path = main.get("file_path", "")
            content = self.media_of(main.get("media_ref"))
            if content is None:
                content = "(content not stored)"
            lines = _lines(content)
            self.fs.add_file(path, ("text", content))
            self.select(path)
            self.open_tab(path)
            head = f"{'Overwrite' if main.get('operation') == 'overwrite' else 'New file'}: {path}"
            vis = lines[:self.visible]
            out.append((self.screen(body=Pane("editor", head, ()), status=f"Editing {path}"), fr(0.3), "open_editor"))
            for k in (1, 2):
                part = tuple(vis[:max(1, len(vis) * k // 3)])
                out.append((self.screen(body=Pane("editor", head, part), status=f"Editing {path}"),
                            fr(TYPE_STEP_S), "type"))
            self.body = Pane("editor", head, tuple(vis))
            self.status = status_text("write", main)
            out.append((self.screen(), 0, "save"))
        elif kind == "edit":
            path = main.get("file_path", "")
            before = self.media_of(main.get("media_ref_old"))
            after = self.media_of(main.get("media_ref_new"))
            diff = self.media_of(main.get("media_ref_diff"))
            rows, styles = _diff_lines(diff, before, after)
            if after is not None:
                self.fs.add_file(path, ("text", after))
            self.select(path)
            self.open_tab(path)
            pane = Pane("diff", f"Edit: {path}  (+{int(main.get('lines_added') or 0)} "
                                f"-{int(main.get('lines_deleted') or 0)})",
                        tuple(rows[:self.visible]), 0, tuple(styles[:self.visible]))
            self.status = status_text("edit", main)
            cross = next((e for e in evs if e.get("event_type") == "cross_file_reference"), None)
            if cross is not None:
                src = cross.get("source_file", "")
                self.status += f", side by side with {src}"
                left = self.side_pane(src)
                out.append((self.screen(body=pane), fr(0.3), "open_diff"))
                self.body = pane
                out.append((self.screen(body=left, right=pane), 0, "side_by_side+save"))
            else:
                self.body = pane
                out.append((self.screen(), 0, "diff+save"))
        elif kind == "search":
            q = str(main.get("query", ""))
            out.append((self.screen(search=q[:max(1, len(q) // 2)], status="Searching..."), fr(TYPE_STEP_S),
                        "type_query"))
            self.search = q
            low = q.lower().strip("*")
            hits = [p for p in sorted(self.fs.files) if low and low in p.lower()][:self.visible]
            self.body = Pane("results", f"Search results for \"{q}\"", tuple(hits) or ("(matches inside files)",))
            self.status = status_text("search", main)
            out.append((self.screen(), 0, "search"))
        elif kind == "browse":
            d = str(main.get("directory_path") or ".")
            d = "" if d == "." else d
            if d:
                self.fs.add_dir(d)
                self.expanded.add(d)
                self.select(d)
            self.cwd = d or "."
            entries = [posixpath.basename(p) + ("/" if is_dir else "") for p, is_dir in self.fs.children(d)]
            self.body = Pane("folder", f"Folder: {d or '.'}", tuple(entries[:self.visible]))
            self.status = status_text("browse", main)
            out.append((self.screen(), 0, "expand_folder"))
        elif kind == "dir_create":
            path = str(main.get("dir_path", ""))
            parent = posixpath.dirname(path)
            if parent:
                self.fs.add_dir(parent)
                self.select(parent)
            busy = f"Selected {parent or '.'}"
            out.append((self.screen(menu=Menu(parent or self.selected or "", "New Folder"), status=busy), fr(MENU_S),
                        "context_menu:New Folder"))
            out.append((self.screen(dialog=Dialog("New Folder", (f"Name: {posixpath.basename(path)}",
                                                                 f"In: {parent or '.'}"), ("Cancel", "Create")),
                                    status=busy), fr(DIALOG_S), "dialog:New Folder"))
            self.fs.add_dir(path)
            self.select(path)
            self.expanded.add(path)
            self.status = status_text("dir_create", main)
            out.append((self.screen(), 0, "create_folder"))
        elif kind in ("move", "copy", "rename"):
            old = str(main.get("old_path") or main.get("source_path") or "")
            new = str(main.get("new_path") or main.get("dest_path") or "")
            if old in self.fs.files or old in self.fs.dirs:
                self.select(old)
            verb = {"move": "Cut", "copy": "Copy", "rename": "Rename"}[kind]
            busy = f"Selected {old}"
            out.append((self.screen(menu=Menu(old, verb), status=busy), fr(MENU_S), f"context_menu:{verb}"))
            if kind == "rename":
                out.append((self.screen(dialog=Dialog("Rename", (f"From: {posixpath.basename(old)}",
                                                                  f"To: {posixpath.basename(new)}"),
                                                      ("Cancel", "Rename")), status=busy), fr(DIALOG_S),
                            "dialog:Rename"))
            else:
                dest = posixpath.dirname(new)
                if dest:
                    self.fs.add_dir(dest)
                    self.expanded.update([dest, *_ancestors(dest)])
                out.append((self.screen(menu=Menu(dest or ".", "Paste"), status=busy), fr(MENU_S),
                            "context_menu:Paste"))
            self.fs.move(old, new, copy=(kind == "copy"))
            self.select(new)
            self.status = status_text(kind, main)
            out.append((self.screen(), 0, kind))
        elif kind == "delete":
            path = str(main.get("file_path", ""))
            if path in self.fs.files or path in self.fs.dirs:
                self.select(path)
            busy = f"Selected {path}"
            out.append((self.screen(menu=Menu(path, "Delete"), status=busy), fr(MENU_S), "context_menu:Delete"))
            out.append((self.screen(dialog=Dialog("Delete", (f"Delete {path}?", "This cannot be undone."),
                                                  ("Cancel", "Delete")), status=busy), fr(DIALOG_S),
                        "dialog:Delete"))
            self.fs.delete(path)
            name = posixpath.basename(path)
            if name in self.tabs:
                idx = self.tabs.index(name)
                self.tabs.pop(idx)
                self._used.pop(name, None)
                self.active = min(self.active, len(self.tabs) - 1)
            self.selected = posixpath.dirname(path)
            self.status = status_text("delete", main)
            out.append((self.screen(), 0, "delete"))
        elif kind == "tab_switch":
            path = str(main.get("to_file", ""))
            self.select(path)
            self.open_tab(path)
            self.body = self.preview(path, None)
            self.status = status_text("tab_switch", main)
            out.append((self.screen(), 0, "tab_switch"))
        elif kind == "side_by_side":
            src, dst = str(main.get("source_file", "")), str(main.get("target_file", ""))
            left = self.side_pane(src)
            right = self.preview(dst, None)
            self.status = status_text("side_by_side", main)
            out.append((self.screen(body=left, right=right), 0, "side_by_side"))
        # the final state takes the frames the transient ones leave (at least 1)
        used = sum(n for _, n, _ in out[:-1])
        last = out[-1]
        out[-1] = (last[0], max(1, total - used), last[2])
        return out


def build_timeline(events: Sequence[dict[str, Any]], *, initial_files: Sequence[str] = (),
                   text_of: Callable[[str], str | None] = lambda p: None,
                   media_of: Callable[[Any], str | None] = lambda ref: None, title: str = "Workspace",
                   fps: int = 15, timing: TimingParams | None = None, visible_lines: int = 22,
                   tree_rows: int = 24) -> Timeline:
    """Turn a trajectory's kept events into a GUI operation sequence.

    Args:
        events: the trajectory's events (``events.json``; non-kept types are skipped), in order.
        initial_files: relative paths in the workspace before the first event (the first ``fs_snapshot``).
        text_of: ``original path -> text`` of a workspace file for previews (None = no preview).
        media_of: ``MediaRef -> text`` (written content, diffs; reference §2.2).
        title: window title.
        fps: frames per second (step lengths are whole frames).
        timing: :class:`TimingParams`.
        visible_lines: body lines shown at once (set by the frame size; :func:`video.frames.layout`).
        tree_rows: tree rows shown at once.

    Returns:
        The :class:`Timeline`: gestures (with event indices) and the screens to draw.

    Raises:
        ValueError: ``fps`` < 1.
    """
    if fps < 1:
        raise UserError(f"fps must be >= 1, got {fps}")
    timing = timing or TimingParams()
    d = _Director(title, initial_files, text_of, media_of, fps, visible_lines, tree_rows)
    groups = group_events(events)
    first_ts = float(events[groups[0][-1]].get("timestamp") or 0.0) if groups else 0.0
    d.clock = _clock(first_ts)
    steps: list[Step] = [Step(d.screen(), max(1, int(round(timing.lead_in_s * fps))), "idle")]
    gestures: list[Gesture] = []
    t_frames = steps[0].frames
    for gi, grp in enumerate(groups):
        evs = [events[i] for i in grp]
        main = evs[-1]
        kind = GESTURE_OF[main["event_type"]]
        ts = float(main.get("timestamp") or 0.0)
        if gi + 1 < len(groups):
            gap_s = (float(events[groups[gi + 1][-1]].get("timestamp") or ts) - ts) / 1000.0
        else:
            gap_s = timing.max_gesture_s * timing.speed
        dur = min(timing.max_gesture_s, max(timing.min_gesture_s, gap_s / timing.speed))
        total = max(1, int(round(dur * fps)))
        d.clock = _clock(ts)
        new = d.steps_for(kind, evs, total)
        gestures.append(Gesture(kind=kind, events=list(grp), start_s=round(t_frames / fps, 4),
                                duration_s=round(sum(n for _, n, _ in new) / fps, 4), timestamp_ms=ts,
                                actions=[a for _, _, a in new], summary=status_text(kind, main)))
        for scr, n, act in new:
            if steps and steps[-1].screen == scr:  # same picture: extend, never redraw
                steps[-1] = Step(scr, steps[-1].frames + n, steps[-1].action)
            else:
                steps.append(Step(scr, n, act))
            t_frames += n
    tail = max(1, int(round(timing.tail_s * fps)))
    steps[-1] = Step(steps[-1].screen, steps[-1].frames + tail, steps[-1].action)
    return Timeline(gestures=gestures, steps=steps, fps=fps)


def timeline_json(tl: Timeline) -> str:
    """Deterministic JSON text of :meth:`Timeline.to_json`."""
    return json.dumps(tl.to_json(), ensure_ascii=False, sort_keys=True, indent=1)
