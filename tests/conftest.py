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
