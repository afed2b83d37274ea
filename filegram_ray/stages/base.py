"""The stage contract: what a stage computes, apart from where it runs (issue #29; the split of datatrove's
pipeline steps from their executors).

A stage is a :class:`Stage` subclass and one line of :data:`filegram_ray.pipeline.STAGES` (its name, class and
config section). The class declares its ``name``, a pydantic ``Config`` whose fields carry descriptions, the package extras it needs, and three steps:

* :meth:`Stage.plan` — the work units (dicts with a unique ``unit_id``), from the config and the run directory;
* :meth:`Stage.worker` — a :class:`WorkerSpec`: the worker class (``__init__(**kwargs)``, optional ``setup()``,
  ``process(unit) -> dict``) that an executor runs once per unit, and the resources it asks for;
* :meth:`Stage.finish` — after every unit has a :class:`Row`: index tables, the summary printed and returned.

:func:`filegram_ray.stages.runner.run_stage` alone holds the run directory's lock, checks the seed, skips finished
units (:meth:`Stage.finished`), writes the completion record of each finished unit, turns a failing unit into an
error row, measures the stage and writes its :class:`StageRecord` into ``run.json`` once. The executors
(:mod:`filegram_ray.stages.executors`: serial, actor pool, Ray Data) run a :class:`WorkerSpec` over units and never
name a stage.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from filegram_ray.config import PipelineConfig
    from filegram_ray.storage import RunDir

__all__ = ["Row", "UnitCounts", "StageRecord", "WorkerSpec", "Executor", "Stage", "ERROR_KEYS"]

#: the fields an error row adds to ``unit`` and ``status``
ERROR_KEYS = ("stage", "error_type", "error", "traceback")
#: characters of an error message / traceback kept in an error row
ERROR_CHARS, TRACEBACK_CHARS = 2000, 4000


class Row(dict):
    """One unit's result, the one row shape every stage and executor shares: ``unit`` (the unit id), ``status``
    (``"ok"`` or ``"error"``), the worker's own fields; a row the runner did not run because an earlier run
    finished the unit has ``skipped: True`` and its completion record's fields; an error row carries
    :data:`ERROR_KEYS` (``error`` ≤ 2,000 characters, ``traceback`` its last 4,000).

    A ``dict`` (rows cross process boundaries and stages read them with ``row.get``)."""

    @property
    def unit(self) -> str:
        return str(self.get("unit"))

    @property
    def ok(self) -> bool:
        return self.get("status") == "ok"

    @classmethod
    def of(cls, unit_id: str, fields: dict[str, Any] | None) -> Row:
        """A worker's result as a row: its fields, ``unit`` and ``status`` (``ok``) unless it set them."""
        row = cls(fields or {})
        row.setdefault("unit", unit_id)
        row.setdefault("status", "ok")
        return row

    @classmethod
    def error(cls, unit_id: str, exc: BaseException, label: str) -> Row:
        """The row of a unit whose worker raised ``exc`` (``label``: the stage name, for the reader)."""
        return cls(unit=unit_id, status="error", stage=label, error_type=type(exc).__name__,
                   error=str(exc)[:ERROR_CHARS],
                   traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-TRACEBACK_CHARS:])


class UnitCounts(BaseModel):
    """The ``units`` field of every stage record (issue 17): units the stage was given (``planned``), finished now
    (``done``), left alone because an earlier run finished them (``skipped``), ended as error rows (``failed``)."""

    model_config = ConfigDict(extra="forbid")
    planned: int = Field(0, ge=0, description="units the stage was given")
    done: int = Field(0, ge=0, description="units finished by this run")
    skipped: int = Field(0, ge=0, description="units an earlier run had finished")
    failed: int = Field(0, ge=0, description="units that ended as error rows")


class StageRecord(BaseModel):
    """What ``run.json`` holds of one stage (``stages.<name>``), written once per stage by the runner: the
    measurements (:class:`~filegram_ray.stages.meter.StageMeter`: wall ``seconds``, ``cpu_s`` of the process tree,
    ``peak_memory_mb`` / ``driver_peak_memory_mb`` in MiB), the :class:`UnitCounts`, the executor, the number of
    error rows and the stage's own summary fields (kept at the top level of the record, beside these)."""

    model_config = ConfigDict(extra="allow")
    seconds: float = Field(0.0, description="wall seconds of the stage")
    cpu_s: float = Field(0.0, description="CPU seconds of this process and every process below it")
    peak_memory_mb: float = Field(0.0, description="largest PSS sum of the process tree, MiB")
    driver_peak_memory_mb: float = Field(0.0, description="largest PSS of the driver process, MiB")
    units: UnitCounts = Field(default_factory=UnitCounts)
    executor: str = Field("", description="serial | actor-pool | ray-data | in-process")
    n_errors: int = Field(0, ge=0, description="error rows of this run")


