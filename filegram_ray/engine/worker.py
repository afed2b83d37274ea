"""The generate stage's worker: one trajectory per unit, simulated in a private sandbox and written into the run
directory (:class:`GenerateWorker`; the LLM agent's worker extends it), reading a workspace's ``bundle.json``
through :func:`~filegram_ray.workspace.bundle.check_bundle_meta`.

A trajectory is written with atomic files; the stage runner writes its completion record after them, so a
resubmitted or rerun item rewrites identical bytes and is never counted twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: the stage this worker serves (its label in error rows)
STAGE = "generate"

__all__ = ["GenerateWorker", "trajectory_fingerprint", "perturbation_shift", "STAGE"]


def trajectory_fingerprint(traj_dir: Path) -> list[float]:
    """The 17-D fingerprint (reference §7.3) of a written trajectory, with the memory's own feature code."""
    from filegram_ray.engine.simulator.calibration import procedural
    from filegram_ray.memory.features import fingerprint

    return [float(x) for x in fingerprint(procedural(traj_dir))]


def perturbation_shift(dim: str, base: list[float], pert: list[float]) -> dict[str, list[float]]:
    """``{feature: [without, with]}`` over the fingerprint features of dimension ``dim`` (reference §7.3)."""
    from filegram_ray.memory.constants import FINGERPRINT_FEATURES

    return {f"{attr}.{key}": [base[i], pert[i]] for i, (d, attr, key) in enumerate(FINGERPRINT_FEATURES)
            if d == dim}


