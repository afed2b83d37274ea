"""Backbones: what answers a FileGramBench item given a method's retrieved context.

A backbone sees only the **public item** (question, choices, sub-task names — never ``profile_id``, never the answer
key) and the context text a memory method returned. Five kinds (ARCHITECTURE rule 5):

* :class:`OpenAIBackbone` — any OpenAI-compatible chat endpoint (vLLM on a GPU node, a local llama.cpp server).
* :class:`LexicalBackbone` — the CPU default that needs no LLM. It is deliberately simple and **weak**: each choice is
  scored by the idf-weighted share of its content words that occur in the context (words shared by every choice
  carry no signal); the best score wins, ties (including an empty context) go to a seeded pick. It cannot reason;
  it only shows whether a context mentions what a choice mentions. Open-ended items get the context line with the
  largest word overlap with the question.
* :class:`~filegram_ray.llm.encoder_reader.EncoderBackbone` — a CPU reader without a language model: a small
  transformer encoder (the packaged MiniLM) scores each option against the context's passages (its own module).
* :class:`OracleBackbone` and :class:`RandomBackbone` — validity references: the oracle answers from the answer
  key (must score 100), random picks uniformly with a seed (must sit near chance).

Every seeded choice uses a sub-seed from :func:`stable_seed` (sha256 of ``"<seed>:<question_id>"``), never
Python's ``hash()``, so the same seed gives the same answers across processes.
"""

from __future__ import annotations

import hashlib
import logging
import math
import random
import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from filegram_ray.llm.parsing import LETTERS, parse_choice

log = logging.getLogger(__name__)

__all__ = [
    "SYSTEM_PROMPT",
    "Answer",
    "Backbone",
    "LexicalBackbone",
    "OpenAIBackbone",
    "OracleBackbone",
    "RandomBackbone",
    "approx_tokens",
    "mcq_prompt",
    "open_prompt",
    "stable_seed",
]

#: System prompt of the answering call. It names no profile, dimension definition or perturbation tag
#: (leakage rule, reference §9.2).
SYSTEM_PROMPT = (
    "You answer questions about how a person works with files, using only the memory context provided "
    "(a record of their file-system sessions). For a multiple-choice question reply with the letter of the "
    "single best option, e.g. 'Answer: B'."
)


def approx_tokens(text: str) -> int:
    """Token estimate ``len(text) // 4`` (the counting rule of upstream ``_call_llm``, reference §8.1)."""
    return len(text or "") // 4


def stable_seed(seed: int, *parts: Any) -> int:
    """A 64-bit sub-seed from the master seed and any identifying parts (sha256, stable across processes)."""
    h = hashlib.sha256(":".join([str(seed), *map(str, parts)]).encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big")


def _choices(item: Mapping[str, Any]) -> list[str]:
    """Option texts in letter order; accepts a list or the public view's ``{letter: text}`` mapping."""
    ch = item.get("choices")
    if isinstance(ch, Mapping):
        return [str(ch[k]) for k in sorted(ch)]
    return [str(c) for c in (ch or [])]


def mcq_prompt(item: Mapping[str, Any], context: str, *, letter_only: bool = False) -> str:
    """User prompt of a multiple-choice item: context, question, lettered options, answer format (``letter_only``:
    the reply is held to one letter by a constraint, :mod:`filegram_ray.llm.replies`)."""
    opts = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(_choices(item)))
    ctx = context.strip() if context and context.strip() else "(no memory context)"
    fmt = ("Reply with the letter of the best option only." if letter_only else
           "Reply with the letter of the best option in the form 'Answer: <letter>'.")
    return (f"## Memory context\n{ctx}\n\n## Question\n{item.get('question', '')}\n\n## Options\n{opts}\n\n"
            f"{fmt}")


