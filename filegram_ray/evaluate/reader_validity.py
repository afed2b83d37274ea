"""Reader validity rows: can the answering backbone (the *reader*) tell good memory from none at all?

A memory method's score is the reader's score on that method's context. Before ranking methods the report checks the
reader with contexts whose quality is known. Rows, per backbone, beside the oracle and random rows of
:func:`validity_rows`:

* ``empty`` — an empty memory (only when the No Context method itself is not evaluated; otherwise its row is the
  floor);
* ``gold`` — **gold evidence**: the ground truth the item asks about, written as plain memory text
  (:func:`gold_evidence`; the only row that sees the answer key). Per sub-task:

  - AttrRec, BehavInf: the user's attribute or behaviour description the key names ("What this user's sessions
    show about them: <the true description>");
  - ProfRec, VisGrd (open-ended): the attribute in the question's words, its true value and that value's plain-words
    description (``bench.vocab.ATTRIBUTE_TOPIC`` / ``VALUE_BEHAVIOUR``);
  - BehavFP: the true author's behaviour description;
  - TraceDis: the true difference between the two users;
  - AnomDet: which session was not produced by the user;
  - ShiftAna: which habit changed in the last session;
  - FileGrd: as the text sub-task it re-issues.

  Its score is the reader's ceiling; ``gold − floor`` is the reader's **headroom**.
* ``wrong_user`` — the same method's memory of *another* profile (the state a method ingested for a context spec
  that shares no profile with the item, same setting, chosen with a seeded generator), retrieved with the item's
  own query. A reader that uses the memory must fall to the floor here.
* ``masked`` — **masked format**: FileGramOS's own context of each multiple-choice item with the tier words of its
  procedural channel masked (:func:`mask_tier_words`: ``**B. Production — detailed**`` → ``— [masked]``, the
  pattern lines' verdicts likewise; every figure kept). Only when the memory method is FileGramOS. A reader that
  reads the evidence keeps FileGramOS's score; one that matches the labels' words to the options' falls toward
  the floor: the drop says how much of FileGramOS's score rests on its labels.
* ``order`` — each multiple-choice item asked again under the same method's own memory with its options rotated by
  a seeded shift of 1..n−1; the chosen letter is mapped back. :func:`order_stats` gives order consistency (share of
  items answered the same in both orders) and position bias (share of each shown letter among the answers vs among
  the keys).

The method whose memory the ``wrong_user`` and ``order`` rows use is :func:`memory_method`: FileGramOS when it is
evaluated, else the first evaluated method with a memory. Validity rows never count as methods (they are kept out
of every paired test, Holm family and finding).

**The gate** (:func:`reader_gate`): a reader *reads* — and only then may it decide a finding or mark a method as
distinguishable — when its validity rows say so: the gold-evidence headroom is at least :data:`MIN_HEADROOM`
points and, told the answer, it gives it on every multiple-choice sub-task (gold evidence ≥ :data:`MIN_GOLD_SCORE`
where the sub-task has at least :data:`MIN_GOLD_ITEMS` gold items) with gold − floor ≥
:data:`MIN_SUB_TASK_HEADROOM` points on each of them; the wrong user's memory falls to the floor; the option order
changes at most a share 1 − :data:`MIN_ORDER_CONSISTENCY` of its answers and no shown letter's share of the
answers stands more than :data:`MAX_LETTER_SKEW` points off its share of the keys; and the intervals rest on at
least :data:`MIN_INTERVAL_PROFILES` profiles. A check that was not measured does not pass.
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from filegram_ray.evaluate.items import public_view
from filegram_ray.llm.parsing import no_choice_error

log = logging.getLogger(__name__)

__all__ = [
    "MIN_GOLD_ITEMS",
    "MIN_GOLD_SCORE",
    "MIN_HEADROOM",
    "MIN_INTERVAL_PROFILES",
    "MIN_ORDER_CONSISTENCY",
    "READER_ROWS",
    "gold_evidence",
    "item_profiles",
    "mask_tier_words",
    "memory_method",
    "order_stats",
    "reader_gate",
    "reader_requests",
    "ContextResolver",
    "ReaderCheckCollect",
    "ReaderCheckPrompts",
    "ReaderCheckWorker",
    "reader_check_items",
    "reader_validity_frame",
    "rotation",
    "validity_rows",
]

#: the reader validity rows this module adds (row ids in ``results.parquet``)
READER_ROWS = ("empty", "gold", "wrong_user", "order", "masked")
#: headroom (gold evidence − the floor, multiple-choice Avg, points) below which the reader cannot rank methods
MIN_HEADROOM = 20.0
#: gold-evidence score (0–100) a reader must reach on every multiple-choice sub-task: told the answer in plain
#: words, a reader that reads gives it (our bound; the word-matching lexical reader reached 53 on TraceDis, whose
#: flipped options share their words — docs/results.md, 2026-12-02)
MIN_GOLD_SCORE = 80.0
#: gold items a sub-task needs before its gold score is judged (fewer: too few to say)
MIN_GOLD_ITEMS = 5
#: gold evidence − the floor (points) a reader must reach on every multiple-choice sub-task with
#: ≥ MIN_GOLD_ITEMS gold items: headroom on the Avg can hide a sub-task the reader cannot read (our bound)
MIN_SUB_TASK_HEADROOM = 40.0
#: share of items (0–100) answered with the same option when the options are rotated; a reader that picks by
#: position keeps few, one that reads keeps nearly all (our bound)
MIN_ORDER_CONSISTENCY = 90.0
#: most points any shown letter's share of the rotated answers may stand off its share of the keys: a reader that
#: prefers a position answers it more often than the keys hold it (our bound)
MAX_LETTER_SKEW = 5.0
#: ... and only when sampling does not explain it: a letter's answer count against its key share by an exact
#: binomial test, Bonferroni over the letters, below this level (our bound; on 45 items a reader that never
#: looks at positions stands 6–7 points off by chance)
LETTER_SKEW_ALPHA = 0.01
#: profiles below which a bootstrap over profiles has too few distinct replicates for its interval to mean much
#: (2 profiles give 3 distinct resamples); the same floor as leave-profiles-out recovery (validity.core)
MIN_INTERVAL_PROFILES = 5
LETTERS = "ABCDEFGH"

_GOLD_LEAD = {
    "AttrRec": "What this user's sessions show about them",
    "ProfRec": "What this user's sessions show about them",
    "VisGrd": "What this user's sessions show about them",
    "BehavInf": "How this user works, in every session",
    "BehavFP": "The user behind this session",
    "TraceDis": "The true difference between the two users",
    "AnomDet": "The session that was not produced by the same user as the others",
    "ShiftAna": "The habit that changed in the last session",
}


def _key_text(item: Mapping[str, Any], k: Mapping[str, Any]) -> str:
    """The key's answer in words: the correct option's text (multiple choice) or the reference value."""
    choices = list(item.get("choices") or [])
    letter = str(k.get("correct") or "").strip().upper()
    if choices and len(letter) == 1 and letter in LETTERS and LETTERS.index(letter) < len(choices):
        return str(choices[LETTERS.index(letter)])
    return str(k.get("correct_text") or k.get("correct") or "")


def gold_evidence(item: Mapping[str, Any], key: Mapping[str, Any]) -> str:
    """The gold-evidence memory text of one item (module docstring): a lead naming what the memory states, per
    sub-task (FileGrd: the sub-task it re-issues, ``metadata.source_sub_task``, else AttrRec's lead), then the
    ground truth in words. ``""`` when the key has no answer for the item."""
    truth = _key_text(item, key).strip()
    if not truth:
        return ""
    sub = str(item.get("sub_track") or "")
    if sub == "FileGrd":
        facts = key.get("facts")
        if isinstance(facts, str):
            try:
                facts = json.loads(facts or "{}")
            except json.JSONDecodeError:
                facts = {}
        sub = str((facts or {}).get("source_sub_task") or (item.get("metadata") or {}).get("source_sub_task")
                  or "AttrRec")
    lead = _GOLD_LEAD.get(sub, "What this user's sessions show about them")
    attr = str((item.get("metadata") or {}).get("attribute") or "")
    if attr and not item.get("choices"):  # open-ended: the attribute in the question's words, its value described
        from filegram_ray.bench.vocab import ATTRIBUTE_TOPIC, VALUE_BEHAVIOUR

        lead = f"{ATTRIBUTE_TOPIC.get(attr, 'this user' + chr(39) + 's ' + attr.replace('_', ' '))} ({attr})"
        desc = VALUE_BEHAVIOUR.get(attr, {}).get(truth)
        truth = f"{truth} — {desc}" if desc else truth
    return f"Memory of this user ({sub}) — {lead}: {truth}"


#: the heading of FileGramOS's procedural channel in its retrieved context (:mod:`filegram_ray.memory.retrieve`)
_PROCEDURAL_HEAD = "### Channel 1: Procedural Patterns"
#: a dimension line of that channel: ``**B. Production — detailed**: <figures>``; group 2 is the tier word
_DIM_LABEL = re.compile(r"^(\*\*[A-F]\. [^*—]+? — )([^*]+)(\*\*:)", re.M)
#: a pattern line of that channel: ``- OUTPUT: detailed outputs (3120 chars per file)``; group 2 is the verdict
_PATTERN = re.compile(r"^(- [A-Z][A-Z-]+: )([^(\n]*?)(\s*\(.*\))?$", re.M)
#: what replaces a masked word
MASK = "[masked]"


def mask_tier_words(context: str) -> str:
    """FileGramOS's context with the verdicts of its procedural channel masked: the tier word of each dimension line
    (``**B. Production — detailed**`` → ``**B. Production — [masked]**``) and the verdict words of each pattern line
    (``- OUTPUT: detailed outputs (3120 chars per file)`` → ``- OUTPUT: [masked] (3120 chars per file)``); the
    figures (reads per task, characters × files, …) and every other section stay as they are. A context without
    that channel is returned unchanged. The ``masked`` reader row reads it: a reader that reads evidence keeps its
    score, one that reads labels falls toward the floor."""
    start = context.find(_PROCEDURAL_HEAD)
    if start < 0:
        return context
    end = context.find("\n### ", start + len(_PROCEDURAL_HEAD))
    end = len(context) if end < 0 else end
    sec = _DIM_LABEL.sub(lambda m: f"{m.group(1)}{MASK}{m.group(3)}", context[start:end])
    sec = _PATTERN.sub(lambda m: f"{m.group(1)}{MASK}{m.group(3) or ''}", sec)
    return context[:start] + sec + context[end:]


def item_profiles(item: Mapping[str, Any]) -> set[str]:
    """Every profile an item's context or routing names (``profile_id`` and each ``<profile>/<task>`` trajectory)."""
    out = {str(t).split("/", 1)[0] for t in (item.get("context") or {}).get("trajectories") or []}
    if item.get("profile_id"):
        out.add(str(item["profile_id"]))
    return out


def memory_method(methods: Sequence[str]) -> str | None:
    """The method whose memory the ``wrong_user`` and ``order`` rows use: ``filegramos`` when among ``methods``,
    else the first that is not ``no_context``; None when there is none."""
    if "filegramos" in methods:
        return "filegramos"
    return next((m for m in methods if m != "no_context"), None)


def rotation(n: int, seed: int, qid: str) -> int:
    """The seeded shift (1..n−1) of an item's options in the ``order`` row; 0 when n < 2."""
    from filegram_ray.llm.backbones import stable_seed

    return random.Random(stable_seed(seed, "option-order", qid)).randrange(1, n) if n >= 2 else 0


def _rotated(pv: Mapping[str, Any], shift: int) -> dict[str, Any]:
    """The public view with option i shown at position (i + shift) mod n."""
    opts = [pv["choices"][k] for k in sorted(pv["choices"])]
    n = len(opts)
    shown = [""] * n
    for i, text in enumerate(opts):
        shown[(i + shift) % n] = text
    return {**pv, "choices": {LETTERS[j]: t for j, t in enumerate(shown)}}


def _unrotate(letter: str, shift: int, n: int) -> str:
    """The original letter of the option shown at ``letter`` under ``shift``."""
    if not letter or letter not in LETTERS[:n]:
        return ""
    return LETTERS[(LETTERS.index(letter) - shift) % n]


def reader_requests(items: Sequence[Mapping[str, Any]], key: Mapping[str, Mapping[str, Any]], seed: int, *,
                    units: Sequence[Mapping[str, Any]] | None, with_empty: bool,
                    masked: bool = False) -> list[dict[str, Any]]:
    """The requests of the reader validity rows: ``{row, item, pv, shift, cache_key}`` with either ``context``
    (``empty``, ``gold``) or ``state`` — ``{"cache_path", "cache_key"}`` of the memory method's unit whose cached
    state the context is retrieved from with the item's own query (``wrong_user``, ``order``, ``masked``: the
    ``order`` context with :func:`mask_tier_words`), by :class:`ContextResolver` where the request is
    answered.
    ``pv`` = the public view the reader sees, options rotated by ``shift`` for the ``order`` row.

    Args:
        items / key: the evaluated items and the answer key (only ``gold`` reads the key).
        seed: master seed (wrong-user pick, rotations).
        units: the memory method's completed units (:func:`memory_method`; None = no ``wrong_user``/``order``).
        with_empty: add the ``empty`` row (the No Context method is not evaluated).
        masked: add the ``masked`` row (the memory method is FileGramOS).
    """
    out: list[dict[str, Any]] = []
    for it in items:
        pv = public_view(it)
        if with_empty:
            out.append({"row": "empty", "item": it, "pv": pv, "context": "", "shift": 0, "cache_key": ""})
        gold = gold_evidence(it, key.get(it["question_id"], {}))
        if gold:
            out.append({"row": "gold", "item": it, "pv": pv, "context": gold, "shift": 0, "cache_key": ""})
    if not units:
        return out
    unit_of = {it["question_id"]: u for u in units for it in u["items"]}
    # wrong user: per item, a unit of the same setting whose profiles are disjoint from the item's (seeded pick)
    by_setting: dict[str, list[Mapping[str, Any]]] = {}
    for u in sorted(units, key=lambda u: u["unit_id"]):
        by_setting.setdefault(u["setting"], []).append(u)
    from filegram_ray.llm.backbones import stable_seed

    wrong: dict[str, list[Mapping[str, Any]]] = {}
    for it in items:
        mine = item_profiles(it)
        cands = [u for u in by_setting.get(it.get("setting", "text"), [])
                 if mine and not (mine & {p for x in u["items"] for p in item_profiles(x)})]
        if cands:
            u = random.Random(stable_seed(seed, "wrong-user", it["question_id"])).choice(cands)
            wrong.setdefault(u["unit_id"], []).append(it)
    own: dict[str, list[Mapping[str, Any]]] = {}
    for it in items:
        if it.get("choices") and it["question_id"] in unit_of:
            own.setdefault(unit_of[it["question_id"]]["unit_id"], []).append(it)
    by_id = {u["unit_id"]: u for u in units}
    for uid in sorted(set(wrong) | set(own)):
        u = by_id[uid]
        state = {"cache_path": u["cache_path"], "cache_key": u["cache_key"]}
        for row, its in (("wrong_user", wrong.get(uid, [])), ("order", own.get(uid, []))):
            for it in its:
                pv = public_view(it)
                shift = rotation(len(pv["choices"]), seed, it["question_id"]) if row == "order" else 0
                out.append({"row": row, "item": it, "pv": _rotated(pv, shift) if shift else pv, "state": state,
                            "shift": shift, "cache_key": u["cache_key"]})
                if row == "order" and masked:
                    out.append({"row": "masked", "item": it, "pv": pv, "state": state, "shift": 0,
                                "cache_key": u["cache_key"]})
    return out


class ContextResolver:
    """Where a reader validity request is answered: its context — given (``empty``, ``gold``) or retrieved from the
    memory method's cached state with the item's own query (:func:`~filegram_ray.evaluate.items.retrieval_query`),
    cut to ``max_context_chars`` on the language-model path, masked for the ``masked`` row; the last state loaded
    is kept (a task holds the requests of one state).

    Args:
        run_uri / storage_options: the run directory. method / method_options: the memory method
            (:func:`memory_method`; None: no state rows). backbone: what the method's ``complete`` may call (the
            ingest backbone). seed: master seed. multimodal_content / multimodal_formats: as the units'.
        max_context_chars: the language-model path's context budget (None: uncut).
    """

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None, method: str | None,
                 method_options: dict[str, Any] | None, backbone: Any, seed: int, multimodal_content: str,
                 multimodal_formats: list[str] | None, max_context_chars: int | None = None):
        self.method = method
        self.worker_kwargs = {"run_uri": run_uri, "storage_options": storage_options, "method": method,
                              "method_options": method_options, "backbone": backbone, "seed": seed,
                              "multimodal_content": multimodal_content, "multimodal_formats": multimodal_formats}
        self.cut = max_context_chars
        self._worker = None
        self._last: tuple[str, Any] | None = None

    def __call__(self, req: Mapping[str, Any]) -> str:
        """The request's context. Raises what loading the state or retrieving raises (the request's error row)."""
        if "context" in req:
            return str(req["context"])
        from filegram_ray.evaluate.items import retrieval_query
        from filegram_ray.evaluate.worker import EvalWorker

        if self._worker is None:
            if self.method is None:
                raise ValueError("reader validity: a state row without a memory method")
            self._worker = EvalWorker(**self.worker_kwargs)
        path = req["state"]["cache_path"]
        if self._last is None or self._last[0] != path:
            self._last = (path, self._worker._state(dict(req["state"]))[0])
        text = self._worker.method.retrieve(self._last[1], retrieval_query(req["item"])).text
        if self.cut and len(text) > self.cut:
            text = text[:self.cut] + "\n[… context cut to fit the model]"
        return mask_tier_words(text) if req["row"] == "masked" else text