@dataclass
class WorkerSpec:
    """How to run a stage's worker: ``cls(**kwargs)`` once per process (then ``setup()`` if it has one), then
    ``process(unit) -> dict`` per unit. ``num_actors`` / ``num_cpus`` are what the actor-pool and Ray Data
    executors ask Ray for (the serial executor runs one worker in the driver); ``env_vars`` are set in the
    actors' environment; ``max_restarts`` is how often a unit whose worker process died is run again;
    ``unit_noun`` names a unit in progress lines (``"batches"`` where a unit holds several of the stage's items,
    so that ``[render] 37/37 batches`` is not read against the summary's 295 derivatives)."""

    cls: type
    kwargs: dict[str, Any] = field(default_factory=dict)
    num_actors: int = 1
    num_cpus: float = 1.0
    env_vars: dict[str, str] = field(default_factory=dict)
    max_restarts: int = 3
    unit_noun: str = "units"


class Executor(Protocol):
    """Where units run (:mod:`filegram_ray.stages.executors`): ``map(spec, units, label=..., on_row=...)`` returns
    one :class:`Row` per unit in completion order; ``name`` goes into the stage record; ``uses_ray`` says whether
    the runner must connect to Ray first. An executor never names a stage (``label`` is for progress lines)."""

    name: str
    uses_ray: bool

    def map(self, spec: WorkerSpec, units: list[dict[str, Any]], *, label: str,
            on_row: Callable[[Row], None] | None = None) -> list[Row]: ...


