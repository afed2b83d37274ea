"""Reference answerers of a FileGramBench bank, for tests (ARCHITECTURE.md rule 5).

* :class:`OracleAnswerer` reads the answer key: it must score 100 % on every multiple-choice sub-task.
* :class:`RandomAnswerer` picks a letter with a seeded generator: it lands near 1/k per item.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from filegram_ray.bench.schema import AnswerKey, Item
from filegram_ray.seeded import rng


class OracleAnswerer:
    """Answers from the key (sanity reference: 100 % by construction when the bank is consistent)."""

    name = "oracle"

    def __init__(self, keys: Iterable[AnswerKey]):
        self._key = {k.question_id: k.correct for k in keys}

    def answer(self, public: dict[str, Any]) -> str:
        return self._key[public["question_id"]]


class RandomAnswerer:
    """Uniform random letter among the item's choices, seeded per item (expected accuracy = mean 1/k)."""

    name = "random"

    def __init__(self, seed: int):
        self.seed = seed

    def answer(self, public: dict[str, Any]) -> str:
        letters = sorted(public["choices"])
        return rng(self.seed, "random-answerer", public["question_id"]).choice(letters) if letters else ""


def score_mcq(items: Sequence[Item], keys: Sequence[AnswerKey], answerer) -> dict[str, dict[str, float]]:
    """Accuracy of ``answerer`` per multiple-choice sub-task: ``{sub_task: {accuracy, n, chance}}`` where
    ``chance`` = mean of 1/k over the sub-task's items (open-ended items are skipped)."""
    key = {k.question_id: k for k in keys}
    acc: dict[str, list[float]] = defaultdict(list)
    chance: dict[str, list[float]] = defaultdict(list)
    for it in items:
        if it.is_open:
            continue
        got = answerer.answer(it.public_view())
        acc[it.sub_track].append(1.0 if got == key[it.question_id].correct else 0.0)
        chance[it.sub_track].append(1.0 / len(it.choices))
    return {s: {"accuracy": sum(v) / len(v), "n": len(v), "chance": sum(chance[s]) / len(chance[s])}
            for s, v in sorted(acc.items())}
