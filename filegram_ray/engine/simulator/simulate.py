"""Run the persona simulator for one (profile, task) pair on a task bundle and return the finished session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from filegram_ray.engine.simulator.agent import PersonaAgent
from filegram_ray.engine.simulator.persona import Persona, derive_seed

#: Simulated epoch of the first session: 2026-01-05T09:00:00Z (our own choice; any fixed instant works).
EPOCH_MS = 1_767_603_600_000.0
DAY_MS = 86_400_000.0


def session_start_ms(seed: int, profile_id: str, task_id: str) -> float:
    """Simulated start of a trajectory: day = task number (tasks are done on consecutive days), plus a seeded
    offset of 0–8 h inside the working day (whole seconds)."""
    digits = "".join(ch for ch in task_id if ch.isdigit())
    day = int(digits) if digits else 0
    offset_s = derive_seed(seed, profile_id, task_id, "start") % (8 * 3600)
    return EPOCH_MS + day * DAY_MS + offset_s * 1000.0


def _bundle_meta(bundle_dir: Path | None) -> dict[str, Any]:
    if bundle_dir is None or not (Path(bundle_dir) / "bundle.json").exists():
        return {}
    from filegram_ray.workspace.bundle import check_bundle_meta

    path = Path(bundle_dir) / "bundle.json"
    return check_bundle_meta(path.read_bytes(), str(path))  # names the file and the field


def _annotations(meta: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {f["path"]: dict(f["annotation"]) for f in meta.get("files", []) if f.get("annotation")}


def simulate_trajectory(profile: Any, task: Any, bundle_dir: Path | str | None, work_root: Path | str, *,
                        seed: int, perturbation: Any = None, chart_format: str = "svg",
                        upstream_quirks: bool = False) -> Any:
    """Simulate one trajectory and return the finished ``EngineSession`` (call ``write_trajectory``/``close``).

    Args:
        profile: a ``Profile`` (or anything :meth:`Persona.from_profile` accepts).
        task: a ``Task``.
        bundle_dir: the task's bundle folder (``files/`` + ``bundle.json``), or None for an empty workspace.
        work_root: real folder under which the sandbox is created.
        seed: master seed (same seed → same bytes).
        perturbation: None or an object/dict with ``dimension``, ``from``/``from_``, ``to`` (ref §5.7).

    Raises:
        ValueError: malformed profile tiers or perturbation (names the field).
    """
    from filegram_ray.engine import EngineSession

    persona = Persona.from_profile(profile, perturbation)
    files_dir = None
    if bundle_dir is not None:
        fd = Path(bundle_dir) / "files"
        files_dir = fd if fd.is_dir() else None
    sess_seed = derive_seed(seed, persona.profile_id, task.task_id, "engine") % (2**31)
    meta = _bundle_meta(Path(bundle_dir) if bundle_dir else None)
    sess = EngineSession(files_dir, Path(work_root), persona.profile_id, task.task_id, seed=sess_seed,
                         start_ms=session_start_ms(seed, persona.profile_id, task.task_id),
                         annotations=_annotations(meta),
                         upstream_quirks=upstream_quirks)
    try:
        # the planted facts are the task's own truth (what the bundle generator put there: errors to correct,
        # duplicates, batches, versions); the plan of a task reads them, its actions still go through the tools
        agent = PersonaAgent(sess, task, persona, seed, chart_format=chart_format,
                             facts=[f for f in meta.get("facts", []) if isinstance(f, dict)])
        agent.run()
    except BaseException:
        sess.close()
        raise
    # ground truth for meta.json (never for a method): the tier each dimension acted in this session (tendency.py)
    sess.acting_tiers = dict(agent.T)
    return sess
