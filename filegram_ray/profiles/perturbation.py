"""Behavioural perturbation plan (Track 3 ground truth, ref §5.7) as data.

For each profile, 5 of the 8 candidate tasks get one task-relevant dimension shifted by one tier: L→M, R→M, M→L or
M→R. **E is curation** here (ref §5.1). Two schemes:

- ``"upstream"`` reproduces ref §5.7's assignment procedure: task choice seeded by the first 8 hex digits of
  SHA-256(``"{pN}_perturbation_assignment"``), a CPython ``random.Random`` shuffle of the candidates in the order
  t12, t18, t22, t24, t26, t29, t31, t16, first 5 taken; per (profile, task) a RNG seeded from
  SHA-256(``"{pN}_{tNN}_perturbation"``) shuffles the task's active dimensions, takes the first, and for a
  middle tier flips ``rng.choice(["L", "R"])``. Upstream computes E shifts on the old *rhythm* tier; we convert to
  curation by swapping M↔R in from/to for profiles whose curation E is the swap of their rhythm E (the 13 profiles
  of ref §5.1). ``pN`` is the ``p<N>`` prefix of the id. This matches the table printed in ref §5.7 (100 shifts).
  Caveat, inherited from upstream: the swap turns a rhythm shift M→L into curation R→L, a two-tier jump; in the
  bundled set this happens once (p5_balanced_organizer, T-18). We keep it so that Shift-Analysis answers agree with
  the dataset's ``perturbation.json`` files; every other shift is one tier.
- ``"seeded"`` derives everything from the master seed via SHA-256 sub-seeds (``"{seed}:{profile_id}:..."``), on
  curation tiers directly; use it for generated profile sets.

Default (``scheme=None``): ``"upstream"`` for ids of the bundled pattern ``p<N>_...``, ``"seeded"`` otherwise.

Public API: :data:`CANDIDATE_TASKS`, :data:`TASK_ACTIVE_DIMS`, :func:`shift_tier`,
:func:`plan_perturbations(profiles, seed=0, scheme=None) -> dict[(profile_id, task_id), Perturbation]` (task ids
``"T-12"`` form), :func:`alternatives` (fallback shifts when the generator's counterfactual check finds a planned
shift to be a no-op).

Verification: a plan is a proposal. The generate stage runs every perturbed unit a second time without its
perturbation and keeps a shift only when the perturbed dimension's fingerprint features differ; otherwise it
tries :func:`alternatives` in order, and records what it did in ``meta.json`` ``perturbation_check``.
"""

from __future__ import annotations

import hashlib
import random
import re
from typing import Literal

from filegram_ray.schema.meta import Perturbation
from filegram_ray.schema.profile import Profile

#: Candidate tasks and the dimensions each can express (ref §5.7, runner TASK_ACTIVE_DIMS).
TASK_ACTIVE_DIMS: dict[str, tuple[str, ...]] = {
    "t12": ("C", "D", "B"), "t16": ("A", "B", "E"), "t18": ("D", "C", "E"), "t22": ("A", "B", "F"),
    "t24": ("A", "B", "E"), "t26": ("C", "A", "F"), "t29": ("C", "D", "A"), "t31": ("B", "C", "F"),
}
#: Candidate order used by the upstream shuffle (ref §5.7).
CANDIDATE_TASKS: tuple[str, ...] = ("t12", "t18", "t22", "t24", "t26", "t29", "t31", "t16")
#: Perturbed tasks per profile (paper: 5 of 32 trajectories; ref §5.7).
TASKS_PER_PROFILE = 5
_BUNDLED_ID = re.compile(r"^(p\d+)_")
_RHYTHM_LETTER = {"phased": "L", "steady": "M", "bursty": "R"}
_SWAP = {"L": "L", "M": "R", "R": "M"}

Scheme = Literal["seeded", "upstream"]


def _sha_seed(text: str, hex_digits: int = 8) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:hex_digits], 16)


def task_id(key: str) -> str:
    """``"t12"`` -> ``"T-12"``."""
    return f"T-{int(key[1:]):02d}"


def shift_tier(tier: str, rng: random.Random) -> str:
    """One-tier shift (ref §5.7): L→M, R→M, M→L|M→R by ``rng.choice(["L", "R"])`` (drawn only for M)."""
    if tier in ("L", "R"):
        return "M"
    if tier == "M":
        return rng.choice(["L", "R"])
    raise ValueError(f"unknown tier {tier!r}")


