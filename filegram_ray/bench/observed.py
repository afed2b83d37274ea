"""What the shown sessions of an item give away on their own: the memory-less view AnomDet's builder designs
against.

An AnomDet item shows a few sessions of one user and one impostor session; a ShiftAna item shows a few baseline
sessions of one user and one perturbed session. A reader without memory can compare them only with each other.
Such a reader must stay near chance (count-rule answerer ≤ chance + 0.15, a bound of docs/validity.md).
:class:`ObservedView` measures, from the fingerprints alone, how far one session stands from a few others on the
columns of some dimensions, and how far it moved along the direction from one tier to another
(:meth:`ObservedView.departure`), so that a builder can prefer, among contexts and false options that are all
valid for the item, those whose answer the shown sessions do not give away for a reason the question is not about
(the idea of adversarial filtering, Zellers et al. 2018, "SWAG"; over the choice of context and of false options,
never over the answer).

Units: each fingerprint feature is ``log1p`` of its value, standardised per task over the run's sessions of that
task (mean 0, SD 1; a constant feature stays 0), so distances are in task-SDs and a task that exercises a
dimension more than another does not count as a difference.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from filegram_ray.bench.inputs import BenchInputs, TrajRec
from filegram_ray.memory.constants import FINGERPRINT_COLUMNS as DIM_COLUMNS  # (reference §7.3)


class ObservedView:
    """Per-task standardised fingerprints of a run's sessions (module docstring).

    Args:
        inputs: the bench inputs; trajectories without a fingerprint (no encode stage) are left out, and every
            measure that needs one of them returns None.
    """

    def __init__(self, inputs: BenchInputs):
        by_task: dict[str, list[TrajRec]] = {}
        for t in inputs.trajectories:
            if t.fingerprint is not None:
                by_task.setdefault(t.task_id, []).append(t)
        self.z: dict[str, np.ndarray] = {}
        for ts in by_task.values():
            X = np.log1p(np.maximum(np.asarray([t.fingerprint for t in ts], dtype=float), 0.0))
            sd = X.std(axis=0)
            Z = (X - X.mean(axis=0)) / np.where(sd > 1e-12, sd, 1.0)
            self.z.update((t.trajectory_id, row) for t, row in zip(ts, Z))
        self._tiers = {p.profile_id: p.tiers for p in inputs.profiles}
        self._clean = [t for t in inputs.trajectories if not t.perturbed and t.trajectory_id in self.z
                       and t.profile_id in self._tiers]
        self._dirs: dict[tuple[str, str, str], np.ndarray] = {}

    def known(self, trajs: Sequence[TrajRec]) -> bool:
        """True when every one of ``trajs`` has a fingerprint."""
        return all(t.trajectory_id in self.z for t in trajs)

    def _difference(self, session: TrajRec, others: Sequence[TrajRec]) -> np.ndarray | None:
        """``session``'s standardised fingerprint minus the mean of ``others``'; None without fingerprints."""
        if not others or not self.known([session, *others]):
            return None
        return self.z[session.trajectory_id] - np.mean([self.z[t.trajectory_id] for t in others], axis=0)

    def distance(self, session: TrajRec, others: Sequence[TrajRec], dims: Sequence[str]) -> float | None:
        """Euclidean distance of ``session`` from the mean of ``others`` over the columns of ``dims`` (task-SDs);
        None without fingerprints, 0.0 when ``dims`` is empty."""
        dz = self._difference(session, others)
        if dz is None:
            return None
        cols = [i for d in dims for i in DIM_COLUMNS[d]]
        return float(np.linalg.norm(dz[cols])) if cols else 0.0

    def direction(self, dim: str, a: str, b: str) -> np.ndarray:
        """Unit vector over ``dim``'s columns from tier ``a`` to tier ``b``: the mean standardised fingerprint of the
        run's unperturbed sessions of profiles at ``b`` on ``dim`` minus that at ``a``, normalised (the builder
        knows the profiles' tiers; a method never sees this). Zero when either tier has no session."""
        key = (dim, a, b)
        if key not in self._dirs:
            cols = list(DIM_COLUMNS[dim])
            mean = {}
            for tier in (a, b):
                rows = [self.z[t.trajectory_id][cols] for t in self._clean if self._tiers[t.profile_id][dim] == tier]
                mean[tier] = np.mean(rows, axis=0) if rows else None
            u = (mean[b] - mean[a]) if mean[a] is not None and mean[b] is not None else np.zeros(len(cols))
            n = float(np.linalg.norm(u))
            self._dirs[key] = u / n if n > 1e-12 else np.zeros(len(cols))
        return self._dirs[key]

    def departure(self, session: TrajRec, others: Sequence[TrajRec], dim: str, a: str, b: str) -> float | None:
        """How far ``session`` moved from the mean of ``others`` toward tier ``b`` from tier ``a`` on ``dim``: the
        projection of the difference over ``dim``'s columns on :meth:`direction` (task-SDs; negative = away).
        None without fingerprints."""
        dz = self._difference(session, others)
        return None if dz is None else float(dz[list(DIM_COLUMNS[dim])] @ self.direction(dim, a, b))
