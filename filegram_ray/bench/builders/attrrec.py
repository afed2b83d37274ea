"""AttrRec — Attribute Recognition (T1; 3 choices; context: all trajectories of one user). Reference §9.1.

Per profile the pool holds one item per behavioural dimension A–F (which of the three tier behaviours, in plain
words, matches the user) plus one item per semantic/behavioural attribute in :data:`ATTRIBUTES` (role, language,
tone, documentation, …; options are value descriptions).

COUNTS: 6 dimensions + role + language + 8 attributes = 16 items per profile → 320 for the 20 FileGram profiles;
the paper reports 326 (reference §9.1) without saying where the 6 extra items come from. Items are dropped
(and counted in the stage stats) when a profile lacks an attribute or its value has no plain-words description.
"""

from __future__ import annotations

from filegram_ray.bench.common import Draft, sample_down, scaled_count, session_label
from filegram_ray.bench.inputs import BenchInputs, ProfileRec
from filegram_ray.bench.schema import ContextSpec
from filegram_ray.bench.vocab import (
    ATTRIBUTE_CHANNEL,
    ATTRIBUTE_TOPIC,
    DIMENSION_TOPIC,
    DIMENSIONS,
    FILLER_LANGUAGES,
    FILLER_ROLES,
    TIER_BEHAVIOUR,
    TIERS,
    VALUE_BEHAVIOUR,
)
from filegram_ray.seeded import rng

NAME = "AttrRec"
N_CHOICES = 3  # reference §9.1
#: Attributes asked besides the six dimensions (those whose value is not a function of a tier, reference §5.2).
ATTRIBUTES = ("tone", "documentation", "output_structure", "thoroughness", "naming", "version_strategy",
              "error_handling", "working_style")


def default_count(inputs: BenchInputs) -> int:
    return scaled_count(NAME, inputs.n_profiles, inputs.n_tasks, by_tasks=False)


def _context(inputs: BenchInputs, p: ProfileRec) -> ContextSpec:
    trajs = sorted(inputs.trajectories_of(p.profile_id), key=lambda t: t.task_id)
    return ContextSpec(kind="all_trajectories", trajectories=[t.trajectory_id for t in trajs],
                       labels=[session_label(t.task_id) for t in trajs])


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _others(correct: str, pool: list[str], filler: tuple[str, ...], k: int, r) -> list[str]:
    cands = sorted({x for x in pool if x and x != correct})
    r.shuffle(cands)
    out = cands[:k]
    for f in filler:
        if len(out) == k:
            break
        if f != correct and f not in out:
            out.append(f)
    return out


def build(inputs: BenchInputs, seed: int, target: int) -> list[Draft]:
    drafts: list[Draft] = []
    roles = [p.role for p in inputs.profiles]
    langs = [p.language for p in inputs.profiles]
    for p in inputs.profiles:
        if not inputs.trajectories_of(p.profile_id):
            continue
        ctx = _context(inputs, p)
        intro = f"You are given {len(ctx.labels)} work sessions of one user."
        for d in DIMENSIONS:
            correct = TIER_BEHAVIOUR[d][p.tiers[d]]
            drafts.append(Draft(
                sub_task=NAME, sub_class=f"dim:{d}", channel="procedural", profile_id=p.profile_id,
                question=f"{intro} Which statement best describes {DIMENSION_TOPIC[d]}?",
                correct=_cap(correct), distractors=[_cap(TIER_BEHAVIOUR[d][t]) for t in TIERS if t != p.tiers[d]],
                context=ctx, facts={"dimension": d, "tier": p.tiers[d]}, sort_key=f"{p.profile_id}|dim|{d}"))
        r = rng(seed, NAME, p.profile_id, "role")
        drafts.append(Draft(
            sub_task=NAME, sub_class="attr:role", channel="semantic", profile_id=p.profile_id,
            question=f"{intro} What is this user's most likely occupation?",
            correct=p.role, distractors=_others(p.role, roles, FILLER_ROLES, N_CHOICES - 1, r),
            context=ctx, facts={"attribute": "role", "value": p.role}, sort_key=f"{p.profile_id}|attr|role"))
        r = rng(seed, NAME, p.profile_id, "language")
        drafts.append(Draft(
            sub_task=NAME, sub_class="attr:language", channel="semantic", profile_id=p.profile_id,
            question=f"{intro} In which language does this user mainly write?",
            correct=p.language, distractors=_others(p.language, langs, FILLER_LANGUAGES, N_CHOICES - 1, r),
            context=ctx, facts={"attribute": "language", "value": p.language},
            sort_key=f"{p.profile_id}|attr|language"))
        for attr in ATTRIBUTES:
            value = p.attributes.get(attr)
            space = VALUE_BEHAVIOUR.get(attr, {})
            if value not in space:
                continue
            correct = space[value]
            others = sorted({txt for v, txt in space.items() if v != value and txt != correct})
            r = rng(seed, NAME, p.profile_id, attr)
            r.shuffle(others)
            if len(others) < N_CHOICES - 1:
                continue
            drafts.append(Draft(
                sub_task=NAME, sub_class=f"attr:{attr}", channel=ATTRIBUTE_CHANNEL.get(attr, "procedural"),
                profile_id=p.profile_id, question=f"{intro} Which statement best describes {ATTRIBUTE_TOPIC[attr]}?",
                correct=_cap(correct), distractors=[_cap(o) for o in others[:N_CHOICES - 1]], context=ctx,
                facts={"attribute": attr, "value": value}, sort_key=f"{p.profile_id}|attr|{attr}"))
    return sample_down(drafts, target, seed, NAME)


__all__ = ["NAME", "build", "default_count"]
