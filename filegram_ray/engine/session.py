"""EngineSession: one trajectory's sandbox, tools, simulated clock, event collector and media store.

The persona simulator and the LLM agent act only through this class (ARCHITECTURE.md rule 1)::

    sess = EngineSession(bundle_files_dir, work_root, "p1_x", "T-01", seed=7, start_ms=1.7e12)
    sess.start()                                   # session_start + initial fs_snapshot
    with sess.iteration(input_tokens=900, output_tokens=120):   # iteration_start, llm_response … iteration_end
        res = sess.call("read", file_path="notes/a.md", offset=1, limit=40)   # -> ToolResult(ok, output, error)
    sess.finish(completed=True)                    # final fs_snapshot + session_end
    sess.write_trajectory(dest)                    # events_raw.json, events.json, media/, outputs/, summary.json

Reproducibility: event ids, ``session_id`` and ``message_id`` come from ``random.Random`` seeded with a stable
hash of (seed, "event-ids"); tool execution times and LLM response times from a second stream (seed, "timing").
Timestamps are the simulated clock (epoch ms), moved by :meth:`advance`, by each tool's ``execution_time_ms`` and
by each ``llm_response``. Paths in events are virtual (``/sandbox/<profile_id>_<task_id>/...``). Hence the same
seed and the same call sequence give byte-identical ``events_raw.json`` and ``media/``.

Errors: a failing tool call never raises — it returns ``ToolResult(ok=False)`` and is recorded as a failed
``tool_call`` + ``error_encounter`` (reference §3.3); misuse of the session itself (calling before ``start()`` or
after ``finish()``, bad ids) raises ``RuntimeError`` / ``ValueError``.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import os
import random
import re
import shutil
import unicodedata
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from filegram_ray.engine.collector import ERROR_CHARS, Collector
from filegram_ray.engine.filter import filter_events
from filegram_ray.engine.media import MediaStore
from filegram_ray.engine.sandbox import VIRTUAL_PREFIX, Limits, OpCounter, Sandbox, SandboxError
from filegram_ray.engine.tools import TOOLS, ToolContext, ToolError, ToolResult, list_tree
from filegram_ray.names import escape_bytes, escape_name
from filegram_ray.schema.events import dumps_events

#: simulated tool latency ranges in ms, (low, high) inclusive — our own model, not a reference constant.
EXEC_TIME_MS: dict[str, tuple[int, int]] = {
    "read": (4, 40), "write": (6, 60), "edit": (6, 60), "multiedit": (8, 80), "grep": (10, 150),
    "glob": (5, 80), "list": (4, 40), "bash": (15, 250),
}
log = logging.getLogger(__name__)
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def sub_seed(seed: int, label: str) -> int:
    """Stable 64-bit sub-seed of ``seed`` for stream ``label`` (SHA-256; never Python's ``hash``)."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{label}".encode()).digest()[:8], "big")


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class EngineSession:
    """One trajectory in progress. See the module docstring for the call protocol.

    Args:
        bundle_files_dir: the task's visible input bundle (``workspaces/<task_id>/files``), copied into a private
            sandbox; ``None`` → empty sandbox.
        work_root: local scratch folder; the sandbox is ``work_root/sandbox/<profile_id>_<task_id>`` (must not
            exist or be empty).
        profile_id, task_id: ids (letters, digits, ``_.-``); they name the virtual root.
        seed: trajectory seed. start_ms: simulated epoch ms of ``session_start``.
        annotations: ``{relpath or basename: {"modality", "content"}}`` for media files (reference §1.1).
        limits: :class:`Limits`. upstream_quirks: reproduce upstream engine quirks (see ``collector.py``).
        model_provider, model_name: values of the two leakage fields in raw events (stripped by the filter).
    """

    def __init__(self, bundle_files_dir: Path | None, work_root: Path, profile_id: str, task_id: str, *,
                 seed: int, start_ms: float, annotations: dict[str, dict] | None = None,
                 limits: Limits | None = None, upstream_quirks: bool = False,
                 model_provider: str = "filegram-ray", model_name: str = "persona-simulator") -> None:
        for name, val in (("profile_id", profile_id), ("task_id", task_id)):
            if not isinstance(val, str) or not _ID_RE.match(val):
                raise ValueError(f"{name} {val!r} must be letters, digits, '_', '.', '-'")
        self.profile_id, self.task_id, self.seed = profile_id, task_id, int(seed)
        self.limits = limits or Limits()
        self.upstream_quirks = upstream_quirks
        dirname = f"{profile_id}_{task_id}"
        self._clock = float(start_ms)
        self._start_ms = float(start_ms)
        #: persona simulator: the tier each dimension acted in (set by simulate_trajectory; meta.json ground truth)
        self.acting_tiers: dict[str, str] | None = None
        self.sandbox = Sandbox.create(bundle_files_dir, Path(work_root) / "sandbox" / dirname,
                                      f"{VIRTUAL_PREFIX}/{dirname}", self.limits, clock=lambda: self._clock)
        if self.sandbox.skipped:
            log.warning("%s: %d bundle entries not copied into the sandbox (link rule): %s", dirname,
                        len(self.sandbox.skipped), "; ".join(f"{p} ({why})" for p, why in self.sandbox.skipped[:10]))
        if self.sandbox.renamed:
            log.warning("%s: %d bundle names are not valid UTF-8 or hold control, line-separator or bidi characters, "
                        "copied under %%XX names: %s", dirname,
                        len(self.sandbox.renamed), "; ".join(f"{a} -> {b}" for a, b in self.sandbox.renamed[:10]))
        # paths are NFC and follow the names rule inside the sandbox (sandbox.py): key the annotations the same way
        self._ctx = ToolContext(annotations={unicodedata.normalize("NFC", "/".join(map(escape_name, k.split("/")))): v
                                             for k, v in (annotations or {}).items()})
        self._time_rng = random.Random(sub_seed(self.seed, "timing"))
        id_rng = random.Random(sub_seed(self.seed, "event-ids"))
        self.media = MediaStore()
        self.collector = Collector(
            rng=id_rng, clock=lambda: self._clock, virtual=self.sandbox.virtual, session_id="",
            profile_id=profile_id, message_id="", model_provider=model_provider, model_name=model_name,
            media=self.media, upstream_quirks=upstream_quirks)
        self.session_id = self.collector.new_id()
        self.collector.session_id = self.session_id
        self.collector.message_id = self.collector.new_id()
        self._ops = OpCounter(self.limits)
        self._started = self._finished = False
        self.completed = False
        self._iteration = 0
        self._iter_state: dict[str, Any] | None = None
        self._seq = 0
        self._pending_error: tuple[str, str, float] | None = None  # (event_id, tool, time)
        self._outputs: set[str] = set()
        self._scrub_rx: re.Pattern[str] | None = None
        self.error_count = 0
        self.error_recovery_count = 0
        self.input_tokens = self.output_tokens = 0

    # --- clock --------------------------------------------------------------------------------------------------

    @property
    def sandbox_path(self) -> Path:
        """Real directory of the sandbox."""
        return self.sandbox.root

    @property
    def virtual_root(self) -> str:
        return self.sandbox.virtual_root

    @property
    def clock_ms(self) -> float:
        """Simulated epoch milliseconds."""
        return self._clock

    def advance(self, ms: float) -> None:
        """Move the simulated clock forward by ``ms`` (≥ 0) milliseconds."""
        if ms < 0:
            raise ValueError(f"advance(ms): ms must be >= 0, got {ms}")
        self._clock += float(ms)

    @property
    def events(self) -> list[dict[str, Any]]:
        """Raw events emitted so far, in order (the live list; do not mutate)."""
        return self.collector.events

    # --- frame --------------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Emit ``session_start`` and the initial ``fs_snapshot`` (reference §3.3 session frame)."""
        if self._started:
            raise RuntimeError("session already started")
        self._started = True
        self._ops = OpCounter(self.limits)
        self.collector.emit("session_start", {"target_directory": self.sandbox.virtual_root}, session_event=True)
        self.collector.fs_snapshot(list_tree(self.sandbox))

    @contextlib.contextmanager
    def iteration(self, input_tokens: int = 0, output_tokens: int = 0, *, response_time_ms: float | None = None,
                  stop_reason: str = "tool_use", has_reasoning: bool = False,
                  compaction: dict[str, int] | None = None) -> Iterator[None]:
        """One LLM iteration: ``iteration_start`` → (``compaction_triggered``) → ``llm_response`` → (tool events)
        → ``iteration_end`` (reference §3.3 frame).

        ``response_time_ms`` (ms the LLM took; the clock advances by it) defaults to a seeded draw of
        300–700 ms plus 8 ms per output token (our own latency model). ``compaction``: when the agent pruned its
        context before this call, ``{"messages_before", "messages_after", "tokens_saved"}`` (reference §3.2 row 17).
        """
        self._require_running()
        if self._iter_state is not None:
            raise RuntimeError("iterations cannot be nested")
        self._iteration += 1
        n = self._iteration
        t0 = self._clock
        self.collector.emit("iteration_start", {"iteration_number": n})
        if compaction is not None:
            self.collector.emit("compaction_triggered", {
                "reason": "context_overflow", "messages_before": int(compaction["messages_before"]),
                "messages_after": int(compaction["messages_after"]), "tokens_saved": int(compaction["tokens_saved"])})
        if response_time_ms is None:
            response_time_ms = self._time_rng.randint(300, 700) + 8 * max(0, int(output_tokens))
        self.advance(response_time_ms)
        self.input_tokens += int(input_tokens)
        self.output_tokens += int(output_tokens)
        self.collector.emit("llm_response", {
            "response_time_ms": round(response_time_ms), "input_tokens": int(input_tokens),
            "output_tokens": int(output_tokens), "has_reasoning": bool(has_reasoning), "stop_reason": stop_reason})
        self._iter_state = {"tools": 0, "error": False}
        try:
            yield
        finally:
            st, self._iter_state = self._iter_state, None
            self.collector.emit("iteration_end", {
                "iteration_number": n, "duration_ms": round(self._clock - t0), "tools_called": st["tools"],
                "has_tool_error": st["error"]})

    def finish(self, completed: bool = True) -> None:
        """Final ``fs_snapshot``; ``session_end`` only when ``completed`` (reference §1.2 completeness rule)."""
        self._require_running()
        self.collector.fs_snapshot(list_tree(self.sandbox))
        if completed:
            self.collector.emit("session_end", {
                "total_iterations": self._iteration, "total_tool_calls": self._seq,
                "duration_ms": round(self._clock - self._start_ms)}, session_event=True)
        self._finished = True
        self.completed = bool(completed)

    def _require_running(self) -> None:
        if not self._started:
            raise RuntimeError("call start() before using the session")
        if self._finished:
            raise RuntimeError("session already finished")

    # --- tools --------------------------------------------------------------------------------------------------

    def call(self, tool: str, **kwargs: Any) -> ToolResult:
        """Run one tool; never raises for tool failures (they come back as ``ToolResult(ok=False)``)."""
        self._require_running()
        fn = TOOLS.get(tool)
        lo, hi = EXEC_TIME_MS.get(tool, (1, 5))
        exec_ms = self._time_rng.randint(lo, hi)
        self.advance(exec_ms)
        observations: list[dict] = []
        try:
            self._ops.tick()
            if fn is None:
                raise ToolError(f"unknown tool {tool!r}; available: {', '.join(TOOLS)}")
            params = set(inspect.signature(fn).parameters) - {"sb", "ctx"}
            unknown = set(kwargs) - params
            if unknown:
                raise ToolError(f"{tool}: unexpected argument(s) {sorted(unknown)}; expected {sorted(params)}")
            self.sandbox.begin_call(self._ops.deadline())
            result, observations = fn(self.sandbox, self._ctx, **kwargs)
        except (ToolError, SandboxError) as exc:
            result = ToolResult(False, str(exc), error=str(exc))
        except OSError as exc:
            msg = f"{tool}: {exc.strerror or exc}"
            result = ToolResult(False, msg, error=msg)
        except Exception as exc:  # noqa: BLE001 - a tool must never crash the session
            msg = f"{tool}: internal error {type(exc).__name__}: {exc}"
            result = ToolResult(False, msg, error=msg)
        finally:
            self.sandbox.begin_call(None)
        if not result.ok:  # error texts may echo a real path the agent typed: keep events seed-stable
            result = ToolResult(False, self._scrub(result.output), self._scrub(result.error or result.output))
        if self.upstream_quirks and any(o.get("bash_failed") for o in observations):
            observations = []  # upstream parses bash only when the exit code is 0 (§3.3)
        for obs in observations:
            self._track_outputs(obs)
            self.collector.apply(obs)
        self._seq += 1
        self.collector.emit("tool_call", {
            "tool_name": tool, "tool_parameters": self._scrub(_jsonable(kwargs)), "execution_time_ms": exec_ms,
            "success": result.ok, "error_type": None if result.ok else "tool_error",
            "error_message": None if result.ok else (result.error or result.output)[:ERROR_CHARS],
            "retry_count": 0, "sequence_position": self._seq})
        if self._iter_state is not None:
            self._iter_state["tools"] += 1
            self._iter_state["error"] |= not result.ok
        if not result.ok:
            self.error_count += 1
            raw_path = kwargs.get("file_path", kwargs.get("path"))
            ev = self.collector.emit("error_encounter", {
                "error_type": "tool_error", "context": result.output[:ERROR_CHARS], "severity": "medium",
                "tool_name": tool, "file_path": self._virtual_or_raw(raw_path)})
            self._pending_error = (ev["event_id"], tool, self._clock)
        elif self._pending_error is not None:
            eid, etool, et = self._pending_error
            self.error_recovery_count += 1
            self.collector.emit("error_response", {
                "strategy": "retry" if etool == tool else "rethink", "latency_ms": round(self._clock - et),
                "error_event_id": eid, "resolution_successful": True})
            self._pending_error = None
        return result

    def _scrub(self, value: Any) -> Any:
        """Replace the real sandbox directory by the virtual root inside recorded arguments — only where it
        stands as a whole path (followed by ``/``, the end, a quote, a space or a separator), so a sibling
        folder whose name merely starts with the sandbox's name is recorded as the agent wrote it. A lone
        surrogate an agent typed (a JSON ``"\\udce9"`` escape) is recorded by the :mod:`filegram_ray.names` rule
        (``%E9``), so events stay valid UTF-8 (BR-27)."""
        if isinstance(value, str):
            value = escape_bytes(value)
            if self._scrub_rx is None:
                reals = sorted({str(self.sandbox.root), self.sandbox.real_root}, key=len, reverse=True)
                self._scrub_rx = re.compile("(?:" + "|".join(map(re.escape, reals)) + r")(?=$|[/\s'\";&:,)\]])")
            return self._scrub_rx.sub(lambda _m: self.sandbox.virtual_root, value)
        if isinstance(value, list):
            return [self._scrub(x) for x in value]
        if isinstance(value, dict):
            return {self._scrub(k) if isinstance(k, str) else k: self._scrub(x) for k, x in value.items()}
        return value

    def _virtual_or_raw(self, raw: Any) -> str | None:
        if raw is None:
            return None
        if not isinstance(raw, str):
            return repr(raw)[:ERROR_CHARS]
        try:
            return self.sandbox.virtual(self.sandbox.to_rel(raw))
        except SandboxError:
            return self._scrub(raw)[:ERROR_CHARS]

    def _track_outputs(self, obs: dict[str, Any]) -> None:
        kind = obs["kind"]
        if kind in ("write", "edit"):
            self._outputs.add(obs["rel"])
        elif kind == "copy":
            self._outputs.add(obs["dst"])
        elif kind == "move":
            src, dst = obs["src"], obs["dst"]
            for o in [o for o in self._outputs if o == src or o.startswith(src + "/")]:
                self._outputs.discard(o)
                self._outputs.add(dst + o[len(src):])
        elif kind == "delete":
            rel = obs["rel"]
            self._outputs = {o for o in self._outputs if not (o == rel or o.startswith(rel + "/"))}

    # --- output -------------------------------------------------------------------------------------------------

    def output_files(self) -> list[str]:
        """Sorted relative paths of every file the agent created or changed that exists now (copied dirs
        expanded to their files)."""
        sb = self.sandbox
        out = set()
        for rel in self._outputs:
            try:
                kind = sb.kind(sb.resolve(rel))
                if kind == "file":
                    out.add(rel)
                elif kind == "dir":
                    out.update(e.rel for _d, _dirs, others in sb.walk(rel, what="outputs") for e in others
                               if e.kind == "file")
            except SandboxError:
                continue
        return sorted(out)

    def sandbox_record(self) -> dict[str, list[dict[str, str]]]:
        """What the bundle copy and the listings changed or left out (``meta.json`` ``sandbox``; empty lists when
        nothing): ``renamed`` [{"path": sandbox-relative new name, "renamed_from": original with ``\\xNN``}],
        ``skipped`` [{"path", "reason"}] (BR-27, the link rule)."""
        return {"renamed": [{"path": new, "renamed_from": old} for old, new in self.sandbox.renamed],
                "skipped": [{"path": p, "reason": why} for p, why in self.sandbox.skipped]}

    def summary(self) -> dict[str, Any]:
        """summary.json content (reference §2.3), computed from the raw events."""
        return build_summary(self.events, session_id=self.session_id, profile_id=self.profile_id,
                             model_provider=self.collector.model_provider, model_name=self.collector.model_name,
                             total_duration_ms=self._clock - self._start_ms, completed=self.completed,
                             input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                             error_count=self.error_count, error_recovery_count=self.error_recovery_count)

    def write_trajectory(self, dest: Path) -> dict[str, Any]:
        """Write the trajectory folder (layout in COMMON.md / reference §2) to ``dest``; returns counts
        ``{n_events_raw, n_events, n_media_files, n_outputs, event_counts}``. Each file is written atomically."""
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        raw = self.events
        kept = filter_events(raw)
        _atomic_write(dest / "events_raw.json", dumps_events(raw))
        _atomic_write(dest / "events.json", dumps_events(kept))
        n_media = self.media.write_to(dest / "media")
        outs = self.output_files()
        for rel in outs:
            _atomic_write(dest / "outputs" / rel, self.sandbox.read_bytes(rel, limit=2 ** 62))
        _atomic_write(dest / "summary.json",
                      json.dumps(self.summary(), indent=2, ensure_ascii=False).encode("utf-8"))
        return {"n_events_raw": len(raw), "n_events": len(kept), "n_media_files": n_media, "n_outputs": len(outs),
                "event_counts": dict(sorted(Counter(e["event_type"] for e in raw).items()))}

    def close(self) -> None:
        """Delete the sandbox directory (call after ``write_trajectory``)."""
        self.sandbox.close()
        shutil.rmtree(self.sandbox.root, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=repr))


