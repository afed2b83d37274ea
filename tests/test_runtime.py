"""map_units: serial and Ray actor-pool execution, error rows, actor death and resubmission."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from filegram_ray.stages.executors import map_units


class Squarer:
    def __init__(self, marker_dir: str | None = None, die_on: str | None = None):
        self.marker_dir = Path(marker_dir) if marker_dir else None
        self.die_on = die_on

    def process(self, unit):
        if unit["unit_id"] == "bad":
            raise ValueError("bad unit")
        if self.die_on == unit["unit_id"] and self.marker_dir is not None:
            marker = self.marker_dir / "died-once"
            if not marker.exists():
                marker.write_text("x")
                os._exit(1)  # kill the actor process mid-unit
        return {"value": unit["x"] ** 2}


def _units():
    return [{"unit_id": f"u{i}", "x": i} for i in range(6)] + [{"unit_id": "bad", "x": 0}]


def test_serial_error_row_does_not_sink_batch():
    rows = map_units(Squarer, _units(), executor="serial", stage="t", progress=False)
    ok = {r["unit"]: r["value"] for r in rows if r["status"] == "ok"}
    assert ok == {f"u{i}": i * i for i in range(6)}
    (err,) = [r for r in rows if r["status"] == "error"]
    assert err["unit"] == "bad" and err["error_type"] == "ValueError" and "bad unit" in err["error"]


@pytest.mark.ray
def test_ray_pool_survives_actor_death(tmp_path, ray_local):
    import sys

    from ray import cloudpickle

    # ship the worker class by value: workers need not import this test module, whoever started Ray
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    rows = map_units(Squarer, _units(), init_kwargs={"marker_dir": str(tmp_path), "die_on": "u3"},
                     num_actors=2, num_cpus_per_actor=0.5, stage="t", progress=False)
    assert (tmp_path / "died-once").exists()  # the actor really died once
    units = sorted(r["unit"] for r in rows)
    assert units == sorted([f"u{i}" for i in range(6)] + ["bad"])  # each unit exactly once
    ok = {r["unit"]: r["value"] for r in rows if r["status"] == "ok"}
    assert ok == {f"u{i}": i * i for i in range(6)}
