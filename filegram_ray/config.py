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
from pydantic import BaseModel, ConfigDict, Field, field_validator

from filegram_ray.errors import UserError
from filegram_ray.paths import conf_dir


class RayConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    address: str | None = Field(None, description="cluster address; None = RAY_ADDRESS or a local Ray")
    num_cpus: int | None = Field(None, ge=1, description="CPUs of a new local Ray (None = all)")


def names_id(wanted: str, id_: str) -> bool:
    """Whether the wanted id ``wanted`` names ``id_``: equal to it, or equal to its part before the first ``_`` (the
    short form: ``p1`` names ``p1_methodical``; case REL-short-profile-ids-empty-encode-bench)."""
    return id_ == wanted or id_.split("_", 1)[0] == wanted


def _natural(id_: str) -> list:
    """Sort key that orders ``p2`` before ``p10`` (digit runs compare as numbers)."""
    import re

    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", id_)]


def match_ids(wanted: list[str] | None, available: list[str], field: str, where: str = "",
              label: str | None = None) -> list[str]:
    """The ids of ``available`` that ``wanted`` names, in ``available`` order; ``None``/empty ``wanted`` = all.

    A wanted id matches an available id equal to it or equal to its part before the first ``_`` (the short form:
    ``p1`` names ``p1_methodical``), the same rule in every stage (case REL-short-profile-ids-empty-encode-bench).
    ``label`` names where the ids came from in the error (default ``config field <field>``; a command's positional
    argument passes e.g. ``argument PROFILE``).

    Raises:
        ValueError: a wanted id matches nothing: ``config field <field>: unknown id 'x' (<where> has: …)``.
    """
    if not wanted:
        return list(available)
    hits: set[str] = set()
    for w in wanted:
        got = [a for a in available if names_id(w, a)]
        if not got:
            known = ", ".join(sorted(available, key=_natural)[:12]) + (" …" if len(available) > 12 else "")
            raise UserError(f"{label or f'config field {field}'}: unknown id {w!r}"
                             + (f" ({where} has: {known or 'none'})" if where else f" (known: {known or 'none'})"))
        hits.update(got)
    return [a for a in available if a in hits]


def stage_sections() -> tuple[str, ...]:
    """The stage sections of a pipeline config (top-level keys besides :class:`PipelineConfig`'s fields), from
    :data:`filegram_ray.stage_list.STAGES`; each present one is validated against its stage's model
    (:func:`section_models`)."""
    from filegram_ray.stage_list import STAGES

    return tuple(s.section for s in STAGES)


def section_models(sections: list[str] | tuple[str, ...] | None = None) -> dict[str, type[BaseModel]]:
    """``{section: the stage's Config model}`` of the stages whose sections are named (default: every stage): only
    their modules are imported, on first use (not at import of this module, so ``filegram --help`` stays fast)."""
    from filegram_ray.stage_list import STAGES

    return {s.section: s.load().Config for s in STAGES if sections is None or s.section in sections}


class PipelineConfig(BaseModel):
    """Shared settings. The other top-level keys are the stage sections (:func:`stage_sections`), kept as plain dicts
    (:meth:`section`); :func:`load_config` refuses any other key and validates every section."""

    model_config = ConfigDict(extra="allow")
    run_dir: str = Field("runs/default", description="local path or fsspec URI of the run directory")
    storage_options: dict[str, Any] = Field(default_factory=dict, description="fsspec options for run_dir")
    seed: int = Field(7, description="master seed; every stochastic choice derives from it")
    profiles_dir: str | None = Field(None, description="profile set directory; None = conf/profiles")
    tasks_dir: str | None = Field(None, description="task set directory; None = conf/tasks")
    profiles: list[str] | None = Field(None, description="profile ids to run; None = all")
    tasks: list[str] | None = Field(None, description="task ids to run; None = all")
    ray: RayConfig = Field(default_factory=RayConfig)

    @field_validator("profiles", "tasks")
    @classmethod
    def _ids(cls, v: list[str] | None) -> list[str] | None:
        """An id list holds ids (:func:`~filegram_ray.schema.profile.id_problem`: never a path) and is not empty:
        ``[]`` is refused, not read as "all" (leave the key out or set it to null for all; case
        REL2-CONFIG-set-section-scalar-accepted)."""
        if v is None:
            return v
        if not v:
            raise UserError("empty list: name at least one id, or leave the key out (null) for all")
        from filegram_ray.schema.profile import id_problem

        for i, item in enumerate(v):
            problem = id_problem(item)
            if problem:
                raise UserError(f"item {i}: {problem}")
        return v

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
    """``generate.num_actors=4`` → ``{"generate": {"num_actors": 4}}`` (value parsed as YAML).

    Raises:
        ValueError: no ``=``, or the value is not valid YAML or nested deeper than
            :data:`~filegram_ray.limits.MAX_NESTING` levels (names the override)."""
    from filegram_ray.limits import MAX_NESTING, check_nesting

    if "=" not in item:
        raise UserError(f"override {item!r} must look like key.sub=value")
    key, raw = item.split("=", 1)
    try:
        value = yaml.safe_load(raw)
    except RecursionError:  # PyYAML's composer recurses once per level
        raise UserError(f"--set {key.strip()}: the value is not valid YAML: nesting too deep (more than "
                        f"{MAX_NESTING} levels)") from None
    except yaml.YAMLError as exc:
        raise UserError(f"--set {_one_line(item)}: the value is not valid YAML "
                        f"({getattr(exc, 'problem', None) or exc}; quote it: key='\"text\"')") from exc
    check_nesting(value, f"--set {key.strip()}", "the value is not valid YAML")
    out: dict[str, Any] = {}
    cur = out
    parts = key.strip().split(".")
    if len(parts) > MAX_NESTING:
        raise UserError(f"--set {_one_line(key.strip()[:80])}…: the key is nested more than {MAX_NESTING} levels")
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value
    return out


