"""AnomDet — Anomaly Detection (T3; 5–6 choices; context: sessions of one user plus one impostor session).

Reference §9.1. Four or five unperturbed sessions of the user are mixed with one session of a *similar* profile
done on a different task; the options name the sessions by task ("Session T-12") and exactly one is the impostor.
The impostor comes from a fine-grained pair, a profile that differs in 1–2 dimensions (reference §9.2: "distractors
come from fine-grained profile pairs differing in 1–2 dimensions"; §5.6); only a user with no such profile in the
set takes its impostors from the nearest profiles that still share ≥ 3 dimensions (the appendix rule of §9.2).
Until 2026-12-02 half of the impostors came from any profile sharing ≥ 3 dimensions (up to 3 differing): a
three-dimension difference lets a memory-less count rule that reads each shown session on its own pick the
impostor (issue #28: count-rule answerer at chance + 0.23–0.28 on two fresh 30-profile sets). The impostor's session must be on a task that
probes at least one dimension where the two profiles differ, so the difference can show; the user's sessions are
drawn first among tasks that probe one of those dimensions as well, then among the rest (like is compared with
like: until 2026-12-02 (morning) they were any of the user's tasks, so the impostor was often the one session whose
task exercises the dimension at all — many deletes or moves next to sessions of tasks that have none — which a
memory-less count rule reads without knowing anything of the user; issue #28). The user's perturbed sessions are
never used (they would be a second anomaly).

Only real differences (issue #16): when fingerprints are available (encode stage), the impostor session must differ
from the user's own session of the same task in at least one fingerprint feature of a dimension where the two
profiles differ (reference §7.3 columns) — otherwise nothing in the behaviour gives the impostor away.

COUNTS: per profile the builder draws its quota of distinct (impostor session, user sessions) combinations; total =
the paper's 815 for 20 × 32 (reference §9.1), scaled by profiles × tasks / (20 × 32) for other sets.
"""

from __future__ import annotations

from filegram_ray.bench.common import (
    FINE_MAX_DISTANCE,
    MIN_SHARED_DIMS,
    Draft,
    hamming,
    quotas,
    rng,
    sample_preferring,
    scaled_count,
    session_label,
)
from filegram_ray.bench.inputs import FINGERPRINT_FEATURES, BenchInputs, TrajRec
from filegram_ray.bench.schema import ContextSpec
from filegram_ray.bench.vocab import DIMENSIONS

NAME = "AnomDet"
CHOICE_RANGE = (5, 6)  # reference §9.1
#: Draw attempts per wanted item before a profile's quota is given up (pool exhausted).
ATTEMPTS_PER_ITEM = 20


#: Fingerprint columns of each dimension (reference §7.3 order: 3 A, 3 B, 3 C, 3 D, 2 E, 3 F).
DIM_COLUMNS: dict[str, tuple[int, ...]] = {"A": (0, 1, 2), "B": (3, 4, 5), "C": (6, 7, 8), "D": (9, 10, 11),
                                           "E": (12, 13), "F": (14, 15, 16)}
assert sum(len(c) for c in DIM_COLUMNS.values()) == len(FINGERPRINT_FEATURES)


def differs(inputs: BenchInputs, user_id: str, imp_t: TrajRec, dims: set[str]) -> bool:
    """True when the impostor session's fingerprint differs from the user's session of the same task on a column
    of ``dims``; True as well when either fingerprint is unknown (no encode stage: nothing to check)."""
    own = next((t for t in inputs.trajectories_of(user_id) if t.task_id == imp_t.task_id), None)
    if own is None or own.fingerprint is None or imp_t.fingerprint is None:
        return True
    return any(abs(own.fingerprint[i] - imp_t.fingerprint[i]) > 1e-9 for d in dims for i in DIM_COLUMNS[d])


def default_count(inputs: BenchInputs) -> int:
    return scaled_count(NAME, inputs.n_profiles, inputs.n_tasks)


def build(inputs: BenchInputs, seed: int, target: int) -> list[Draft]:
    drafts: list[Draft] = []
    eligible = []
    for p in inputs.profiles:
        own = [t for t in inputs.trajectories_of(p.profile_id) if not t.perturbed]
        if len(own) >= CHOICE_RANGE[0] - 1 and inputs.similar(p.profile_id, MIN_SHARED_DIMS):
            eligible.append(p)
    quota = quotas(target, [p.profile_id for p in eligible])
    for p in eligible:
        own = sorted((t for t in inputs.trajectories_of(p.profile_id) if not t.perturbed), key=lambda t: t.task_id)
        sims = inputs.similar(p.profile_id, MIN_SHARED_DIMS)
        nearest = min(hamming(p, s) for s in sims)
        # fine-grained pairs (1–2 dimensions apart, reference §9.2), else the nearest band that shares ≥ 3
        imps = [s for s in sims if hamming(p, s) <= FINE_MAX_DISTANCE] or [s for s in sims
                                                                          if hamming(p, s) == nearest]
        r = rng(seed, NAME, p.profile_id)
        seen: set[tuple] = set()
        made = 0
        for _ in range(ATTEMPTS_PER_ITEM * max(quota[p.profile_id], 1)):
            if made >= quota[p.profile_id]:
                break
            imp = r.choice(imps)
            diff = {d for d in DIMENSIONS if imp.tiers[d] != p.tiers[d]}
            cands = [t for t in inputs.trajectories_of(imp.profile_id) if not t.perturbed
                     and (not inputs.task(t.task_id).dimensions or diff & set(inputs.task(t.task_id).dimensions))
                     and differs(inputs, p.profile_id, t, diff)]
            if not cands:
                continue
            imp_t = r.choice(cands)
            pool = [t for t in own if t.task_id != imp_t.task_id]
            k = r.choice(CHOICE_RANGE)
            if len(pool) < k - 1:
                k = CHOICE_RANGE[0]
                if len(pool) < k - 1:
                    continue
            user_ts = sorted(sample_preferring(r, pool, lambda t: bool(diff & set(inputs.task(t.task_id).dimensions)),
                                               k - 1, k - 1), key=lambda t: t.task_id)
            key = (imp_t.trajectory_id, tuple(t.trajectory_id for t in user_ts))
            if key in seen:
                continue
            seen.add(key)
            shown = [*user_ts, imp_t]
            r.shuffle(shown)
            labels = [session_label(t.task_id) for t in shown]
            correct = session_label(imp_t.task_id)
            drafts.append(Draft(
                sub_task=NAME, sub_class=f"k:{k}", channel="episodic", profile_id=p.profile_id,
                question=(f"{k} work sessions are listed. All but one come from the same user; one was done by "
                          "someone else with similar but not identical habits. Which session is the odd one out?"),
                correct=correct, distractors=[lab for lab in labels if lab != correct],
                context=ContextSpec(kind="sessions_with_impostor", trajectories=[t.trajectory_id for t in shown],
                                    labels=labels),
                facts={"impostor": imp_t.trajectory_id, "impostor_profile": imp.profile_id,
                       "differing_dimensions": sorted(diff)},
                distractor_profiles=[imp.profile_id], sort_key=f"{p.profile_id}|{made:04d}"))
            made += 1
    return drafts
