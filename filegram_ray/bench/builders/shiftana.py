"""ShiftAna — Shift Analysis (T3; 3–6 choices; context: baseline sessions + one perturbed session).

Reference §9.1, §5.7. The last session shown was generated with one dimension moved by one tier (its
``meta.json`` perturbation); which change happened? Options are shifts in plain words ("everything in the top
folder → one or two folder levels"): the true one and false ones.

False options, when the shown sessions have fingerprints (encode stage; the validity check builds them in memory):
every one-tier move of a dimension away from the user's usual tier other than the true shift — the other
dimensions, and on the shifted dimension the other direction when the usual tier is M — ranked by how far the shown
session stands from the shown baseline toward that move's tier
(:meth:`~filegram_ray.bench.observed.ObservedView.toward`): the changes the shown sessions display most come first,
so that read against the baseline with one coarse count several options look like the change, and only how far
the session moved against the user's usual spread says which one is the deliberate shift. Works for any
trajectory with a fingerprint (the LLM agent records no acting tiers). The opposite of the true
shift (its "from" is not the user's usual tier) comes last. Without fingerprints (older runs, a bench without
encode) the order is the one used until 2026-12-03: dimensions the session acted one tier off the user's usual
tier by the user's own variation (``meta.json`` ``acting_tiers``, persona simulator; issue #28: a session may go
against type), then the opposite of the true shift, then one-tier shifts of other dimensions, the task's probed
dimensions first (the shift itself is drawn among them, reference §5.7).

Until 2026-12-02 (morning) the false options were changes the session does *not* show, so a memory-less rule
that compares the shown session's tiers with the baseline sessions picked the one shown change (issue #28:
count-rule answerer at chance + 0.29 / + 0.32 on two fresh 30-profile sets, bound + 0.15); with the acting-tier
order it was still chance + 0.19 / + 0.28: the shifted dimension read as changed in 49 % of the sessions, a false
option in 17 %.

Baseline = up to :data:`MAX_BASELINE` of the user's unperturbed sessions (seeded sample, shown in task order), drawn
first among the sessions whose task probes the shifted dimension (the perturbed session's task does, reference
§5.7), then, only up to :data:`MIN_BASELINE`, among the rest. Like is compared with like: until 2026-12-02 the
baseline was any of the user's sessions, so a task that exercises a dimension (deletes, moves) read as a "change"
next to baselines from tasks that do not, whatever the user did (issue #28).

Measured 2026-12-03 on two fresh 30-profile sets (seeds 2803 / 2804, docs/measurements/2026-12-03-validity.md):
count-rule answerer chance + 0.31 / + 0.22 with the acting-tier order, + 0.24 / + 0.21 with the observed order —
still above issue #28's + 0.15. A smaller baseline (3 sessions) and keeping, of 4 baseline samples, the one the
session stands least far from moved it by less than the draw-to-draw noise (± 0.03) on those sets, and were not
kept.

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
from filegram_ray.bench.observed import ObservedView
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


def _acting_order(r, d: str, a: str, b: str, usual: dict[str, str], acting: dict[str, str],
                  probed: set[str]) -> list[tuple[str, str, str]]:
    """False options without fingerprints (module docstring): acting-tier changes, the opposite, the rest."""
    shown = [(e, usual[e], acting[e]) for e in DIMENSIONS if e != d and acting.get(e) in NEIGHBOURS[usual[e]]]
    others = [(e, usual[e], n) for e in DIMENSIONS if e != d for n in NEIGHBOURS[usual[e]]
              if (e, usual[e], n) not in shown]
    r.shuffle(shown)
    r.shuffle(others)
    shown.sort(key=lambda x: x[0] not in probed)  # the task's probed dimensions first (stable)
    others.sort(key=lambda x: x[0] not in probed)
    return [*shown, (d, b, a), *others]


def _observed_order(r, view: ObservedView, sess, base, d: str, a: str, b: str, usual: dict[str, str],
                    probed: set[str]) -> list[tuple[str, str, str]] | None:
    """False options ranked by the shown session's departure from ``base`` toward each (module docstring); None
    without fingerprints."""
    moves = [(e, usual[e], n) for e in DIMENSIONS for n in NEIGHBOURS[usual[e]] if (e, usual[e], n) != (d, a, b)]
    far = {m: view.toward(sess, base, *m) for m in moves}
    if any(v is None for v in far.values()):
        return None
    r.shuffle(moves)
    moves.sort(key=lambda m: (-round(far[m], 9), m[0] not in probed))
    return [*moves, (d, b, a)]


def build(inputs: BenchInputs, seed: int, target: int) -> list[Draft]:
    drafts: list[Draft] = []
    view = ObservedView(inputs)
    for p in inputs.profiles:
        own = sorted(inputs.trajectories_of(p.profile_id), key=lambda t: t.task_id)
        clean = [t for t in own if not t.perturbed]
        if not clean:
            continue
        for sess in (t for t in own if t.perturbed and t.shift_real is not False):
            pert = sess.perturbation
            d, a, b = pert["dimension"], pert["from"], pert["to"]
            correct = shift_text(d, a, b)
            probed = set(inputs.task(sess.task_id).dimensions)
            for k in CHOICE_RANGE:
                r = rng(seed, NAME, sess.trajectory_id, k)
                base = sorted(sample_preferring(r, clean, lambda t: d in inputs.task(t.task_id).dimensions,
                                                MAX_BASELINE, MIN_BASELINE), key=lambda t: t.task_id)
                order = (_observed_order(r, view, sess, base, d, a, b, p.tiers, probed)
                         or _acting_order(r, d, a, b, p.tiers, sess.acting_tiers or {}, probed))
                distractors = [shift_text(*x) for x in order[:k - 1]]
                if len(distractors) < k - 1:
                    continue
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
