"""ShiftAna — Shift Analysis (T3; 3–6 choices; context: baseline sessions + one perturbed session).

Reference §9.1, §5.7. The last session shown was generated with one dimension moved by one tier (its
``meta.json`` perturbation); which change happened? Options are shifts in plain words ("everything in the top
folder → one or two folder levels"): the true one, the same dimension in the opposite direction, and one-tier
shifts of other dimensions away from the user's usual tier (all false). The other dimensions are taken from the
task's own probed dimensions first (the shift itself is drawn among them, reference §5.7), then from the rest: the
alternatives are changes the session could have shown. Until 2026-12-02 they were drawn from all five other
dimensions alike, so distractors were often habits the task barely exercises, which a memory-less count rule
rules out at a glance (issue #28: on one 12-profile set, count-rule accuracy 0.60 with the old draw, 0.54 with
this one, chance 0.24).

Baseline = up to :data:`MAX_BASELINE` of the user's unperturbed sessions (seeded sample, shown in task order).

Only real shifts (issue #16): a perturbed session whose counterfactual check (``TrajRec.shift_real``, from
``meta.json`` ``perturbation_check``) found no change in the perturbed dimension's features gives no item — the
question "which change happened" would have no right answer. Unchecked sessions (older runs) are kept.

COUNTS: every perturbed session gives one item per option count 3, 4, 5, 6 (different baseline samples); the pool
is sampled down to 2.88 items per perturbed session, the paper's 288 for its 100 perturbed sessions (reference §9.1,
§5.7).
"""

from __future__ import annotations

from filegram_ray.bench.common import Draft, rng, sample_down, session_label
from filegram_ray.bench.inputs import BenchInputs
from filegram_ray.bench.schema import ContextSpec
from filegram_ray.bench.vocab import DIMENSIONS, TIER_SHORT

NAME = "ShiftAna"
CHOICE_RANGE = (3, 4, 5, 6)  # reference §9.1
MAX_BASELINE = 8
#: Items per perturbed session in the paper: 288 items / 100 perturbed sessions (reference §9.1, §5.7).
ITEMS_PER_PERTURBED = 2.88
#: One-tier moves (reference §5.7 shift rule: L→M, R→M, M→L, M→R).
NEIGHBOURS = {"L": ("M",), "R": ("M",), "M": ("L", "R")}


def default_count(inputs: BenchInputs) -> int:
    return round(ITEMS_PER_PERTURBED * sum(t.perturbed and t.shift_real is not False for t in inputs.trajectories))


def shift_text(d: str, a: str, b: str) -> str:
    return f"{TIER_SHORT[d][a]} → {TIER_SHORT[d][b]}"


def build(inputs: BenchInputs, seed: int, target: int) -> list[Draft]:
    drafts: list[Draft] = []
    for p in inputs.profiles:
        own = sorted(inputs.trajectories_of(p.profile_id), key=lambda t: t.task_id)
        clean = [t for t in own if not t.perturbed]
        if not clean:
            continue
        for sess in (t for t in own if t.perturbed and t.shift_real is not False):
            pert = sess.perturbation
            d, a, b = pert["dimension"], pert["from"], pert["to"]
            correct = shift_text(d, a, b)
            false = [(e, p.tiers[e], n) for e in DIMENSIONS if e != d for n in NEIGHBOURS[p.tiers[e]]]
            probed = set(inputs.task(sess.task_id).dimensions)
            for k in CHOICE_RANGE:
                r = rng(seed, NAME, sess.trajectory_id, k)
                others = list(false)
                r.shuffle(others)
                others.sort(key=lambda x: x[0] not in probed)  # the task's probed dimensions first (stable)
                distractors = [shift_text(d, b, a)] + [shift_text(*x) for x in others[:k - 2]]
                if len(distractors) < k - 1:
                    continue
                base = sorted(r.sample(clean, min(MAX_BASELINE, len(clean))), key=lambda t: t.task_id)
                shown = [*base, sess]
                drafts.append(Draft(
                    sub_task=NAME, sub_class=f"dim:{d}", channel="episodic", profile_id=p.profile_id,
                    question=(f"The first {len(base)} sessions show this user's usual way of working. In the last "
                              f"one, {session_label(sess.task_id)}, exactly one habit changed. Which change was it?"),
                    correct=correct, distractors=distractors,
                    context=ContextSpec(kind="baseline_plus_session", trajectories=[t.trajectory_id for t in shown],
                                        labels=[session_label(t.task_id) for t in shown]),
                    facts={"session": sess.trajectory_id, "perturbation": dict(pert),
                           "usual_tiers": p.tiers},
                    sort_key=f"{sess.trajectory_id}|{k}"))
    return sample_down(drafts, target, seed, NAME)