def open_prompt(item: Mapping[str, Any], context: str) -> str:
    """User prompt of an open-ended (Profile Reconstruction) item."""
    ctx = context.strip() if context and context.strip() else "(no memory context)"
    return (f"## Memory context\n{ctx}\n\n## Question\n{item.get('question', '')}\n\n"
            "Answer in one or two sentences: state the value you infer and the concrete behavioural evidence.")


@dataclass
class Answer:
    """A backbone's reply to one item.

    Attributes:
        choice: chosen letter ``A``–``F`` for multiple-choice items (``None`` when unparseable or open-ended).
        text: raw reply (free-form answer for open-ended items).
        tokens_in / tokens_out: prompt and reply size (API usage when reported, else :func:`approx_tokens`).
    """

    choice: str | None
    text: str
    tokens_in: int = 0
    tokens_out: int = 0


class Backbone(ABC):
    """Answers public items; optionally offers ``complete`` (an ``llm_fn``) to methods and the judge."""

    name: str = "backbone"
    #: True when :meth:`complete` calls a language model (methods then summarise/judge with it).
    is_llm: bool = False

    @abstractmethod
    def answer(self, item: Mapping[str, Any], context: str) -> Answer:
        """Answer one public item given the retrieved context text."""

    def complete(self, prompt: str, system_prompt: str | None = None, *, temperature: float | None = None,
                 max_tokens: int | None = None) -> str:
        """Free-text completion (the ``llm_fn(prompt, system_prompt)`` of reference §8.1).

        Raises:
            TypeError: the backbone is not a language model (only LLM backbones complete free text).
        """
        raise TypeError(f"backbone {self.name!r} is not a language model")

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "is_llm": self.is_llm}