class GenerateWorker:
    """Actor body: ``process(item)`` simulates one trajectory and writes it into the run directory.

    Args:
        run_uri / storage_options: the run directory.
        chart_format, upstream_quirks: simulator/engine options.
        crash_on_unit / crash_marker: test hook — when both are set and the marker file does not exist yet,
            the worker creates the marker and ``os._exit(1)``s while processing that item (a dying actor).
    """

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None = None, chart_format: str = "svg",
                 upstream_quirks: bool = False, crash_on_unit: str | None = None, crash_marker: str | None = None,
                 tts: str = "auto"):
        from filegram_ray.storage import RunDir

        self.tts = tts  # speech of bundles built on the fly (the seed stage's workspace.tts)
        self.run = RunDir(run_uri, storage_options or {})
        self.chart_format, self.upstream_quirks = chart_format, upstream_quirks
        self.crash_on_unit, self.crash_marker = crash_on_unit, crash_marker
        self.tmp = Path(tempfile.mkdtemp(prefix="fg-generate-"))
        self.bundles: dict[str, Path | None] = {}

    def __del__(self):  # best effort: the sandbox root of this actor
        shutil.rmtree(getattr(self, "tmp", ""), ignore_errors=True)

    def bundle_dir(self, task: Any, seed: int) -> Path | None:
        tid = task.task_id
        if tid in self.bundles:
            return self.bundles[tid]
        local = self.tmp / "workspaces" / tid
        if self.run.exists(f"workspaces/{tid}/bundle.json"):
            from filegram_ray.workspace.bundle import check_bundle_meta

            check_bundle_meta(self.run.read_bytes(f"workspaces/{tid}/bundle.json"),
                              self.run.url(f"workspaces/{tid}/bundle.json"))  # names the run's file, not the copy
            self.run.get_tree(f"workspaces/{tid}", local)
        else:
            from filegram_ray.workspace.bundle import build_bundle

            build_bundle(task, seed, local, tts=self.tts)
        self.bundles[tid] = local
        return local

    def process(self, unit: dict[str, Any]) -> dict[str, Any]:
        from filegram_ray.engine.simulator import AGENT_VERSION, simulate_trajectory
        from filegram_ray.schema.profile import Profile
        from filegram_ray.schema.task import Task

        uid = unit["unit_id"]
        if self.crash_on_unit == uid and self.crash_marker and not os.path.exists(self.crash_marker):
            Path(self.crash_marker).write_text("crashed once\n")
            os._exit(1)
        t0 = time.perf_counter()
        profile = Profile.model_validate(unit["profile"])
        task = Task.model_validate(unit["task"])
        seed = int(unit["seed"])
        pert = unit.get("perturbation")
        bdir = self.bundle_dir(task, seed)
        work = self.tmp / "work"

        def simulate(p: dict[str, str] | None, dest: Path) -> dict[str, Any]:
            sess = simulate_trajectory(profile, task, bdir, work, seed=seed, perturbation=p,
                                       chart_format=self.chart_format, upstream_quirks=self.upstream_quirks)
            shutil.rmtree(dest, ignore_errors=True)
            try:
                info = sess.write_trajectory(dest)
                started = sess.events[0]["timestamp"] if sess.events else 0.0
                return {"info": info, "started": started, "duration": sess.clock_ms - started,
                        "outputs": sess.output_files(), "sandbox": sess.sandbox_record(),
                        "acting_tiers": sess.acting_tiers}
            finally:
                sess.close()

        dest = self.tmp / "traj" / profile.profile_id / task.task_id
        res = simulate(pert, dest)
        check = None
        if pert is not None and unit.get("verify", True):
            res, pert, check = self.verify(simulate, dest, res, pert, list(unit.get("alternatives") or []))
        return self.write_unit(uid, profile, task, seed, pert, dest, res, t0, agent_kind="persona-simulator",
                               agent_version=AGENT_VERSION, check=check,
                               record_extra={"bundle_sha256": unit.get("bundle_sha256")})

    @staticmethod
    def unit_fingerprint(settings: list[Any], bundle_sha: str | None) -> str:
        """Hash of everything that decides the trajectory's bytes (``settings``), the item's key: a finished item
        is reused only if it matches — the bundle's content included, so a re-imported folder regenerates (case
        R2-generate-stale-trajectory-after-reimport). A bundle built on the fly is a function of (task, seed),
        already in the list."""
        settings = list(settings)
        if bundle_sha is not None:
            settings.append({"bundle_sha256": bundle_sha})
        return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def write_unit(self, uid: str, profile: Any, task: Any, seed: int, pert: dict[str, str] | None, dest: Path,
                   res: dict[str, Any], t0: float, *, agent_kind: str, agent_version: str,
                   check: dict[str, Any] | None = None, record_extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Finish a trajectory folder written at ``dest`` (``res``: ``info``, ``started``, ``duration``,
        ``outputs``, ``sandbox``, optional ``completed`` and ``acting_tiers``): meta.json, then the upload to
        ``trajectories/<profile>/<task>/``. Returns the item's fields (the runner's completion record)."""
        from filegram_ray.schema.meta import Perturbation, TrajectoryMeta, package_versions

        info, started, duration, outputs = res["info"], res["started"], res["duration"], res["outputs"]
        kept_counts = Counter(e["event_type"] for e in _read_events(dest / "events.json"))
        meta = TrajectoryMeta(
            trajectory_id=uid, profile_id=profile.profile_id, task_id=task.task_id, seed=seed,
            agent_kind=agent_kind, agent_version=agent_version,
            perturbation=Perturbation.model_validate(pert) if pert else None, perturbation_check=check,
            completed=bool(res.get("completed", True)),
            started_at_ms=float(started), duration_ms=float(duration), wall_time_s=round(time.perf_counter() - t0, 3),
            event_counts={"raw": info["n_events_raw"], "kept": info["n_events"], **dict(sorted(kept_counts.items()))},
            versions={k: v for k, v in package_versions().items() if k in ("filegram-ray", "python")},
            sandbox=res["sandbox"] if any(res["sandbox"].values()) else None,
            acting_tiers=res.get("acting_tiers"))
        meta_d = meta.to_json_dict()
        meta_d["wall_time_s"] = 0.0  # keep meta.json byte-identical across runs; wall time goes to the record

        (dest / "meta.json").write_text(json.dumps(meta_d, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                                        encoding="utf-8")
        rel = f"trajectories/{profile.profile_id}/{task.task_id}"
        self.run.remove(rel)  # a regenerated trajectory leaves nothing of its previous version behind
        self.run.put_tree(dest, rel)
        out_rows = []
        for o in outputs:
            data = (dest / "outputs" / o).read_bytes()
            out_rows.append({"path": o, "file_type": (Path(o).suffix.lstrip(".").lower() or "unknown"),
                             "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        shutil.rmtree(dest, ignore_errors=True)
        return {"trajectory_id": uid, "profile_id": profile.profile_id, "task_id": task.task_id,
                  "n_events_raw": info["n_events_raw"], "n_events": info["n_events"],
                  "perturbed": pert is not None, "kept_counts": dict(sorted(kept_counts.items())),
                  "perturbation_status": (check or {}).get("status"),
                  "outputs": out_rows, **(record_extra or {}),
                  "wall_s": round(time.perf_counter() - t0, 3), "pid": os.getpid(), "peak_rss_mb": _peak_rss_mb()}


    def verify(self, simulate, dest: Path, res: dict[str, Any], planned: dict[str, str],
               alts: list[dict[str, str]]) -> tuple[dict[str, Any], dict[str, str] | None, dict[str, Any]]:
        """Counterfactual check of a perturbation (reference §5.7; the check is ours): simulate the same unit
        without it and compare the perturbed dimension's fingerprint features. A shift that changes none of them
        is a no-op: the next of ``alts`` is tried; if none changes anything the unit is kept unperturbed (the
        counterfactual run).

        Returns (simulation result written at ``dest``, applied perturbation or None, the ``meta.json``
        ``perturbation_check`` record: status real | replaced | dropped, planned, applied, tried,
        baseline_fingerprint, fingerprint, shift {feature: [without, with]})."""
        base_dir = self.tmp / "counterfactual" / dest.parent.name / dest.name
        base_res = simulate(None, base_dir)
        base_fp = trajectory_fingerprint(base_dir)
        tried: list[dict[str, Any]] = []
        for k, cand in enumerate([planned, *alts]):
            if k:
                res = simulate(cand, dest)
            fp = trajectory_fingerprint(dest)
            shift = perturbation_shift(cand["dimension"], base_fp, fp)
            real = any(a != b for a, b in shift.values())
            tried.append({**cand, "real": real})
            if real:
                shutil.rmtree(base_dir, ignore_errors=True)
                return res, cand, {"status": "real" if k == 0 else "replaced", "planned": planned, "applied": cand,
                                   "tried": tried, "baseline_fingerprint": base_fp, "fingerprint": fp,
                                   "shift": shift}
        shutil.rmtree(dest, ignore_errors=True)
        shutil.move(str(base_dir), str(dest))
        return base_res, None, {"status": "dropped", "planned": planned, "applied": None, "tried": tried,
                                "baseline_fingerprint": base_fp, "fingerprint": base_fp, "shift": {}}


def _read_events(path: Path) -> list[dict[str, Any]]:
    import json

    return json.loads(path.read_text(encoding="utf-8"))


def _peak_rss_mb() -> float:
    try:
        import resource

        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)
    except (ImportError, OSError):  # pragma: no cover - non-POSIX
        return 0.0
