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
``error`` ("" when ok; otherwise the HTTP status or engine error) and ``raw`` (the server's JSON reply on an error,
cut to 2000 characters).

Call shapes checked against the installed Ray 2.60 source (``ray/llm/_internal/batch/processor/*.py``): the HTTP
processor posts ``row["payload"]`` and returns ``row["http_response"]`` (a 4xx/5xx JSON body comes back as the
response; only connection failures after ``max_retries`` raise); the vLLM processor needs ``messages`` and
``sampling_params`` and returns ``generated_text``, ``num_input_tokens``, ``num_generated_tokens``, and with
``should_continue_on_error`` an ``__inference_error__`` column instead of raising.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger(__name__)

__all__ = [
    "HttpChatSpec",
    "VLLMEngineSpec",
    "build_chat_processor",
    "chat_spec",
    "is_llm_spec",
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
    #: processor actors (HTTP: concurrent request workers; vLLM: engine replicas)
    concurrency: int = Field(1, ge=1)
    #: display name; default ``<kind>:<model>``
    name: str | None = None


class HttpChatSpec(_ChatSpecBase):
    """An OpenAI-compatible chat endpoint, answered through ``HttpRequestProcessorConfig``.

    Attributes:
        base_url: e.g. ``http://127.0.0.1:8011/v1`` (requests go to ``<base_url>/chat/completions``).
        model: model name or alias served there.
        api_key: bearer token (``EMPTY`` for local servers).
        qps: request rate cap per worker (None = the processor's default: sequential per batch).
        max_retries: retries of a request on a connection error, timeout or 408/429/502/503/504.
        timeout: seconds per request of the one-off client (:class:`~filegram_ray.llm.OpenAIBackbone`, used for
            the start-up probe and ingest-time completions).
        num_cpus: Ray CPUs per request worker (0.25: HTTP workers wait, they do not compute).
    """

    kind: Literal["openai"] = "openai"
    base_url: str
    model: str = "local"
    api_key: str = "EMPTY"
    qps: int | None = None
    max_retries: int = Field(2, ge=0)
    timeout: float = 600.0
    num_cpus: float = Field(0.25, gt=0)

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def display(self) -> str:
        return self.name or f"openai:{self.model}"

    def identity(self) -> dict[str, Any]:
        """What changes the answers (not batch size, concurrency, rates, retries): the answer cache key."""
        return {"kind": self.kind, "base_url": self.base_url, "model": self.model, "temperature": self.temperature,
                "max_tokens": self.max_tokens, "max_tokens_open": self.max_tokens_open}

    def backbone_kwargs(self) -> dict[str, Any]:
        """Arguments of the one-off :class:`~filegram_ray.llm.OpenAIBackbone` on the same endpoint."""
        return {"base_url": self.base_url, "model": self.model, "api_key": self.api_key, "timeout": self.timeout,
                "retries": self.max_retries, "temperature": self.temperature, "max_tokens": self.max_tokens,
                "max_tokens_open": self.max_tokens_open, "name": self.display()}


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
                "engine_kwargs": self.engine_kwargs}

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
        kind = "vllm_engine" if "model_source" in data and "base_url" not in data else "openai"
    if kind in _HTTP_KINDS:
        if "retries" in data:  # the one-off client's spelling of max_retries
            retries = data.pop("retries")
            data.setdefault("max_retries", retries)
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


def _http_pre(model: str):
    def pre(row: dict[str, Any]) -> dict[str, Any]:
        return {"payload": {"model": model, "messages": _plain_messages(row["messages"]),
                            "temperature": float(row["temperature"]), "max_tokens": int(row["max_tokens"])}}
    return pre


def _plain_messages(messages: Any) -> list[dict[str, str]]:
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in list(messages)]


def _http_post(row: dict[str, Any]) -> dict[str, Any]:
    resp = row.get("http_response") or {}
    out = {"req_key": row["req_key"], "reply": "", "prompt_tokens": -1, "reply_tokens": -1, "finish_reason": "",
           "error": "", "raw": ""}
    choices = resp.get("choices") if isinstance(resp, Mapping) else None
    if not choices:
        err = resp.get("error") if isinstance(resp, Mapping) else None
        detail = (err.get("message") if isinstance(err, Mapping) else err) or (
            resp.get("detail") if isinstance(resp, Mapping) else None) or "reply without choices"
        out["error"] = f"HTTP error reply: {str(detail)[:500]}"
        out["raw"] = json.dumps(resp, default=str, ensure_ascii=False)[:2000]
        return out
    first = choices[0] or {}
    msg = first.get("message") or {}
    out["reply"] = str(msg.get("content") or first.get("text") or "")
    out["finish_reason"] = str(first.get("finish_reason") or "")
    usage = resp.get("usage") or {}
    out["prompt_tokens"] = int(usage.get("prompt_tokens") or -1)
    out["reply_tokens"] = int(usage.get("completion_tokens") or -1)
    return out


def _vllm_pre(row: dict[str, Any]) -> dict[str, Any]:
    return {"messages": _plain_messages(row["messages"]),
            "sampling_params": {"temperature": float(row["temperature"]), "max_tokens": int(row["max_tokens"])}}


def _vllm_post(row: dict[str, Any]) -> dict[str, Any]:
    return {"req_key": row["req_key"], "reply": str(row.get("generated_text") or ""),
            "prompt_tokens": int(row.get("num_input_tokens") or -1),
            "reply_tokens": int(row.get("num_generated_tokens") or -1), "finish_reason": "", "error": "",
            "raw": ""}


def _normalise(row: dict[str, Any]) -> dict[str, Any]:
    """One reply shape for success rows and the processor's bypassed error rows (``__inference_error__``)."""
    err = row.get("__inference_error__") or ""
    if err:
        return {"req_key": row["req_key"], "reply": "", "prompt_tokens": -1, "reply_tokens": -1,
                "finish_reason": "", "error": f"engine error: {str(err)[:1000]}", "raw": ""}
    return {k: row.get(k) for k in ("req_key", "reply", "prompt_tokens", "reply_tokens", "finish_reason", "error",
                                    "raw")}


def build_chat_processor(spec: ChatSpec):
    """The ``ray.data.llm`` processor for a spec: request rows in, reply rows out (module docstring).

    Raises:
        ImportError: ``kind: vllm_engine`` without vLLM installed (``pip install vllm`` on the GPU workers, or the
            spec's ``runtime_env``).
    """
    from ray.data.llm import HttpRequestProcessorConfig, build_processor, vLLMEngineProcessorConfig

    small = {"num_cpus": 0.1}
    if isinstance(spec, HttpChatSpec):
        cfg = HttpRequestProcessorConfig(
            url=spec.url, headers={"Authorization": f"Bearer {spec.api_key}"}, batch_size=spec.batch_size,
            concurrency=spec.concurrency, qps=spec.qps, max_retries=spec.max_retries,
            http_request_stage={"num_cpus": spec.num_cpus, "concurrency": spec.concurrency})
        return build_processor(cfg, preprocess=_http_pre(spec.model), postprocess=_http_post,
                               preprocess_map_kwargs=small, postprocess_map_kwargs=small)
    cfg = vLLMEngineProcessorConfig(
        model_source=spec.model_source, engine_kwargs=spec.engine_args(), batch_size=spec.batch_size,
        concurrency=spec.concurrency, accelerator_type=spec.accelerator_type, runtime_env=spec.runtime_env,
        max_concurrent_batches=spec.max_concurrent_batches, should_continue_on_error=True,
        placement_group_config=spec.placement_group_config,
        # the CPU stages (chat template, tokenizer) get no runtime env: a {pip: [vllm]} is for the engine actors
        chat_template_stage={"runtime_env": {}, **({"chat_template": spec.chat_template} if spec.chat_template
                                                   else {})},
        tokenize_stage={"runtime_env": {}}, detokenize_stage={"runtime_env": {}})
    return build_processor(cfg, preprocess=_vllm_pre, postprocess=_vllm_post, preprocess_map_kwargs=small,
                           postprocess_map_kwargs=small)


def run_chat(requests: Iterable[Mapping[str, Any]] | Any, spec: ChatSpec) -> Iterator[dict[str, Any]]:
    """Send request rows through the spec's processor; yield reply rows as Ray Data streams them (any order).

    Args:
        requests: request rows (module docstring) or a Ray Dataset of them.
        spec: :class:`HttpChatSpec` or :class:`VLLMEngineSpec`.

    Raises:
        RuntimeError: the processor gave up on the endpoint (connection failures after ``max_retries``); replies
            already yielded stay valid.
    """
    import ray.data

    ds = requests if isinstance(requests, ray.data.Dataset) else ray.data.from_items(
        [dict(r) for r in requests])
    if ds.count() == 0:
        return
    out = build_chat_processor(spec)(ds).map(_normalise, num_cpus=0.1)
    for row in out.iter_rows():
        yield dict(row)