class OpenAIBackbone(Backbone):
    """An OpenAI-compatible chat endpoint (``httpx``; every reply checked by
    :func:`~filegram_ray.llm.replies.read_completion`).

    Args:
        base_url: e.g. ``http://127.0.0.1:8011/v1``.
        model: model name or alias served there.
        api_key: ``"EMPTY"`` for local servers.
        timeout: seconds per request.
        retries: extra attempts after a connection error, a timeout, HTTP 408/429/5xx or a malformed reply
            (back-off ``backoff_s`` doubling, at most 30 s); other 4xx are not retried.
        temperature: sampling temperature of answers (0 = greedy).
        max_tokens: reply budget of a multiple-choice answer; open-ended answers and ``complete`` use
            ``max_tokens_open``.
        constrain: how a multiple-choice answer is held to one option letter
            (:func:`~filegram_ray.llm.replies.constraint_fields`; ``none`` = free text read by
            :func:`~filegram_ray.llm.parsing.parse_choice`).

    Errors: :meth:`answer` and :meth:`complete` raise RuntimeError naming the URL when no usable reply came after
    the retries (an error status, a malformed body, an empty reply, reasoning only; for answers also a reply cut at
    ``max_tokens``); the message keeps the start of the raw body.
    """

    is_llm = True

    def __init__(self, base_url: str, model: str, api_key: str = "EMPTY", timeout: float = 120.0,
                 retries: int = 2, temperature: float = 0.0, max_tokens: int = 32, max_tokens_open: int = 512,
                 name: str | None = None, constrain: str = "none", backoff_s: float = 1.0):
        if not base_url:
            raise ValueError("OpenAIBackbone: base_url is required (e.g. http://127.0.0.1:8011/v1)")
        if not model:
            raise ValueError("OpenAIBackbone: model is required")
        from filegram_ray.llm.replies import CONSTRAIN_MODES

        if constrain not in CONSTRAIN_MODES:
            raise ValueError(f"OpenAIBackbone: constrain {constrain!r} is not one of {', '.join(CONSTRAIN_MODES)}")
        self.base_url, self.model, self.timeout, self.retries = base_url, model, float(timeout), int(retries)
        self.temperature, self.max_tokens, self.max_tokens_open = float(temperature), int(max_tokens), \
            int(max_tokens_open)
        self.name = name or f"openai:{model}"
        self.api_key, self.constrain, self.backoff_s = api_key or "EMPTY", constrain, float(backoff_s)
        self._http = None

    def __reduce__(self):  # picklable for Ray actors: the HTTP client is made again on the other side
        return (_rebuild_openai, ({"base_url": self.base_url, "model": self.model, "timeout": self.timeout,
                                   "retries": self.retries, "temperature": self.temperature,
                                   "max_tokens": self.max_tokens, "max_tokens_open": self.max_tokens_open,
                                   "name": self.name, "api_key": self.api_key, "constrain": self.constrain,
                                   "backoff_s": self.backoff_s},))

    def _chat(self, user: str, system: str | None, temperature: float, max_tokens: int, *,
              extra: Mapping[str, Any] | None = None, allow_length: bool = False) -> tuple[str, int, int]:
        import httpx

        from filegram_ray.llm.replies import (
            REPLY_CHARS_PER_TOKEN,
            ReplyError,
            backoff_s,
            exchange_sync,
            is_constrained,
            post_sync,
        )

        if self._http is None:
            self._http = httpx.Client(timeout=self.timeout)
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
        payload = {"model": self.model, "messages": messages, "temperature": temperature, "max_tokens": max_tokens,
                   **(extra or {})}
        url = self.base_url.rstrip("/") + "/chat/completions"
        try:
            comp, _ = exchange_sync(lambda: post_sync(self._http, url, payload,
                                                      {"Authorization": f"Bearer {self.api_key}"}),
                                    retries=self.retries, wait_s=lambda a: backoff_s(a, self.backoff_s),
                                    allow_empty=False, allow_length=allow_length or is_constrained(payload),
                                    max_chars=REPLY_CHARS_PER_TOKEN * max_tokens)
        except ReplyError as exc:
            raise RuntimeError(f"{self.name} at {self.base_url}: no usable reply: {exc.describe()}; raw reply: "
                               f"{exc.raw[:500]!r}") from exc
        tin = comp.prompt_tokens if comp.prompt_tokens is not None else approx_tokens(user + (system or ""))
        tout = comp.completion_tokens if comp.completion_tokens is not None else approx_tokens(comp.content)
        return comp.content, int(tin), int(tout)

    def answer(self, item: Mapping[str, Any], context: str) -> Answer:
        from filegram_ray.llm.replies import constraint_fields, read_letter

        choices = _choices(item)
        if choices:
            letters = list(LETTERS[:len(choices)])
            constrained = self.constrain != "none"
            text, tin, tout = self._chat(mcq_prompt(item, context, letter_only=constrained), SYSTEM_PROMPT,
                                         self.temperature, self.max_tokens,
                                         extra=constraint_fields(self.constrain, letters))
            letter = read_letter(text, self.constrain, letters) if constrained else \
                parse_choice(text, len(choices), choices)
            return Answer(letter, text, tin, tout)
        text, tin, tout = self._chat(open_prompt(item, context), SYSTEM_PROMPT, self.temperature,
                                     self.max_tokens_open)
        return Answer(None, text.strip(), tin, tout)

    def complete(self, prompt: str, system_prompt: str | None = None, *, temperature: float | None = None,
                 max_tokens: int | None = None) -> str:
        return self._chat(prompt, system_prompt, self.temperature if temperature is None else temperature,
                          max_tokens or self.max_tokens_open, allow_length=True)[0]

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "base_url": self.base_url, "model": self.model,
                "temperature": self.temperature, "constrain": self.constrain}


def _rebuild_openai(kwargs: dict[str, Any]) -> OpenAIBackbone:
    return OpenAIBackbone(**kwargs)


