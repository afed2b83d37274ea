"""Profile-pair design (ref §5.6): Hamming distance over the six tiers, fine and macro pairs, distractors.

Paper rule (ref §5.6): *fine-grained* pairs differ in 1–2 dimensions, *macro* pairs in >= 5. Tiers are compared as
letters (E = curation, see :mod:`filegram_ray.schema.profile`); rhythm is not a dimension and is ignored.
For the 20 bundled profiles the distance histogram is d=1: 3, d=2: 12, d=3: 34, d=4: 63, d=5: 51, d=6: 27
(ref §5.3), i.e. 15 fine and 78 macro pairs.
"""

from __future__ import annotations

from itertools import combinations

from filegram_ray.schema.profile import DIMENSIONS, Profile

#: distance bands (ref §5.6)
FINE_RANGE = (1, 2)
MACRO_MIN = 5


def hamming(a: Profile, b: Profile) -> int:
    """Number of dimensions (0–6) on which two profiles' tiers differ."""
    return sum(a.tiers[d] != b.tiers[d] for d in DIMENSIONS)


def _pairs(profiles: list[Profile], lo: int, hi: int) -> list[tuple[str, str, int]]:
    out = []
    for a, b in combinations(profiles, 2):
        d = hamming(a, b)
        if lo <= d <= hi:
            out.append((a.profile_id, b.profile_id, d))
    return sorted(out, key=lambda r: (r[2], r[0], r[1]))


def fine_pairs(profiles: list[Profile]) -> list[tuple[str, str, int]]:
    """Pairs 1–2 dimensions apart: ``[(id_a, id_b, distance), ...]``, ids in input order within a pair, sorted by
    distance then ids."""
    return _pairs(profiles, *FINE_RANGE)


def macro_pairs(profiles: list[Profile]) -> list[tuple[str, str, int]]:
    """Pairs >= 5 dimensions apart, same shape as :func:`fine_pairs`."""
    return _pairs(profiles, MACRO_MIN, len(DIMENSIONS))


def distance_histogram(profiles: list[Profile]) -> dict[int, int]:
    """``{distance: number of pairs}`` for distances 0..6."""
    hist = {d: 0 for d in range(len(DIMENSIONS) + 1)}
    for a, b in combinations(profiles, 2):
        hist[hamming(a, b)] += 1
    return hist


def distractor_candidates(target: Profile, profiles: list[Profile], min_shared: int = 3) -> list[Profile]:
    """Profiles other than ``target`` sharing at least ``min_shared`` tiers with it (hard distractors for
    identification items), most similar first, ties by id. Raises ``ValueError`` when ``min_shared`` is outside
    0..6."""
    if not 0 <= min_shared <= len(DIMENSIONS):
        raise ValueError(f"min_shared must be in 0..{len(DIMENSIONS)}, got {min_shared}")
    scored = [(len(DIMENSIONS) - hamming(target, p), p) for p in profiles if p.profile_id != target.profile_id]
    keep = [(s, p) for s, p in scored if s >= min_shared]
    return [p for s, p in sorted(keep, key=lambda r: (-r[0], r[1].profile_id))]
