"""Post-execution filter (reference §4): raw engine events → the ``events.json`` a memory method may see.

* keeps only the 12 atomic behavioural types (:data:`~filegram_ray.schema.events.KEPT_TYPES`), dropping the 10
  simulation types (:data:`~filegram_ray.schema.events.SIMULATION_TYPES`);
* removes the 3 leakage fields (:data:`~filegram_ray.schema.events.LEAKAGE_FIELDS`) — the paper's rule, which
  no upstream code applied (⚠ CODE≠PAPER, reference §4 / §13 item 7);
* anonymises every path field: a path containing ``/sandbox/<dir>/`` keeps what follows (``"."`` if nothing
  does), any other path keeps its basename. One extension to the reference rule: the bare sandbox root
  ``/sandbox/<dir>`` (no trailing slash, e.g. ``ls`` of the root) also becomes ``"."`` instead of its basename,
  which would be ``<profile_id>_<task_id>`` and leak the profile.

Apply it to *raw* events only: by the reference rule a relative path (already anonymised, or an OS-watcher
path) is cut to its basename, so filtering an already filtered list is not a no-op. Event order and all other
fields are unchanged; the input is not modified. Ground truth (meta.json, profile
tags) is never in events, so nothing of it survives.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from filegram_ray.schema.events import KEPT_TYPES, LEAKAGE_FIELDS

#: event fields that hold a file-system path (reference §3.2 rows 1-12)
PATH_FIELDS: tuple[str, ...] = (
    "file_path", "directory_path", "old_path", "new_path", "dir_path", "source_path", "dest_path",
    "from_file", "to_file", "source_file", "target_file",
)
_SANDBOX_RE = re.compile(r"/sandbox/[^/]+(?:/(.*))?$")
_KEPT = frozenset(KEPT_TYPES)


def anonymise_path(path: str | None) -> str | None:
    """reference §4 path anonymisation (plus the bare-root case, see module docstring); ``None`` passes."""
    if path is None:
        return None
    m = _SANDBOX_RE.search(path)
    if m:
        rest = (m.group(1) or "").strip("/")
        return rest or "."
    base = posixpath.basename(path.rstrip("/"))
    return base or "."


def filter_event(event: dict[str, Any]) -> dict[str, Any] | None:
    """Filtered copy of one raw event, or ``None`` if its type is stripped."""
    if event.get("event_type") not in _KEPT:
        return None
    out = {k: v for k, v in event.items() if k not in LEAKAGE_FIELDS}
    for f in PATH_FIELDS:
        if isinstance(out.get(f), str):
            out[f] = anonymise_path(out[f])
    return out


def filter_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Apply :func:`filter_event` to every event, keeping order."""
    return [f for f in (filter_event(e) for e in events) if f is not None]
