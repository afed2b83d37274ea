"""Issue #53: the simulated person does the task. Each task's plan reaches its outcome whatever the profile's tiers
(the tiers choose how), on real bundles: corrections made and logged (T-11), the report cut below 800 words
(T-09), every review comment decided (T-13), the version chain kept and described (T-14), the data recomputed
(T-15), batches applied in order with the index refreshed after each (T-18), duplicates settled (T-21), the
paperwork of an empty workspace (T-03, T-04, T-20); and nothing of the tools in any file, no move onto a file."""

from __future__ import annotations

import pytest

from filegram_ray.engine.simulator import simulate_trajectory
from filegram_ray.validity.motivation import markers_in_outputs
from filegram_ray.validity.outcomes import session_outcome

TASKS = ("T-03", "T-04", "T-09", "T-11", "T-13", "T-14", "T-15", "T-18", "T-20", "T-21")
#: p1 A-L B-L C-L D-L E-L (Chinese), p3 all but A and E at R (English), p5 A-R B-M C-M D-M E-R, p18 mostly R.
PROFILES = ("p1", "p3", "p5", "p18")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from filegram_ray.profiles import load_profiles
    from filegram_ray.tasks import load_tasks
    from filegram_ray.workspace.bundle import build_bundle

    root = tmp_path_factory.mktemp("plans")
    profiles = {p.profile_id.split("_")[0]: p for p in load_profiles()}
    tasks = {t.task_id: t for t in load_tasks()}
    bundles = {}
    for tid in TASKS:
        build_bundle(tasks[tid], 11, root / "ws" / tid, tts="tone")
        bundles[tid] = root / "ws" / tid
    return {"root": root, "profiles": profiles, "tasks": tasks, "bundles": bundles}


@pytest.mark.parametrize("tid", TASKS)
def test_every_profile_reaches_the_outcome(world, tid):
    for pid in PROFILES:
        sess = simulate_trajectory(world["profiles"][pid], world["tasks"][tid], world["bundles"][tid],
                                   world["root"] / "work", seed=11)
        dest = world["root"] / "traj" / pid / tid
        sess.write_trajectory(dest)
        sess.close()
        r = session_outcome(dest, world["bundles"][tid], tid)
        assert r["ok"], (pid, r["missing"])
        assert r["overwrites"] == [], (pid, r["overwrites"])
        assert markers_in_outputs(dest) == [], pid


def test_the_tiers_choose_how(world):
    """The same outcome, reached differently (three sessions each): T-11's corrections by small edits (D-L, p1) or
    fewer, larger changes (D-R, p3); T-21's duplicates deleted by E-L (p1), archived by E-R (p5)."""
    import json

    def counts(pid, tid):
        c: dict[str, int] = {}
        for seed in (11, 12, 13):
            dest = world["root"] / "tiers" / f"{pid}{seed}" / tid
            sess = simulate_trajectory(world["profiles"][pid], world["tasks"][tid], world["bundles"][tid],
                                       world["root"] / "work", seed=seed)
            sess.write_trajectory(dest)
            sess.close()
            assert session_outcome(dest, world["bundles"][tid], tid)["ok"], (pid, seed)
            for e in json.loads((dest / "events.json").read_text(encoding="utf-8")):
                key = e["event_type"] + (":" + e["operation"] if e.get("operation") else "")
                c[key] = c.get(key, 0) + 1
        return c

    l11, r11 = counts("p1", "T-11"), counts("p3", "T-11")
    assert l11.get("file_edit", 0) > r11.get("file_edit", 0)
    l21, r21 = counts("p1", "T-21"), counts("p5", "T-21")
    assert l21.get("file_delete", 0) > r21.get("file_delete", 0)
