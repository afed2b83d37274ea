"""ShiftAna and AnomDet use only real behavioural differences (issue #16): a perturbation whose counterfactual
check found no change gives no ShiftAna item; an AnomDet impostor must differ from the user's own session of the
same task in a dimension where the two profiles differ."""

from __future__ import annotations

from filegram_ray.bench.builders import anomdet, shiftana
from filegram_ray.bench.inputs import BenchInputs, ProfileRec, TaskRec, TrajRec

TASKS = [f"T-{i:02d}" for i in range(1, 11)]


def _profile(pid: str, vector: str) -> ProfileRec:
    return ProfileRec(profile_id=pid, name=pid, role="Analyst", language="English",
                      tiers=dict(zip("ABCDEF", vector, strict=True)), attributes={})


def _fp(seed: int) -> tuple[float, ...]:
    return tuple(float((seed * 7 + i * 3) % 11) for i in range(17))


def _inputs(shift_real: dict[str, bool | None], same_as_user: bool = False) -> BenchInputs:
    profiles = [_profile("u1", "LLLLLM"), _profile("u2", "LLLLML"), _profile("u3", "MLLLLM"),
                _profile("u4", "LMLLLM")]
    trajs = []
    for k, p in enumerate(profiles):
        for j, t in enumerate(TASKS):
            pert = None
            real = None
            if p.profile_id == "u1" and t in shift_real:
                pert, real = {"dimension": "C", "from": "L", "to": "M"}, shift_real[t]
            fp = _fp(j) if same_as_user else _fp(100 * k + j)
            trajs.append(TrajRec(trajectory_id=f"{p.profile_id}/{t}", profile_id=p.profile_id, task_id=t,
                                 perturbation=pert, fingerprint=fp, shift_real=real))
    return BenchInputs(profiles=profiles, tasks=[TaskRec(task_id=t, type="understand") for t in TASKS],
                       trajectories=trajs)


def test_shiftana_skips_noop_shifts():
    inp = _inputs({"T-02": True, "T-05": False, "T-07": None})
    drafts = shiftana.build(inp, seed=3, target=1000)
    sessions = {d.facts["session"] for d in drafts}
    assert sessions == {"u1/T-02", "u1/T-07"}  # the checked no-op (T-05) is left out; unchecked ones stay
    assert shiftana.default_count(inp) == round(shiftana.ITEMS_PER_PERTURBED * 2)


def test_anomdet_impostor_must_differ_on_a_differing_dimension():
    real = anomdet.build(_inputs({}), seed=3, target=40)
    assert real, "distinct fingerprints: items are built"
    for d in real:
        imp = d.facts["impostor"]
        assert d.facts["differing_dimensions"] and imp.split("/")[0] != d.profile_id
    # every session identical to the user's own session of the same task: nothing gives an impostor away
    assert anomdet.build(_inputs({}, same_as_user=True), seed=3, target=40) == []
    inp = _inputs({}, same_as_user=True)
    assert not anomdet.differs(inp, "u1", inp.trajectories_of("u2")[0], {"E", "F"})
    no_fp = BenchInputs(profiles=inp.profiles, tasks=inp.tasks,
                        trajectories=[TrajRec(t.trajectory_id, t.profile_id, t.task_id) for t in inp.trajectories])
    assert anomdet.differs(no_fp, "u1", no_fp.trajectories_of("u2")[0], {"E"})  # unknown: no check possible
