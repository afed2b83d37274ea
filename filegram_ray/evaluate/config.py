"""The ``evaluate:`` section of the pipeline config (:class:`EvaluateConfig`), the one place where the answering and
judging backbones are validated.

``evaluate.backbone`` / ``evaluate.judge_backbone`` are checked once, here, when the section is validated
(:func:`filegram_ray.config.load_config` and the stage's own options): a language-model backbone becomes its
validated processor spec (:class:`~filegram_ray.llm.processors.HttpChatSpec` or ``VLLMEngineSpec``, through
:func:`~filegram_ray.llm.processors.chat_spec`), a CPU backbone (``lexical``, ``random``) stays as written. Everything
downstream — the unit plan's backbone tag, the workers' reader, the judge, the processor — takes the validated value
and validates nothing again.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

from pydantic import Field, field_validator

from filegram_ray.errors import UserError
from filegram_ray.stages.base import StageOptions

__all__ = ["DEFAULT_METHODS", "JUDGES", "SETTINGS", "STAGE", "EvaluateConfig", "backbone_tag", "chat_of", "make_reader",
           "validate_backbone"]

#: the stage's name: ``filegram run evaluate``, ``run.json`` ``stages.evaluate``, ``_done/evaluate/``
STAGE = "evaluate"
#: item settings (reference §9.2) and judges of open-ended items (:func:`filegram_ray.evaluate.scoring.make_judge`)
SETTINGS = ("text", "multimodal", "real_world")
JUDGES = ("auto", "llm", "rubric")
#: Methods evaluated by default: the context baselines, FileGramOS and its three channel ablations (ref §8.4).
DEFAULT_METHODS = ["no_context", "full_context", "naive_rag", "eager_summarization", "visrag", "mem0", "zep",
                   "memos", "simplemem", "evermemos", "memu", "mma", "filegramos",
                   "filegramos_no_procedural", "filegramos_no_semantic", "filegramos_no_episodic"]


def validate_backbone(v: Any) -> Any:
    """A backbone config value, validated: ``None`` stays None; a language model (``{kind: openai, base_url, …}``,
    ``{kind: vllm_engine, model_source, …}``) becomes its processor spec; ``lexical`` / ``random`` (a name or a
    ``{kind: …}`` mapping) stay as written. An already validated spec is returned as it is.

    Raises:
        UserError: ``oracle`` (the report's validity row, not a backbone) or an unknown kind.
        ValueError: a language-model backbone with a missing, unknown or invalid setting (pydantic's message,
            naming the field; :func:`~filegram_ray.llm.processors.chat_spec`).
    """
    from filegram_ray.llm.processors import HttpChatSpec, VLLMEngineSpec, chat_spec, is_llm_spec
    from filegram_ray.llm.readers import BACKBONE_KINDS

    if v is None or isinstance(v, (HttpChatSpec, VLLMEngineSpec)):
        return v
    if not isinstance(v, (str, dict)):
        raise UserError(f"a backbone is a name (encoder, lexical, random) or a mapping {{kind: openai, base_url: …, model: "
                        f"…}}, not {type(v).__name__}")
    kind = str(v if isinstance(v, str) else v.get("kind", "openai" if "base_url" in v else "")).lower()
    if kind == "oracle":
        raise UserError("the oracle answers from the key: it is the report's validity row (evaluate.validity), "
                        "not a backbone for the methods")
    if kind not in BACKBONE_KINDS:
        raise UserError(f"unknown backbone kind {kind!r} (one of {', '.join(BACKBONE_KINDS)}; a language model "
                        "is a mapping {kind: openai, base_url: …, model: …})")
    if kind == "encoder":  # its settings are checked now, not when the first actor makes it
        from filegram_ray.llm.readers import make_backbone

        try:
            make_backbone(v)
        except (TypeError, ValueError) as exc:
            raise UserError(f"evaluate.backbone (encoder): {exc}") from exc
        return v
    return chat_spec(v) if is_llm_spec(v) else v


def chat_of(backbone: Any) -> Any:
    """The processor spec of a validated backbone value (:func:`validate_backbone`), None for a CPU backbone."""
    from filegram_ray.llm.processors import HttpChatSpec, VLLMEngineSpec

    return backbone if isinstance(backbone, (HttpChatSpec, VLLMEngineSpec)) else None


def backbone_tag(backbone: Any) -> str:
    """A short, stable identity of a validated backbone value (``lexical``, ``openai-3f2a9c1e`` …): answers and
    completion records are kept per backbone, so changing the backbone never reuses another backbone's answers.
    A language model's tag hashes only what changes the answers (its spec's ``identity()``: batch size,
    concurrency and retries keep the answers)."""
    if isinstance(backbone, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", backbone):
        return backbone
    cs = chat_of(backbone)
    if cs is not None:
        value, kind = cs.identity(), cs.kind
    else:
        value, kind = backbone, backbone.get("kind", "openai") if isinstance(backbone, dict) else "backbone"
    digest = hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:8]
    return f"{kind}-{digest}"


def make_reader(backbone: Any, seed: int):
    """The one-off answering :class:`~filegram_ray.llm.backbones.Backbone` of a validated backbone value: an
    OpenAI-compatible client for an endpoint spec, else ``lexical`` / ``random`` (:func:`~filegram_ray.llm
    .make_backbone`).

    Raises:
        ValueError: a vLLM engine spec (it runs inside the stage's ``ray.data.llm`` processor only).
    """
    from filegram_ray.llm.backbones import OpenAIBackbone
    from filegram_ray.llm.processors import HttpChatSpec
    from filegram_ray.llm.readers import make_backbone

    cs = chat_of(backbone)
    if cs is None:
        return make_backbone(backbone, seed=seed)
    if not isinstance(cs, HttpChatSpec):
        raise ValueError(f"backbone {cs.kind!r} runs vLLM engines inside the evaluate stage's ray.data.llm "
                         "processor; it has no one-off client (use an OpenAI-compatible server for that)")
    return OpenAIBackbone(**cs.backbone_kwargs())


class EvaluateConfig(StageOptions):
    """The ``evaluate:`` section of the pipeline config (defaults: the field defaults; ``conf/default.yaml``
    samples ``sample_per_sub_task`` on a laptop). Unknown keys, methods, method options, backbones, judges,
    settings and sub-tasks are refused when the config loads (whichever stage runs), not hours later when
    evaluate starts."""

    methods: list[str] = Field(default_factory=lambda: list(DEFAULT_METHODS), min_length=1,
                               description="registered method names to evaluate (`filegram methods` lists them)")
    method_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per-method options, e.g. {full_context: {cap_chars: 100000}}")
    backbone: Any = Field(
        "lexical", description="the reader: 'encoder' (conf/default.yaml's, no LLM: the packaged MiniLM scores each option "
        "against the context, filegram_ray.llm.encoder_reader; {kind: encoder, head: PATH} adds a trained head), "
        "'lexical' (word overlap, a plumbing check; the field's default, so a bare config needs no model), 'random', or a language model "
        "answered through a ray.data.llm processor (filegram_ray.evaluate.answer): {kind: openai, base_url, model, "
        "…} for any OpenAI-compatible server, {kind: vllm_engine, model_source, tensor_parallel_size, …} for vLLM "
        "engines on GPU workers (fields: filegram_ray.llm.processors); validated once, into its processor spec")
    judge: str = Field("auto", description="open-ended items' judge: auto | llm | rubric (auto = the LLM judge "
                       "when there is a language model)")
    judge_backbone: Any = Field(None, description="the judge's language model (same shapes as backbone); "
                                "None = the answering backbone")
    judge_max_tokens: int = Field(512, ge=1, description="longest reply of the LLM judge, tokens (reference "
                                  "§9.4: 512); a small CPU model that rambles to the cap costs that many tokens a "
                                  "verdict, and the score is read from the reply's start")
    ingest_llm: bool = Field(True, description="with an OpenAI-compatible backbone, let methods call it at "
                             "ingest (Eager Summarization's summaries, FileGramOS consolidation); false = their "
                             "non-LLM path (much faster on a CPU server)")
    max_context_chars: int | None = Field(
        None, ge=1, description="language-model path only: cut each retrieved context to this many characters "
        "before it goes into the prompt (the answering model's window; None = no cut); every method alike, the "
        "report counts the cut prompts")
    wave_units: int = Field(64, ge=1, description="work units per prompt-and-answer wave of the language-model "
                            "path (bounds driver memory; a unit is written as soon as its last answer is in)")
    embedder: str = Field(
        "auto", description="the methods' sentence embedder: auto (minilm, the packaged all-MiniLM-L6-v2; "
        "filegram_ray.evaluate.embedding.CPU_EMBEDDER) or a registered kind: minilm, minilm-int8, minilm-static "
        "(≈85x less CPU, retrieval agreement with MiniLM 0.28: docs/measurements/2026-12-05-embed-plan.md), "
        "e5-small, hashing; the report's mechanism lines name it")
    settings: list[str] = Field(
        default_factory=lambda: ["text", "multimodal", "real_world"], min_length=1,
        description="item settings to evaluate: text, multimodal, real_world (methods ingest the events the "
        "caption stage read back from screen recordings, video.realworld)")
    multimodal_content: Literal["auto", "derivatives", "strip"] = Field(
        "auto", description="created-file content in the multimodal setting: derivatives (text recovered from "
        "the rendered files), strip (removed, upstream's simulation, reference §8.3) or auto (derivatives when "
        "derivatives/index.parquet exists); filegram_ray.evaluate.multimodal")
    multimodal_formats: list[str] | None = Field(
        None, description="derivative formats whose text is shown in the multimodal setting (None = every "
        "rendered format of filegram_ray.evaluate.multimodal.SHOWN_FORMATS; md derivatives, the source Markdown, "
        "stay hidden)")
    validity: bool = Field(True, description="add the oracle, random and reader validity rows")
    sub_tracks: list[str] | None = Field(None, min_length=1, description="restrict to these sub-tasks (None = "
                                         "all)")
    max_items: int | None = Field(None, ge=0, description="evaluate only the first N items (by question id): "
                                  "smoke runs")
    sample_per_sub_task: int | None = Field(
        None, ge=1, description="a seeded sample of at most N items per (sub-task, setting), plus the text twins "
        "of the sampled FileGrd items (the Text vs Multimodal table stays paired); None = the whole bank. The "
        "laptop default samples: every item has its own context spec and a full bank on 2 cores takes hours")
    num_actors: int = Field(2, ge=1, description="actors of the answering pool (and the prompt builders of the "
                            "language-model path)")
    num_cpus_per_actor: float = Field(0.5, gt=0, description="CPUs per actor: ≤ 0.5 on a 2-CPU laptop (whole-CPU "
                                      "actors deadlock it, ENVIRONMENT_FACTS §1)")
    plots: bool = Field(True, description="write the PNG plots")

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, v: list[str]) -> list[str]:
        from filegram_ray.methods import method_names

        unknown = [m for m in v if m not in method_names()]
        if unknown:
            raise UserError(f"unknown method(s) {', '.join(map(repr, unknown))} (registered: "
                            f"{', '.join(method_names())}; `filegram methods` lists them)")
        return v

    @field_validator("method_options")
    @classmethod
    def _known_method_options(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        from filegram_ray.methods import method_names

        unknown = [m for m in v if m not in method_names()]
        if unknown:
            raise UserError(f"options for unknown method(s) {', '.join(map(repr, unknown))} (registered: "
                            f"{', '.join(method_names())})")
        from filegram_ray.methods.base import check_options

        for m, opts in v.items():
            check_options(m, opts)
        return v

    @field_validator("embedder")
    @classmethod
    def _known_embedder(cls, v: str) -> str:
        from filegram_ray.memory.embed import EMBEDDERS

        if v != "auto" and v not in EMBEDDERS:
            raise UserError(f"unknown embedder {v!r} (auto or one of {', '.join(sorted(EMBEDDERS))})")
        return v

    @field_validator("backbone", "judge_backbone")
    @classmethod
    def _backbone(cls, v: Any) -> Any:
        return validate_backbone(v)

    @field_validator("judge")
    @classmethod
    def _known_judge(cls, v: str) -> str:
        if v not in JUDGES:
            raise UserError(f"unknown judge {v!r} (one of {', '.join(JUDGES)})")
        return v

    @field_validator("settings")
    @classmethod
    def _known_settings(cls, v: list[str]) -> list[str]:
        bad = [s for s in v if s not in SETTINGS]
        if bad:
            raise UserError(f"unknown setting(s) {', '.join(map(repr, bad))} (one of {', '.join(SETTINGS)})")
        return v

    @field_validator("sub_tracks")
    @classmethod
    def _known_sub_tracks(cls, v: list[str] | None) -> list[str] | None:
        from filegram_ray.bench.builders import check_sub_tasks

        check_sub_tasks(v or [])
        return v

    # -- the validated backbones, for the stage and its workers ---------------------------------------------
    @property
    def chat(self) -> Any:
        """The answering backbone's processor spec (None: a CPU backbone)."""
        return chat_of(self.backbone)

    @property
    def judge_model(self) -> Any:
        """The judge's model: ``judge_backbone`` when set, else the answering backbone (validated values)."""
        return self.judge_backbone if self.judge_backbone is not None else self.backbone

    @property
    def tag(self) -> str:
        """:func:`backbone_tag` of the answering backbone (units, answer tables, reader cache)."""
        return backbone_tag(self.backbone)
