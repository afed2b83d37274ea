"""Failed items: which items a method never got an answer for, why, and which methods have no result at all.

An *error row* (``status != "ok"`` in ``results/results.parquet``) is an item the method did not answer: the server
refused the prompt (HTTP 400 over its context window), sent nothing (200 with empty content), sent a reply that
states no single option, timed out, or the method failed to ingest or retrieve. An error row has no score: it is
left out of every mean, interval, paired test and finding (:mod:`filegram_ray.evaluate.scoring`), and counted here
per method and per cause (:func:`error_cause`).

A method whose error rows (other than the judge's: an answer the open-ended judge could not score is the judge's
failure) are more than :data:`MOSTLY_FAILED` of its items has **no result** (:func:`failure_summary` ``failed``): the report names it as failed with its first distinct error texts and the setting that would fix
the cause (:func:`fix_hint`), and it gets no marker, no paired test and no finding verdict — a score made of the
few items that happened to fit is not the method's score.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import polars as pl

__all__ = ["CAUSES", "MOSTLY_FAILED", "error_cause", "failed_methods", "failure_lines", "failure_summary",
           "fix_hint", "suggest_context_chars"]

#: Share of a method's items that must fail for the method to count as having no result ("mostly failed").
MOSTLY_FAILED = 0.5
#: Distinct error texts kept per method (the first ones, in item order).
N_EXAMPLES = 3

#: cause → what it means, in report order
CAUSES = {
    "context_overflow": "prompt longer than the server's context window",
    "empty_reply": "the server answered with empty content",
    "cut_reply": "reply cut at max_tokens before an answer",
    "no_option": "reply states no single option",
    "http_error": "other HTTP error status",
    "transport": "server unreachable or timed out",
    "malformed": "malformed reply",
    "judge": "the open-ended judge gave no score",
    "method": "the method failed to ingest or retrieve",
    "no_key": "no answer-key entry",
    "other": "other error",
}
#: (cause, pattern on the error text), first match wins. Context-window texts: llama.cpp's
#: ``exceed_context_size_error`` ("exceeds the available context size"), vLLM / OpenAI ("maximum context length",
#: "context_length_exceeded"), LM Studio and Ollama ("context length", "too many tokens").
_RULES = [
    ("context_overflow", re.compile(r"context[ _](?:size|length|window)|exceed_context|maximum context|"
                                    r"context_length_exceeded|too many tokens|prompt is too long|n_ctx", re.I)),
    ("judge", re.compile(r"^judge\b|judge (?:error|failed|reply)", re.I)),
    ("no_option", re.compile(r"states no single option|not an option letter|unparseable reply", re.I)),
    ("empty_reply", re.compile(r"empty reply|reply holds only reasoning", re.I)),
    ("cut_reply", re.compile(r"cut off|finish_reason length", re.I)),
    ("transport", re.compile(r"^transport reply|timed? ?out|connection|no reply from the processor", re.I)),
    ("http_error", re.compile(r"^status reply|HTTP \d{3}", re.I)),
    ("malformed", re.compile(r"^malformed reply|engine error", re.I)),
    ("method", re.compile(r"ingest failed|Error:|Exception:", re.I)),
    ("no_key", re.compile(r"no answer key entry", re.I)),
]
_WINDOW = re.compile(r"(?:available context size|context size|maximum context length(?: is)?|context length of|"
                     r"n_ctx\s*[=:]?)\D{0,12}(\d{3,7})\s*tokens?", re.I)
#: the prompt's own token count as the server states it: llama.cpp "request (9057 tokens)", vLLM "you requested
#: 5000 tokens (4900 in the messages, …)" (the messages' count preferred)
_REQUEST = re.compile(r"request \((\d+) tokens\)|requested \d+ tokens \((\d+) in the messages|requested (\d+) tokens",
                      re.I)
#: share of the window a suggested cut fills (room for the tokenizer's spread between prompts)
FILL = 0.9
#: characters per token assumed when the server does not state a prompt's token count (English text runs 3–4,
#: ENVIRONMENT_FACTS §4; 3 errs short)
CHARS_PER_TOKEN = 3.0


def error_cause(text: str | None) -> str:
    """The cause (a key of :data:`CAUSES`) of one error row's ``error`` text."""
    t = str(text or "")
    for cause, pattern in _RULES:
        if pattern.search(t):
            return cause
    return "other"


