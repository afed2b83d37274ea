"""The evaluate stage's language-model path: model calls (a :class:`~filegram_ray.stages.base.ModelCallSpec` run by
the model-call executor), answered by a ``ray.data.llm`` processor (an OpenAI-compatible endpoint or vLLM engines,
:mod:`filegram_ray.llm.processors`).

Per item (one method × setting × context spec, as on the CPU path), in waves of ``evaluate.wave_units`` items:

1. **Prompts** — :class:`PromptBuilder` on the stage's executor (0.5 CPU per actor by default, ENVIRONMENT_FACTS
   §1): it ingests the item's trajectories with the method (or loads the cached state, ``results/cache/…``),
   retrieves the context of every bench item and writes the chat messages, context first (system prompt + method
   context, then the item's public view: :func:`context_first`, :func:`filegram_ray.llm.backbones.mcq_prompt` /
   ``open_prompt``). A failing ingest fails the item (its error row; a rerun retries it); a failing retrieve is an
   error row of that question in the item's answer table.
2. **Answers** — the prompts go through the processor (:func:`answer_requests`, ordered by context so a server
   reuses its KV prefix); replies stream back to the driver, which writes an item's answer table as soon as its
   last reply is in (:class:`AnswerCollect`); the runner then writes its completion record (resumable per item, as
   on the CPU path).

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
from collections.abc import Mapping
from typing import Any

import polars as pl

from filegram_ray.storage import RunDir

log = logging.getLogger(__name__)

__all__ = ["AnswerCollect", "PromptBuilder", "answer_requests", "context_first", "order_by_context", "request_key"]


def request_key(*parts: Any) -> str:
    """A 24-hex key of a request (sha256 of its identifying parts)."""
    return hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).hexdigest()[:24]


class PromptBuilder:
    """The ``prepare`` worker of the language-model path: an item (one method × context spec) →
    ``{"requests": [one prompt row per question that could be retrieved], "state": {"failed": [the other questions'
    prompt rows]}}`` (:meth:`process`).

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

    def process(self, unit: dict[str, Any]) -> dict[str, Any]:
        """The item's prompts: requests (with ``req_key``, ``messages``, ``max_tokens``, ``temperature`` and, for a
        multiple-choice question, ``letters``) and, in ``state``, the questions whose context failed.

        Raises:
            Exception: the method's ingest failed (the item's error row)."""
        from filegram_ray.llm.parsing import LETTERS

        rows = self.prompts(unit)
        ok = [{**p, "letters": list(LETTERS[:len(json.loads(p["choices_json"]))])} for p in rows
              if p["status"] == "ok"]
        return {"requests": ok, "state": {"failed": [p for p in rows if p["status"] != "ok"]}}

    def prompts(self, unit: dict[str, Any]) -> list[dict[str, Any]]:
        """One prompt row per question of the item (``status`` error for one whose context failed).

        Raises:
            Exception: the method's ingest failed."""
        from filegram_ray.evaluate.items import public_view, retrieval_query
        from filegram_ray.evaluate.worker import error_text
        from filegram_ray.llm.backbones import SYSTEM_PROMPT, mcq_prompt, open_prompt

        base = {"unit_id": unit["unit_id"], "method": unit["method"], "cache_key": unit["cache_key"]}
        worker = self._worker(unit["method"])
        state, ingest_s, cached = worker._state(unit)
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


def answer_requests(requests: list[dict[str, Any]], spec) -> Any:
    """The ``call`` of the language-model path: prompt rows through the processor of ``spec``
    (:func:`~filegram_ray.llm.processors.run_chat`), items of one context back to back (:func:`order_by_context`);
    yields reply rows (``req_key``, ``reply``, token counts, ``error``, ``raw``). A server that fails or goes away
    gives replies with their ``error``, not an exception."""
    from filegram_ray.llm.processors import run_chat

    keep = ("req_key", "messages", "max_tokens", "temperature", "letters")
    return run_chat(order_by_context([{k: r[k] for k in keep} for r in requests]), spec)


class AnswerCollect:
    """The ``collect`` of the language-model path: an item's prompts and replies → its answer table (and the
    contexts the model was shown), written atomically; returns the item's fields (``n_items``, ``n_errors``,
    ``n_requests``, ``n_context_cut``, ``backbone``, ``ingest_s``, ``cached_state``).

    Args:
        run: the run directory. spec: the backbone with ``constrain`` resolved
            (:func:`~filegram_ray.llm.processors.probe_endpoint`). unit_schema: the answer table's schema.
    """

    def __init__(self, run: RunDir, spec, unit_schema: dict[str, Any]):
        self.run, self.schema, self.name = run, unit_schema, spec.display()
        self.constrain = "choice" if spec.constrain == "auto" and spec.kind == "vllm_engine" else spec.constrain

    def __call__(self, unit: dict[str, Any], state: dict[str, Any], requests: list[dict[str, Any]],
                 replies: list[dict[str, Any]]) -> dict[str, Any]:
        from filegram_ray.evaluate.worker import CONTEXT_KEEP_CHARS, CONTEXT_SCHEMA, context_path

        by_q = {p["question_id"]: p for p in [*requests, *(state.get("failed") or [])]}
        got = {r["req_key"]: r for r in replies}
        prompts = [by_q[it["question_id"]] for it in unit["items"] if it["question_id"] in by_q]
        rows = [_answer_row(p, got.get(p["req_key"]), self.name, self.constrain) for p in prompts]
        contexts = [{"question_id": p["question_id"], "context_text": p["context_text"][:CONTEXT_KEEP_CHARS],
                     "context_chars": len(p["context_text"]), "context_tokens": int(p["tokens_out"])}
                    for p in prompts if p["status"] == "ok"]
        if contexts:  # what the model was shown (after any cut), for `filegram view`
            self.run.write_table(context_path(unit["out_path"]), pl.DataFrame(contexts, schema=CONTEXT_SCHEMA))
        self.run.write_table(unit["out_path"], pl.DataFrame(rows, schema=self.schema))
        first = prompts[0] if prompts else {}
        return {"n_items": len(rows), "n_errors": sum(r["status"] != "ok" for r in rows), "backbone": self.name,
                "n_requests": len(requests), "n_context_cut": sum(bool(p.get("context_cut")) for p in requests),
                "ingest_s": round(float(first.get("ingest_s") or 0.0), 3),
                "cached_state": bool(first.get("cached_state"))}
