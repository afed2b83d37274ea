"""The bank's validity check (ARCHITECTURE.md rule 5), run by the bench stage on every bank it builds:
:func:`validate_items` checks that each item has exactly one right answer and that no public text gives the answer
away or leaks ground truth (profile ids/names, tier letters, dimension names, attribute keys).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from filegram_ray.bench.schema import LETTERS, AnswerKey, Item
from filegram_ray.bench.vocab import ATTRIBUTE_TOPIC, FORBIDDEN_TERMS, JUDGE_VALUE_SPACE

__all__ = ["Problem", "validate_items"]


@dataclass(frozen=True)
class Problem:
    """One validity problem: the item, a short code and a human-readable detail."""

    question_id: str
    code: str
    detail: str


#: Words too common to count as "distinctive" when comparing a correct option with the question.
STOPWORDS = frozenset(["a", "an", "the", "and", "or", "of", "to", "in", "on", "for", "with", "without", "from", "by", "at", "as", "is", "are", "was", "were", "be", "been", "it", "its", "this", "that", "these", "those", "than", "then", "there", "their", "them", "they", "one", "two", "three", "each", "every", "only", "once", "user", "users", "session", "sessions", "into", "over", "under", "more", "most", "less", "least", "some", "many", "much", "very", "other", "others", "not", "no", "nor", "but", "which", "what", "how", "when", "whereas", "work", "working", "files", "file"])
_WORD = re.compile(r"[a-z]+")
_TIER_LETTER = re.compile(r"\b(?:tier|level)\s+[LMR]\b|\b[LMR]\s*(?:→|->)\s*[LMR]\b|\b[LMR]/[LMR]\b")
_ID_TOKEN = re.compile(r"[\w\-.]+")
_UNDERSCORE_TOKEN = re.compile(r"\b[a-z]+_[a-z_]+\b")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 4 and w not in STOPWORDS}


def validate_items(items: Sequence[Item], keys: Sequence[AnswerKey],
                   profile_ids: Iterable[str] = (), profile_names: Iterable[str] = ()) -> list[Problem]:
    """Check a bank; returns the problems found (empty list = valid).

    Checks per item:
      * ``key``: exactly one answer key entry, whose letter names one of the choices and whose ``correct_text``
        equals that choice (MCQ), or a non-empty reference value (open-ended);
      * ``duplicate-choice``: no two choices are equal (case- and space-insensitive);
      * ``too-few-choices``: an MCQ item has at least two choices;
      * ``give-away``: no word that only the correct choice contains (≥ 4 letters, not a stop word) appears in
        the question;
      * ``leak``: the public view mentions no profile id or profile name, no trajectory id, no tier letter
        pattern ("tier L", "M → R", "L/M"), no dimension name or other :data:`FORBIDDEN_TERMS`, no attribute key
        or underscore-joined value token (e.g. ``sequential_deep``).
    Also ``duplicate-id`` across the bank and ``orphan-key`` for key rows without an item.
    """
    problems: list[Problem] = []
    key_by_id: dict[str, list[AnswerKey]] = defaultdict(list)
    for k in keys:
        key_by_id[k.question_id].append(k)
    seen: set[str] = set()
    pids = {p.lower() for p in profile_ids if p}
    names = sorted({n.lower() for n in profile_names if n and len(n) >= 3}, key=len, reverse=True)
    name_re = re.compile("|".join(re.escape(n) for n in names)) if names else None
    banned_tokens = set(ATTRIBUTE_TOPIC) | {v for vs in JUDGE_VALUE_SPACE.values() for v in vs if "_" in v}
    for it in items:
        qid = it.question_id
        if qid in seen:
            problems.append(Problem(qid, "duplicate-id", "question id used twice"))
        seen.add(qid)
        ks = key_by_id.get(qid, [])
        if len(ks) != 1:
            problems.append(Problem(qid, "key", f"{len(ks)} answer key rows"))
            continue
        k = ks[0]
        if it.is_open:
            if not k.correct.strip():
                problems.append(Problem(qid, "key", "open-ended item without a reference value"))
        else:
            if len(it.choices) < 2:
                problems.append(Problem(qid, "too-few-choices", f"{len(it.choices)} choices"))
            norm = [" ".join(c.lower().split()) for c in it.choices]
            if len(set(norm)) != len(norm):
                problems.append(Problem(qid, "duplicate-choice", "two choices are identical"))
            idx = LETTERS.find(k.correct) if len(k.correct) == 1 else -1
            if idx < 0 or idx >= len(it.choices):
                problems.append(Problem(qid, "key", f"correct letter {k.correct!r} names no choice"))
            elif it.choices[idx] != k.correct_text:
                problems.append(Problem(qid, "key", "correct_text differs from the lettered choice"))
            else:
                others: set[str] = set()
                for j, c in enumerate(it.choices):
                    if j != idx:
                        others |= _words(c)
                give = (_words(it.choices[idx]) - others) & _words(it.question)
                if give:
                    problems.append(Problem(qid, "give-away", f"question contains {sorted(give)} that only the "
                                                               "correct choice has"))
        public = it.public_view()
        text = " ".join([public["question"], *public["choices"].values(), *public["context"]["labels"],
                         public["context"]["held_out"] or ""])
        low = text.lower()
        for tok in sorted(set(_ID_TOKEN.findall(low)) & pids):
            problems.append(Problem(qid, "leak", f"profile id {tok!r} in public text"))
        if name_re is not None and (m := name_re.search(low)):
            problems.append(Problem(qid, "leak", f"profile name {m.group(0)!r} in public text"))
        for tid in it.context.trajectories:
            if tid.lower() in low:
                problems.append(Problem(qid, "leak", f"trajectory id {tid!r} in public text"))
        if _TIER_LETTER.search(text):
            problems.append(Problem(qid, "leak", f"tier letter pattern {_TIER_LETTER.search(text).group(0)!r}"))
        for term in FORBIDDEN_TERMS:
            if re.search(rf"\b{re.escape(term.lower())}(?:s|es|ed|ing)?\b", low):
                problems.append(Problem(qid, "leak", f"forbidden term {term!r} in public text"))
        for tok in _UNDERSCORE_TOKEN.findall(low):
            if tok in banned_tokens or "_" in tok:
                problems.append(Problem(qid, "leak", f"attribute key or value token {tok!r} in public text"))
                break
    item_ids = {it.question_id for it in items}
    for qid in key_by_id:
        if qid not in item_ids:
            problems.append(Problem(qid, "orphan-key", "answer key row without an item"))
    return problems
