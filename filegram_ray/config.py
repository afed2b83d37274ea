"""Pipeline configuration: ``conf/default.yaml`` (laptop) or ``conf/cluster.yaml``, plus CLI overrides.

The top level holds what every stage shares (run directory, seed, profile and task sets, Ray connection);
each stage reads its own section (``generate:``, ``encode:`` …) and validates it with its own pydantic model,
so stages stay independent.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from filegram_ray.paths import conf_dir


class RayConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    address: str | None = Field(None, description="cluster address; None = RAY_ADDRESS or a local Ray")
    num_cpus: int | None = Field(None, description="CPUs of a new local Ray (None = all)")


def match_ids(wanted: list[str] | None, available: list[str], field: str, where: str = "") -> list[str]:
    """The ids of ``available`` that ``wanted`` names, in ``available`` order; ``None``/empty ``wanted`` = all.

    A wanted id matches an available id equal to it or equal to its part before the first ``_`` (the short form:
    ``p1`` names ``p1_methodical``), the same rule in every stage (case REL-short-profile-ids-empty-encode-bench).

    Raises:
        ValueError: a wanted id matches nothing: ``config field <field>: unknown id 'x' (<where> has: …)``.
    """
    if not wanted:
        return list(available)
    hits: set[str] = set()
    for w in wanted:
        got = [a for a in available if a == w or a.split("_", 1)[0] == w]
        if not got:
            known = ", ".join(sorted(available)[:12]) + (" …" if len(available) > 12 else "")
            raise ValueError(f"config field {field}: unknown id {w!r}"
                             + (f" ({where} has: {known or 'none'})" if where else f" (known: {known or 'none'})"))
        hits.update(got)
    return [a for a in available if a in hits]


class PipelineConfig(BaseModel):
    """Shared settings. Unknown top-level keys are stage sections, kept as plain dicts in ``stages``."""

    model_config = ConfigDict(extra="allow")
    run_dir: str = Field("runs/default", description="local path or fsspec URI of the run directory")
    storage_options: dict[str, Any] = Field(default_factory=dict, description="fsspec options for run_dir")
    seed: int = Field(7, description="master seed; every stochastic choice derives from it")
    profiles_dir: str | None = Field(None, description="profile set directory; None = conf/profiles")
    tasks_dir: str | None = Field(None, description="task set directory; None = conf/tasks")
    profiles: list[str] | None = Field(None, description="profile ids to run; None = all")
    tasks: list[str] | None = Field(None, description="task ids to run; None = all")
    ray: RayConfig = Field(default_factory=RayConfig)

    def section(self, name: str) -> dict[str, Any]:
        """The raw dict of a stage section (empty if absent)."""
        extra = self.model_extra or {}
        return dict(extra.get(name) or {})

    def run(self):
        """The :class:`~filegram_ray.storage.RunDir` of this configuration."""
        from filegram_ray.storage import RunDir

        return RunDir(self.run_dir, self.storage_options)


def _deep_update(base: dict[str, Any], upd: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in upd.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_update(out[k], v)
        else:
            out[k] = v
    return out


def parse_override(item: str) -> dict[str, Any]:
    """``generate.num_actors=4`` → ``{"generate": {"num_actors": 4}}`` (value parsed as YAML)."""
    if "=" not in item:
        raise ValueError(f"override {item!r} must look like key.sub=value")
    key, raw = item.split("=", 1)
    value = yaml.safe_load(raw)
    out: dict[str, Any] = {}
    cur = out
    parts = key.strip().split(".")
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value
    return out


def load_config(path: str | os.PathLike | None = None, overrides: list[str] | dict[str, Any] | None = None
                ) -> PipelineConfig:
    """Load a pipeline config.

    Args:
        path: YAML file; ``None`` = ``conf/default.yaml``.
        overrides: ``["key.sub=value", …]`` or a nested dict applied on top.

    Raises:
        FileNotFoundError: the YAML file does not exist.
        ValueError: the file is not UTF-8 or not valid YAML (a key given twice included), is not a mapping, or a
            field has the wrong type (message names file and field).
    """
    p = Path(path) if path else conf_dir() / "default.yaml"
    if not p.exists():
        raise FileNotFoundError(f"config file not found: {p}")
    from filegram_ray.limits import load_yaml_file

    data = load_yaml_file(p) or {}  # names the file when not UTF-8 / not YAML; a key given twice is an error
    if not isinstance(data, dict):
        raise ValueError(f"{p}: top level must be a mapping")
    if isinstance(overrides, dict):
        data = _deep_update(data, overrides)
    else:
        for item in overrides or []:
            data = _deep_update(data, parse_override(item))
    try:
        return PipelineConfig.model_validate(data)
    except Exception as exc:
        raise ValueError(f"{p}: {exc}") from exc