_WORD = re.compile(r"[a-z0-9\u4e00-\u9fff]+")
#: Function words ignored by the lexical backbone (plain English stop list; ours).
_STOP = frozenset(
    ["a", "an", "the", "and", "or", "of", "to", "in", "on", "for", "with", "by", "at", "from", "as", "is", "are", "was", "were", "be", "been", "this", "that", "these", "those", "it", "its", "their", "they", "them", "he", "she", "his", "her", "user", "users", "person", "which", "what", "who", "how", "does", "do", "did", "most", "more", "less", "than", "into", "per", "each", "one", "two", "when", "while", "not", "no", "only", "also", "very", "about", "after", "before", "then", "there"])


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall((text or "").lower()) if w not in _STOP and (len(w) > 2 or w.isdigit())]


class LexicalBackbone(Backbone):
    """CPU default without an LLM (deterministic, method-agnostic, weak by design — see the module docstring).

    Score of choice *i* = Σ_{w ∈ words(i), w in context} idf(w) / Σ_{w ∈ words(i)} idf(w) with
    idf(w) = log(1 + n_choices / df(w)) over the item's choices, where ``words`` are lower-cased alphanumeric tokens
    minus a small stop list. Highest score wins; ties → seeded pick (:func:`stable_seed`).

    Args:
        seed: master seed for tie-breaks.
    """

    name = "lexical"

    def __init__(self, seed: int = 7):
        self.seed = int(seed)

    def answer(self, item: Mapping[str, Any], context: str) -> Answer:
        choices = _choices(item)
        qid = str(item.get("question_id", ""))
        ctx_words = set(_words(context))
        rng = random.Random(stable_seed(self.seed, "lexical", qid))
        if not choices:
            return Answer(None, self._open_answer(item, context), approx_tokens(context), 0)
        sets = [set(_words(c)) for c in choices]
        df = Counter(w for s in sets for w in s)
        n = len(choices)
        scores = []
        for s in sets:
            weights = {w: math.log(1.0 + n / df[w]) for w in s}
            total = sum(weights.values())
            hit = sum(v for w, v in weights.items() if w in ctx_words)
            scores.append(hit / total if total > 0 else 0.0)
        best = max(scores)
        tied = [i for i, s in enumerate(scores) if abs(s - best) < 1e-12]
        pick = tied[0] if len(tied) == 1 else rng.choice(tied)
        return Answer(LETTERS[pick], f"Answer: {LETTERS[pick]} (lexical scores {[round(s, 3) for s in scores]})",
                      approx_tokens(mcq_prompt(item, context)), 4)

    @staticmethod
    def _open_answer(item: Mapping[str, Any], context: str) -> str:
        q = set(_words(str(item.get("question", ""))))
        best, best_score = "", 0
        for line in (context or "").splitlines():
            line = line.strip()
            if not line:
                continue
            score = len(q & set(_words(line)))
            if score > best_score:
                best, best_score = line, score
        return best[:500]


class OracleBackbone(Backbone):
    """Validity reference: answers from the answer key (expected score 100).

    Args:
        key: ``question_id -> correct`` (a letter for multiple-choice items, the ground-truth value text for
            open-ended ones).
    """

    name = "oracle"

    def __init__(self, key: Mapping[str, Any]):
        self.key = {str(k): v for k, v in key.items()}

    def answer(self, item: Mapping[str, Any], context: str) -> Answer:
        qid = str(item.get("question_id"))
        if qid not in self.key:
            raise KeyError(f"oracle: question {qid!r} is not in the answer key")
        correct = self.key[qid]
        if _choices(item):
            return Answer(str(correct), f"Answer: {correct}", 0, 0)
        return Answer(None, str(correct), 0, 0)


class RandomBackbone(Backbone):
    """Validity reference: a uniform seeded pick among the choices (expected score = mean of 1/n_choices)."""

    name = "random"

    def __init__(self, seed: int = 7):
        self.seed = int(seed)

    def answer(self, item: Mapping[str, Any], context: str) -> Answer:
        choices = _choices(item)
        if not choices:
            return Answer(None, "", 0, 0)
        rng = random.Random(stable_seed(self.seed, "random", item.get("question_id", "")))
        return Answer(LETTERS[rng.randrange(len(choices))], "", 0, 0)