class Stage:
    """Base class of a pipeline stage (see the module docstring). Subclasses set the class attributes and
    override :meth:`plan`, :meth:`worker`, :meth:`finish` (and :meth:`finished` when "finished" means more than
    a completion record). One instance serves one run of the stage; its attributes:

    * ``config`` — the :class:`~filegram_ray.config.PipelineConfig`;
    * ``opts`` — the stage's section validated by ``Config``;
    * ``run`` — the :class:`~filegram_ray.storage.RunDir`;
    * ``executor`` — the :class:`Executor` the runner chose (:meth:`map` uses it
      for a second round of units inside :meth:`finish`).
    """

    #: the stage's name: ``filegram run <name>``, ``jobs/<name>.py``, ``run.json`` ``stages.<name>``, ``_done/<name>/``
    name: ClassVar[str]
    #: the stage's options; fields carry descriptions (``filegram config`` and the docs print them)
    Config: ClassVar[type[BaseModel]]
    #: package extras the stage needs (``pip install 'filegram-ray[<extra>]'``), checked before it starts
    extras: ClassVar[tuple[str, ...]] = ()
    #: whether the stage may start a new run directory (else a missing local run directory is refused)
    starts_run: ClassVar[bool] = False
    #: a stage that never uses Ray runs its units in the driver whatever the executor
    in_process: ClassVar[bool] = False

    def __init__(self, config: PipelineConfig, opts: BaseModel, run: RunDir, executor: Executor):
        self.config, self.opts, self.run, self.executor = config, opts, run, executor

    # -- declared by subclasses ---------------------------------------------------------------------------
    @classmethod
    def may_start_run(cls, config: PipelineConfig) -> bool:  # noqa: ARG003 - a subclass may read the config
        """Whether this stage may start a new run directory with ``config`` (default: :attr:`starts_run`)."""
        return bool(cls.starts_run)

    @classmethod
    def required_extras(cls, config: PipelineConfig) -> tuple[str, ...]:
        """The package extras this run of the stage needs (checked by the runner before anything starts):
        :func:`filegram_ray.extras.config_extras` for a pipeline stage — it reads the configuration (e.g.
        ``encode.embedder``, ``evaluate.methods``) — else :attr:`extras`."""
        from filegram_ray.extras import STAGE_EXTRAS, config_extras

        if cls.name in STAGE_EXTRAS:
            return config_extras(cls.name, config.model_dump(mode="json"))
        return tuple(cls.extras)

    @classmethod
    def options(cls, config: PipelineConfig, overrides: dict[str, Any] | None = None) -> BaseModel:
        """The stage's section of ``config`` (plus ``overrides``) validated by :attr:`Config`.

        Raises:
            pydantic.ValidationError: a malformed section (``load_config`` refuses it earlier with the key named).
        """
        return cls.Config.model_validate({**config.section(cls.section_name()), **(overrides or {})})

    @classmethod
    def section_name(cls) -> str:
        """The config section of the stage's options: its :data:`~filegram_ray.pipeline.STAGES` line's, else (a
        stage outside the pipeline) its name."""
        from filegram_ray.stages.registry import STAGES

        return next((s.section for s in STAGES if s.name == cls.name), cls.name)

    # -- the command line (``filegram run <name>``, ``jobs/<name>.py``) -----------------------------------------
    @classmethod
    def add_arguments(cls, parser) -> None:
        """Add the stage's own options to ``parser`` (an ``argparse.ArgumentParser`` that already has the common
        options). Default: none."""

    @classmethod
    def from_arguments(cls, args) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(shared config fields, section overrides)`` from the parsed options of :meth:`add_arguments`
        (``({"tasks": [...]}, {"num_actors": 4})``). Default: nothing."""
        return {}, {}

    @classmethod
    def exit_code(cls, record: dict[str, Any]) -> int:
        """The job's exit code for its record: 1 when a unit failed, else 0."""
        return 1 if int((record.get("units") or {}).get("failed") or 0) else 0

    @classmethod
    def after_run(cls, record: dict[str, Any], config: PipelineConfig) -> None:
        """What a stage job prints after its record (e.g. where the report is). Default: nothing."""

    def check(self) -> None:
        """Refuse input that would fail every unit (a malformed table of an earlier run, an unknown option
        combination) before any unit runs; raises :class:`~filegram_ray.errors.UserError`. Default: nothing."""

    def plan(self) -> list[dict[str, Any]]:
        """The work units, each a dict with a unique ``unit_id`` string, in the order they should start."""
        return []

    def finished(self, unit: dict[str, Any]) -> Row | None:
        """The row of a unit an earlier run finished (the runner skips it), else None. Default: the unit's
        completion record ``_done/<name>/<unit_id>.json`` unless the stage's config has ``force: true``."""
        uid = str(unit["unit_id"])
        if getattr(self.opts, "force", False) or not self.run.is_done(self.name, uid):
            return None
        rec = self.run.read_json(f"_done/{self.name}/{self._done_name(uid)}.json")
        return Row({**rec, "unit": uid, "status": "ok", "skipped": True})

    def worker(self) -> WorkerSpec | None:
        """The worker that processes one unit (None: the stage has no units)."""
        return None

    def done_record(self, row: Row) -> dict[str, Any] | None:
        """What the runner writes as the completion record of a finished unit (``_done/<name>/<unit>.json``),
        after the worker wrote the unit's outputs; None writes none. Default: the row's fields."""
        return {k: v for k, v in row.items() if k not in ("unit", "status", "stage")}

    def done_records(self, row: Row) -> dict[str, dict[str, Any]]:
        """``{unit id: completion record}`` the runner writes for a finished row: by default the row's own
        (:meth:`done_record`); a stage whose executor unit groups several resumable units (evaluate: one context
        spec, one record per method unit) returns one per finished part."""
        rec = self.done_record(row)
        return {} if rec is None else {row.unit: rec}

    def finish(self, rows: list[Row]) -> dict[str, Any]:
        """After every planned unit has a row (ok, skipped or error, in plan order): write the stage's tables,
        print its summary and return the summary fields of its record. A ``units`` key
        (:class:`UnitCounts` fields) replaces the runner's counts. Default: ``{}``."""
        return {}

    def close(self) -> None:
        """Release what :meth:`check` / :meth:`plan` started (servers, temporary folders); the runner always calls
        it, after :meth:`finish` or when the stage fails. Default: nothing."""

    # -- helpers for subclasses ------------------------------------------------------------------------------
    def map(self, spec: WorkerSpec, units: list[dict[str, Any]], *, on_row: Callable[[Row], None] | None = None,
            label: str | None = None) -> list[Row]:
        """Run ``spec`` over ``units`` on this run's executor (a second round inside :meth:`finish`); one row per
        unit, error rows included, in completion order."""
        return self.executor.map(spec, units, label=label or self.name, on_row=on_row)

    @staticmethod
    def _done_name(unit_id: str) -> str:
        from filegram_ray.storage import safe_unit_name

        return safe_unit_name(unit_id)
