"""Scheduling of the seed and caption stages (issue #31 item 3): longest units first, deterministic order, and the
caption pool's Ray Data plan (one recording per block, one task in flight per actor)."""

from __future__ import annotations

from filegram_ray.tasks import load_tasks
from filegram_ray.workspace.stage import bundle_cost, longest_first


def _units():
    return [{"unit_id": t.task_id, "task": t.model_dump(mode="json")} for t in load_tasks(None)]


def test_seed_units_speech_heavy_bundles_first():
    """Every bundle with planned voice memos (mp3/wav) is submitted before every bundle without any."""
    order = longest_first(_units())
    speech = [("mp3" in u["task"]["workspace"]["inputs"] or "wav" in u["task"]["workspace"]["inputs"])
              for u in order]
    assert any(speech) and not all(speech)
    first_plain = speech.index(False)
    assert not any(speech[first_plain:]), [u["unit_id"] for u in order]
    costs = [bundle_cost(u["task"]) for u in order]
    assert costs == sorted(costs, reverse=True)


def test_seed_order_is_deterministic_and_independent_of_input_order():
    units = _units()
    a = [u["unit_id"] for u in longest_first(units)]
    b = [u["unit_id"] for u in longest_first(list(reversed(units)))]
    assert a == b
    assert sorted(a) == sorted(u["unit_id"] for u in units)


def test_bundle_cost_of_an_empty_workspace_is_zero():
    assert bundle_cost({"workspace": {"empty": True, "inputs": {}}}) == 0
    assert bundle_cost({"workspace": {"inputs": {"wav": 1}}}) > bundle_cost({"workspace": {"inputs": {"pdf": 20}}})
