"""VLM captioner: keyframes → the visible file operation, through ``ray.data.llm``.

Two back ends, one request shape (OpenAI chat messages with the keyframe as a ``data:image/jpeg;base64`` image part)
and one caption schema (:mod:`video.captions`):

* ``kind: vllm`` — :class:`ray.data.llm.vLLMEngineProcessorConfig` with a vision-language model from a **local
  path** (``model_source``), its multimodal preparation stage on, on GPU workers (``accelerator_type``,
  ``concurrency``). Needs ``pip install vllm`` (the ``gpu`` extra) on those workers; nothing is downloaded.
* ``kind: http`` — :class:`ray.data.llm.HttpRequestProcessorConfig` against any OpenAI-compatible endpoint that
  accepts image input (``url`` = its ``/v1`` base; a vLLM ``serve``, a llama.cpp server with an ``mmproj``, …).

Both are built declaratively (:func:`build_vlm_processor` → ``build_processor(config, preprocess, postprocess)``);
:func:`vlm_preprocess` and :func:`vlm_postprocess` are pure functions of a row, so the request a model receives is
testable without a model.

The prompt (:data:`PROMPT`) asks for the visible file operation (what action, on which file) and for a verbatim
transcription of the status line, the clock and the main pane, returned as one JSON object; the reconstruction
(:mod:`video.reconstruct`) reads the status line first and falls back to the structured fields.
"""

from __future__ import annotations

import base64
import json
import os
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from filegram_ray.errors import UserError

if TYPE_CHECKING:  # numpy is imported where frames are handled (a stage's --help loads none)
    import numpy as np

__all__ = ["PROMPT", "VlmConfig", "build_vlm_processor", "encode_keyframe", "run_vlm", "vlm_messages",
           "vlm_postprocess", "vlm_preprocess", "vlm_processor_config"]

#: The instruction sent with every keyframe.
PROMPT = (
    "This image is one frame of a screen recording of a person working in a desktop file manager (file tree on "
    "the left, a preview, editor or diff pane on the right, a status line at the bottom, a clock in the title bar)."
    " Identify the file operation visible in this frame: what action the person performs and on which file or "
    "folder. Reply with one JSON object only, with these keys:\n"
    '  "action": one of "read", "write", "edit", "search", "browse", "new_folder", "move", "rename", "copy", '
    '"delete", "none";\n'
    '  "file": the path of the file or folder acted on ("" if none);\n'
    '  "target": the destination path of a move, rename or copy ("" otherwise);\n'
    '  "query": the search text of a search ("" otherwise);\n'
    '  "status_line": the exact text of the status line at the bottom;\n'
    '  "clock": the exact date and time shown in the title bar;\n'
    '  "visible_text": the first lines of text in the main pane, verbatim.'
)


