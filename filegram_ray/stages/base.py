"""The stage contract: what a stage computes, apart from where it runs (the split of datatrove's pipeline steps
from their executors).

A stage is a :class:`Stage` subclass and one line of :data:`filegram_ray.stage_list.STAGES` (its name, class and
config section). The class declares its ``name``, a pydantic ``Config`` (a :class:`StageOptions`: every stage has
the one ``executor`` setting) whose fields carry descriptions, and the **items** it is made of:

* an *item* is what a rerun skips and what the record counts: a task bundle, a trajectory, a derivative, a
  recording, a method × context spec. It is a dict with a unique ``unit_id`` string and, optionally, ``key`` (what
  made it: a finished item whose completion record holds another key is done again), ``inputs`` (run paths whose
  bytes decide it: the runner folds their digest into the key, so an item is done again when an upstream stage
  rewrote one of them with other content) and ``outputs`` (paths that must exist for it to count as finished);
* a *task* is what one worker call gets: one item by default, or a group the stage declares (a batch of
  derivatives of one renderer group, the methods of one context spec, a shard of LLM trajectories);
* a *step* is one round of items on one worker; most stages have one (:attr:`Stage.steps`), encode has two (its
  profiles are consolidated from the trajectories the first step encoded).

:func:`filegram_ray.stages.runner.run_stage` alone holds the run directory, skips finished items, writes each
finished item's completion record, turns a failing item into an error row (:meth:`Row.error`, written to
``errors/<stage>.parquet``), counts the items and writes the stage's :class:`StageRecord` into ``run.json`` once —
with ``status: failed`` when the stage raised. The executors (:mod:`filegram_ray.stages.executors`: serial, actor
pool, Ray Data, and the model-call executor for a ``ray.data.llm`` processor) run a :class:`WorkerSpec` or a
:class:`ModelCallSpec` over tasks and never name a stage.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:
    from filegram_ray.config import PipelineConfig
    from filegram_ray.storage import RunDir

__all__ = ["ERROR_KEYS", "EXECUTOR_NAMES", "Executor", "ModelCallSpec", "Row", "Stage", "StageOptions",
           "StageRecord", "UnitCounts", "WorkerSpec"]

#: the fields an error row adds to ``unit`` and ``status``
ERROR_KEYS = ("stage", "error_type", "error", "traceback")
#: characters of an error message / traceback kept in an error row
ERROR_CHARS, TRACEBACK_CHARS = 2000, 4000
#: the executors a stage section's ``executor`` may name (``--serial`` is ``executor: serial``)
EXECUTOR_NAMES = ("serial", "actor-pool", "ray-data")


class Row(dict):
    """One item's result, the one row shape every stage and executor shares: ``unit`` (the item's ``unit_id``),
    ``status`` (``"ok"`` or ``"error"``), the worker's own fields; a row the runner did not run because an earlier
    run finished the item has ``skipped: True`` and its completion record's fields; an error row carries
    :data:`ERROR_KEYS` (``error`` ≤ 2,000 characters, ``traceback`` its last 4,000).

    A ``dict`` (rows cross process boundaries and stages read them with ``row.get``)."""

    @property
    def unit(self) -> str:
        return str(self.get("unit"))

    @property
    def ok(self) -> bool:
        return self.get("status") == "ok"

    @property
    def error_line(self) -> str:
        """``"<exception type>: <message>"`` of an error row (≤ 2,000 characters): how a stage's own tables and
        reports show the error (its cause read from the type)."""
        kind = self.get("error_type")
        return (f"{kind}: {self.get('error')}" if kind else str(self.get("error") or ""))[:ERROR_CHARS]

    @classmethod
    def of(cls, unit_id: str, fields: dict[str, Any] | None) -> Row:
        """A worker's result as a row: its fields, then ``unit`` and ``status: ok`` (a worker reports a failure by
        raising, never by a field: a ``status`` of its own is overwritten)."""
        row = cls(fields or {})
        row["unit"], row["status"] = unit_id, "ok"
        return row

    @classmethod
    def error(cls, unit_id: str, exc: BaseException, label: str) -> Row:
        """The row of an item whose worker raised ``exc`` (``label``: the stage name, for the reader)."""
        return cls(unit=unit_id, status="error", stage=label, error_type=type(exc).__name__,
                   error=str(exc)[:ERROR_CHARS],
                   traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-TRACEBACK_CHARS:])


class UnitCounts(BaseModel):
    """The ``units`` field of every stage record: items the stage was given (``planned``), finished now
    (``done``), left alone because an earlier run finished them (``skipped``), ended as error rows (``failed``)."""

    model_config = ConfigDict(extra="forbid")
    planned: int = Field(0, ge=0, description="items the stage was given")
    done: int = Field(0, ge=0, description="items finished by this run")
    skipped: int = Field(0, ge=0, description="items an earlier run had finished")
    failed: int = Field(0, ge=0, description="items that ended as error rows")

    def __add__(self, other: UnitCounts) -> UnitCounts:
        return UnitCounts(**{k: getattr(self, k) + getattr(other, k) for k in type(self).model_fields})


class StageRecord(BaseModel):
    """What ``run.json`` holds of one stage (``stages.<name>``), written once per stage by the runner: the
    measurements (:class:`~filegram_ray.stages.meter.StageMeter`: wall ``seconds``, ``cpu_s`` of the process tree,
    ``peak_memory_mb`` / ``driver_peak_memory_mb`` in MiB), the :class:`UnitCounts` (every step's items; per step
    in ``steps`` when the stage has more than one), the executor, the number of error rows, whether the stage
    finished (``status``) and the stage's own summary fields (kept at the top level of the record, beside these)."""

    model_config = ConfigDict(extra="allow")
    status: Literal["ok", "failed"] = Field("ok", description="ok, or failed: the stage raised (its error in "
                                                              "'error'; the items it finished are kept)")
    seconds: float = Field(0.0, description="wall seconds of the stage")
    cpu_s: float = Field(0.0, description="CPU seconds of this process and every process below it")
    peak_memory_mb: float = Field(0.0, description="largest PSS sum of the process tree, MiB")
    driver_peak_memory_mb: float = Field(0.0, description="largest PSS of the driver process, MiB")
    units: UnitCounts = Field(default_factory=UnitCounts)
    steps: dict[str, UnitCounts] | None = Field(None, description="the counts per step (stages with several)")
    executor: str = Field("", description="serial | actor-pool | ray-data | in-process, + model-call")
    n_errors: int = Field(0, ge=0, description="error rows of this run (errors/<stage>.parquet)")


