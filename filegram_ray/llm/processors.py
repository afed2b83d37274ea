"""Chat requests in bulk on Ray Data's LLM processors (``ray.data.llm``), declared as configs.

A backbone that is a language model is one of two processor specs (validated pydantic models):

* :class:`HttpChatSpec` (``kind: openai``, alias ``openai_compatible``, ``llama_cpp``, ``vllm`` with a
  ``base_url``) → ``ray.data.llm.HttpRequestProcessorConfig`` posting to ``<base_url>/chat/completions`` of any
  OpenAI-compatible server: ``vllm serve``, llama.cpp's server (``filegram llm serve``), a cluster's Ray Serve LLM
  deployment.
* :class:`VLLMEngineSpec` (``kind: vllm_engine``, or ``vllm`` with a ``model_source``) →
  ``ray.data.llm.vLLMEngineProcessorConfig``: vLLM engines inside Ray Data actors on GPU workers, the model read
  from a local path or a mounted volume (``model_source``), batch size / concurrency / tensor parallel from config.

Both take the same request rows and give the same reply rows (:func:`run_chat`), so the evaluate stage's answering
and judging are written once. Request row: ``req_key`` (str, unique), ``messages`` (OpenAI chat list),
``max_tokens`` (int), ``temperature`` (float). Reply row: ``req_key``, ``reply`` (str), ``prompt_tokens`` /
``reply_tokens`` (int, from the server's ``usage`` / the engine's token counts; -1 when absent), ``finish_reason``,
``error`` ("" when ok; otherwise what went wrong: an HTTP status, a timeout, a malformed reply, an engine error) and
``raw`` (the start of the server's raw body on an error, at most 2000 characters). A request row may carry
``letters`` (the option letters of a multiple-choice item): the request then asks for one of them under the spec's
``constrain`` (:func:`~filegram_ray.llm.replies.constraint_fields`).

Call shapes checked against the installed Ray 2.60 source (``ray/llm/_internal/batch/``): the HTTP processor posts
``row["payload"]`` through the session its ``session_factory`` makes and returns ``row["http_response"]``; its
stage calls ``response.json()`` unguarded and raises after ``max_retries`` on timeouts, which ended the whole
Dataset (``stages/http_request_stage.py``), so the session here is :class:`CheckedSession`, which reads and checks
every reply itself (:mod:`filegram_ray.llm.replies`) and hands the stage a reply dict or an error dict. The vLLM
processor needs ``messages`` and ``sampling_params`` (``structured_outputs`` in them becomes vLLM's
``StructuredOutputsParams``, ``stages/vllm_engine_stage.py``) and returns ``generated_text``, ``num_input_tokens``,
``num_generated_tokens``, and with ``should_continue_on_error`` an ``__inference_error__`` column instead of
raising.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from filegram_ray.errors import UserError
from filegram_ray.llm.replies import constraint_fields

log = logging.getLogger(__name__)

__all__ = [
    "HttpChatSpec",
    "VLLMEngineSpec",
    "build_chat_processor",
    "chat_spec",
    "is_llm_spec",
    "probe_endpoint",
    "route_key",
    "route_url",
    "run_chat",
]

_HTTP_KINDS = ("openai", "openai_compatible", "llama_cpp", "vllm_server")


class _ChatSpecBase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: sampling temperature of answers (0 = greedy)
    temperature: float = 0.0
    #: reply budget of a multiple-choice answer (a letter and a few words)
    max_tokens: int = Field(32, ge=1)
    #: reply budget of an open-ended answer and of ingest-time completions
    max_tokens_open: int = Field(384, ge=1)
    #: rows per processor batch
    batch_size: int = Field(8, ge=1)
    #: processor actors (HTTP: request workers, each sending its batch's requests one after another in Ray
    #: 2.60's HTTP stage, so this is the number of requests in flight; vLLM: engine replicas)
    concurrency: int = Field(1, ge=1)
    #: display name; default ``<kind>:<model>``
    name: str | None = None
    #: how a multiple-choice answer is held to one option letter (:data:`~filegram_ray.llm.replies
    #: .CONSTRAIN_MODES`): ``grammar`` (llama.cpp GBNF), ``json_schema`` (OpenAI ``response_format`` enum),
    #: ``choice`` (vLLM structured outputs), ``none`` (free text read by ``parse_choice``); ``auto``: an endpoint
    #: is probed at start (:func:`probe_endpoint`), a vLLM engine uses ``choice``
    constrain: Literal["auto", "grammar", "json_schema", "choice", "none"] = "auto"


class HttpChatSpec(_ChatSpecBase):
    """An OpenAI-compatible chat endpoint, answered through ``HttpRequestProcessorConfig``.

    Attributes:
        base_url: e.g. ``http://127.0.0.1:8011/v1`` (requests go to ``<base_url>/chat/completions``).
        model: model name or alias served there.
        api_key: bearer token (``EMPTY`` for local servers).
        qps: request rate cap per worker (None = the processor's default: sequential per batch).
        max_retries: retries of a request on a connection error, a timeout, HTTP 408/429/5xx or a malformed reply
            (:mod:`filegram_ray.llm.replies`); other 4xx are not retried.
        retry_backoff_s: first wait between retries (doubles per retry, at most 30 s).
        server: the server software (set from ``kind``: ``llama_cpp``, ``vllm`` with a ``base_url``): the order
            in which ``constrain: auto`` tries the constraints (llama.cpp: grammar, json_schema; vLLM: choice,
            json_schema; other: grammar, json_schema, choice).
        timeout: seconds per request, for the processor's HTTP session (aiohttp's own default, 300 s, is shorter
            than one long prompt on a busy 2-core CPU server) and for the one-off client
            (:class:`~filegram_ray.llm.OpenAIBackbone`: start-up probe, ingest-time completions).
        num_cpus: Ray CPUs per request worker (0.25: HTTP workers wait, they do not compute).
        base_urls: a pool of servers of the same model (e.g. :func:`~filegram_ray.engine.agents.serve
            .start_servers` replicas, one per node or per N cores); each request goes to the one its context
            picks (:func:`route_url`: every message but the last, i.e. system prompt + memory context), so items
            of one context reach one server and reuse its KV prefix. Empty = ``base_url`` only. Set
            ``concurrency`` to the pool's size to keep every server busy.
    """

    kind: Literal["openai"] = "openai"
    base_url: str
    base_urls: list[str] = Field(default_factory=list)
    model: str = "local"
    api_key: str = "EMPTY"
    qps: int | None = None
    max_retries: int = Field(2, ge=0)
    timeout: float = 600.0
    num_cpus: float = Field(0.25, gt=0)
    server: Literal["openai", "llama_cpp", "vllm"] = "openai"
    retry_backoff_s: float = Field(1.0, ge=0)

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def pool_urls(self) -> list[str]:
        """``…/chat/completions`` of every server of the pool (``base_urls``, else ``base_url`` alone)."""
        return [u.rstrip("/") + "/chat/completions" for u in (self.base_urls or [self.base_url])]

    def display(self) -> str:
        return self.name or f"openai:{self.model}"

    def identity(self) -> dict[str, Any]:
        """What changes the answers (not batch size, concurrency, rates, retries): the answer cache key."""
        return {"kind": self.kind, "base_url": self.base_url, "model": self.model, "temperature": self.temperature,
                "max_tokens": self.max_tokens, "max_tokens_open": self.max_tokens_open, "constrain": self.constrain}

    def backbone_kwargs(self) -> dict[str, Any]:
        """Arguments of the one-off :class:`~filegram_ray.llm.OpenAIBackbone` on the same endpoint."""
        return {"base_url": self.base_url, "model": self.model, "api_key": self.api_key, "timeout": self.timeout,
                "retries": self.max_retries, "temperature": self.temperature, "max_tokens": self.max_tokens,
                "max_tokens_open": self.max_tokens_open, "name": self.display(),
                "constrain": "none" if self.constrain == "auto" else self.constrain,
                "backoff_s": self.retry_backoff_s}


class VLLMEngineSpec(_ChatSpecBase):
    """vLLM engines in Ray Data actors (``vLLMEngineProcessorConfig``), one per ``concurrency``, each on
    ``tensor_parallel_size`` GPUs.

    Attributes:
        model_source: a local model folder or a mounted volume (Hugging Face layout); a hub id would download at
            run time, which this project never does in its own jobs and tests.
        tensor_parallel_size: GPUs per engine.
        max_model_len: context window (tokens) given to vLLM (None = the model's).
        gpu_memory_utilization: share of each GPU's memory vLLM may take.
        engine_kwargs: any further vLLM engine arguments (override the three above).
        accelerator_type: Ray accelerator type to schedule on (e.g. ``H100``; None = any GPU).
        runtime_env: Ray runtime env of the engine actors (e.g. ``{pip: [vllm]}`` on a cluster without vllm).
        max_concurrent_batches: batches in flight per engine.
        chat_template: a Jinja chat template overriding the model's (None = the model's own).
        placement_group_config: Ray placement of each engine's workers (``{bundles: [{GPU: 1, CPU: 4}], strategy:
            PACK}``; None = one GPU per tensor-parallel worker). ``{bundles: [{CPU: 1}]}`` puts an engine on CPU
            (vLLM's CPU build).
    """

    kind: Literal["vllm_engine"] = "vllm_engine"
    model_source: str
    tensor_parallel_size: int = Field(1, ge=1)
    max_model_len: int | None = 8192
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)
    accelerator_type: str | None = None
    runtime_env: dict[str, Any] | None = None
    max_concurrent_batches: int = Field(4, ge=1)
    chat_template: str | None = None
    placement_group_config: dict[str, Any] | None = None
    batch_size: int = Field(32, ge=1)

    def display(self) -> str:
        return self.name or f"vllm:{self.model_source.rstrip('/').rsplit('/', 1)[-1]}"

    def identity(self) -> dict[str, Any]:
        """What changes the answers (the answer cache key)."""
        return {"kind": self.kind, "model_source": self.model_source, "temperature": self.temperature,
                "max_tokens": self.max_tokens, "max_tokens_open": self.max_tokens_open,
                "max_model_len": self.max_model_len, "chat_template": self.chat_template,
                "engine_kwargs": self.engine_kwargs, "constrain": self.constrain}

    def engine_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"tensor_parallel_size": self.tensor_parallel_size,
                                "gpu_memory_utilization": self.gpu_memory_utilization}
        if self.max_model_len:
            args["max_model_len"] = self.max_model_len
        return {**args, **self.engine_kwargs}


ChatSpec = HttpChatSpec | VLLMEngineSpec


def is_llm_spec(spec: Any) -> bool:
    """True when a backbone config value names a language model (an endpoint or a vLLM engine)."""
    if isinstance(spec, (HttpChatSpec, VLLMEngineSpec)):
        return True
    if isinstance(spec, str):
        return spec.lower() in (*_HTTP_KINDS, "vllm", "vllm_engine")
    if isinstance(spec, Mapping):
        return str(spec.get("kind", "openai" if spec.get("base_url") else "")).lower() in (
            *_HTTP_KINDS, "vllm", "vllm_engine")
    return False


def chat_spec(spec: Any) -> ChatSpec:
    """Validate a backbone config mapping into :class:`HttpChatSpec` or :class:`VLLMEngineSpec`.

    ``kind: vllm`` means a vLLM *server* when ``base_url`` is given and the in-process engine when
    ``model_source`` is.

    Raises:
        ValueError: not a language-model backbone, or invalid / unknown settings (pydantic's message, naming the
            field).
    """
    if isinstance(spec, (HttpChatSpec, VLLMEngineSpec)):
        return spec
    if not isinstance(spec, Mapping):
        raise ValueError(f"backbone {spec!r}: a language-model backbone needs settings, e.g. "
                         "{kind: openai, base_url: http://127.0.0.1:8011/v1, model: local}")
    data = dict(spec)
    kind = str(data.pop("kind", "openai" if "base_url" in data else "")).lower()
    if kind == "vllm":
        kind = "vllm_engine" if "model_source" in data and "base_url" not in data else "vllm_server"
    if kind in _HTTP_KINDS:
        data.setdefault("server", {"llama_cpp": "llama_cpp", "vllm_server": "vllm"}.get(kind, "openai"))
        for short, name in (("retries", "max_retries"), ("backoff_s", "retry_backoff_s")):  # the one-off
            if short in data:                                                            # client's spellings
                data.setdefault(name, data.pop(short))
        return _validated(HttpChatSpec, kind, data)
    if kind == "vllm_engine":
        return _validated(VLLMEngineSpec, kind, data)
    raise ValueError(f"backbone kind {kind!r} is not a language model (openai, llama_cpp, vllm, vllm_engine)")


def _validated(cls, kind: str, data: dict[str, Any]):
    """``cls(**data)`` with pydantic's errors turned into one ValueError naming the backbone kind and fields."""
    from pydantic import ValidationError

    try:
        return cls(**data)
    except ValidationError as exc:
        unknown = [".".join(map(str, e["loc"])) for e in exc.errors() if e["type"] == "extra_forbidden"]
        other = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
                 if e["type"] != "extra_forbidden"]
        parts = ([f"unknown settings {unknown} (allowed: {sorted(cls.model_fields)})"] if unknown else []) + other
        raise ValueError(f"backbone {kind!r}: {'; '.join(parts)}") from None


