"""Reader validity rows: can the answering backbone (the *reader*) tell good memory from none at all?

A memory method's score is the reader's score on that method's context. Before ranking methods the report checks
the reader with contexts whose quality is known (issue #30 item 2). Rows, per backbone, beside the oracle and random
rows of :func:`filegram_ray.evaluate.stage._validity_rows`:

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
* ``order`` — each multiple-choice item asked again under the same method's own memory with its options rotated by
  a seeded shift of 1..n−1; the chosen letter is mapped back. :func:`order_stats` gives order consistency (share of
  items answered the same in both orders) and position bias (share of each shown letter among the answers vs among
  the keys).

The method whose memory the ``wrong_user`` and ``order`` rows use is :func:`memory_method`: FileGramOS when it is
evaluated, else the first evaluated method with a memory. Validity rows never count as methods (they are kept out
of every paired test, Holm family and finding).
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

log = logging.getLogger(__name__)

__all__ = [
    "READER_ROWS",
    "answer_requests",
    "gold_evidence",
    "item_profiles",
    "memory_method",
    "order_stats",
    "reader_requests",
    "rotation",
]

#: the reader validity rows this module adds (row ids in ``results.parquet``)
READER_ROWS = ("empty", "gold", "wrong_user", "order")
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
                    units: Sequence[Mapping[str, Any]] | None, load_state, retrieve, with_empty: bool
                    ) -> list[dict[str, Any]]:
    """The requests of the reader validity rows: ``{row, item, pv, context, shift, cache_key}`` (``pv`` = the
    public view the reader sees, options rotated by ``shift`` for the ``order`` row).

    Args:
        items / key: the evaluated items and the answer key (only ``gold`` reads the key).
        seed: master seed (wrong-user pick, rotations).
        units: the memory method's completed units (:func:`memory_method`; None = no ``wrong_user``/``order``).
        load_state: ``unit -> state`` (the method's cached ingest; raising skips that unit's items).
        retrieve: ``(state, item) -> context text``.
        with_empty: add the ``empty`` row (the No Context method is not evaluated).
    """
    from filegram_ray.evaluate.stage import public_view

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
        try:
            state = load_state(u)
        except Exception as exc:  # noqa: BLE001 - a state that cannot load leaves its validity items out
            log.warning("evaluate: reader validity: state of %s not loaded: %s", uid, exc)
            continue
        for row, its in (("wrong_user", wrong.get(uid, [])), ("order", own.get(uid, []))):
            for it in its:
                try:
                    ctx = retrieve(state, it)
                except Exception as exc:  # noqa: BLE001 - one failed retrieval leaves that item out
                    log.warning("evaluate: reader validity %s %s: %s", row, it["question_id"], exc)
                    continue
                pv = public_view(it)
                shift = rotation(len(pv["choices"]), seed, it["question_id"]) if row == "order" else 0
                out.append({"row": row, "item": it, "pv": _rotated(pv, shift) if shift else pv, "context": ctx,
                            "shift": shift, "cache_key": u["cache_key"]})
    return out


def _row(req: Mapping[str, Any], backbone: str, *, status: str = "ok", error: str = "", choice: str = "",
         text: str = "", prompt_tokens: int = 0, reply_tokens: int = 0) -> dict[str, Any]:
    from filegram_ray.evaluate.stage import prompt_sha
    from filegram_ray.llm.backbones import approx_tokens

    n = len(req["pv"]["choices"])
    return {"method": req["row"], "question_id": req["item"]["question_id"], "cache_key": req["cache_key"],
            "backbone": backbone, "status": status, "error": error[:1000],
            "choice": _unrotate(choice, req["shift"], n) if req["shift"] else choice, "answer_text": text[:4000],
            "tokens_in_memory": 0, "tokens_out": approx_tokens(req["context"]), "prompt_tokens": int(prompt_tokens),
            "reply_tokens": int(reply_tokens), "prompt_sha": prompt_sha(req["pv"], req["context"]),
            "shown_choice": choice, "shift": int(req["shift"])}


def answer_requests(requests: Sequence[Mapping[str, Any]], *, backbone: Any = None, spec: Any = None
                    ) -> list[dict[str, Any]]:
    """Answer the reader validity requests with a CPU ``backbone`` (:func:`filegram_ray.llm.make_backbone`) or a
    language-model ``spec`` (one ``ray.data.llm`` pass, :func:`filegram_ray.llm.processors.run_chat`), exactly as
    the method rows are answered: the same prompts (``SYSTEM_PROMPT`` + ``mcq_prompt``/``open_prompt``, one letter
    when the backbone's ``constrain`` holds the reply to one) and the same reply reading
    (:func:`filegram_ray.evaluate.answer._answer_row`). Returns unit-table rows (``stage._UNIT_SCHEMA`` plus
    ``shown_choice`` and ``shift``); ``choice`` is the letter in the item's own order. A failed request or a reply
    without an option letter is an error row keeping the raw reply."""
    if spec is None:
        out = []
        for req in requests:
            try:
                ans = backbone.answer(req["pv"], req["context"])
                out.append(_row(req, backbone.name, choice=ans.choice or "", text=ans.text,
                                prompt_tokens=ans.tokens_in, reply_tokens=ans.tokens_out))
            except Exception as exc:  # noqa: BLE001 - a validity item's failure is an error row
                out.append(_row(req, backbone.name, status="error", error=f"{type(exc).__name__}: {exc}"))
        return out
    from filegram_ray.evaluate.answer import _answer_row, context_first, request_key
    from filegram_ray.llm.backbones import SYSTEM_PROMPT, mcq_prompt, open_prompt
    from filegram_ray.llm.processors import run_chat

    constrain = "choice" if spec.constrain == "auto" and spec.kind == "vllm_engine" else spec.constrain
    letter_only = constrain not in ("none", "auto")
    prompts, chat = [], []
    for i, req in enumerate(requests):
        opts = [req["pv"]["choices"][k] for k in sorted(req["pv"]["choices"])]
        user = mcq_prompt(req["pv"], req["context"], letter_only=letter_only) if opts else \
            open_prompt(req["pv"], req["context"])
        key = request_key("reader-validity", i, req["row"], req["item"]["question_id"])
        messages = context_first(SYSTEM_PROMPT, user)  # the method rows' layout: the same prompts
        prompts.append({"method": req["row"], "question_id": req["item"]["question_id"],
                        "cache_key": req["cache_key"], "status": "ok", "error": "", "messages": messages,
                        "choices_json": json.dumps(opts), "tokens_in_memory": 0, "tokens_out": 0})
        chat.append({"req_key": key, "messages": messages, "letters": list(LETTERS[:len(opts)]),
                     "max_tokens": spec.max_tokens if opts else spec.max_tokens_open, "temperature": spec.temperature})
    replies = {r["req_key"]: r for r in run_chat(chat, spec)} if chat else {}
    out = []
    for req, p, c in zip(requests, prompts, chat):
        a = _answer_row(p, replies.get(c["req_key"]), spec.display(), constrain)
        out.append(_row(req, spec.display(), status=a["status"], error=a["error"], choice=a["choice"],
                        text=a["answer_text"], prompt_tokens=a["prompt_tokens"], reply_tokens=a["reply_tokens"]))
    return out


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
