"""Reading a multiple-choice letter and JSON objects from free model text, as a person reads them.

A reply is read for the answer it *states*, and the last, most explicit statement wins (:func:`read_choice`):

1. a JSON object with an ``answer`` / ``choice`` / ``option`` / ``letter`` / ``final_answer`` field (also inside
   a code fence);
2. a reply that *is* a letter (``"C"``, ``"C."``, ``"(C)"``, ``"**C**"``);
3. a stated final answer (``Final answer: B``, ``\\boxed{B}``) — the last one;
4. a stated answer (``Answer: C``, ``the answer is (C)``, ``ANSWER: $B$``, ``Antwort: C``, ``答案：C``) — the last
   one, so "Answer seems to be A … Answer: C" is C and "Option A is tempting, but the answer is (C)." is C
   (naming an option is not answering with it);
5. a leading letter (``"C) because …"``) and weaker statements (``I would pick C``, ``my choice is C``) — only
   when they all name the same letter;
6. a reply that quotes exactly one option's text.

A statement that names two letters (``Answer: A or B``), a stated letter that is not an option, or weaker statements
that disagree are *ambiguous*: no letter (the evaluate stage makes such a reply an error row, never a guess). A
lower-case letter counts only where it cannot be the article (``answer: b`` yes, ``the answer is a flat layout``
no). The order follows how graders of multiple-choice benchmarks read replies (the "final answer" convention of
OpenAI simple-evals and Inspect's ``choice`` scorer); the rules and their order are ours.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["LETTERS", "ChoiceReading", "index_of_letter", "letter_of", "no_choice_error", "parse_choice",
           "parse_json_object", "read_choice"]

#: Choice letters; FileGramBench items have 2–6 options (reference §9.1, AnomDet up to 6).
LETTERS = "ABCDEF"

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
#: The letter slot after an answer cue: optional "option"/"choice"/"letter", markup (``**``, ``$``, quotes,
#: brackets, ``\boxed{…}``, ``\text{…}``), then one letter that does not start a word.
_SLOT = (r"(?:(?:option|choice|letter)\s*)?[\"'`*_$(\[{\s]*(?:\\(?:boxed|text|textbf|mathrm|mathbf)\s*\{\s*)?"
         r"(?P<letter>[A-Za-z])(?![A-Za-z0-9])")
#: What may stand between a cue and its letter: markup, then ``:`` / ``=`` / a dash, then markup.
_SEP = r"[\s*_]*(?:[:=：]|[-–—](?=\s))?[\s*_]*"
_VERB = r"(?:\s+(?:is|was|would\s+be|should\s+be|must\s+be|will\s+be|seems\s+to\s+be|appears\s+to\s+be))?"
#: Stated final answers: "Final answer: B", "final choice is (B)", "\boxed{B}".
_FINAL = re.compile(rf"(?:\bfinal\s+(?:answer|choice|pick|selection)\b{_VERB}{_SEP}|\\boxed\s*\{{\s*){_SLOT}",
                    re.IGNORECASE)
#: Stated answers: "Answer: B", "the correct answer is (C)", "ANSWER: $B$", and the same cue in German, French,
#: Spanish, Portuguese, Italian, Russian, Chinese, Japanese and Korean ("Antwort: C", "答案：C", "答案是C").
_STATED = re.compile(
    rf"(?:\banswer\b{_VERB}{_SEP}|\b(?:antwort|réponse|reponse|respuesta|resposta|risposta|ответ)"
    rf"(?:\s+(?:ist|est|es|é|è))?{_SEP}|(?:答案|回答|答|正解|정답)(?:是|为|為|は|은)?{_SEP}){_SLOT}",
    re.IGNORECASE)
#: Weaker statements of a choice: "I would pick C", "I'd go with B", "my choice is A", "我选C".
_PICK = re.compile(
    rf"(?:\bI(?:'d|’d|\s+would|\s+will|'ll|’ll)?\s+(?:pick|choose|select|go\s+with|opt\s+for)\b{_SEP}"
    rf"|\bmy\s+(?:pick|choice|selection)\s+(?:is|would\s+be){_SEP}|(?:选择|选){_SEP}){_SLOT}", re.IGNORECASE)
#: A second letter right after a stated one ("A or B", "A/B", "A and C"): no single answer is stated.
_OR_MORE = re.compile(r"^[\s*_$)\]}\"'`.]*(?:or|and|oder|und|ou|et|o|y|или|и|或|和|/|,|&)\s*"
                      r"(?:(?:option|choice)\s*)?[\"'`*_$(\[{\s]*(?-i:[A-F])(?![A-Za-z0-9])", re.IGNORECASE)
_BARE = re.compile(r"^\W*([A-Fa-f])\W*$")
_LEADING = re.compile(r"^\W{0,3}([A-F])(?:[).:\]]|\s*$|\s+[-–—]|\s+because)", re.DOTALL)
#: After a lower-case letter, what keeps it a letter ("answer: b because …", "answer: b."); before any other word
#: it is the article ("the answer is a flat layout").
_LOWER_OK_NEXT = re.compile(r"^(?:\s*$|\s*[^\sA-Za-z]|\s+(?:because|since)\b)", re.IGNORECASE)


def letter_of(i: int) -> str:
    """Letter for a 0-based choice index (0 → ``A``)."""
    return LETTERS[i]


def index_of_letter(letter: str) -> int:
    """0-based index of a choice letter (``"c"`` → 2). Raises ValueError for anything else."""
    s = (letter or "").strip().upper()
    if len(s) != 1 or s not in LETTERS:
        raise ValueError(f"not a choice letter: {letter!r}")
    return LETTERS.index(s)


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (code fences and trailing commas tolerated, reference §8.3); else None
    (also for JSON nested too deeply for Python's decoder: model output never raises here)."""
    if not text:
        return None
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for cand in candidates:
        start = cand.find("{")
        while start != -1:
            depth = 0
            for j in range(start, len(cand)):
                if cand[j] == "{":
                    depth += 1
                elif cand[j] == "}":
                    depth -= 1
                    if depth == 0:
                        blob = re.sub(r",\s*([}\]])", r"\1", cand[start:j + 1])
                        try:
                            obj = json.loads(blob)
                        except (json.JSONDecodeError, RecursionError):  # deep nesting from a model: not an answer
                            break
                        if isinstance(obj, dict):
                            return obj
                        break
            start = cand.find("{", start + 1)
    return None


