"""Tendencies, not quotas: each profile draws its own latent position on every dimension around its tier, and each
session draws where it acts from a distribution around that position, so neighbouring tiers overlap session by
session while a profile's sessions, taken together, still show its tier (the paper's agents were LLMs whose habits
show across sessions as distributions with noise).

Positions live on one axis per dimension: L = 0, M = 1, R = 2 (:data:`TIER_POS`).

* Profile level (:func:`profile_tendency`): ``offset`` ~ N(0, 0.18) clipped to ±0.35 (stays inside the tier's
  half-width 0.5, so the profile's own mean is still its tier) and a session spread ``sigma`` ~ U(0.30, 0.48);
  both seeded from SHA-256(master seed, profile id, dimension), so two profiles with the same tiers differ and
  a perturbed session of a profile keeps the profile's own offset and spread. :data:`PER_DIMENSION` sets other
  values for five dimensions:

  * B and E are narrower (E offset N(0, 0.09) clipped to ±0.18, spread U(0.26, 0.38); B offset N(0, 0.07)
    clipped to ±0.14, spread U(0.30, 0.42) until version 9; B's task × tier η² of avg_output_length reached 0.81 with E's values
    on a 32-task set, so B keeps less of its spread in the profile and more in the session). Their counts map
    the position through steep, one-sided curves (deletes 2.6 / 0.35 / 0.03 per session; output length ×3 per
    tier), so a profile sitting 0.35 off its tier, or a wide session spread that pushes an E-M profile's mean
    deletes toward E-L's (the curve is convex), made whole profiles unreadable: measured 2026-12-02,
    profile-level recovery B 0.77–0.83 and E 0.83–0.87 on two fresh 30-profile sets with single-session
    separability B ≤ 0.65, E ≤ 0.61. Version 10 narrows B's session spread to U(0.24, 0.34): with A and C back
    on the common spread, C-L's READMEs and F-L's data files reach B's counts in more of a profile's sessions,
    and B's profile-level recovery fell to 0.85–0.88 on fresh sets 5343 / 5344
    (docs/measurements/2026-12-06-perturbation-visibility.md).
  * D keeps the common spread with a narrower offset, N(0, 0.10) clipped to ±0.20: its counts (lines per edit,
    edits per file) are the noisiest of the six (single-session separability D 0.51–0.58), so a profile placed
    0.2–0.35 toward a neighbour read as that neighbour: profile-level recovery D leave-profiles-out 0.87–0.97 on
    four 30-profile sets (2805, 2806, 2811, 2812), 4 of its 7 misses with |offset| ≥ 0.18 (measured 2026-12-03).
  * A and C had a wider session spread in versions 6–9, U(0.42, 0.60), then U(0.50, 0.68). Their acting tier switches the whole strategy (A: the
    searching branch, C: nested folders), so with the common spread a single session read its tier best of all
    six (single-session separability A 0.71, C 0.78, the others 0.48–0.65, fresh sets 2803 / 2804), and a
    perturbed session's shift on A or C showed in one count: the memory-less count rule answered ShiftAna items
    on A and C at chance + 0.29–0.47, on B and D at chance − 0.17–+ 0.21. Measured 2026-12-03 on sets 2803 / 2804
    (docs/measurements/2026-12-03-validity-round6.md): separability A 0.71 → 0.64–0.65, C 0.77–0.78 → 0.69–0.72;
    profile-level recovery A 0.93–1.00, C 0.97–1.00. Version 7 widens both to U(0.50, 0.68) and narrows C's offset to
    N(0, 0.12) clipped to ±0.24: C's folder depth reads its acting tier exactly (TIER_TARGETS §2.3 hard bands), so
    the count rule read a C shift at chance + 0.23–0.30 and an A shift at + 0.13–0.17 on ShiftAna items of sets
    2833 / 2834, and C's profile-level misses were profiles placed 0.19–0.33 toward a neighbour (set 2824). Figures:
    docs/measurements/2026-12-04-validity-round11.md. Version 8 narrows A's offset the same way: on five 60-profile
    sets (2848, 2855–2858) 17 of the 21 profiles whose A tier was missed sat more than 0.2 toward the tier they were
    read as (docs/measurements/2026-12-04-validity-round12.md). Version 10 gives A and C the common spread
    again: version 9 made their counts vary inside a tier (one count reads the acting tier at 0.60–0.67), so the
    wide spread counted that noise twice — a quarter of a profile's unperturbed sessions acted another A tier and
    stood as far from the profile's other sessions as the perturbed ones (perturbation visibility 0.69:
    docs/measurements/2026-12-06-perturbation-visibility.md).
* Session level (:func:`session_positions`): ``s = TIER_POS[tier] + offset + N(0, sigma)``, the noise seeded
  from (master seed, profile id, task id, dimension) — the same noise with or without a perturbation, so a
  counterfactual re-simulation differs only by the shift. A perturbation moves the distribution, not the draw's
  spread: the shifted dimension of a perturbed session is ``TIER_POS[target] + offset + N(0, sigma)`` like any
  session of the target tier (reference §5.7: one tier, acted by the agent with its usual variability). Until
  2026-12-02 the shifted dimension used 40 % of the spread, which let a single count read the target tier of a
  perturbed session (the count rule read it in 0.81 of the perturbed A sessions;
  docs/measurements/2026-12-02-validity.md).
* The *acting tier* of a session is the tier nearest to ``s``; about 10–15 % (L, R) and 20–30 % (M) of a
  profile's sessions act a neighbouring tier, more on A and C (a session may go against type), and counts inside
  a tier are drawn from distributions whose means move continuously with ``s`` (:func:`lerp`).

The constants are ours (no source gives them); they were chosen so that a one-feature depth-2 tree reads the tier
of a single session with ≤ 0.80 accuracy while a profile's 32 sessions still recover its tier (≥ 0.90; the bounds
table of docs/validity.md, "The bounded checks").
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from filegram_ray.engine.simulator.persona import DIMENSIONS, derive_seed

TIER_POS = {"L": 0.0, "M": 1.0, "R": 2.0}
#: Profile offset: N(0, OFFSET_SD) clipped to ±OFFSET_MAX (tier half-width is 0.5).
OFFSET_SD, OFFSET_MAX = 0.18, 0.35
#: Session spread range (uniform per profile and dimension).
SIGMA_RANGE = (0.30, 0.48)
#: (offset SD, offset clip, spread range) where a dimension differs from the common values: A, B, C, D and E
#: narrower offsets, B and E a narrower session spread (module docstring); F keeps the common values.
PER_DIMENSION: dict[str, tuple[float, float, tuple[float, float]]] = {
    "B": (0.07, 0.14, (0.24, 0.34)), "E": (0.09, 0.18, (0.26, 0.38)), "D": (0.10, 0.20, SIGMA_RANGE),
    "A": (0.12, 0.24, SIGMA_RANGE), "C": (0.12, 0.24, SIGMA_RANGE)}
#: Share of the spread left on the shifted dimension of a perturbed session (1: the whole spread, module docstring).
PERTURBED_SPREAD = 1.0
#: SD of the log of a session's writing effort (:func:`session_effort`; ours, chosen in round 10:
#: docs/measurements/2026-12-04-validity-round10.md).
EFFORT_SD = 0.2


@dataclass(frozen=True)
class Tendency:
    """One profile's latent parameters: ``offset[d]`` (position units) and ``sigma[d]`` (session spread)."""

    offset: dict[str, float]
    sigma: dict[str, float]