def _row(req: Mapping[str, Any], backbone: str, *, status: str = "ok", error: str = "", choice: str = "",
         text: str = "", prompt_tokens: int = 0, reply_tokens: int = 0) -> dict[str, Any]:
    from filegram_ray.evaluate.worker import prompt_sha
    from filegram_ray.llm.backbones import approx_tokens

    n = len(req["pv"]["choices"])
    return {"method": req["row"], "question_id": req["item"]["question_id"], "cache_key": req["cache_key"],
            "backbone": backbone, "status": status, "error": error[:1000],
            "choice": _unrotate(choice, req["shift"], n) if req["shift"] else choice, "answer_text": text[:4000],
            "tokens_in_memory": 0, "tokens_out": approx_tokens(req["context"]), "prompt_tokens": int(prompt_tokens),
            "reply_tokens": int(reply_tokens), "prompt_sha": prompt_sha(req["pv"], req["context"]),
            "shown_choice": choice, "shift": int(req["shift"])}


def _constrain(spec: Any) -> str:
    return "choice" if spec.constrain == "auto" and spec.kind == "vllm_engine" else spec.constrain


def cpu_answer(req: Mapping[str, Any], backbone: Any) -> dict[str, Any]:
    """One reader validity request answered by a CPU ``backbone``: its unit-table row (an error row when the
    answer names no option). Raises what the backbone raises."""
    ans = backbone.answer(req["pv"], req["context"])
    opts = list(req["pv"]["choices"].values())
    unread = no_choice_error(ans.text, len(opts), opts) if opts and not ans.choice else ""
    return _row(req, backbone.name, status="error" if unread else "ok", error=unread, choice=ans.choice or "",
                text=ans.text, prompt_tokens=ans.tokens_in, reply_tokens=ans.tokens_out)


