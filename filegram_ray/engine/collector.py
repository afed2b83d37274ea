"""Event collector: turns what a tool call actually did on disk into upstream-compatible raw events.

Tools (``tools.py``) report *observations* — facts checked on disk before and after the operation (did the path
exist, its text before and after, what was listed) — never intentions. The collector maps observations to the
12 behavioural event types and frames them with the 10 simulation types, following reference §3.2–§3.4:

* envelope (§3.1): ``event_id`` = UUID4 from a seeded ``random.Random``; ``timestamp`` = the session's simulated
  clock (epoch ms, float); ``message_id`` = one seeded UUID per session ("" on session events, as upstream).
* derived fields: every rule of §3.4 (depths, view_count, revisit_interval_ms, unique-line-set edit sizes,
  naming_pattern_change, is_backup / was_temporary extension sets, the 30,000 ms cross_file_reference window,
  context_switch on a read of a different file, fs_snapshot statistics).

Correct semantics by default; ``upstream_quirks=True`` reproduces the original engine (§3.3, §13):

=====================================  ==========================================  ==================================
behaviour                              default                                     upstream_quirks=True
=====================================  ==========================================  ==================================
``mv a.md docs/`` (existing dir)       ``file_move`` to ``docs/a.md``              ``file_rename`` to ``docs``
``edit`` with empty ``old_string``     ``file_write`` create / overwrite           no event (silent)
``list`` tool                          ``file_browse`` (listing is browsing)       no event
``touch`` creating a file              ``file_write`` create (0 chars)             no event
``file_delete.file_age_ms``            ms since the file was created in this       ms since its last read
                                       session (null for bundle files)             (null if never read)
bash with a failing sub-command        events for the sub-commands that changed    no events unless exit status 0
                                       the disk
diff header / manifest original_path   sandbox-relative path (no profile id in     absolute virtual path
                                       media/, which memory methods read)
edit lines_added/deleted               a last line without a newline differs        bare lines compared (a
                                       from the same line with one (as the diff)    final-newline change is +0 -0)
=====================================  ==========================================  ==================================

Kept in both modes (upstream semantics, the simulator is calibrated on them, TIER_TARGETS §1): ``write`` creates
missing parent folders without ``dir_create``; ``mkdir -p a/b/c`` is one ``dir_create`` for ``a/b/c``.
"""

from __future__ import annotations

import json
import posixpath
import random
import uuid
from typing import Any

from filegram_ray.engine.lines import split_lines
from filegram_ray.engine.media import MediaStore, content_hash
from filegram_ray.names import escape_strings

#: reference §3.4 is_backup: destination extension (lower-case) in this set
BACKUP_EXTS = frozenset({".bak", ".backup", ".orig", ".old", ".save"})
#: reference §3.4 was_temporary: extension in this set
TEMP_EXTS = frozenset({".tmp", ".temp", ".bak", ".swp", ".swo", ".pyc", ".o", ".log"})
#: reference §3.4 cross_file_reference window (ms)
CROSS_REF_WINDOW_MS = 30_000
#: reference §3.2 row 13/21: error_message and error context keep the first 200 chars
ERROR_CHARS = 200


def file_type_of(rel: str) -> str:
    """Extension without the dot, lower-cased, or ``unknown`` (reference §3.2 row 1)."""
    ext = posixpath.splitext(posixpath.basename(rel))[1]
    return ext[1:].lower() if len(ext) > 1 else "unknown"


def components(rel: str) -> int:
    """Number of path components of a relative path (``"."`` → 0)."""
    return 0 if rel in ("", ".") else len(rel.split("/"))


def naming_pattern_change(old_path: str, new_path: str) -> str:
    """reference §3.4 ``naming_pattern_change`` on file stems, first matching rule wins."""
    old = posixpath.splitext(posixpath.basename(old_path.rstrip("/")))[0]
    new = posixpath.splitext(posixpath.basename(new_path.rstrip("/")))[0]
    if "_" in old and "-" in new:
        return "snake_to_kebab"
    if "-" in old and "_" in new:
        return "kebab_to_snake"
    if "_" in old and any(c.isupper() for c in old):
        return "mixed_to_other"
    if old.replace("_", "") == new.replace("_", "").lower():
        return "case_change"
    if old.lower() == new.lower():
        return "case_change"
    return "other"


def _lines(text: str, exact_eol: bool) -> list[str]:
    """Lines of ``text``: the stored diff's lines, ending included (``exact_eol``: the one line model,
    :mod:`filegram_ray.engine.lines`, so an unterminated last line differs from the same text with a newline),
    or ``str.splitlines`` as upstream (``upstream_quirks``)."""
    return split_lines(text) if exact_eol else text.splitlines()


def unique_line_delta(before: str, after: str, *, exact_eol: bool = False) -> tuple[int, int]:
    """(|after−before|, |before−after|) over the sets of unique lines (reference §3.4, ``edit``).

    ``exact_eol`` (the default mode of the collector) counts a last line without a newline as different from
    the same text with one, as the stored diff does: a change of only the final newline is ``+1 -1``, not
    ``+0 -0``. Upstream compares the bare lines (``upstream_quirks``)."""
    b, a = set(_lines(before, exact_eol)), set(_lines(after, exact_eol))
    return len(a - b), len(b - a)