def _window_tokens(texts: list[str]) -> int | None:
    """The server's context window in tokens as an error text states it (llama.cpp, vLLM wordings), else None."""
    for t in texts:
        m = _WINDOW.search(t)
        if m:
            return int(m.group(1))
    return None


def _request_tokens(text: str) -> int | None:
    m = _REQUEST.search(text or "")
    return int(next(g for g in m.groups() if g)) if m else None


def suggest_context_chars(failed: list[dict[str, Any]]) -> dict[str, Any]:
    """The largest ``evaluate.max_context_chars`` under which the failed prompts would fit the window the server
    stated in its error texts.

    Args:
        failed: the failed rows, each ``{error, prompt_chars, context_chars}`` (``prompt_chars`` the whole prompt,
            ``context_chars`` the method's context in it; rows with ``prompt_chars`` 0 are not counted).

    The prompt may hold ``limit = FILL × window × c`` characters, ``c`` the fewest characters per token among the
    failed prompts whose token count the server stated (else :data:`CHARS_PER_TOKEN`); the cut leaves room for the
    rest of the prompt: ``chars = limit − max(prompt_chars − context_chars)``. Returns ``{window, limit, chars}``:
    all None without a stated window; ``chars`` None when the rest of the prompt alone leaves under 200 characters.
    """
    rows = [r for r in failed if r.get("prompt_chars")]
    window = _window_tokens([r["error"] for r in failed])
    if not window:
        return {"window": None, "limit": None, "chars": None}
    ratios = [r["prompt_chars"] / n for r in rows if (n := _request_tokens(r["error"]))]
    limit = int(FILL * window * (min(ratios) if ratios else CHARS_PER_TOKEN))
    chars = limit - max((r["prompt_chars"] - r["context_chars"] for r in rows), default=0)
    return {"window": window, "limit": limit, "chars": chars if chars >= 200 else None}


def fix_hint(cause: str, texts: list[str], budget_chars: int | None = None,
             suggestion: dict[str, Any] | None = None) -> str:
    """The setting that would fix ``cause``, in one sentence (empty for causes no setting fixes).

    A context overflow (or empty replies, which some servers send for a prompt over their window) is fixed by
    cutting every method's context to the server's window, ``evaluate.max_context_chars``
    (``suggestion``: :func:`suggest_context_chars`), or by starting the server with a larger window.
    """
    now = f" (now {budget_chars:,})" if budget_chars else " (now unset: no cut)"
    if cause in ("context_overflow", "empty_reply"):
        sug = suggestion or {"window": _window_tokens(texts), "limit": None, "chars": None}
        win = (f"the server's window is {sug['window']:,} tokens" if sug.get("window") else
               "the server did not say its window")
        if sug.get("chars"):
            size = f"cut every method's context to fit with `--set evaluate.max_context_chars={sug['chars']}`{now}"
        elif sug.get("limit"):
            size = (f"the question and system prompt alone nearly fill the {sug['limit']:,} characters it holds, so "
                    f"cutting the context (`evaluate.max_context_chars`{now}) cannot make room")
        else:
            size = f"cut every method's context with `--set evaluate.max_context_chars=N`{now}"
        lead = ("the prompts did not fit the server's context window" if cause == "context_overflow" else
                "an empty reply is how some servers (LM Studio's GGUF path) answer a prompt over their window")
        return (f"{lead}; {win}: {size}, or start the server with a larger window (llama-server `--ctx-size`, "
                "vLLM `--max-model-len`).")
    if cause == "cut_reply":
        return "raise the reply budget (`evaluate.backbone.max_tokens`) or use a backbone `constrain` mode."
    if cause == "no_option":
        return ("the model does not state one option; a `constrain` mode (grammar, json_schema, choice) holds it to "
                "one letter.")
    if cause == "transport":
        return "the server was unreachable or slow: check it is up, or raise `evaluate.backbone.timeout`."
    return ""