def chat_request(req: Mapping[str, Any], spec: Any, i: int | str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(chat request row, prompt row)`` of one reader validity request for a language-model ``spec``: the method
    rows' prompts (``SYSTEM_PROMPT`` + ``mcq_prompt``/``open_prompt``, context first); ``i`` makes its
    ``req_key`` unique."""
    from filegram_ray.evaluate.answer import context_first, request_key
    from filegram_ray.llm.backbones import SYSTEM_PROMPT, mcq_prompt, open_prompt

    letter_only = _constrain(spec) not in ("none", "auto")
    opts = [req["pv"]["choices"][k] for k in sorted(req["pv"]["choices"])]
    user = mcq_prompt(req["pv"], req["context"], letter_only=letter_only) if opts else \
        open_prompt(req["pv"], req["context"])
    messages = context_first(SYSTEM_PROMPT, user)  # the method rows' layout: the same prompts
    prompt = {"method": req["row"], "question_id": req["item"]["question_id"], "cache_key": req["cache_key"],
              "status": "ok", "error": "", "messages": messages, "choices_json": json.dumps(opts),
              "tokens_in_memory": 0, "tokens_out": 0}
    chat = {"req_key": request_key("reader-validity", i, req["row"], req["item"]["question_id"]),
            "messages": messages, "letters": list(LETTERS[:len(opts)]),
            "max_tokens": spec.max_tokens if opts else spec.max_tokens_open, "temperature": spec.temperature}
    return chat, prompt


def reply_row(req: Mapping[str, Any], prompt: Mapping[str, Any], reply: Mapping[str, Any] | None, name: str,
              constrain: str) -> dict[str, Any]:
    """The unit-table row of one reader validity request from the model's ``reply`` (None: no reply), read as
    the method rows' replies are (:func:`filegram_ray.evaluate.answer._answer_row`)."""
    from filegram_ray.evaluate.answer import _answer_row

    a = _answer_row(dict(prompt), reply, name, constrain)
    return _row(req, name, status=a["status"], error=a["error"], choice=a["choice"], text=a["answer_text"],
                prompt_tokens=a["prompt_tokens"], reply_tokens=a["reply_tokens"])


def order_stats(results: pl.DataFrame, method: str | None) -> dict[str, Any]:
    """Option-order check of the ``order`` rows against ``method``'s own answers (same items, original order):
    ``{method, n, consistency}`` (share of items whose answer, mapped back to the original letters, is the same
    option; 0–100), ``bias``: per shown letter ``{letter, answers, keys}`` — its share (0–100) among the answers of
    the rotated asking and among the keys as shown — and ``bias_original``: the same for ``method``'s own answers in
    the original order. Empty dict without ``order`` rows."""
    if not results.height or "shift" not in results.columns or method is None:
        return {}
    rot = results.filter((pl.col("method") == "order") & (pl.col("status") == "ok"))
    if not rot.height:
        return {}
    orig = results.filter(pl.col("method") == method).select("question_id", pl.col("choice").alias("orig"))
    j = rot.join(orig, on="question_id", how="inner")
    same = sum(1 for a, b in zip(j["choice"].to_list(), j["orig"].to_list()) if a and a == b)
    n_letters = max(int(x) for x in rot["n_choices"].to_list()) if "n_choices" in rot.columns else 4
    shown_keys = [LETTERS[(LETTERS.index(k) + int(s)) % int(n)] if k and k in LETTERS else ""
                  for k, s, n in zip(rot["correct"].to_list(), rot["shift"].to_list(), rot["n_choices"].to_list())]
    own = results.filter((pl.col("method") == method) & (pl.col("n_choices") > 0))

    def shares(answers: list[str], keys: list[str]) -> list[dict[str, Any]]:
        return [{"letter": letter, "answers": 100 * answers.count(letter) / max(1, len(answers)),
                 "keys": 100 * keys.count(letter) / max(1, len(keys))} for letter in LETTERS[:n_letters]]

    return {"method": method, "n": j.height, "consistency": 100 * same / j.height if j.height else None,
            "bias": shares([c or "" for c in rot["shown_choice"].to_list()], shown_keys),
            "bias_original": shares([c or "" for c in own["choice"].to_list()],
                                    [c or "" for c in own["correct"].to_list()])}


def reader_gate(reader: Mapping[str, Any]) -> dict[str, Any]:
    """Whether the reader reads (module docstring, "The gate"), from its validity rows as
    :func:`filegram_ray.evaluate.report.reader_summary` gathers them: ``headroom`` (points), ``floor`` (the floor's
    Avg interval row, with ``n_profiles``), ``gold_sub_tasks`` (``{sub_task: {mean, n}}`` of the gold row on the
    multiple-choice items), ``wrong_user`` (with ``falls_to_floor``) and ``order`` (with ``consistency``, ``n``).

    Returns ``{"reads": bool, "checks": [{check, ok, value, bound}], "why": "…"}``: ``reads`` only when every check
    passed (one not measured has ``ok`` False and ``value`` None); ``why`` names the checks that did not pass, in
    words, "" when it reads.
    """
    checks: list[dict[str, Any]] = []

    def check(name: str, ok: bool, value: Any, bound: str, fail: str) -> None:
        checks.append({"check": name, "ok": bool(ok), "value": value, "bound": bound, "why": "" if ok else fail})

    h = reader.get("headroom")
    check("headroom", h is not None and h >= MIN_HEADROOM, h, f"≥ {MIN_HEADROOM:.0f} points",
          "headroom not measured (no gold-evidence row)" if h is None else
          f"headroom {h:.1f} < {MIN_HEADROOM:.0f} points")
    gold = {s: g for s, g in (reader.get("gold_sub_tasks") or {}).items() if (g.get("n") or 0) >= MIN_GOLD_ITEMS}
    low = {s: g["mean"] for s, g in gold.items() if g.get("mean") is None or g["mean"] < MIN_GOLD_SCORE}
    check("gold_per_sub_task", bool(gold) and not low, {s: g.get("mean") for s, g in gold.items()},
          f"≥ {MIN_GOLD_SCORE:.0f} on every multiple-choice sub-task with ≥ {MIN_GOLD_ITEMS} gold items",
          "told the answer, it does not give it: gold evidence scores "
          + ", ".join(f"{s} {'–' if v is None else f'{v:.1f}'}" for s, v in sorted(low.items()))
          + f" (< {MIN_GOLD_SCORE:.0f})" if low else
          f"no multiple-choice sub-task has {MIN_GOLD_ITEMS} gold-evidence items")
    floors = {r["sub_task"]: r for r in reader.get("sub_tasks") or []}
    room = {s: floors[s]["headroom"] for s in gold if s in floors}
    short = {s: v for s, v in room.items() if v < MIN_SUB_TASK_HEADROOM}
    check("headroom_per_sub_task", bool(room) and not short, room,
          f"≥ {MIN_SUB_TASK_HEADROOM:.0f} points on every multiple-choice sub-task with ≥ {MIN_GOLD_ITEMS} gold items",
          "gold evidence lifts the reader little above the floor on "
          + ", ".join(f"{s} ({v:+.1f})" for s, v in sorted(short.items()))
          + f" (< {MIN_SUB_TASK_HEADROOM:.0f} points)" if short else
          "no multiple-choice sub-task has both a gold and a floor figure")
    wu = reader.get("wrong_user")
    check("wrong_user", bool(wu) and bool(wu.get("falls_to_floor")), None if not wu else wu.get("mean"),
          "falls to the floor", "the wrong user's memory was not measured" if not wu else
          "whether the wrong user's memory falls to the floor is undecided (too few profiles)"
          if wu.get("falls_to_floor") is None else
          "the wrong user's memory does not fall to the floor (it scores memory of another person apart from none)")
    order = reader.get("order") or {}
    cons = order.get("consistency")
    check("order", cons is not None and cons >= MIN_ORDER_CONSISTENCY, cons, f"≥ {MIN_ORDER_CONSISTENCY:.0f} %",
          "option order not measured" if cons is None else
          f"rotating the options changes {100 - cons:.1f} % of its answers (same option for {cons:.1f} %, "
          f"< {MIN_ORDER_CONSISTENCY:.0f} %)")
    bias = order.get("bias") or []
    skew = max((abs(b["answers"] - b["keys"]) for b in bias), default=None)
    p_skew = _letter_skew_p(bias, order.get("n"))
    check("letter_skew", skew is not None and (skew <= MAX_LETTER_SKEW or p_skew >= LETTER_SKEW_ALPHA), skew,
          f"≤ {MAX_LETTER_SKEW:.0f} points, or not beyond sampling (binomial p ≥ {LETTER_SKEW_ALPHA})",
          "option order not measured" if skew is None else
          f"one shown letter's share of the answers stands {skew:.1f} points off its share of the keys "
          f"(> {MAX_LETTER_SKEW:.0f}; binomial p {p_skew:.2g} < {LETTER_SKEW_ALPHA} over {order.get('n')} items): "
          "the reader prefers a position")
    n_prof = (reader.get("floor") or {}).get("n_profiles")
    check("profiles", n_prof is not None and n_prof >= MIN_INTERVAL_PROFILES, n_prof,
          f"≥ {MIN_INTERVAL_PROFILES} profiles",
          "no interval for the floor" if n_prof is None else
          f"the intervals are bootstrapped over {n_prof} profile(s); fewer than {MIN_INTERVAL_PROFILES} give too "
          "few distinct resamples to mean much")
    reads = all(c["ok"] for c in checks)
    return {"reads": reads, "checks": checks, "why": "" if reads else "; ".join(c["why"] for c in checks
                                                                                if not c["ok"])}


def _letter_skew_p(bias: Sequence[Mapping[str, Any]], n: int | None) -> float:
    """The smallest Bonferroni-adjusted two-sided exact binomial p over the shown letters that stand more than
    :data:`MAX_LETTER_SKEW` points off their key share: ``answers`` share of ``n`` items against the ``keys``
    share. 1.0 when no letter stands that far off; 0.0 when ``n`` is unknown (the share alone decides)."""
    far = [b for b in bias if abs(b["answers"] - b["keys"]) > MAX_LETTER_SKEW]
    if not far:
        return 1.0
    if not n:
        return 0.0
    from scipy.stats import binomtest

    ps = []
    for b in far:
        k, p0 = round(b["answers"] * n / 100), b["keys"] / 100
        ps.append(binomtest(k, n, p0).pvalue if 0 < p0 < 1 else 0.0)
    return min(1.0, min(ps) * len(bias))


def validity_rows(items: list[dict[str, Any]], key: Mapping[str, Mapping[str, Any]], seed: int) -> list[dict]:
    """The ``oracle`` (answers from the key) and ``random`` (a seeded letter) rows of every item, from its public
    view, as unit-table rows (:data:`~filegram_ray.evaluate.worker.UNIT_SCHEMA`); a failure is an error row."""
    from filegram_ray.evaluate.items import is_letter
    from filegram_ray.evaluate.worker import error_text
    from filegram_ray.llm import OracleBackbone, RandomBackbone

    oracle = OracleBackbone({q: (k.get("correct") if is_letter(k.get("correct")) else
                                 k.get("correct_text") or k.get("correct")) for q, k in key.items()})
    out = []
    for name, bb in (("oracle", oracle), ("random", RandomBackbone(seed))):
        for it in items:
            pv = public_view(it)
            base = {"method": name, "question_id": it["question_id"], "cache_key": "", "backbone": name}
            try:
                ans = bb.answer(pv, "")
                out.append({**base, "status": "ok", "error": "", "choice": ans.choice or "",
                            "answer_text": ans.text, "tokens_in_memory": 0, "tokens_out": 0, "prompt_tokens": 0,
                            "reply_tokens": 0})
            except Exception as exc:  # noqa: BLE001 - a validity row failure is an error row
                out.append({**base, "status": "error", "error": error_text(exc), "choice": "", "answer_text": "",
                            "tokens_in_memory": 0, "tokens_out": 0, "prompt_tokens": 0, "reply_tokens": 0})
    return out


def reader_check_items(run, items: list[dict[str, Any]], key: Mapping[str, Mapping[str, Any]], seed: int,
                       plan: Mapping[str, list[dict[str, Any]]], opts: Any) -> list[dict[str, Any]]:
    """The reader validity requests (:func:`reader_requests`: empty memory when No Context is not evaluated, gold
    evidence, wrong user, option order, masked format) as the evaluate stage's ``reader checks`` items:
    ``{"unit_id": "<backbone tag>/<row>/<question id>/<state's cache key or ->", "key": what the answer depends on
    (the given context's prompt hash, or the state's cache key and the rotation), "state_path", "request"}`` (the
    runner skips an item an earlier evaluate answered with the same backbone and inputs). ``wrong_user``, ``order``
    and ``masked`` read the memory method's finished units' cached states (nothing is ingested for them).

    Args:
        run: the :class:`~filegram_ray.storage.RunDir`.
        items / key / seed: the evaluated items, the answer key, the master seed.
        plan: ``{method: units}`` of this run and the earlier methods joining its report.
        opts: the validated :class:`~filegram_ray.evaluate.config.EvaluateConfig`.
    """
    import hashlib

    from filegram_ray.evaluate.plan import unit_complete
    from filegram_ray.evaluate.worker import prompt_sha

    mm = memory_method(list(plan))
    units = [u for u in plan.get(mm, []) if unit_complete(run, u) and run.exists(u["cache_path"])] if mm else []
    reqs = reader_requests(items, key, seed, units=units, with_empty="no_context" not in plan,
                           masked=mm == "filegramos")
    out: dict[str, dict[str, Any]] = {}
    for q in reqs:
        if "context" in q:
            what, where = prompt_sha(q["pv"], q["context"]), "-"
        else:
            what = hashlib.sha256(f"{q['state']['cache_key']}:{q['shift']}".encode()).hexdigest()[:16]
            where = q["state"]["cache_key"]
        out.setdefault(f"{opts.tag}/{q['row']}/{q['item']['question_id']}/{where}",
                       {"key": what, "state_path": q.get("state", {}).get("cache_path", ""), "request": q})
    return [{"unit_id": uid, **v} for uid, v in out.items()]


class ReaderCheckWorker:
    """The CPU reader answering ``reader checks`` items (:func:`reader_check_items`): ``process(item) ->
    {"answer": its unit-table row}``, the context resolved here (:class:`ContextResolver`); an exception (a state
    that cannot load, a failed retrieval, the reader) is the item's error row.

    Args:
        backbone: the evaluate section's ``backbone`` value (a CPU reader). seed: the master seed.
        resolver: the :class:`ContextResolver` arguments (``run_uri`` … ``max_context_chars``).
    """

    def __init__(self, backbone: Any, seed: int, resolver: dict[str, Any]):
        from filegram_ray.evaluate.config import make_reader

        self.backbone = make_reader(backbone, seed)
        self.context = ContextResolver(**resolver)

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        req = item["request"]
        return {"answer": cpu_answer({**req, "context": self.context(req)}, self.backbone)}


class ReaderCheckPrompts:
    """The ``prepare`` of the language-model path's ``reader checks``: an item → its one chat request, the context
    resolved here (:class:`ContextResolver`; state: the context and the prompt row :func:`reply_row` reads the
    reply against). ``spec``: the processor spec, ``constrain`` resolved; ``resolver``: as
    :class:`ReaderCheckWorker`'s."""

    def __init__(self, spec: Any, resolver: dict[str, Any]):
        self.spec = spec
        self.context = ContextResolver(**resolver)

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        req = item["request"]
        ctx = self.context(req)
        chat, prompt = chat_request({**req, "context": ctx}, self.spec, item["unit_id"])
        return {"requests": [chat], "state": {"prompt": prompt, "context": ctx}}


class ReaderCheckCollect:
    """The ``collect`` of the language-model path's ``reader checks``: the reply → ``{"answer": the unit-table
    row}``.

    Raises:
        RuntimeError: no reply, or a reply the server could not give (the item's error row: asked again by the
            next evaluate); a reply that names no option is an answer, kept.
    """

    def __init__(self, spec: Any):
        self.name, self.constrain = spec.display(), _constrain(spec)

    def __call__(self, item: dict[str, Any], state: dict[str, Any], requests: list[dict[str, Any]],
                 replies: list[dict[str, Any]]) -> dict[str, Any]:
        reply = replies[0] if replies else None
        if reply is None:
            raise RuntimeError("reader check: no reply")
        if reply.get("error"):
            raise RuntimeError(str(reply["error"])[:1000])
        req = {**item["request"], "context": state["context"]}
        return {"answer": reply_row(req, state["prompt"], reply, self.name, self.constrain)}


def reader_validity_frame(items: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]],
                          backbone: str) -> pl.DataFrame:
    """The reader validity rows of ``results.parquet`` from the ``reader checks`` step: ``items``
    (:func:`reader_check_items`) and their runner ``rows`` (ok: ``answer``; an error row becomes an error answer
    with its message). Unit-table rows plus ``shown_choice`` and ``shift``."""
    from filegram_ray.evaluate.worker import UNIT_SCHEMA

    schema = {**UNIT_SCHEMA, "shown_choice": pl.Utf8, "shift": pl.Int64}
    by_id = {str(r.get("unit")): r for r in rows}
    out = []
    for it in items:
        r = by_id.get(it["unit_id"]) or {}
        if r.get("status") == "ok" and isinstance(r.get("answer"), Mapping):
            out.append({k: r["answer"].get(k) for k in schema})
        else:
            out.append(_row({"context": "", **it["request"]}, backbone, status="error",
                            error=str(r.get("error") or "reader check did not run")))
    return pl.DataFrame(out, schema=schema)