def build_summary(events: list[dict[str, Any]], *, session_id: str, profile_id: str, model_provider: str,
                  model_name: str, total_duration_ms: float, completed: bool, input_tokens: int = 0,
                  output_tokens: int = 0, error_count: int = 0, error_recovery_count: int = 0) -> dict[str, Any]:
    """reference §2.3 summary fields from a raw event list."""
    calls = [e for e in events if e["event_type"] == "tool_call"]
    by_type: dict[str, list[dict]] = {}
    for e in events:
        by_type.setdefault(e["event_type"], []).append(e)
    writes = by_type.get("file_write", [])
    edits = by_type.get("file_edit", [])
    created = [e["file_path"] for e in writes if e["operation"] == "create"]
    modified = [e["file_path"] for e in writes if e["operation"] == "overwrite"] + [e["file_path"] for e in edits]
    return {
        "session_id": session_id, "profile_id": profile_id, "model_provider": model_provider,
        "model_name": model_name, "total_duration_ms": round(total_duration_ms),
        "total_iterations": len(by_type.get("iteration_start", [])), "total_tool_calls": len(calls),
        "tool_success_rate": round(sum(c["success"] for c in calls) / len(calls), 4) if calls else 1.0,
        "tool_usage_frequency": dict(sorted(Counter(c["tool_name"] for c in calls).items())),
        "tool_sequence": [c["tool_name"] for c in calls],
        "unique_files_read": len({e["file_path"] for e in by_type.get("file_read", [])}),
        "unique_files_modified": len(set(created) | set(modified)),
        "files_created": created, "files_modified": modified,
        "total_lines_added": sum(e["lines_added"] for e in edits),
        "total_lines_deleted": sum(e["lines_deleted"] for e in edits),
        "compaction_count": len(by_type.get("compaction_triggered", [])),
        "total_input_tokens": input_tokens, "total_output_tokens": output_tokens,
        "context_switch_count": len(by_type.get("context_switch", [])),
        "files_deleted": [e["file_path"] for e in by_type.get("file_delete", [])],
        "files_renamed": [[e["old_path"], e["new_path"]] for e in by_type.get("file_rename", [])],
        "dirs_created": [e["dir_path"] for e in by_type.get("dir_create", [])],
        "error_count": error_count, "error_recovery_count": error_recovery_count,
        "completed": bool(completed), "total_events": len(events),
    }


__all__ = ["EngineSession", "Limits", "ToolResult", "build_summary", "sub_seed"]