class StageOptions(BaseModel):
    """The base of every stage's ``Config``: the one executor setting. A section's old ``serial: true`` is refused
    with a line naming ``executor: serial``."""

    model_config = ConfigDict(extra="forbid")
    executor: Literal["serial", "actor-pool", "ray-data"] = Field(
        "actor-pool", description="where the items run: serial (this process, no Ray; --serial), actor-pool "
        "(ray.util.ActorPool), ray-data (Ray Data map_batches on an actor pool)")

    @model_validator(mode="before")
    @classmethod
    def _serial_is_executor(cls, data: Any) -> Any:
        if isinstance(data, dict) and "serial" in data:
            raise ValueError("the key 'serial' is now 'executor': write executor: serial (or "
                             "--set <section>.executor=serial, or --serial) instead of serial: true")
        return data


@dataclass
class WorkerSpec:
    """How to run a stage's worker: ``cls(**kwargs)`` once per process (then ``setup()`` if it has one), then per
    task either ``process_task(items)`` — an iterable of ``(unit_id, fields or exception)``, one per item — or, for
    a worker without it, ``process(item) -> fields`` per item (an exception is that item's error row).
    ``num_actors`` / ``num_cpus`` are what the actor-pool and Ray Data executors ask Ray for (the serial executor
    runs one worker in the driver); ``env_vars`` are set in the actors' environment; ``max_restarts`` is how often
    a task whose worker process died is run again (then a task of several items is split into one task per item,
    so that one item that kills its worker takes no other item with it, and a single item that still does is an
    error row naming it)."""

    cls: type
    kwargs: dict[str, Any] = field(default_factory=dict)
    num_actors: int = 1
    num_cpus: float = 1.0
    env_vars: dict[str, str] = field(default_factory=dict)
    max_restarts: int = 3