def failure_summary(results: pl.DataFrame, budget_chars: int | None = None) -> dict[str, Any]:
    """Error rows per method: ``{"methods": {method: {n, n_failed, share (of items failed other than by the judge),
    failed, causes: {cause: n}, examples:
    [first distinct error texts], hint, prompt_tokens_failed, prompt_tokens_ok}}, "failed": [methods with more than
    MOSTLY_FAILED of their items failed]}``, methods in results order, only methods with an error row listed.
    ``budget_chars``: the run's ``evaluate.max_context_chars`` (for :func:`fix_hint`)."""
    out: dict[str, Any] = {"methods": {}, "failed": []}
    if not results.height or "status" not in results.columns:
        return out
    tok = "prompt_tokens" in results.columns
    for method in dict.fromkeys(results["method"].to_list()):
        df = results.filter(pl.col("method") == method)
        bad = df.filter(pl.col("status") != "ok")
        if not bad.height:
            continue
        texts = [str(e or "") for e in bad["error"].to_list()] if "error" in bad.columns else [""] * bad.height
        causes: dict[str, int] = {}
        for t in texts:
            c = error_cause(t)
            causes[c] = causes.get(c, 0) + 1
        causes = {c: causes[c] for c in CAUSES if c in causes}
        examples = list(dict.fromkeys(t[:300] for t in texts))[:N_EXAMPLES]
        top = max(causes, key=lambda c: causes[c])
        # prompt and context sizes of the failed rows (len // 4 on error rows, evaluate/answer.py: × 4 = chars)
        sizes = [{"error": t, "prompt_chars": 4 * int(p or 0), "context_chars": 4 * int(c or 0)}
                 for t, p, c in zip(texts, bad["prompt_tokens"].to_list() if "prompt_tokens" in bad.columns
                                    else [0] * bad.height,
                                    bad["tokens_out"].to_list() if "tokens_out" in bad.columns else [0] * bad.height)
                 if error_cause(t) == top]
        # the judge failing to score an answer is the judge's failure, not the method's: counted, never "no result"
        share = (bad.height - causes.get("judge", 0)) / df.height
        entry = {"n": df.height, "n_failed": bad.height, "share": share, "failed": share > MOSTLY_FAILED,
                 "causes": causes, "examples": examples,
                 "hint": fix_hint(top, [r["error"] for r in sizes], budget_chars, suggest_context_chars(sizes)),
                 "prompt_tokens_failed": None, "prompt_tokens_ok": None}
        if tok:
            ok = df.filter(pl.col("status") == "ok")
            entry["prompt_tokens_failed"] = float(bad["prompt_tokens"].mean()) if bad.height else None
            entry["prompt_tokens_ok"] = float(ok["prompt_tokens"].mean()) if ok.height else None
        out["methods"][method] = entry
        if entry["failed"]:
            out["failed"].append(method)
    return out


def failed_methods(results: pl.DataFrame) -> list[str]:
    """The methods (and validity rows) with more than :data:`MOSTLY_FAILED` of their items failed."""
    return failure_summary(results)["failed"]


def failure_lines(summary: Mapping[str, Any], name=lambda m: m) -> list[str]:
    """The report's "Failed items" section of a :func:`failure_summary` (``name``: method id → row name)."""
    methods = summary.get("methods") or {}
    if not methods:
        return []
    out = ["", "## Failed items", "",
           ("Items a method never got an answer for. They have no score: they are left out of every score, interval, "
            "paired test and finding above, and counted here per cause. A method with more than "
            f"{MOSTLY_FAILED:.0%} of its items failed has **no result** (its row says failed)."), "",
           "| Method | failed | of | causes | prompt tokens (failed: len // 4 / answered: the server's count) |", "|---|---|---|---|---|"]
    for m, e in methods.items():
        causes = ", ".join(f"{CAUSES[c]}: {n}" for c, n in e["causes"].items())
        toks = "–"
        if e.get("prompt_tokens_failed") is not None:
            ok = e.get("prompt_tokens_ok")
            toks = f"{e['prompt_tokens_failed']:,.0f} / {'–' if ok is None else f'{ok:,.0f}'}"
        out.append(f"| {name(m)}{' — **no result**' if e['failed'] else ''} | {e['n_failed']} | {e['n']} | "
                   f"{causes} | {toks} |")
    for m, e in methods.items():
        if not e["failed"] and e["share"] < 0.1:
            continue
        out += ["", f"**{name(m)}**: {e['n_failed']} of {e['n']} items failed"
                + (" — no result." if e["failed"] else ".") + (f" Fix: {e['hint']}" if e["hint"] else ""),
                "First distinct errors:"]
        out += [f"- `{t.replace('`', chr(39))}`" for t in e["examples"]]
    return out