# ------------------------------------------------------------------------------------------- processors


def _letters(row: Mapping[str, Any]) -> list[str]:
    """The option letters of a request row (``letters``; absent or empty for open-ended and judge requests)."""
    letters = row.get("letters")
    return [str(x) for x in letters] if letters is not None and len(letters) else []


def _http_pre(model: str, constrain: str = "none"):
    def pre(row: dict[str, Any]) -> dict[str, Any]:
        return {"payload": {"model": model, "messages": _plain_messages(row["messages"]),
                            "temperature": float(row["temperature"]), "max_tokens": int(row["max_tokens"]),
                            **constraint_fields(constrain, _letters(row))}}
    return pre


def _plain_messages(messages: Any) -> list[dict[str, Any]]:
    """Messages with string content, or OpenAI content parts (``[{type: text, text}, {type: image_url,
    image_url: {url}}]``, e.g. the import's media description) with the null fields Arrow adds to a part dropped."""
    out = []
    for m in list(messages):
        content = m["content"]
        if isinstance(content, str) or not hasattr(content, "__iter__") or isinstance(content, Mapping):
            out.append({"role": str(m["role"]), "content": str(content)})
            continue
        parts = []
        for part in content:
            part = {k: v for k, v in dict(part).items() if v is not None}
            if isinstance(part.get("image_url"), Mapping):
                part["image_url"] = {k: v for k, v in dict(part["image_url"]).items() if v is not None}
            parts.append(part)
        out.append({"role": str(m["role"]), "content": parts})
    return out