@dataclass
class ModelCallSpec:
    """A stage's model calls, declared (the ``ray.data.llm`` processor style) and run by the model-call executor:

    * ``prepare`` — a :class:`WorkerSpec` whose worker turns one item into ``{"requests": [request rows, each with
      a unique "req_key"], "state": {…}}`` (prompts built from a method's context, keyframes of a recording); it
      runs on the stage's executor, and an item whose ``prepare`` raises is an error row;
    * ``call`` — request rows → reply rows (each with its ``req_key``), a processor built with ``build_processor``
      over an engine or an HTTP config (:func:`filegram_ray.llm.processors.run_chat`,
      :func:`video.vlm.run_vlm`): a failed request is a reply with its ``error``, never an exception;
    * ``collect`` — ``(item, state, requests, replies)`` → the item's row fields, in the driver once every reply of
      the item is in: it writes the item's outputs (an exception is the item's error row);
    * ``wave`` — items whose requests the driver holds at once.
    """

    prepare: WorkerSpec
    call: Callable[[list[dict[str, Any]]], Iterable[dict[str, Any]]]
    collect: Callable[[dict[str, Any], dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]
    wave: int = 64


class Executor(Protocol):
    """Where tasks run (:mod:`filegram_ray.stages.executors`): ``map(spec, tasks, label=..., noun=...,
    on_row=...)`` takes tasks ``{"task_id", "items": [...]}`` and returns one :class:`Row` per item in completion
    order; ``name`` goes into the stage record; ``uses_ray`` says whether the runner must connect to Ray first. An
    executor never names a stage (``label`` is for progress lines and error rows)."""

    name: str
    uses_ray: bool

    def map(self, spec: WorkerSpec, tasks: list[dict[str, Any]], *, label: str, noun: str = "items",
            on_row: Callable[[Row], None] | None = None) -> list[Row]: ...


class Stage:
    """Base class of a pipeline stage (see the module docstring). Subclasses set the class attributes and
    override the hooks they need — :meth:`add_arguments`, :meth:`from_arguments`, :meth:`check`, :meth:`items`,
    :meth:`tasks`, :meth:`worker`, :meth:`finish`, :meth:`close` (eight; the runner does the rest). One instance
    serves one run of the stage; its attributes:

    * ``config`` — the :class:`~filegram_ray.config.PipelineConfig`;
    * ``opts`` — the stage's section validated by ``Config``;
    * ``run`` — the :class:`~filegram_ray.storage.RunDir`;
    * ``uses_ray`` — whether the items run on Ray (the executor is not the serial one);
    * ``rows`` — ``{step: rows of its items, in item order}``, filled by the runner after each step;
    * ``counts`` — ``{step: its UnitCounts}``, filled by the runner after each step: a summary that reports how
      many items were done, skipped or failed reads them here and never counts its rows again.
    """

    #: the stage's name: ``filegram run <name>``, ``jobs/<name>.py``, ``run.json`` ``stages.<name>``, ``_done/<name>/``
    name: ClassVar[str]
    #: the stage's options (a :class:`StageOptions`); fields carry descriptions (``filegram config`` and the docs)
    Config: ClassVar[type[BaseModel]]
    #: package extras the stage needs (``pip install 'filegram-ray[<extra>]'``), checked before it starts
    extras: ClassVar[tuple[str, ...]] = ()
    #: whether the stage may start a new run directory: True, or the name of a field of its section that, when
    #: set, lets it (caption: ``inputs``); else a missing local run directory is refused
    starts_run: ClassVar[bool | str] = False
    #: a stage that never uses Ray runs its items in the driver whatever the executor
    in_process: ClassVar[bool] = False
    #: whether finished items are skipped on a rerun (False: every item is done again and no completion record is
    #: written — a stage that is a pure function of its inputs and cheap)
    resumable: ClassVar[bool] = True
    #: the stage's steps, in order, each named by what one of its items is (progress lines, ``steps`` counts)
    steps: ClassVar[tuple[str, ...]] = ("items",)
    #: which failed items make the job exit 1: ``any`` item, ``all`` items (none finished), or ``never`` (a stage
    #: whose error rows are part of its results)
    exit_on: ClassVar[Literal["any", "all", "never"]] = "any"

    def __init__(self, config: PipelineConfig, opts: BaseModel, run: RunDir, uses_ray: bool = False):
        self.config, self.opts, self.run, self.uses_ray = config, opts, run, uses_ray
        self.rows: dict[str, list[Row]] = {}
        self.counts: dict[str, UnitCounts] = {}

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

    # -- one run -------------------------------------------------------------------------------------------------
    def check(self) -> None:
        """Read the stage's inputs and refuse what would fail every item (a missing or malformed table of an
        earlier stage, an unknown option combination, a server that does not answer) before any item runs; raises
        :class:`~filegram_ray.errors.UserError`. Plans nothing. Default: nothing."""

    def items(self, step: str) -> list[dict[str, Any]]:
        """The items of ``step`` (one of :attr:`steps`), each a dict with a unique ``unit_id`` (and optionally
        ``key`` and ``outputs``, module docstring), in the order they should start; every item, finished or
        not — the runner skips the finished ones."""
        return []

    def tasks(self, step: str, items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """The unfinished ``items`` of ``step`` grouped into tasks, in the order they should start (every item in
        exactly one task). Default: one task per item."""
        return [[it] for it in items]

    def worker(self, step: str) -> WorkerSpec | ModelCallSpec:
        """What processes the tasks of ``step``: a :class:`WorkerSpec`, or a :class:`ModelCallSpec` for items
        answered by a language or vision-language model."""
        raise NotImplementedError(f"{type(self).__name__}.worker")

    def finish(self, rows: list[Row]) -> dict[str, Any]:
        """After every item has a row (ok, skipped or error; step by step, items in order): write the stage's
        tables from the rows, print its summary and return the summary fields of its record. Default: ``{}``."""
        return {}

    def close(self) -> None:
        """Release what :meth:`check` started (servers, temporary folders); the runner always calls it, after
        :meth:`finish` or when the stage fails. Default: nothing."""