@dataclass(frozen=True)
class ChoiceReading:
    """What a reply states: ``letter`` (None when it states no single valid option), ``how`` it was read
    (``json``, ``bare``, ``final``, ``stated``, ``pick``, ``text``, or ``""``) and, without a letter, ``why``."""

    letter: str | None
    how: str = ""
    why: str = ""


def _statements(pattern: re.Pattern[str], text: str) -> list[tuple[str | None, str]]:
    """``(letter or None, what)`` for each match of ``pattern``: None when the letter is the article or is
    followed by another letter (``A or B``)."""
    out = []
    for m in pattern.finditer(text):
        letter = m.group("letter")
        rest = text[m.end():]
        if letter.islower() and not _LOWER_OK_NEXT.match(rest):
            continue  # "the answer is a …": an article, not a statement
        if letter.upper() not in LETTERS:
            continue  # "the answer is I think …" / "答案：我…": no letter stated here
        if _OR_MORE.match(rest):
            out.append((None, f"{m.group(0).strip()!r} names more than one option"))
        else:
            out.append((letter.upper(), m.group(0).strip()))
    return out


def read_choice(text: str, n_choices: int, choices: Sequence[str] | None = None) -> ChoiceReading:
    """The option letter a reply states, read as a person reads it (the module docstring's order: the last,
    most explicit statement wins; an ambiguous reply gives no letter and says why).

    Args:
        text: the raw reply.
        n_choices: number of options; a stated letter beyond them is no answer ("not an option").
        choices: the option texts, used last (exactly one option's text quoted in the reply).
    """
    if not text or not text.strip():
        return ChoiceReading(None, "", "empty reply")
    valid = LETTERS[:max(0, min(n_choices, len(LETTERS)))]

    def stated(letter: str | None, how: str, what: str) -> ChoiceReading:
        if letter is None:
            return ChoiceReading(None, how, what)
        if letter not in valid:
            return ChoiceReading(None, how, f"states {letter}, which is not one of the options {valid}")
        return ChoiceReading(letter, how)

    obj = parse_json_object(text)
    if obj:
        for key in ("final_answer", "answer", "choice", "option", "letter"):
            if key in obj:
                v = str(obj[key]).strip().strip("()[]*").strip()
                if len(v) == 1 and v.isalpha():
                    return stated(v.upper(), "json", f"JSON {key!r}")
    stripped = text.strip()
    m = _BARE.match(stripped)
    if m:
        return stated(m.group(1).upper(), "bare", "")
    for pattern, how in ((_FINAL, "final"), (_STATED, "stated")):
        found = _statements(pattern, stripped)
        if found:
            letter, what = found[-1]  # the last statement is the one the reply ends on
            return stated(letter, how, what)
    weak = [(m.group(1), "leading letter")] if (m := _LEADING.match(stripped)) else []
    weak += _statements(_PICK, stripped)
    if weak:
        letters = {letter for letter, _ in weak}
        if len(letters) == 1 and None not in letters:
            return stated(weak[0][0], "pick", "")
        return ChoiceReading(None, "pick", "the reply leans to more than one option: "
                             + "; ".join(w for _, w in weak if w)[:200] if None in letters else
                             f"the reply leans to more than one option ({', '.join(sorted(letters))})")
    if choices:
        low = stripped.lower()
        hits = [i for i, c in enumerate(choices[:len(valid)]) if c and str(c).strip().lower() in low]
        if len(hits) == 1:
            return ChoiceReading(valid[hits[0]], "text")
        if len(hits) > 1:
            return ChoiceReading(None, "text", f"quotes {len(hits)} options' texts")
    return ChoiceReading(None, "", "states no option letter")


def parse_choice(text: str, n_choices: int, choices: Sequence[str] | None = None) -> str | None:
    """The option letter a reply states (:func:`read_choice`); ``None`` when it states none or is ambiguous.

    Args:
        text: the raw reply.
        n_choices: number of options; letters beyond it are rejected.
        choices: the option texts, used as a last resort (exactly one option's text quoted in the reply).
    """
    return read_choice(text, n_choices, choices).letter


def no_choice_error(text: str, n_choices: int, choices: Sequence[str] | None = None) -> str:
    """The error-row text of a multiple-choice reply that states no single option: why (:func:`read_choice`) and
    the reply's first 200 characters."""
    return f"reply states no single option ({read_choice(text, n_choices, choices).why}): {(text or '')[:200]!r}"