#: The reply fields the checked session hands Ray's HTTP stage (one flat shape for answers and failures, so Arrow
#: sees one type).
_REPLY_FIELDS = {"ok": False, "reply": "", "finish_reason": "", "prompt_tokens": -1, "reply_tokens": -1,
                 "error": "", "raw": ""}


def route_key(messages: Any) -> str:
    """The context a request shares with others: sha256 of every message but the last (the prompt layout puts
    system prompt + memory context first and the item's question last, :mod:`filegram_ray.evaluate.answer`)."""
    import hashlib

    head = [{"role": str(m["role"]), "content": m["content"]} for m in list(messages)[:-1]]
    return hashlib.sha256(json.dumps(head, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def route_url(urls: list[str], messages: Any) -> str:
    """The server of ``urls`` that answers a request: fixed by its context (:func:`route_key`), so every item of
    one context goes to the same server and reuses its KV prefix; contexts spread evenly over the pool."""
    if len(urls) == 1:
        return urls[0]
    return urls[int(route_key(messages)[:12], 16) % len(urls)]


class _CheckedReply:
    """What :meth:`CheckedSession.post` gives Ray's HTTP stage: always HTTP 200, ``json()`` the checked reply."""

    status, reason = 200, "OK"

    def __init__(self, fields: dict[str, Any]):
        self._fields = fields

    async def json(self) -> dict[str, Any]:
        return self._fields

    async def __aenter__(self) -> _CheckedReply:
        return self

    async def __aexit__(self, *exc: Any) -> bool:
        return False


class CheckedSession:
    """The aiohttp session given to Ray's HTTP stage (``session_factory``): each ``post`` sends the request,
    reads the body (bounded), checks it with :func:`~filegram_ray.llm.replies.read_completion` and retries
    (connection errors, timeouts, 408/429/5xx, malformed replies) on its own, and cuts a reply's content at
    ``16 × max_tokens`` characters (the request's ``max_tokens``); Ray's stage then only ever sees
    HTTP 200 and a reply dict (``ok``, ``reply``, ``finish_reason``, ``prompt_tokens``, ``reply_tokens``,
    ``error``, ``raw``), so no reply can raise inside the stage and end the Dataset (Ray 2.60's stage calls
    ``response.json()`` unguarded and raises after its retries).

    Args:
        timeout_s: seconds per request (aiohttp total timeout).
        retries: extra attempts; backoff_s: first wait (doubling, at most 30 s).
        strict: the replies are answers (``allow_empty`` / ``allow_length`` false in ``read_completion``).
        urls: a server pool (``…/chat/completions`` each): a request goes to :func:`route_url` of its messages
            instead of the stage's URL. None = the stage's URL.
    """

    def __init__(self, timeout_s: float, retries: int, backoff_s: float, strict: bool = True,
                 urls: list[str] | None = None):
        import aiohttp

        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s))
        self.retries, self.backoff_s, self.strict = int(retries), float(backoff_s), bool(strict)
        self.urls = list(urls or [])

    async def __aenter__(self) -> CheckedSession:
        await self._session.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._session.__aexit__(*exc)

    async def close(self) -> None:
        await self._session.close()

    def post(self, url: str, *, headers: Mapping[str, str] | None = None, data: Any = None):
        return self._exchange(url, headers, data)

    async def _exchange(self, url: str, headers: Mapping[str, str] | None, data: Any) -> _CheckedReply:
        from filegram_ray.llm.replies import (
            REPLY_CHARS_PER_TOKEN,
            ReplyError,
            backoff_s,
            exchange_async,
            is_constrained,
            post_aiohttp,
        )

        try:  # the per-reply size bound follows the request's max_tokens
            payload = json.loads(data)
            max_chars = REPLY_CHARS_PER_TOKEN * int(payload["max_tokens"])
        except (TypeError, ValueError, KeyError):
            payload, max_chars = None, None
        if len(self.urls) > 1 and isinstance(payload, Mapping) and payload.get("messages"):
            url = route_url(self.urls, payload["messages"])
        try:
            comp, _ = await exchange_async(
                lambda: post_aiohttp(self._session, url, data, headers), retries=self.retries,
                wait_s=lambda a: backoff_s(a, self.backoff_s), allow_empty=not self.strict,
                allow_length=not self.strict or is_constrained(payload), max_chars=max_chars)
        except ReplyError as exc:
            return _CheckedReply({**_REPLY_FIELDS, "error": exc.describe()[:1000], "raw": exc.raw})
        return _CheckedReply({**_REPLY_FIELDS, "ok": True, "reply": comp.content,
                              "finish_reason": comp.finish_reason,
                              "prompt_tokens": -1 if comp.prompt_tokens is None else comp.prompt_tokens,
                              "reply_tokens": -1 if comp.completion_tokens is None else comp.completion_tokens})