class VlmConfig(BaseModel):
    """The ``caption.vlm:`` section.

    Attributes:
        kind: ``vllm`` (engine on GPU workers, local model path) or ``http`` (OpenAI-compatible endpoint).
        model_source: local directory of the VLM (``vllm``).
        url: the endpoint's base URL, e.g. ``http://127.0.0.1:8000/v1`` (``http``); ``/chat/completions`` is added.
        model: model name sent in ``http`` requests.
        api_key_env: environment variable holding a bearer token for ``http`` (never stored in the config).
        max_tokens / temperature: sampling (temperature 0: the same keyframe gets the same caption).
        image_width: keyframes are scaled to this width before sending (vision-token budget), pixels.
        jpeg_quality: JPEG quality of the image part.
        batch_size / concurrency: rows per model call and engine replicas / concurrent HTTP workers.
        accelerator_type: GPU type for the vLLM workers (e.g. ``H100``), None = any.
        engine_kwargs: passed to the vLLM engine (e.g. ``max_model_len``, ``limit_mm_per_prompt``).
        qps / max_retries: HTTP rate limit and retries.
        processor_kwargs: fields of the processor config, merged last: they replace the ones built here (e.g.
            ``prepare_multimodal_stage: {enabled: true, chat_template_content_format: string}`` for a model whose
            chat template takes string content, ``max_concurrent_batches``, ``runtime_env``).
    """

    model_config = ConfigDict(extra="forbid")
    kind: Literal["vllm", "http"] = Field("http", description="vllm (engine on GPU workers) or http (endpoint)")
    model_source: str | None = Field(None, description="local directory of the VLM (kind vllm)")
    url: str | None = Field(None, description="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 (kind http)")
    model: str = Field("vlm", description="model name sent in http requests")
    api_key_env: str | None = Field(None, description="environment variable holding a bearer token (http)")
    max_tokens: int = Field(384, ge=16, description="longest reply, tokens")
    temperature: float = Field(0.0, ge=0, description="sampling temperature (0: same keyframe, same caption)")
    image_width: int = Field(1280, ge=64, description="keyframes are scaled to this width before sending, pixels")
    jpeg_quality: int = Field(90, ge=10, le=100, description="JPEG quality of the image part")
    batch_size: int = Field(8, ge=1, description="rows per model call")
    concurrency: int = Field(1, ge=1, description="vLLM engine replicas / concurrent HTTP workers")
    accelerator_type: str | None = Field(None, description="GPU type of the vLLM workers (e.g. H100), None = any")
    engine_kwargs: dict[str, Any] = Field(default_factory=dict, description="passed to the vLLM engine")
    qps: int | None = Field(None, description="HTTP requests per second (None = no limit)")
    max_retries: int = Field(2, ge=0, description="HTTP retries of a failed request")
    processor_kwargs: dict[str, Any] = Field(default_factory=dict, description="processor config fields, merged "
                                                                               "last")

    @model_validator(mode="after")
    def _needs(self) -> VlmConfig:
        if self.kind == "vllm" and not self.model_source:
            raise UserError("caption.vlm.model_source: a local model directory is required for kind 'vllm'")
        if self.kind == "http" and not self.url:
            raise UserError("caption.vlm.url: an OpenAI-compatible base URL is required for kind 'http'")
        return self

    def endpoint(self) -> str:
        u = (self.url or "").rstrip("/")
        return u if u.endswith("/chat/completions") else f"{u}/chat/completions"


def encode_keyframe(image: np.ndarray, width: int = 1280, quality: int = 90) -> bytes:
    """JPEG bytes of a BGR keyframe scaled to ``width`` (never enlarged)."""
    import cv2

    h, w = image.shape[:2]
    if w > width:
        image = cv2.resize(image, (width, max(1, int(round(h * width / w)))), interpolation=cv2.INTER_AREA)
    ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError("keyframe could not be encoded as JPEG")
    return buf.tobytes()


def vlm_messages(jpeg: bytes, prompt: str = PROMPT) -> list[dict[str, Any]]:
    """OpenAI chat messages: one user turn with the prompt and the image (``data:`` URL)."""
    url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
    return [{"role": "user", "content": [{"type": "text", "text": prompt},
                                         {"type": "image_url", "image_url": {"url": url}}]}]


def vlm_preprocess(row: dict[str, Any], cfg: VlmConfig) -> dict[str, Any]:
    """A keyframe row (``jpeg`` bytes + ids) → the processor's input row: ``messages`` + ``sampling_params``
    (vLLM) or ``payload`` (HTTP). The image bytes are not carried further."""
    keep = {k: v for k, v in row.items() if k != "jpeg"}
    messages = vlm_messages(bytes(row["jpeg"]))
    if cfg.kind == "http":
        return {**keep, "payload": {"model": cfg.model, "messages": messages, "max_tokens": cfg.max_tokens,
                                    "temperature": cfg.temperature}}
    return {**keep, "messages": messages,
            "sampling_params": {"temperature": cfg.temperature, "max_tokens": cfg.max_tokens}}