class Collector:
    """Holds the raw event list and the per-session state behind the derived fields.

    ``clock`` is a zero-argument callable returning the simulated epoch-ms clock; ``rng`` is the seeded
    generator for event ids. ``virtual(rel)`` maps a sandbox-relative path to its virtual absolute path.
    """

    def __init__(self, *, rng: random.Random, clock, virtual, session_id: str, profile_id: str,
                 message_id: str, model_provider: str, model_name: str, media: MediaStore,
                 upstream_quirks: bool = False) -> None:
        self.rng = rng
        self.clock = clock
        self.virtual = virtual
        self.session_id = session_id
        self.profile_id = profile_id
        self.message_id = message_id
        self.model_provider = model_provider
        self.model_name = model_name
        self.media = media
        self.quirks = upstream_quirks
        self.events: list[dict[str, Any]] = []
        # derived-field state (§3.4)
        self.read_count: dict[str, int] = {}
        self.last_read_at: dict[str, float] = {}
        self.last_read_rel: str | None = None
        self.switch_count = 0
        self.last_op: tuple[str, str, float] | None = None  # (rel, "read"|"edit", time)
        self.created_at: dict[str, float] = {}

    # --- envelope -----------------------------------------------------------------------------------------------

    def new_id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def emit(self, event_type: str, fields: dict[str, Any], *, session_event: bool = False) -> dict[str, Any]:
        ev = {
            "event_id": self.new_id(),
            "event_type": event_type,
            "timestamp": float(self.clock()),
            "session_id": self.session_id,
            "profile_id": self.profile_id,
            "message_id": "" if session_event else self.message_id,
            "model_provider": self.model_provider,
            "model_name": self.model_name,
        }
        ev.update(escape_strings(fields))  # an agent-typed lone surrogate is recorded as %XX (BR-27)
        self.events.append(ev)
        return ev

    def _media_path(self, rel: str) -> str:
        return self.virtual(rel) if self.quirks else rel

    # --- behavioural events from observations ----------------------------------------------------------------

    def apply(self, obs: dict[str, Any]) -> None:
        """Emit the behavioural events of one observation (see ``tools.py`` for the observation kinds)."""
        kind = obs["kind"]
        getattr(self, f"_on_{kind}")(obs)

    def _cross_ref(self, rel: str, op: str) -> None:
        now = self.clock()
        prev = self.last_op
        if prev is not None and prev[0] != rel and now - prev[2] <= CROSS_REF_WINDOW_MS:
            rtype = "read_then_edit" if (prev[1] == "read" and op == "edit") else "sequential_access"
            self.emit("cross_file_reference", {
                "source_file": self.virtual(prev[0]), "target_file": self.virtual(rel),
                "reference_type": rtype, "interval_ms": round(now - prev[2]),
            })
        self.last_op = (rel, op, now)

    def _on_read(self, obs: dict[str, Any]) -> None:
        rel, now = obs["rel"], self.clock()
        if self.last_read_rel != rel:
            self.switch_count += 1
            self.emit("context_switch", {
                "from_file": self.virtual(self.last_read_rel) if self.last_read_rel is not None else None,
                "to_file": self.virtual(rel), "trigger": "file_read", "switch_count": self.switch_count,
            })
        self.last_read_rel = rel
        self._cross_ref(rel, "read")
        count = self.read_count.get(rel, 0) + 1
        prev = self.last_read_at.get(rel)
        self.read_count[rel] = count
        self.last_read_at[rel] = now
        self.emit("file_read", {
            "file_path": self.virtual(rel), "file_type": file_type_of(rel),
            "directory_depth": components(rel) - 1, "view_count": count, "view_range": obs["view_range"],
            "content_length": obs["output_len"],
            "revisit_interval_ms": None if prev is None else round(now - prev),
        })

    def _on_write(self, obs: dict[str, Any]) -> None:
        # obs: rel, existed, before (str|None), after (str), written_chars, tool ("write"|"edit"|"touch")
        if self.quirks and obs["tool"] in ("edit", "touch"):
            return  # §3.3: empty-old-string edit and touch are silent upstream
        rel, now = obs["rel"], self.clock()
        if not obs["existed"]:
            self.created_at[rel] = now
        after = obs["after"]
        fields: dict[str, Any] = {
            "file_path": self.virtual(rel), "file_type": file_type_of(rel), "directory_depth": components(rel) - 1,
            "operation": "overwrite" if obs["existed"] else "create", "content_length": obs["written_chars"],
            "before_hash": content_hash(obs["before"]) if obs["existed"] else None,
            "after_hash": content_hash(after),
        }
        if after:
            ref = self.media.save_blob(after, self._media_path(rel), now)
            if ref is not None:
                fields["media_ref"] = ref
        self.emit("file_write", fields)

    def _on_edit(self, obs: dict[str, Any]) -> None:
        # obs: rel, tool ("edit"|"multiedit"), before, after, n_edits
        rel, now = obs["rel"], self.clock()
        before, after = obs["before"], obs["after"]
        added, deleted = unique_line_delta(before, after, exact_eol=not self.quirks)
        if obs["tool"] == "multiedit":
            # §3.4 multiedit: line-count growth/shrink plus the unique-line set differences
            nb, na = len(_lines(before, not self.quirks)), len(_lines(after, not self.quirks))
            added += max(0, na - nb)
            deleted += max(0, nb - na)
            summary = f"{obs['n_edits']} edits, +{added} -{deleted}"
        else:
            summary = f"+{added} -{deleted}"
        refs = {}
        mp = self._media_path(rel)
        old_ref = self.media.save_blob(before, mp, now) if before else None
        diff_ref = self.media.save_diff(before, after, mp, now)
        new_ref = self.media.save_blob(after, mp, now) if after else None
        for key, ref in (("media_ref_old", old_ref), ("media_ref_new", new_ref), ("media_ref_diff", diff_ref)):
            if ref is not None:
                refs[key] = ref
        self._cross_ref(rel, "edit")
        self.emit("file_edit", {
            "file_path": self.virtual(rel), "file_type": file_type_of(rel), "edit_tool": obs["tool"],
            "lines_added": added, "lines_deleted": deleted, "lines_modified": min(added, deleted),
            "diff_summary": summary, "before_hash": content_hash(before), "after_hash": content_hash(after),
            **refs,
        })

    def _on_search(self, obs: dict[str, Any]) -> None:
        self.emit("file_search", {"search_type": obs["search_type"], "query": obs["query"],
                                  "files_matched": obs["matched"], "files_opened_after": []})

    def _on_browse(self, obs: dict[str, Any]) -> None:
        if self.quirks and obs["tool"] == "list":
            return  # §3.3: the list tool emits nothing upstream
        self.emit("file_browse", {"directory_path": self.virtual(obs["rel"]), "files_listed": obs["listed"],
                                  "depth": components(obs["rel"])})

    def _on_mkdir(self, obs: dict[str, Any]) -> None:
        rel = obs["rel"]
        self.emit("dir_create", {"dir_path": self.virtual(rel), "depth": components(rel),
                                 "sibling_count": max(0, obs["dirs_in_parent"] - 1)})

    def _on_delete(self, obs: dict[str, Any]) -> None:
        rel, now = obs["rel"], self.clock()
        if self.quirks:
            last = self.last_read_at.get(rel)
            age = None if last is None else round(now - last)
        else:
            born = self.created_at.get(rel)
            age = None if born is None else round(now - born)
        for key in [k for k in self.created_at if k == rel or k.startswith(rel + "/")]:
            del self.created_at[key]
        ext = posixpath.splitext(rel)[1].lower()
        self.emit("file_delete", {"file_path": self.virtual(rel), "file_age_ms": age,
                                  "was_temporary": ext in TEMP_EXTS})

    def _on_move(self, obs: dict[str, Any]) -> None:
        # obs: src, dst (actual final path), dst_arg (destination as typed, normalised)
        src, dst = obs["src"], obs["dst"]
        for key in [k for k in self.created_at if k == src or k.startswith(src + "/")]:
            self.created_at[dst + key[len(src):]] = self.created_at.pop(key)
        new = obs["dst_arg"] if self.quirks else dst
        if posixpath.dirname(src) == posixpath.dirname(new):
            self.emit("file_rename", {"old_path": self.virtual(src), "new_path": self.virtual(new),
                                      "naming_pattern_change": naming_pattern_change(src, new)})
        else:
            self.emit("file_move", {"old_path": self.virtual(src), "new_path": self.virtual(new),
                                    "destination_directory_depth": components(posixpath.dirname(new))})

    def _on_copy(self, obs: dict[str, Any]) -> None:
        src, dst = obs["src"], obs["dst"]
        if not obs["existed"]:
            self.created_at[dst] = self.clock()
        new = obs["dst_arg"] if self.quirks else dst
        self.emit("file_copy", {"source_path": self.virtual(src), "dest_path": self.virtual(new),
                                "is_backup": posixpath.splitext(new)[1].lower() in BACKUP_EXTS})

    # --- simulation events --------------------------------------------------------------------------------------

    def fs_snapshot(self, paths: list[tuple[str, bool]]) -> dict[str, Any]:
        """``paths``: (relative path, is_dir) for every entry of the sandbox (reference §3.4 fs_snapshot)."""
        by_type: dict[str, int] = {}
        for rel, is_dir in paths:
            if not is_dir:
                t = file_type_of(rel)
                by_type[t] = by_type.get(t, 0) + 1
        listing = sorted(rel for rel, _ in paths)
        fields: dict[str, Any] = {
            "file_count_by_type": dict(sorted(by_type.items())),
            "max_depth": max((components(r) for r in listing), default=0),
            "total_files": sum(1 for _, d in paths if not d),
        }
        ref = self.media.save_blob(json.dumps(listing, ensure_ascii=False), "fs_snapshot.json", self.clock())
        if ref is not None:
            fields["media_ref"] = ref
        return self.emit("fs_snapshot", fields, session_event=True)