def _checked_session(timeout_s: float, retries: int, backoff_s: float, strict: bool,
                     urls: tuple[str, ...] = ()) -> CheckedSession:
    return CheckedSession(timeout_s, retries, backoff_s, strict, urls=list(urls))


def _http_post(row: dict[str, Any]) -> dict[str, Any]:
    resp = row.get("http_response")
    resp = resp if isinstance(resp, Mapping) else {}
    out = {"req_key": row["req_key"], **{k: resp.get(k, v) for k, v in _REPLY_FIELDS.items()}}
    ok = bool(out.pop("ok"))
    if not ok and not out["error"]:
        out["error"] = "no reply"
    for k in ("prompt_tokens", "reply_tokens"):
        out[k] = int(out[k]) if out[k] is not None else -1
    return {k: ("" if v is None else v) for k, v in out.items()}


def _vllm_pre(constrain: str = "choice"):
    def pre(row: dict[str, Any]) -> dict[str, Any]:
        params = {"temperature": float(row["temperature"]), "max_tokens": int(row["max_tokens"]),
                  **constraint_fields("choice" if constrain in ("auto", "choice") else "none", _letters(row))}
        return {"messages": _plain_messages(row["messages"]), "sampling_params": params}
    return pre


def _vllm_post(row: dict[str, Any]) -> dict[str, Any]:
    """A vLLM engine's reply through the same content checks as an endpoint's (reasoning-only, unterminated
    ``<think>``, empty)."""
    from filegram_ray.llm.replies import ReplyError, check_content

    text = str(row.get("generated_text") or "")
    out = {"req_key": row["req_key"], "reply": "", "prompt_tokens": int(row.get("num_input_tokens") or -1),
           "reply_tokens": int(row.get("num_generated_tokens") or -1), "finish_reason": "", "error": "",
           "raw": ""}
    try:
        out["reply"] = check_content(text, allow_empty=False)[0]
    except ReplyError as exc:
        out.update(error=exc.describe()[:1000], raw=exc.raw)
    return out


