"""The evaluate stage's language-model path: prompts built in Ray Data CPU stages, answered by a ``ray.data.llm``
processor (an OpenAI-compatible endpoint or vLLM engines, :mod:`filegram_ray.llm.processors`).

Per wave of work units (a unit = one method × setting × context spec, as on the CPU path):

1. **Prompts** — ``ray.data.from_items(units).flat_map(PromptBuilder)`` on an actor pool (0.5 CPU each by
   default, ENVIRONMENT_FACTS §1): each actor ingests the unit's trajectories with the method (or loads the cached
   state, ``results/cache/…``), retrieves the context of every item and writes the chat messages,
   context first (system prompt + method context, then the item's public view: :func:`context_first`,
   :func:`filegram_ray.llm.backbones.mcq_prompt` / ``open_prompt``).
   A failing ingest gives error rows for the unit's items; a failing retrieve an error row for that item.
2. **Answers** — the prompts go through the processor as one Ray Dataset (:func:`~filegram_ray.llm.processors
   .run_chat`); replies stream back to the driver, which writes a unit's answer table and its completion record as
   soon as the unit's last reply is in (resumable per unit, as on the CPU path).

Multiple choice is answered by one letter held by a constraint when the backbone honours one (``constrain``:
llama.cpp grammar, a JSON-schema enum, vLLM guided choice; :mod:`filegram_ray.llm.replies`): such a reply is read
strictly, never by free-text parsing; a free-text reply is read for the option it states
(:func:`~filegram_ray.llm.parsing.read_choice`: the final, explicit statement wins). A reply that is not an option
letter, a free-text reply that states no single option (none, or an ambiguous one), and every reply the processor
could not use after its retries (an HTTP error, a timeout, a malformed body, an empty or reasoning-only reply, one
cut at ``max_tokens``; :func:`~filegram_ray.llm.processors.run_chat`) and an engine error are error rows whose
``answer_text`` keeps the raw reply (its first 2,000 characters); they have no score (never a guessed or a wrong
answer: :mod:`filegram_ray.evaluate.failures`) and are counted in ``n_errors``.
Token counts come from the server's ``usage`` (or the engine's counts) and fall back to ``len(text) // 4``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

import polars as pl

from filegram_ray.storage import RunDir

log = logging.getLogger(__name__)

__all__ = ["PromptBuilder", "answer_units", "context_first", "order_by_context", "request_key"]


def request_key(*parts: Any) -> str:
    """A 24-hex key of a request (sha256 of its identifying parts)."""
    return hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).hexdigest()[:24]


class PromptBuilder:
    """Ray Data ``flat_map`` callable: a unit row (``unit_json``) in, one prompt row per item out.

    Args:
        run_uri / storage_options: the run directory.
        method_options: per-method options (``evaluate.method_options``).
        ingest_backbone: backbone spec whose ``complete`` methods may call at ingest (``lexical`` = none).
        seed, multimodal_content, multimodal_formats: as :class:`~filegram_ray.evaluate.worker.EvalWorker`.
        temperature / max_tokens / max_tokens_open: the answering call's sampling settings.
        letter_only: the answer is held to one letter (the prompt then asks for the letter only).
        max_context_chars: cut each retrieved context to this many characters (None = no cut).
        embedder: the methods' sentence embedder kind (as :class:`~filegram_ray.evaluate.worker.EvalWorker`).
    """

    def __init__(self, run_uri: str, storage_options: dict[str, Any] | None, method_options: dict[str, Any],
                 ingest_backbone: Any, seed: int, multimodal_content: str, multimodal_formats: list[str] | None,
                 temperature: float, max_tokens: int, max_tokens_open: int, max_context_chars: int | None = None,
                 letter_only: bool = False, embedder: str = "minilm"):
        self.kw = {"run_uri": run_uri, "storage_options": storage_options, "backbone": ingest_backbone,
                   "seed": seed, "multimodal_content": multimodal_content,
                   "multimodal_formats": multimodal_formats, "embedder": embedder}
        self.method_options = method_options or {}
        self.temperature, self.max_tokens, self.max_tokens_open = temperature, max_tokens, max_tokens_open
        self.max_context_chars = max_context_chars
        self.letter_only = bool(letter_only)
        self._workers: dict[str, Any] = {}

    def _worker(self, method: str):
        from filegram_ray.evaluate.worker import EvalWorker

        if method not in self._workers:
            self._workers[method] = EvalWorker(method=method, method_options=self.method_options.get(method, {}),
                                               **self.kw)
        return self._workers[method]

    def __call__(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        from filegram_ray.evaluate.items import public_view, retrieval_query
        from filegram_ray.evaluate.worker import error_text
        from filegram_ray.llm.backbones import SYSTEM_PROMPT, mcq_prompt, open_prompt

        unit = json.loads(row["unit_json"])
        base = {"unit_id": unit["unit_id"], "method": unit["method"], "cache_key": unit["cache_key"]}
        try:
            worker = self._worker(unit["method"])
            state, ingest_s, cached = worker._state(unit)
        except Exception as exc:  # noqa: BLE001 - a failing ingest fails its unit's items, not the wave
            log.warning("evaluate: ingest of %s failed: %s", unit["unit_id"], exc)
            return [_prompt_row(base, it, status="error", error=f"ingest failed: {error_text(exc)}")
                    for it in unit["items"]]
        out = []
        for it in unit["items"]:
            try:
                ctx = worker.method.retrieve(state, retrieval_query(it))
                text, cut = ctx.text, False
                if self.max_context_chars and len(text) > self.max_context_chars:
                    text, cut = text[:self.max_context_chars] + "\n[… context cut to fit the model]", True
                pv = public_view(it)
                is_open = not pv["choices"]
                user = open_prompt(pv, text) if is_open else mcq_prompt(pv, text, letter_only=self.letter_only)
                out.append(_prompt_row(
                    base, it, messages=context_first(SYSTEM_PROMPT, user),
                    max_tokens=self.max_tokens_open if is_open else self.max_tokens, temperature=self.temperature,
                    tokens_in_memory=int(ctx.tokens_in_memory), tokens_out=int(ctx.tokens_out),
                    ingest_s=float(ingest_s), cached_state=bool(cached), context_cut=cut, context_text=text))
            except Exception as exc:  # noqa: BLE001 - one bad item never sinks the unit
                out.append(_prompt_row(base, it, status="error", error=error_text(exc)))
        return out


#: Where the question part of :func:`~filegram_ray.llm.backbones.mcq_prompt` / ``open_prompt`` starts.
_QUESTION_HEAD = "\n\n## Question\n"


def context_first(system_prompt: str, user_prompt: str) -> list[dict[str, str]]:
    """Chat messages laid out context first: ``system`` = system prompt + the memory context (the part items of
    one context share), ``user`` = the item's question, options and answer format (the part that differs).

    A llama.cpp server reuses the KV cache of the longest token prefix a request shares with the previous one,
    so with this layout (and the requests ordered by context, :func:`order_by_context`) the memory context is
    read once per context instead of once per item. ``user_prompt`` is a :func:`~filegram_ray.llm.backbones
    .mcq_prompt` / ``open_prompt`` text (``## Memory context`` … ``## Question`` …); one without a question
    heading stays whole in the user message.
    """
    ctx, sep, question = user_prompt.partition(_QUESTION_HEAD)
    if not sep:
        return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user_prompt}]
    return [{"role": "system", "content": f"{system_prompt}\n\n{ctx.strip()}"},
            {"role": "user", "content": f"## Question\n{question}"}]


def order_by_context(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Requests grouped by shared context (:func:`~filegram_ray.llm.processors.route_key`), groups in order of
    first appearance and requests in their order within a group, so that items of one context go back to back
    (to the same server of a pool) and reuse its KV prefix. Stable: the same requests give the same order."""
    from filegram_ray.llm.processors import route_key

    first: dict[str, int] = {}
    keys = []
    for i, r in enumerate(requests):
        k = route_key(r["messages"])
        first.setdefault(k, i)
        keys.append(first[k])
    return [r for _, _, r in sorted(zip(keys, range(len(requests)), requests), key=lambda t: (t[0], t[1]))]


def _prompt_row(base: dict[str, Any], item: Mapping[str, Any], *, status: str = "ok", error: str = "",
                messages: list[dict[str, str]] | None = None, max_tokens: int = 1, temperature: float = 0.0,
                tokens_in_memory: int = 0, tokens_out: int = 0, ingest_s: float = 0.0,
                cached_state: bool = False, context_cut: bool = False, context_text: str = "") -> dict[str, Any]:
    choices = [str(c) for c in item.get("choices") or []]
    return {**base, "question_id": item["question_id"], "req_key": request_key(base["unit_id"], item["question_id"]),
            "status": status, "error": error, "messages": messages or [{"role": "user", "content": ""}],
            "max_tokens": int(max_tokens), "temperature": float(temperature), "choices_json": json.dumps(choices),
            "tokens_in_memory": tokens_in_memory, "tokens_out": tokens_out, "ingest_s": ingest_s,
            "cached_state": cached_state, "context_cut": context_cut, "context_text": context_text}


def _answer_row(prompt: Mapping[str, Any], reply: Mapping[str, Any] | None, backbone_name: str,
                constrain: str = "none") -> dict[str, Any]:
    """The unit-table row of one item (:data:`~filegram_ray.evaluate.worker.UNIT_SCHEMA`) from its prompt row and reply row; ``constrain``:
    the constraint the multiple-choice request carried (a constrained reply is read strictly)."""
    from filegram_ray.llm.backbones import approx_tokens
    from filegram_ray.llm.parsing import LETTERS, no_choice_error, parse_choice
    from filegram_ray.llm.replies import read_letter

    row = {"method": prompt["method"], "question_id": prompt["question_id"], "cache_key": prompt["cache_key"],
           "backbone": backbone_name, "status": prompt["status"], "error": prompt["error"], "choice": "",
           "answer_text": "", "tokens_in_memory": int(prompt["tokens_in_memory"]),
           "tokens_out": int(prompt["tokens_out"]), "prompt_tokens": 0, "reply_tokens": 0}
    if prompt["status"] != "ok":
        return row
    if reply is None:
        row.update(status="error", error="no reply from the processor")
        return row
    text = str(reply.get("reply") or "")
    prompt_text = "".join(m["content"] for m in prompt["messages"])
    pt, rt = int(reply.get("prompt_tokens") or -1), int(reply.get("reply_tokens") or -1)
    row.update(prompt_tokens=pt if pt >= 0 else approx_tokens(prompt_text),
               reply_tokens=rt if rt >= 0 else approx_tokens(text))
    if reply.get("error"):
        row.update(status="error", error=str(reply["error"])[:1000], answer_text=str(reply.get("raw") or "")[:4000],
                   reply_tokens=0)
        return row
    choices = json.loads(prompt["choices_json"])
    row["answer_text"] = text[:4000] if choices else text.strip()[:4000]
    if choices and constrain not in ("none", "auto"):
        letter = read_letter(text, constrain, LETTERS[:len(choices)])
        if letter is None:
            row.update(status="error", error=f"constrained reply ({constrain}) is not an option letter: "
                                             f"{text[:200]!r}")
        else:
            row["choice"] = letter
    elif choices:
        letter = parse_choice(text, len(choices), choices)
        if letter is None:
            row.update(status="error", error=no_choice_error(text, len(choices), choices))
        else:
            row["choice"] = letter
    return row


def answer_units(run: RunDir, units: list[dict[str, Any]], *, spec, stage: str, unit_schema: dict[str, Any],
                 method_options: dict[str, Any], ingest_backbone: Any, seed: int, multimodal_content: str,
                 multimodal_formats: list[str] | None, num_actors: int, num_cpus_per_actor: float,
                 wave_units: int = 64, max_context_chars: int | None = None, embedder: str = "minilm"
                 ) -> dict[str, Any]:
    """Answer the items of ``units`` (not yet done) through the processor of ``spec``; write one answer table and
    one completion record per unit. Returns ``{n_units, n_requests, n_errors, n_context_cut, prompt_s, answer_s,
    context_budget_chars, context_budget_tokens}`` (the budget: ``max_context_chars`` and its ``// 4`` tokens).

    ``spec``: the backbone with ``constrain`` resolved (:func:`~filegram_ray.llm.processors.probe_endpoint`). A
    server that fails or goes away gives error rows, not an exception (:func:`~filegram_ray.llm.processors
    .run_chat`).
    """
    import ray.data

    from filegram_ray.evaluate.worker import CONTEXT_KEEP_CHARS, CONTEXT_SCHEMA, context_path
    from filegram_ray.llm.parsing import LETTERS
    from filegram_ray.llm.processors import run_chat

    stats = {"n_units": 0, "n_requests": 0, "n_errors": 0, "n_context_cut": 0, "prompt_s": 0.0, "answer_s": 0.0,
             # the one context budget every method is cut to (tokens by the len // 4 rule, reference §8.1)
             "context_budget_chars": max_context_chars,
             "context_budget_tokens": max_context_chars // 4 if max_context_chars else None}
    name = spec.display()
    constrain = "choice" if spec.constrain == "auto" and spec.kind == "vllm_engine" else spec.constrain
    for w in range(0, len(units), max(1, wave_units)):
        wave = units[w:w + wave_units]
        t0 = time.perf_counter()
        ds = ray.data.from_items([{"unit_json": json.dumps(u, default=str, ensure_ascii=False)} for u in wave])
        prompts = ds.flat_map(
            PromptBuilder, fn_constructor_kwargs={
                "run_uri": run.uri, "storage_options": run.storage_options, "method_options": method_options,
                "ingest_backbone": ingest_backbone, "seed": seed, "multimodal_content": multimodal_content,
                "multimodal_formats": multimodal_formats, "temperature": spec.temperature,
                "max_tokens": spec.max_tokens, "max_tokens_open": spec.max_tokens_open,
                "max_context_chars": max_context_chars, "letter_only": constrain not in ("none", "auto"),
                "embedder": embedder},
            compute=ray.data.ActorPoolStrategy(size=max(1, min(num_actors, len(wave)))),
            num_cpus=num_cpus_per_actor).take_all()
        t1 = time.perf_counter()
        stats["prompt_s"] += t1 - t0
        stats["n_context_cut"] += sum(bool(p.get("context_cut")) for p in prompts)
        by_unit: dict[str, list[dict[str, Any]]] = {}
        for p in prompts:
            by_unit.setdefault(p["unit_id"], []).append(p)
        pending = {uid: len(rows) for uid, rows in by_unit.items()}
        replies: dict[str, dict[str, Any]] = {}
        meta = {u["unit_id"]: u for u in wave}

        def finish(uid: str) -> None:
            rows = [_answer_row(p, replies.get(p["req_key"]), name, constrain) for p in by_unit[uid]]
            u = meta[uid]
            contexts = [{"question_id": p["question_id"], "context_text": p["context_text"][:CONTEXT_KEEP_CHARS],
                         "context_chars": len(p["context_text"]), "context_tokens": int(p["tokens_out"])}
                        for p in by_unit[uid] if p["status"] == "ok"]
            if contexts:  # what the model was shown (after any cut), for `filegram view`
                run.write_table(context_path(u["out_path"]), pl.DataFrame(contexts, schema=CONTEXT_SCHEMA))
            run.write_table(u["out_path"], pl.DataFrame(rows, schema=unit_schema))
            n_err = sum(r["status"] != "ok" for r in rows)
            first = by_unit[uid][0]
            run.mark_done(stage, uid, {"n_items": len(rows), "n_errors": n_err, "backbone": name,
                                       "ingest_s": round(float(first.get("ingest_s") or 0.0), 3),
                                       "cached_state": bool(first.get("cached_state"))})
            stats["n_units"] += 1
            stats["n_errors"] += n_err

        requests = []
        for uid, rows in by_unit.items():
            ok = [p for p in rows if p["status"] == "ok"]
            pending[uid] = len(ok)
            requests += [{**{k: p[k] for k in ("req_key", "messages", "max_tokens", "temperature")},
                          "letters": list(LETTERS[:len(json.loads(p["choices_json"]))])} for p in ok]
            if not ok:
                finish(uid)
        requests = order_by_context(requests)  # one context's items back to back: its KV prefix is reused
        owner = {p["req_key"]: p["unit_id"] for p in prompts}
        stats["n_requests"] += len(requests)
        if requests:
            log.info("evaluate: answering %d prompts of %d units with %s", len(requests), len(wave), name)
            for reply in run_chat(requests, spec):
                key = reply["req_key"]
                replies[key] = reply
                uid = owner[key]
                pending[uid] -= 1
                if pending[uid] == 0:
                    finish(uid)
        stats["answer_s"] += time.perf_counter() - t1
    return stats