def _upstream(profile: Profile) -> dict[str, Perturbation]:
    m = _BUNDLED_ID.match(profile.profile_id)
    if not m:
        raise ValueError(f"profile {profile.profile_id!r}: the upstream scheme needs an id 'p<N>_...'")
    pn = m.group(1)
    rhythm_e = _RHYTHM_LETTER[profile.rhythm]
    tasks = list(CANDIDATE_TASKS)
    random.Random(_sha_seed(f"{pn}_perturbation_assignment")).shuffle(tasks)
    out: dict[str, Perturbation] = {}
    for key in tasks[:TASKS_PER_PROFILE]:
        rng = random.Random(_sha_seed(f"{pn}_{key}_perturbation"))
        dims = list(TASK_ACTIVE_DIMS[key])
        rng.shuffle(dims)
        dim = dims[0]
        if dim == "E" and rhythm_e != profile.tiers["E"]:
            if _SWAP[rhythm_e] == profile.tiers["E"]:  # rhythm convention -> curation: swap M<->R (ref §5.1)
                fr_rhythm = rhythm_e
                to_rhythm = shift_tier(fr_rhythm, rng)
                fr, to = _SWAP[fr_rhythm], _SWAP[to_rhythm]
            else:  # rhythm unrelated to curation (non-bundled data): shift the curation tier itself
                fr = profile.tiers["E"]
                to = shift_tier(fr, rng)
        else:
            fr = profile.tiers[dim]
            to = shift_tier(fr, rng)
        out[task_id(key)] = Perturbation(dimension=dim, from_=fr, to=to)
    return out


def _seeded(profile: Profile, seed: int) -> dict[str, Perturbation]:
    rng = random.Random(_sha_seed(f"{seed}:{profile.profile_id}:perturbation_tasks", 16))
    chosen = sorted(rng.sample(sorted(CANDIDATE_TASKS), TASKS_PER_PROFILE))
    out: dict[str, Perturbation] = {}
    for key in chosen:
        r = random.Random(_sha_seed(f"{seed}:{profile.profile_id}:{key}:perturbation", 16))
        dim = r.choice(TASK_ACTIVE_DIMS[key])
        fr = profile.tiers[dim]
        out[task_id(key)] = Perturbation(dimension=dim, from_=fr, to=shift_tier(fr, r))
    return out


def plan_perturbations(profiles: list[Profile], seed: int = 0,
                       scheme: Scheme | None = None) -> dict[tuple[str, str], Perturbation]:
    """The perturbation plan: ``{(profile_id, "T-NN"): Perturbation}`` with 5 entries per profile.

    ``scheme`` None picks per profile (module docstring); ``seed`` only affects ``"seeded"``. Raises
    ``ValueError`` for an unknown scheme or ``"upstream"`` on an id without the ``p<N>_`` prefix."""
    if scheme not in (None, "seeded", "upstream"):
        raise ValueError(f"unknown perturbation scheme {scheme!r} (expected 'seeded' or 'upstream')")
    plan: dict[tuple[str, str], Perturbation] = {}
    for p in profiles:
        use = scheme or ("upstream" if _BUNDLED_ID.match(p.profile_id) else "seeded")
        per = _upstream(p) if use == "upstream" else _seeded(p, seed)
        for tid in sorted(per):
            plan[(p.profile_id, tid)] = per[tid]
    return plan


def alternatives(profile: Profile, tid: str, planned: Perturbation, seed: int = 0) -> list[Perturbation]:
    """Fallback shifts for a planned one that the generator's counterfactual check finds to be a no-op: the task's
    other active dimensions (ref §5.7 map, in map order), each shifted one tier from the profile's tier with a
    SHA-256-seeded choice for M. Empty when ``tid`` is not a candidate task."""
    key = f"t{int(tid.split('-')[1]):02d}" if tid.startswith("T-") else tid
    out: list[Perturbation] = []
    for dim in TASK_ACTIVE_DIMS.get(key, ()):
        if dim == planned.dimension:
            continue
        r = random.Random(_sha_seed(f"{seed}:{profile.profile_id}:{key}:{dim}:alternative", 16))
        fr = profile.tiers[dim]
        out.append(Perturbation(dimension=dim, from_=fr, to=shift_tier(fr, r)))
    return out