def _normalise(row: dict[str, Any]) -> dict[str, Any]:
    """One reply shape for success rows and the processor's bypassed error rows (``__inference_error__``)."""
    err = row.get("__inference_error__") or ""
    if err:
        return {"req_key": row["req_key"], "reply": "", "prompt_tokens": -1, "reply_tokens": -1,
                "finish_reason": "", "error": f"engine error: {str(err)[:1000]}", "raw": ""}
    return {k: row.get(k) for k in ("req_key", "reply", "prompt_tokens", "reply_tokens", "finish_reason", "error",
                                    "raw")}


#: settings of the vLLM processor's chat-template, tokenize and detokenize stages (:func:`build_chat_processor`)
_CPU_STAGE = {"runtime_env": {}, "num_cpus": 0.25}


def build_chat_processor(spec: ChatSpec, *, multimodal: bool = False, strict: bool = True):
    """The ``ray.data.llm`` processor for a spec: request rows in, reply rows out (module docstring).
    ``multimodal``: messages carry images (content parts); a vLLM engine then runs Ray's prepare-multimodal stage.
    ``strict``: an empty reply or one cut at ``max_tokens`` is an error row (answers, verdicts).

    Raises:
        ImportError: ``kind: vllm_engine`` without vLLM installed (``pip install vllm`` on the GPU workers, or the
            spec's ``runtime_env``).
    """
    from ray.data.llm import HttpRequestProcessorConfig, build_processor, vLLMEngineProcessorConfig

    small = {"num_cpus": 0.1}
    if isinstance(spec, HttpChatSpec):
        cfg = HttpRequestProcessorConfig(
            url=spec.url, headers={"Authorization": f"Bearer {spec.api_key}"}, batch_size=spec.batch_size,
            concurrency=spec.concurrency, qps=spec.qps, max_retries=0,  # CheckedSession retries
            http_request_stage={"num_cpus": spec.num_cpus, "concurrency": spec.concurrency},
            session_factory=functools.partial(_checked_session, float(spec.timeout), spec.max_retries,
                                              spec.retry_backoff_s, strict, tuple(spec.pool_urls())))
        mode = "none" if spec.constrain == "auto" else spec.constrain
        return build_processor(cfg, preprocess=_http_pre(spec.model, mode), postprocess=_http_post,
                               preprocess_map_kwargs=small, postprocess_map_kwargs=small)
    cfg = vLLMEngineProcessorConfig(
        model_source=spec.model_source, engine_kwargs=spec.engine_args(), batch_size=spec.batch_size,
        concurrency=spec.concurrency, accelerator_type=spec.accelerator_type, runtime_env=spec.runtime_env,
        max_concurrent_batches=spec.max_concurrent_batches, should_continue_on_error=True,
        placement_group_config=spec.placement_group_config, prepare_multimodal_stage=bool(multimodal),
        # the CPU stages (chat template, tokenizer) get no runtime env: a {pip: [vllm]} is for the engine actors,
        # and a quarter CPU each (Ray Data's default, 1 each, let their three actors and the engine's hold every CPU
        # of a 4-CPU node, and the preprocess task then waited forever: seen on 2 cores with the engine on CPU)
        chat_template_stage={**_CPU_STAGE, **({"chat_template": spec.chat_template} if spec.chat_template
                                              else {})},
        tokenize_stage=dict(_CPU_STAGE), detokenize_stage=dict(_CPU_STAGE))
    return build_processor(cfg, preprocess=_vllm_pre(spec.constrain), postprocess=_vllm_post, preprocess_map_kwargs=small,
                           postprocess_map_kwargs=small)


