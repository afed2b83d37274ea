"""Format-choice policy: which derivatives each section of an output gets (seeded, deterministic).

Target: the project page's mix of derived files (FILEGRAM_REFERENCE §0): PDF 3,609; DOCX 3,093; Markdown 2,310;
presentation 1,547; image 1,031; audio 516; spreadsheet 516 — 12,622 files from ≈2.5 K agent outputs, i.e. ≈5 per
output ("over 10 K").

Per section (§10's selection rules, applied per section instead of per document):

1. the number of formats ``k`` is 1, 2 or 3 with probability 0.4 / 0.4 / 0.2 (§10: "≈40 % of docs with 1 format,
   ≈40 % with 2, ≈20 % with 3"), capped by the section's length (§10's hard cap: < 500 chars → 1, < 2,000 → 2);
2. formats are drawn without replacement, weighted by the §0 mix, among the *eligible* ones: spreadsheet only for a
   section with a table; image = a chart (``png_chart``) when the section has a numeric table, else a page image
   (``png_page``); audio only for English sections (no Chinese voice is packaged, see
   :func:`rendering.renderers.build_wav`);
3. because spreadsheet and audio are eligible for only part of the sections, their weights are multiplied by
   ``boost`` factors (defaults: spreadsheet × 4, audio × 2 — audio is open to the English half of the profiles,
   §0: 10 of 20; spreadsheet to the sections with tables, about a quarter in our test corpus) so the overall mix
   lands near §0.
4. an output that gets fewer than ``min_per_output`` derivatives in total gets more: one extra format at a time,
   round-robin over its sections, drawn the same way (so ≈2.5 K outputs give > 10 K derivatives).

All draws use ``random.Random`` seeded by a SHA-256 of (seed, trajectory id, output path, section index): the same
inputs give the same choices whatever the order or machine.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from rendering.sections import Section

__all__ = ["CATEGORY", "MIX", "PolicyParams", "category_of", "choose_formats", "sub_seed"]

#: the §0 project-page derivative mix (counts), by category
MIX = {"pdf": 3609, "docx": 3093, "markdown": 2310, "presentation": 1547, "image": 1031, "audio": 516,
       "spreadsheet": 516}
#: derivative format → mix category
CATEGORY = {"pdf": "pdf", "docx": "docx", "md": "markdown", "pptx": "presentation", "png_page": "image",
            "png_chart": "image", "wav": "audio", "xlsx": "spreadsheet"}


def category_of(fmt: str) -> str:
    return CATEGORY.get(fmt, fmt)


def sub_seed(*parts: object) -> int:
    """A stable 64-bit seed from any parts (SHA-256 of their ``repr`` joined by ``|``; never Python's ``hash``)."""
    h = hashlib.sha256("|".join(repr(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big")


@dataclass(frozen=True)
class PolicyParams:
    """Knobs of the policy (defaults and their sources in the module doc)."""

    k_probs: tuple[float, float, float] = (0.4, 0.4, 0.2)
    length_caps: tuple[int, int] = (500, 2000)
    boost: dict[str, float] = field(default_factory=lambda: {"spreadsheet": 4.0, "audio": 2.0})
    min_per_output: int = 4
    formats: tuple[str, ...] = ("pdf", "docx", "md", "pptx", "png_page", "png_chart", "wav", "xlsx")


def _eligible(sec: Section, p: PolicyParams) -> dict[str, float]:
    has_table = bool(sec.tables)
    numeric = any(t.is_numeric() for t in sec.tables)
    out: dict[str, float] = {}
    for fmt in p.formats:
        cat = category_of(fmt)
        if fmt == "xlsx" and not has_table:
            continue
        if fmt == "png_chart" and not numeric:
            continue
        if fmt == "png_page" and numeric and "png_chart" in p.formats:
            continue
        if fmt == "wav" and sec.language != "en":
            continue
        if not sec.plain_text.strip() and fmt not in ("md",):
            continue
        out[fmt] = MIX[cat] * p.boost.get(cat, 1.0)
    return out


def _draw(rng: random.Random, weights: dict[str, float], k: int, exclude: set[str]) -> list[str]:
    pool = {f: w for f, w in sorted(weights.items()) if f not in exclude}
    chosen: list[str] = []
    while pool and len(chosen) < k:
        total = sum(pool.values())
        x = rng.random() * total
        for f, w in pool.items():
            x -= w
            if x <= 0:
                break
        chosen.append(f)
        del pool[f]
    return chosen


def choose_formats(sections: Sequence[Section], *, seed: int, trajectory_id: str, path: str,
                   params: PolicyParams | None = None) -> list[tuple[int, str]]:
    """The derivatives of one output as ``(section index, format)`` pairs, in section order.

    Args:
        sections: the output's sections (:func:`rendering.sections.split_sections`).
        seed: the pipeline's master seed. trajectory_id, path: identify the output (seed derivation).
        params: policy knobs (default :class:`PolicyParams`).
    """
    p = params or PolicyParams()
    picks: dict[int, list[str]] = {}
    rngs: dict[int, random.Random] = {}
    weights: dict[int, dict[str, float]] = {}
    for sec in sections:
        rng = rngs[sec.index] = random.Random(sub_seed(seed, "render-policy", trajectory_id, path, sec.index))
        w = weights[sec.index] = _eligible(sec, p)
        u = rng.random()
        k = 1 if u < p.k_probs[0] else 2 if u < p.k_probs[0] + p.k_probs[1] else 3
        size = sec.size
        k = min(k, 1 if size < p.length_caps[0] else 2 if size < p.length_caps[1] else 3)
        picks[sec.index] = _draw(rng, w, k, set())
    total = sum(len(v) for v in picks.values())
    order = [s.index for s in sections]
    stalled = 0
    i = 0
    while total < p.min_per_output and order and stalled < len(order):
        idx = order[i % len(order)]
        extra = _draw(rngs[idx], weights[idx], 1, set(picks[idx]))
        if extra:
            picks[idx].extend(extra)
            total += 1
            stalled = 0
        else:
            stalled += 1
        i += 1
    return [(idx, f) for idx in order for f in picks[idx]]
