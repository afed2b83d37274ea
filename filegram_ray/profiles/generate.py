"""Build a profile set of any size: ``filegram profiles new --n 200 --seed 7 --out DIR``.

Shape of the output directory: one ``<profile_id>.yaml`` per profile (our :class:`Profile` format, ids
``g0001`` … in build order) and ``pairs.json`` = ``{"seed", "n", "fine": [[id_a, id_b, d], ...], "macro": [...],
"histogram": {d: count}}`` (pair rules of :mod:`filegram_ray.profiles.pairs`). Same seed, same bytes.

How a profile is made (all randomness from ``random.Random`` sub-seeds derived with SHA-256 from the master seed):

- **Tiers** — per dimension, a list with each of L/M/R ``n // 3`` times (remainder spread L, M, R in a seeded
  order) shuffled independently, so every tier of every dimension is covered as evenly as ``n`` allows (the bundled
  set has 6–7 per tier, ref §5.3). Duplicate vectors are then repaired by swapping one dimension's tiers between a
  duplicate and another profile (keeps the per-dimension counts) while ``n`` <= 3**6.
- **Identity** — half the profiles English (``Faker("en_US")``), half Chinese (``Faker("zh_CN")``), alternating;
  each Faker is ``seed_instance``-ed from the master seed; name = ``name()``, role = ``job()`` (in the profile's
  language). Names are kept unique.
- **Rhythm** — from the curation tier with the relation that holds in all 20 bundled profiles (ref §5.3 E(m)/E(y):
  L→phased, M→bursty, R→steady), so the upstream perturbation conversion stays valid.
- **Attributes** — the deterministic ones of ref §5.2 follow the tier
  (:data:`~filegram_ray.schema.profile.DETERMINISTIC_ATTRIBUTES`); the free ones are drawn from their observed value
  spaces, with the value that matches the tier (our alignment, :data:`FREE_ALIGNMENT`) at probability 0.6 and the
  rest uniform; ``tone`` is professional 0.6 / friendly 0.2 / casual 0.2 (the 20 profiles: 14/4/2 of 20,
  rounded).
- **Text** — persona, preferences, avoidances and greeting from the per-tier phrase tables of
  :mod:`filegram_ray.profiles.phrases` in the profile's language.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import yaml

from filegram_ray.profiles.pairs import distance_histogram, fine_pairs, macro_pairs
from filegram_ray.profiles.phrases import GREETINGS, avoidances_for, compose_persona, preferences_for
from filegram_ray.schema.profile import (
    BEHAVIOURAL_ATTRIBUTES,
    DETERMINISTIC_ATTRIBUTES,
    DIMENSIONS,
    FREE_ATTRIBUTE_VALUES,
    TIERS,
    Profile,
)

#: free attribute -> (dimension, {tier: aligned value}); a tier missing from the map draws uniformly.
FREE_ALIGNMENT: dict[str, tuple[str, dict[str, str]]] = {
    "documentation": ("B", {"L": "comprehensive", "M": "moderate", "R": "minimal"}),
    "output_structure": ("B", {"L": "hierarchical", "R": "flat_list"}),
    "thoroughness": ("A", {"L": "exhaustive", "M": "balanced", "R": "minimal"}),
    "organization_style": ("C", {"L": "deeply_nested", "M": "by_type", "R": "flat"}),
    "naming_convention": ("C", {"L": "descriptive_long", "R": "short_abbreviation"}),
    "naming": ("C", {"L": "long_descriptive", "R": "short_abbrev"}),
    "version_strategy": ("D", {"L": "keep_history", "M": "archive_old", "R": "overwrite"}),
    "error_handling": ("D", {"L": "defensive", "M": "balanced", "R": "optimistic"}),
    "working_style": ("E", {"L": "methodical", "M": "pragmatic", "R": "exploratory"}),
}
TONE_WEIGHTS = {"professional": 0.6, "friendly": 0.2, "casual": 0.2}
ALIGNED_P = 0.6
RHYTHM_FROM_CURATION = {"L": "phased", "M": "bursty", "R": "steady"}


def _sub(seed: int, label: str) -> int:
    return int(hashlib.sha256(f"{seed}:profileset:{label}".encode()).hexdigest()[:16], 16)


def balanced_vectors(n: int, seed: int) -> list[dict[str, str]]:
    """``n`` tier vectors, each tier of each dimension used ``n//3`` or ``n//3 + 1`` times (shape: list of
    ``{A..F: tier}``). Raises ``ValueError`` for ``n < 1``."""
    if n < 1:
        raise ValueError(f"profile count must be >= 1, got {n}")
    cols: dict[str, list[str]] = {}
    for d in DIMENSIONS:
        rng = random.Random(_sub(seed, f"tiers:{d}"))
        extra = list(TIERS)
        rng.shuffle(extra)
        col = [t for t in TIERS for _ in range(n // 3)] + extra[: n % 3]
        rng.shuffle(col)
        cols[d] = col
    if n <= len(TIERS) ** len(DIMENSIONS):
        rng = random.Random(_sub(seed, "dedupe"))
        for _ in range(50 * n):
            seen: dict[tuple[str, ...], int] = {}
            dup = None
            for i in range(n):
                key = tuple(cols[d][i] for d in DIMENSIONS)
                if key in seen:
                    dup = i
                    break
                seen[key] = i
            if dup is None:
                break
            d = rng.choice(DIMENSIONS)
            j = rng.randrange(n)
            cols[d][dup], cols[d][j] = cols[d][j], cols[d][dup]
    return [{d: cols[d][i] for d in DIMENSIONS} for i in range(n)]


def _attributes(tiers: dict[str, str], rng: random.Random) -> dict[str, str]:
    out: dict[str, str] = {}
    for a in BEHAVIOURAL_ATTRIBUTES:
        if a in DETERMINISTIC_ATTRIBUTES:
            dim, table = DETERMINISTIC_ATTRIBUTES[a]
            out[a] = table[tiers[dim]]
        elif a == "tone":
            out[a] = rng.choices(list(TONE_WEIGHTS), weights=list(TONE_WEIGHTS.values()))[0]
        else:
            space = FREE_ATTRIBUTE_VALUES[a]
            dim, align = FREE_ALIGNMENT[a]
            want = align.get(tiers[dim])
            if want is not None and rng.random() < ALIGNED_P:
                out[a] = want
            else:
                out[a] = rng.choice([v for v in space if v != want])
    return out


def build_profile_set(n: int, seed: int) -> list[Profile]:
    """``n`` profiles (module docstring). Deterministic in ``(n, seed)`` for a given Faker version."""
    from faker import Faker

    fakers = {"en": Faker("en_US"), "zh": Faker("zh_CN")}
    for lang, fk in fakers.items():
        fk.seed_instance(_sub(seed, f"faker:{lang}"))
    rng = random.Random(_sub(seed, "attributes"))
    used: set[str] = set()
    profiles = []
    for i, tiers in enumerate(balanced_vectors(n, seed)):
        lang = "en" if i % 2 == 0 else "zh"
        fk = fakers[lang]
        name = fk.name()
        while name in used:
            name = fk.name()
        used.add(name)
        role = fk.job()
        attrs = _attributes(tiers, rng)
        rhythm = RHYTHM_FROM_CURATION[tiers["E"]]
        greet = rng.choice(GREETINGS[lang][attrs["tone"]]).format(name=name, role=role)
        profiles.append(Profile(
            profile_id=f"g{i + 1:04d}", name=name, role=role, language="English" if lang == "en" else "Chinese",
            tiers=tiers, rhythm=rhythm, attributes=attrs,
            persona=compose_persona(lang, name, role, tiers, rhythm),
            preferences=preferences_for(lang, tiers), avoidances=avoidances_for(lang, tiers), greeting=greet))
    return profiles


def write_profile_set(profiles: list[Profile], out: str | Path, seed: int) -> Path:
    """Write one YAML per profile plus ``pairs.json`` into ``out`` (created). Each file is written to a temp name
    and renamed. Returns the directory."""
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)

    def put(name: str, text: str) -> None:
        tmp = root / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(root / name)

    for p in profiles:
        body = yaml.safe_dump(p.model_dump(mode="json"), allow_unicode=True, sort_keys=False, width=110)
        put(f"{p.profile_id}.yaml", f"# {p.profile_id} — generated profile (seed {seed}); E = curation tier\n" + body)
    pairs = {"seed": seed, "n": len(profiles),
             "fine": [list(r) for r in fine_pairs(profiles)], "macro": [list(r) for r in macro_pairs(profiles)],
             "histogram": {str(k): v for k, v in distance_histogram(profiles).items()}}
    put("pairs.json", json.dumps(pairs, sort_keys=True, ensure_ascii=False, indent=1) + "\n")
    return root