def run_chat(requests: Iterable[Mapping[str, Any]] | Any, spec: ChatSpec, *,
             multimodal: bool = False, strict: bool = True) -> Iterator[dict[str, Any]]:
    """Send request rows through the spec's processor; yield reply rows as Ray Data streams them (any order).

    Every request gives one reply row: a connection failure, a timeout, an HTTP error or a malformed reply becomes
    an error row (``error`` says what and after how many attempts, ``raw`` keeps the body's first 2,000
    characters) once its retries are spent; nothing a server sends ends the Dataset.

    Args:
        requests: request rows (module docstring; ``letters``, the option letters of a multiple-choice item, asks
            for a constrained answer) or a Ray Dataset of them.
        spec: :class:`HttpChatSpec` or :class:`VLLMEngineSpec` (``constrain`` already resolved by
            :func:`probe_endpoint` for an endpoint; ``auto`` sends no constraint there).
        multimodal: the messages carry images (:func:`build_chat_processor`).
        strict: see :func:`build_chat_processor`.
    """
    import ray.data

    ds = requests if isinstance(requests, ray.data.Dataset) else ray.data.from_items(
        [dict(r) for r in requests])
    if ds.count() == 0:
        return
    out = build_chat_processor(spec, multimodal=multimodal, strict=strict)(ds).map(_normalise, num_cpus=0.1)
    for row in out.iter_rows():
        yield dict(row)