def load_config(path: str | os.PathLike | None = None, overrides: list[str] | dict[str, Any] | None = None,
                sections: list[str] | tuple[str, ...] | None = None) -> PipelineConfig:
    """Load a pipeline config.

    Args:
        path: YAML file; ``None`` = ``conf/default.yaml``.
        overrides: ``["key.sub=value", …]`` or a nested dict applied on top.
        sections: the stage sections to validate against their stage's model (those of the stages a job runs; only
            their modules are imported); ``None`` = every section. A section left out is still checked to be a
            mapping, and is validated by the runner when its stage runs.

    Raises:
        FileNotFoundError: the YAML file does not exist.
        ValueError: the file is not UTF-8 or not valid YAML (a key given twice included), is not a mapping, has a
            key that is neither a shared field nor a stage section, or a field (shared or of any stage section) is
            invalid: one line naming the file or the ``--set`` override, the key and the allowed keys/values
            (:func:`check_config`).
    """
    p = Path(path) if path else conf_dir() / "default.yaml"
    if not p.exists():
        raise FileNotFoundError(f"config file not found: {p}")
    from filegram_ray.limits import load_yaml_file

    data = load_yaml_file(p) or {}  # names the file when not UTF-8 / not YAML; a key given twice is an error
    if not isinstance(data, dict):
        raise UserError(f"{p}: top level must be a mapping")
    blame: list[tuple[tuple[str, ...], str]] = []  # (key path, "--set k=v") of each override, to name in errors
    if isinstance(overrides, dict):
        data = _deep_update(data, overrides)
        blame += [(path, f"override {'.'.join(path)}") for path in _leaf_paths(overrides)]
    else:
        for item in overrides or []:
            upd = parse_override(item)
            key = tuple(item.split("=", 1)[0].strip().split("."))
            _check_override_shape(data, key, upd, f"--set {_one_line(item)}", blame)
            data = _deep_update(data, upd)
            blame.append((key, f"--set {_one_line(item)}"))
    check_config(data, lambda loc: next((label for path, label in reversed(blame)
                                         if loc[:len(path)] == path or path[:len(loc)] == loc), str(p)), sections)
    return PipelineConfig.model_validate(data)


def _one_line(text: str) -> str:
    """``text`` with control characters written as ``\\xNN`` / ``\\uNNNN`` escapes (an error stays one line)."""
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii") for c in text)


