"""ShiftAna — Shift Analysis (T3; 3–6 choices; context: baseline sessions + one perturbed session).

Reference §9.1, §5.7. The last session shown was generated with one dimension moved by one tier (its
``meta.json`` perturbation); which change happened? Options are shifts in plain words ("everything in the top
folder → one or two folder levels"): the true one and false ones, in this order of preference:

1. **changes the session shows but the user did not make**: another dimension on which this session acted one
   tier away from the user's usual tier by the user's own session-to-session variation (``meta.json``
   ``acting_tiers``, persona simulator; issue #28: a session may go against type). Read on its own, the session
   shows both changes; only the user's usual spread, which a memory has and one session does not, says which one
   is the deliberate shift — the shifted dimension sits a whole tier away on average, a natural deviation just
   past the tier's edge.
2. the same dimension in the opposite direction;
3. one-tier shifts of other dimensions away from the user's usual tier, the task's probed dimensions first (the
   shift itself is drawn among them, reference §5.7), then the rest.

Until 2026-12-02 (morning) the false options were 2 and 3 only: every one of them was a change the session does
*not* show, so a memory-less rule that reads the shown session's tiers and compares them with the baseline sessions
picked the one shown change (issue #28: count-rule answerer at chance + 0.29 / + 0.32 on two fresh 30-profile
sets, bound + 0.15). Trajectories without ``acting_tiers`` (the LLM agent, older runs) get 2 and 3 only.

Baseline = up to :data:`MAX_BASELINE` of the user's unperturbed sessions (seeded sample, shown in task order),
drawn first among the sessions whose task probes the shifted dimension (the perturbed session's task does, reference
§5.7), then, only up to :data:`MIN_BASELINE`, among the rest. Like is compared with like: until 2026-12-02 the
baseline was any of the user's sessions, so a task that exercises a dimension (deletes, moves) read as a "change"
next to baselines from tasks that do not, whatever the user did (issue #28).

Only real shifts (issue #16): a perturbed session whose counterfactual check (``TrajRec.shift_real``, from
``meta.json`` ``perturbation_check``) found no change in the perturbed dimension's features gives no item — the
question "which change happened" would have no right answer. Unchecked sessions (older runs) are kept.

COUNTS: every perturbed session gives one item per option count 3, 4, 5, 6 (different baseline samples); the pool
is sampled down to 2.88 items per perturbed session, the paper's 288 for its 100 perturbed sessions (reference §9.1,
§5.7).
"""

from __future__ import annotations

from filegram_ray.bench.common import Draft, rng, sample_down, sample_preferring, session_label
from filegram_ray.bench.inputs import BenchInputs
from filegram_ray.bench.schema import ContextSpec
from filegram_ray.bench.vocab import DIMENSIONS, TIER_SHORT

NAME = "ShiftAna"
CHOICE_RANGE = (3, 4, 5, 6)  # reference §9.1
MAX_BASELINE = 8
#: Fewest baseline sessions shown; sessions of tasks that do not probe the shifted dimension fill up to it (ours).
MIN_BASELINE = 3
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
            acting = sess.acting_tiers or {}
            shown_changes = [(e, p.tiers[e], acting[e]) for e in DIMENSIONS
                             if e != d and acting.get(e) in NEIGHBOURS[p.tiers[e]]]
            false = [(e, p.tiers[e], n) for e in DIMENSIONS if e != d for n in NEIGHBOURS[p.tiers[e]]
                     if (e, p.tiers[e], n) not in shown_changes]
            probed = set(inputs.task(sess.task_id).dimensions)
            for k in CHOICE_RANGE:
                r = rng(seed, NAME, sess.trajectory_id, k)
                shown, others = list(shown_changes), list(false)
                r.shuffle(shown)
                r.shuffle(others)
                shown.sort(key=lambda x: x[0] not in probed)  # the task's probed dimensions first (stable)
                others.sort(key=lambda x: x[0] not in probed)
                ordered = [shift_text(*x) for x in shown] + [shift_text(d, b, a)] + [shift_text(*x) for x in others]
                distractors = ordered[:k - 1]
                if len(distractors) < k - 1:
                    continue
                base = sorted(sample_preferring(r, clean, lambda t: d in inputs.task(t.task_id).dimensions,
                                                MAX_BASELINE, MIN_BASELINE), key=lambda t: t.task_id)
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
