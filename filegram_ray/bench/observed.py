"""What the shown sessions of an item give away on their own: the memory-less view AnomDet's builder designs
against.

An AnomDet item shows a few sessions of one user and one impostor session. A reader without memory can compare
them only with each other. Issue #28 asks that such a reader stay near chance (count-rule answerer ≤ chance + 0.15).
:class:`ObservedView` measures, from the fingerprints alone, how far one session stands from a few others on the
columns of some dimensions, so that a builder can prefer, among contexts that are all valid for the item, the one
whose answer the shown sessions do not give away for a reason the question is not about (the idea of adversarial
filtering, Zellers et al. 2018, "SWAG"; here over the choice of context, never over the answer).

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

    def known(self, trajs: Sequence[TrajRec]) -> bool:
        """True when every one of ``trajs`` has a fingerprint."""
        return all(t.trajectory_id in self.z for t in trajs)

    def distance(self, session: TrajRec, others: Sequence[TrajRec], dims: Sequence[str]) -> float | None:
        """Euclidean distance of ``session`` from the mean of ``others`` over the columns of ``dims`` (task-SDs);
        None without fingerprints, 0.0 when ``dims`` is empty."""
        if not others or not self.known([session, *others]):
            return None
        cols = [i for d in dims for i in DIM_COLUMNS[d]]
        if not cols:
            return 0.0
        dz = self.z[session.trajectory_id] - np.mean([self.z[t.trajectory_id] for t in others], axis=0)
        return float(np.linalg.norm(dz[cols]))