def _check_override_shape(data: dict[str, Any], key: tuple[str, ...], upd: dict[str, Any], label: str,
                          blame: list[tuple[tuple[str, ...], str]]) -> None:
    """Refuse an override that gives a stage section a value that is not a mapping (``--set generate=5``,
    ``--set generate=null``), or that reaches into a key an earlier override made a scalar (``--set generate=5``
    then ``--set generate.executor=serial`` — the job's own ``--serial``): the later one would silently replace the
    scalar and the stage would run with its defaults (case REL2-CONFIG-set-section-scalar-accepted).

    Raises:
        ValueError: ``--set generate=5: generate: must be a mapping of generate options (got int)``.
    """
    if len(key) == 1 and key[0] in stage_sections() and not isinstance(upd[key[0]], dict):
        value = upd[key[0]]
        raise UserError(f"{label}: {key[0]}: must be a mapping of {key[0]} options, e.g. {key[0]}.<option>=value "
                         f"(got {'null' if value is None else type(value).__name__})")
    cur: Any = data
    for i, part in enumerate(key[:-1]):
        if not isinstance(cur, dict) or part not in cur:
            return
        cur = cur[part]
        if cur is not None and not isinstance(cur, dict):
            loc = key[:i + 1]
            earlier = next((lab for path, lab in reversed(blame) if path == loc), None)
            if earlier is None:  # the file's own scalar (`seed: 7` and `--set seed.x=1`): check_config names it
                return
            raise UserError(f"{earlier}: {'.'.join(loc)}: must be a mapping (got {type(cur).__name__}; "
                             f"{label} sets a key inside it)")


def _leaf_paths(d: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for k, v in d.items():
        out += _leaf_paths(v, (*prefix, str(k))) if isinstance(v, dict) and v else [(*prefix, str(k))]
    return out


def check_config(data: dict[str, Any], source=lambda loc: "config",
                 sections: list[str] | tuple[str, ...] | None = None) -> None:
    """Validate a pipeline config mapping: the shared fields, no unknown top-level key, every stage section is a
    mapping, and the stage sections named by ``sections`` (default: all) against their stage's model
    (:func:`section_models`: only those stages' modules are imported).

    Args:
        data: the merged config mapping (file + overrides).
        source: ``loc`` (key path tuple) → what set it (the file path or ``--set key=value``), named in errors.

    Raises:
        ValueError: one line per config, ``<source>: <key.path>: <problem>`` for each problem (``; ``-joined),
            naming the allowed keys of an unknown key and pydantic's allowed values of a bad one.
    """
    from pydantic import ValidationError

    problems: list[str] = []

    def add(loc: tuple[str, ...], msg: str) -> None:
        problems.append(f"{source(loc)}: {'.'.join(loc)}: {msg}")

    def collect(model: type[BaseModel], value: Any, prefix: tuple[str, ...]) -> None:
        try:
            model.model_validate(value)
        except ValidationError as exc:
            for e in exc.errors():
                loc = (*prefix, *(str(x) for x in e["loc"]))
                msg = e["msg"].removeprefix("Value error, ")  # a validator's own message reads as it is
                if e["type"] == "extra_forbidden":
                    allowed = _field_names(model, tuple(str(x) for x in e["loc"][:-1]))
                    msg = "unknown key" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
                add(loc, msg.replace("\n", " "))

    from filegram_ray.stage_list import STAGES

    all_sections = stage_sections()
    stage_section = {s.name: s.section for s in STAGES if s.name != s.section}  # seed → workspace
    shared = {k: v for k, v in data.items() if k in PipelineConfig.model_fields}
    for key, sec in stage_section.items():
        if isinstance(shared.get(key), dict):  # `--set seed.num_actors=2`: the stage's options live in its section
            add((key,), f"is a shared value, not a section: the {key} stage's options are under {sec} "
                        f"(e.g. {sec}.{next(iter(shared[key]))})")
            shared.pop(key)
    collect(PipelineConfig, shared, ())
    for key in data:
        if key not in PipelineConfig.model_fields and key not in all_sections:
            add((str(key),), "unknown key (allowed: " + ", ".join([*PipelineConfig.model_fields, *all_sections])
                + ")")
    present = [k for k in all_sections if k in data]
    models = section_models([k for k in present if sections is None or k in sections])
    for key in present:
        value = data[key] if data[key] is not None else {}
        if not isinstance(value, dict):
            allowed = f" (allowed: {', '.join(models[key].model_fields)})" if key in models else ""
            add((key,), f"must be a mapping of {key} options{allowed}")
        elif key in models:
            collect(models[key], value, (key,))
    if problems:
        raise UserError("; ".join(problems))


def _field_names(model: type[BaseModel], loc: tuple[str, ...]) -> list[str]:
    """The field names of the (nested) model at ``loc`` inside ``model`` ([] when it is not a model)."""
    import typing

    parts = list(loc)
    while parts:
        field = model.model_fields.get(parts.pop(0))
        if field is None:
            return []
        cands = [field.annotation, *typing.get_args(field.annotation)]
        if typing.get_origin(field.annotation) is dict and parts:  # dict[str, Model]: skip the key
            parts.pop(0)
        nested = [c for c in cands if isinstance(c, type) and issubclass(c, BaseModel)]
        if not nested:
            return []
        model = nested[0]
    return list(model.model_fields)