def profile_tendency(profile_id: str, seed: int) -> Tendency:
    """The profile's latent offsets and spreads (module docstring); deterministic in (seed, profile_id)."""
    off: dict[str, float] = {}
    sig: dict[str, float] = {}
    for d in DIMENSIONS:
        rng = random.Random(derive_seed(seed, profile_id, d, "tendency"))
        sd, clip, spread = PER_DIMENSION.get(d, (OFFSET_SD, OFFSET_MAX, SIGMA_RANGE))
        off[d] = max(-clip, min(clip, rng.gauss(0.0, sd)))
        sig[d] = rng.uniform(*spread)
    return Tendency(offset=off, sigma=sig)


def session_positions(tiers: dict[str, str], tendency: Tendency, seed: int, profile_id: str, task_id: str,
                      shifted: str | None = None) -> dict[str, float]:
    """The session's position per dimension, ``s`` in about [-1, 3] (module docstring).

    Args:
        tiers: effective tiers A..F (after a perturbation).
        shifted: the perturbed dimension, or None.
    """
    out: dict[str, float] = {}
    for d in DIMENSIONS:
        rng = random.Random(derive_seed(seed, profile_id, task_id, d, "session"))
        z = rng.gauss(0.0, 1.0)
        sd = tendency.sigma[d] * (PERTURBED_SPREAD if d == shifted else 1.0)
        out[d] = TIER_POS[tiers[d]] + tendency.offset[d] + sd * z
    return out


def session_effort(seed: int, profile_id: str, task_id: str) -> float:
    """How much writing this session had time for: a factor ``exp(N(0, EFFORT_SD))`` on the length of every text file
    it writes, shared by all its files (a rushed session writes everything shorter: a person's output length varies
    from day to day, not only from file to file). Seeded from (master seed, profile id, task id), so a perturbed
    session and its counterfactual re-simulation draw the same effort. Measured 2026-12-04: without it the task ×
    B-tier cells explained 0.76–0.83 of avg_output_length's variance on eight fresh 30-profile sets (the per-file
    draws average out inside a session)."""
    rng = random.Random(derive_seed(seed, profile_id, task_id, "effort"))
    return math.exp(rng.gauss(0.0, EFFORT_SD))


def acting_tier(s: float) -> str:
    """The tier nearest to position ``s`` (L below 0.5, R from 1.5)."""
    return "L" if s < 0.5 else "M" if s < 1.5 else "R"


def lerp(s: float, at_l: float, at_m: float, at_r: float) -> float:
    """Piecewise-linear value at position ``s`` through (0, at_l), (1, at_m), (2, at_r); clamped outside [0, 2]."""
    s = max(0.0, min(2.0, s))
    return at_l + (at_m - at_l) * s if s <= 1.0 else at_m + (at_r - at_m) * (s - 1.0)


def poisson(rng: random.Random, lam: float) -> int:
    """A Poisson draw (Knuth's method; ``lam`` ≤ 30 here), 0 for ``lam`` ≤ 0."""
    if lam <= 0:
        return 0
    limit, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1