def vlm_postprocess(row: dict[str, Any]) -> dict[str, Any]:
    """The processor's output row → caption fields: ``text`` (status line + visible text), ``operation`` (the
    reply's JSON object, as JSON text), ``error`` ("" when the reply parsed)."""
    from filegram_ray.llm.parsing import parse_json_object

    reply, err = "", ""
    if "http_response" in row:
        resp = row.get("http_response") or {}
        try:
            reply = resp["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            err = f"unexpected response: {json.dumps(resp, default=str)[:300]}"
    else:
        reply = str(row.get("generated_text") or "")
    if row.get("__inference_error__"):
        err = str(row["__inference_error__"])[:500]
    obj = parse_json_object(reply) if reply else None
    if obj is None and not err:
        err = f"reply is not a JSON object: {reply[:200]!r}"
    obj = obj or {}
    text = "\n".join(str(obj.get(k) or "") for k in ("status_line", "visible_text")).strip()
    drop = {"payload", "messages", "sampling_params", "http_response", "generated_text", "generated_tokens",
            "prompt", "prompt_token_ids", "num_generated_tokens", "num_input_tokens", "request_id", "params",
            "time_taken_llm", "metrics", "embeddings", "__inference_error__", "batch_uuid", "image", "jpeg"}
    out = {k: v for k, v in row.items() if k not in drop}
    out.update(text=text, operation=json.dumps(obj, ensure_ascii=False, sort_keys=True) if obj else "",
               error=err, reply=reply[:4000])
    return out


def vlm_processor_config(cfg: VlmConfig):
    """The ``ray.data.llm`` processor config of ``cfg`` (no engine is started; :func:`build_vlm_processor` builds it).

    Raises:
        ValueError: ``api_key_env`` names an unset environment variable.
    """
    from ray.data.llm import HttpRequestProcessorConfig, vLLMEngineProcessorConfig

    if cfg.kind == "http":
        headers = None
        if cfg.api_key_env:
            token = os.environ.get(cfg.api_key_env)
            if not token:
                raise UserError(f"caption.vlm.api_key_env: environment variable {cfg.api_key_env} is not set")
            headers = {"Authorization": f"Bearer {token}"}
        kw = {"url": cfg.endpoint(), "headers": headers, "qps": cfg.qps, "max_retries": cfg.max_retries,
              "batch_size": cfg.batch_size, "concurrency": cfg.concurrency}
        return HttpRequestProcessorConfig(**{**kw, **cfg.processor_kwargs})  # processor_kwargs win
    kw = {"model_source": cfg.model_source, "engine_kwargs": dict(cfg.engine_kwargs), "batch_size": cfg.batch_size,
          "concurrency": cfg.concurrency, "accelerator_type": cfg.accelerator_type,
          "prepare_multimodal_stage": {"enabled": True, "chat_template_content_format": "openai"},
          "should_continue_on_error": True}
    return vLLMEngineProcessorConfig(**{**kw, **cfg.processor_kwargs})


def build_vlm_processor(cfg: VlmConfig):
    """The ``ray.data.llm`` processor of ``cfg``: ``build_processor(config, preprocess, postprocess)``; call it on
    a dataset of keyframe rows (``jpeg`` bytes + ids).

    Raises:
        ImportError: ``kind: vllm`` on a machine without vLLM (``pip install vllm``; GPU workers).
    """
    from ray.data.llm import build_processor

    def pre(row: dict[str, Any]) -> dict[str, Any]:
        return vlm_preprocess(row, cfg)

    return build_processor(vlm_processor_config(cfg), preprocess=pre, postprocess=vlm_postprocess)


def run_vlm(rows: list[dict[str, Any]], cfg: VlmConfig):
    """Keyframe rows (``jpeg`` bytes + ids, each with its ``req_key``) through the processor of ``cfg``
    (:func:`build_vlm_processor`); yields the caption rows (:func:`vlm_postprocess`) as Ray Data streams them, any
    order. A reply the model could not give is a row with its ``error``, not an exception."""
    import ray.data

    if not rows:
        return
    for r in build_vlm_processor(cfg)(ray.data.from_items(rows)).iter_rows():
        yield dict(r)
