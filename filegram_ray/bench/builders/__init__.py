"""Registry of FileGramBench item builders: sub-task name → :class:`BuilderSpec` (reference §9.1).

A builder is ``build(inputs, seed, target) -> list[Draft]`` (derived builders also get the drafts of their
sources) plus ``default_count(inputs)``, the paper's count scaled to the profile/task set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from filegram_ray.bench.builders import (
    anomdet,
    attrrec,
    behavfp,
    behavinf,
    filegrd,
    profrec,
    shiftana,
    tracedis,
    visgrd,
)


@dataclass(frozen=True)
class BuilderSpec:
    """One sub-task's builder. ``sources``: sub-tasks whose drafts a derived builder consumes."""

    name: str
    build: Callable
    default_count: Callable
    sources: tuple[str, ...] = ()


BUILDERS: dict[str, BuilderSpec] = {
    m.NAME: BuilderSpec(m.NAME, m.build, m.default_count)
    for m in (attrrec, behavfp, profrec, behavinf, tracedis, anomdet, shiftana, visgrd)
}
BUILDERS[filegrd.NAME] = BuilderSpec(filegrd.NAME, filegrd.build, filegrd.default_count, sources=filegrd.SOURCES)



def check_sub_tasks(names) -> None:
    """Refuse names that are not a builder (:data:`BUILDERS`): the one
    check behind ``bench.sub_tasks`` / ``bench.counts``, ``evaluate.sub_tracks`` and :func:`~filegram_ray.bench.bank.build_bank`.

    Raises:
        ValueError: ``unknown sub-task(s) 'X' (one of AttrRec, …)``.
    """
    bad = [n for n in names if n not in BUILDERS]
    if bad:
        raise ValueError(f"unknown sub-task(s) {', '.join(map(repr, bad))} (one of {', '.join(BUILDERS)})")


__all__ = ["BUILDERS", "BuilderSpec", "check_sub_tasks"]
