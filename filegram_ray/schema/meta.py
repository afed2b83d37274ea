"""Trajectory metadata (``meta.json``) and the run manifest (``run.json``).

``meta.json`` holds the ground truth of one trajectory (profile, task, seed, perturbation). It sits beside
``events.json`` in ``trajectories/<profile_id>/<task_id>/`` and is never given to a memory method
(ARCHITECTURE.md rule 6).
"""

from __future__ import annotations

import platform
import re
import sys
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Dimension = Literal["A", "B", "C", "D", "E", "F"]
Tier = Literal["L", "M", "R"]


class Perturbation(BaseModel):
    """One dimension shifted by one tier on one trajectory (reference §5.7; E in the curation meaning)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    dimension: Dimension
    from_: Tier = Field(alias="from")
    to: Tier


class TrajectoryMeta(BaseModel):
    """``meta.json`` of one trajectory."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    trajectory_id: str = Field(description="'<profile_id>/<task_id>'")
    profile_id: str
    task_id: str
    seed: int
    agent_kind: str = Field("persona-simulator", description="persona-simulator | llm-agent")
    agent_version: str = ""
    perturbation: Perturbation | None = None
    perturbation_check: dict[str, Any] | None = Field(
        None, description="the generator's counterfactual check of a planned perturbation: fingerprints with and "
        "without it, the shift of the perturbed dimension's features, whether it is real, the plan it replaced")
    completed: bool = True
    started_at_ms: float = Field(0.0, description="simulated epoch ms of session_start")
    duration_ms: float = Field(0.0, description="simulated duration (ms)")
    wall_time_s: float = Field(0.0, description="real seconds spent generating")
    event_counts: dict[str, int] = Field(default_factory=dict, description="raw / kept / per type")
    versions: dict[str, str] = Field(default_factory=dict)
    sandbox: dict[str, list[dict[str, str]]] | None = Field(
        None, description="bundle entries the engine's sandbox copy renamed or left out: {'renamed': [{path, "
        "renamed_from}], 'skipped': [{path, reason}]} (a name that is not valid UTF-8 gets its %XX name, case "
        "BR-27; links and special files are skipped); absent when nothing was")
    acting_tiers: dict[Dimension, Tier] | None = Field(
        None, description="persona simulator only: the tier each dimension A-F acted in this session (the tier "
        "nearest the session's drawn position, engine/simulator/tendency.py); with the perturbation applied. Ground "
        "truth for item construction (ShiftAna distractors), never shown to a method; absent for other agents")

    def to_json_dict(self) -> dict[str, Any]:
        d = self.model_dump(mode="json", by_alias=True)
        for key in ("sandbox", "acting_tiers"):
            if d.get(key) is None:
                d.pop(key, None)
        return d


class RunManifest(BaseModel):
    """``run.json``: what produced a run directory (config snapshot, versions, seeds, per-stage records). The
    config snapshot and the stage records hold no secret: assigned or validated, they are redacted
    (:func:`redact_settings`), so every writer of ``run.json`` through this model leaves API keys out."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)
    config: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0
    versions: dict[str, str] = Field(default_factory=dict)
    stages: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("config", "stages")
    @classmethod
    def _no_secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        return redact_settings(value)


def package_versions(names: tuple[str, ...] = ("ray", "polars", "pyarrow", "pydantic", "numpy", "faiss-cpu",
                                                "sentence-transformers", "scikit-learn")) -> dict[str, str]:
    """Installed versions of the packages that shape results, plus Python and filegram-ray."""
    from importlib import metadata

    from filegram_ray import __version__

    out = {"filegram-ray": __version__, "python": sys.version.split()[0], "platform": platform.platform()}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            pass
    return out


#: a setting whose name ends in one of these words holds a secret (the watcher's list, secret_rules.SECRET_NAMES:
#: ``api_key``, ``*_token``, ``*_secret``, ``password`` …; ``api_key_env`` names a variable and is kept)
_SECRET_SETTING = re.compile(r"(?i)(?:^|[_.-])(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey"
                             r"|access[_-]?key|private[_-]?key|credentials?|authorization|bearer)$")
#: settings of an object store's client (fsspec storage_options) whose value is a credential
_STORE_CREDENTIALS = frozenset({"key", "secret", "token", "password", "aws_access_key_id", "aws_secret_access_key",
                                "aws_session_token", "account_key", "sas_token", "connection_string"})
#: what a redacted setting holds in the snapshot
REDACTED = "<redacted>"
#: values that are no secret and say something (a local server's placeholder key, no key)
_NOT_SECRET = frozenset({"", "EMPTY", "none", "null"})


def redact_settings(value: Any, *, _store: bool = False) -> Any:
    """A copy of a configuration (or a stage record) with every secret setting's value replaced by
    :data:`REDACTED`: a key named like a secret (:data:`_SECRET_SETTING`: ``evaluate.backbone.api_key``,
    ``judge_backbone.api_key``, ``*_token``, ``password``), a credential of an object store's client under
    ``storage_options`` / ``client_kwargs``, and the password of a ``user:password@host`` URL. ``run.json`` keeps
    what produced a run, never what grants access to a service; values such as ``EMPTY`` (a local server) stay."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            name = str(k)
            secret = (_SECRET_SETTING.search(name) or (_store and name.lower() in _STORE_CREDENTIALS)) \
                and not isinstance(v, (dict, list, bool)) and v is not None and str(v) not in _NOT_SECRET
            out[k] = REDACTED if secret else redact_settings(
                v, _store=_store or name in ("storage_options", "client_kwargs"))
        return out
    if isinstance(value, list):
        return [redact_settings(v, _store=_store) for v in value]
    if isinstance(value, str) and "://" in value and "@" in value:
        return re.sub(r"(?<=://)([^/\s:@]{1,64}):[^/\s@]+(?=@)", rf"\1:{REDACTED}", value)
    return value


def read_manifest(run) -> dict[str, Any]:
    """``run.json`` of a :class:`~filegram_ray.storage.RunDir` as a :class:`RunManifest` dict (``{}`` for a run
    directory without one): every reader of ``run.json`` goes through here, so a damaged one is one error line.

    Raises:
        StorageError: ``run.json`` is not JSON, or not a run manifest (its top level is not an object, or its
            ``config`` / ``stages`` are not objects); names the file and what is wrong.
    """
    from pydantic import ValidationError

    from filegram_ray.errors import StorageError

    if not run.exists("run.json"):
        return {}
    data = run.read_json("run.json")
    if not isinstance(data, dict):
        raise StorageError(f"{run.uri}: run.json: top level must be a JSON object (the run manifest), got "
                           f"{type(data).__name__}; restore it or use a new --run-dir")
    try:
        return RunManifest.model_validate(data).model_dump(mode="json")
    except ValidationError as exc:
        err = exc.errors()[0]
        raise StorageError(f"{run.uri}: run.json: field '{'.'.join(map(str, err['loc']))}': {err['msg']}; restore "
                           "it or use a new --run-dir") from None


def record_stage(run, stage: str, record: dict[str, Any], config: dict[str, Any] | None = None) -> None:
    """Merge a stage's record (options, timings, counts) into ``run.json`` of a :class:`RunDir`; the config
    snapshot and the record are written with their secrets redacted (:class:`RunManifest`)."""
    man = RunManifest.model_validate(read_manifest(run))
    if config is not None:
        man.config = config
        man.seed = int(config.get("seed", man.seed))
    man.versions = package_versions()
    man.stages = {**man.stages, stage: record}  # assigned: validated, so redacted
    run.write_json("run.json", man.model_dump(mode="json"))