#: The start-up probe asks for the letter A while a constraint allows only B or C: a server that honours the
#: constraint cannot answer A, one that ignores it does (and old hostile-server harnesses answer this prompt only).
PROBE_PROMPT = "Reply with the single letter A."
_PROBE_LETTERS = ("B", "C")
_AUTO_ORDER = {"llama_cpp": ("grammar", "json_schema"), "vllm": ("choice", "json_schema"),
               "openai": ("grammar", "json_schema", "choice")}


def probe_endpoint(spec: HttpChatSpec) -> HttpChatSpec:
    """Check an endpoint answers before thousands of requests are sent, and settle ``constrain``.

    One short request per constraint tried (``constrain: auto``: in the order of ``spec.server``, module-level
    ``_AUTO_ORDER``; else just the configured one), asking for :data:`PROBE_PROMPT` under a constraint that allows
    only ``B`` or ``C``: the first constraint the server honours is the one used. A server that honours none is
    used without one (``none``, logged), answers read by ``parse_choice``.

    Returns:
        the spec with ``constrain`` resolved (never ``auto``).

    Raises:
        ValueError: the endpoint does not answer (connection, timeout, error status, malformed reply: the message
            names the URL), or an explicitly configured ``constrain`` is rejected or ignored.
    """
    import httpx

    from filegram_ray.llm.replies import ReplyError, exchange_sync, post_sync, read_letter

    explicit = spec.constrain != "auto"
    modes = (spec.constrain,) if explicit else (*_AUTO_ORDER[spec.server], "none")
    headers = {"Authorization": f"Bearer {spec.api_key}"}
    where = f"evaluate: backbone {spec.display()} at {spec.base_url}"
    with httpx.Client(timeout=min(spec.timeout, 60.0)) as client:
        for mode in modes:
            payload = {"model": spec.model, "messages": [{"role": "user", "content": PROBE_PROMPT}],
                       "temperature": 0.0, "max_tokens": 8, **constraint_fields(mode, _PROBE_LETTERS)}
            try:
                comp, _ = exchange_sync(lambda p=payload: post_sync(client, spec.url, p, headers), retries=0,
                                        wait_s=lambda a: 0.0, allow_empty=False)
            except ReplyError as exc:
                # llama-cpp-python answers json_schema with HTTP 500, hosted APIs an unknown field with 400
                if mode != "none" and exc.kind == "status" and not explicit:
                    log.info("%s rejects constrain=%s (%s); trying the next", where, mode, exc.message)
                    continue
                raise UserError(f"{where} is not answering{f' with constrain={mode}' if explicit else ''}: "
                                 f"{exc.describe()}") from exc
            if mode == "none" or read_letter(comp.content, mode, _PROBE_LETTERS):
                if mode == "none":
                    log.warning("%s honours no answer constraint (tried %s): multiple-choice replies are read as "
                                "free text", where, ", ".join(modes[:-1]))
                return spec.model_copy(update={"constrain": mode})
            if explicit:
                raise UserError(f"{where} ignores constrain={mode}: asked for one of {list(_PROBE_LETTERS)}, it "
                                 f"replied {comp.content[:80]!r} (set evaluate.backbone.constrain to another of "
                                 "grammar, json_schema, choice, none)")
    raise AssertionError("unreachable: 'none' always returns")  # pragma: no cover
