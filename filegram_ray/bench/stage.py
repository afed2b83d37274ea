"""The bench stage: build FileGramBench from a run directory's trajectories (reference §9).

Reads ``trajectories/index.parquet`` (+ perturbed trajectories' ``meta.json``), ``engrams/*/*.json`` fingerprints
when present and ``derivatives/index.parquet`` when present (FileGrd); profiles and tasks come from the configured
sets. Default item targets scale to the profiles × tasks the run holds (the ``generate`` record in ``run.json``,
else its trajectory index; ``--profiles``/``--tasks`` narrow further); distractor profiles come from the whole set.
Writes, each atomically:

* ``bench/answers_key.parquet`` — ground truth (:class:`~filegram_ray.bench.schema.AnswerKey` rows);
* ``bench/items.parquet`` — public fields + routing (:meth:`~filegram_ray.bench.schema.Item.to_row`);
* ``bench/stats.json`` — targets, built counts and notes per sub-task; counts per track / sub-task / channel;
* a ``bench`` record in ``run.json`` (written by the stage runner).

The bank is a pure function of (inputs, seed, options): a rerun rewrites identical bytes. Building is light
(≈ 5 s for 640 trajectories on one core), so it runs in-process: the stage's one item is the bank, built again on
every run (not resumable: nothing to gain from skipping it, and its inputs are many tables).

Config section ``bench:`` (:class:`BenchConfig`).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, field_validator

from filegram_ray.bench.inputs import load_bench_inputs
from filegram_ray.errors import UserError
from filegram_ray.stages.base import Row, Stage, StageOptions, WorkerSpec
from filegram_ray.stages.runner import stage_function

if TYPE_CHECKING:  # imported where used: `filegram bench --help` loads no heavy library
    import polars as pl

    from filegram_ray.bench.bank import Bank

log = logging.getLogger(__name__)
STAGE = "bench"


class BenchConfig(StageOptions):
    """Options of the bench stage (``bench:`` section; it always builds in this process, whatever the executor)."""

    sub_tasks: list[str] = Field(default_factory=lambda: list(_default_subtasks()), min_length=1,
                                 description="sub-tasks to build (reference §9.1 abbreviations)")
    counts: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict,
                                   description="per-sub-task item targets; default = paper count scaled to the set")
    seed: int | None = Field(None, description="bank seed; None = the pipeline seed")

    @field_validator("sub_tasks", "counts")
    @classmethod
    def _known_sub_tasks(cls, v):
        from filegram_ray.bench.builders import check_sub_tasks

        check_sub_tasks(v)
        return v


def _default_subtasks() -> tuple[str, ...]:
    from filegram_ray.bench.bank import DEFAULT_SUBTASKS

    return DEFAULT_SUBTASKS


def _items_table(bank: Bank) -> pl.DataFrame:
    import polars as pl

    rows = [it.to_row() for it in bank.items]
    schema = {"question_id": pl.Utf8, "track": pl.Utf8, "sub_track": pl.Utf8, "sub_class": pl.Utf8,
              "channel": pl.Utf8, "setting": pl.Utf8, "profile_id": pl.Utf8, "input_trajectories": pl.Utf8,
              "question": pl.Utf8, "choices": pl.Utf8, "n_choices": pl.Int64, "correct": pl.Utf8,
              "context": pl.Utf8, "metadata": pl.Utf8}
    return pl.DataFrame(rows, schema=schema)


def _keys_table(bank: Bank) -> pl.DataFrame:
    import polars as pl

    schema = {"question_id": pl.Utf8, "correct": pl.Utf8, "correct_text": pl.Utf8, "facts": pl.Utf8,
              "distractor_profiles": pl.Utf8}
    return pl.DataFrame([k.to_row() for k in bank.keys], schema=schema)


def counts_table(items: pl.DataFrame) -> str:
    """A printable table of item counts per track, sub-task and channel (from an items table)."""
    lines = []
    for col, title in (("track", "track"), ("sub_track", "sub-task"), ("channel", "channel"),
                       ("setting", "setting")):
        if col not in items.columns:
            continue
        agg = items.group_by(col).len().sort(col)
        lines.append(f"{title:<18} {'items':>7}")
        for name, n in agg.iter_rows():
            lines.append(f"  {name:<16} {n:>7}")
    cross = items.group_by(["sub_track", "channel"]).len().sort(["sub_track", "channel"])
    lines.append(f"{'sub-task × channel':<26} {'items':>7}")
    for st, ch, n in cross.iter_rows():
        lines.append(f"  {st + ' / ' + ch:<24} {n:>7}")
    lines.append(f"{'total':<18} {items.height:>7}")
    return "\n".join(lines)


class BankWorker:
    """The bench stage's one item, in this process: build the bank from ``inputs`` (:func:`build_bank`), check it
    (:func:`check_bank`: a bank with a leak or a broken key is not written) and write the tables.

    Raises (the item's error row; the stage then fails naming it):
        UserError: no item built (0 of N fails loudly). BankValidityError: the built bank fails its check.
    """

    def __init__(self, run, inputs, seed: int, sub_tasks: list[str], counts: dict[str, int]):
        self.run, self.inputs, self.seed, self.sub_tasks, self.counts = run, inputs, seed, sub_tasks, counts

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        from filegram_ray.bench.bank import build_bank

        inputs, run = self.inputs, self.run
        bank = build_bank(inputs, self.seed, sub_tasks=self.sub_tasks, counts=self.counts)
        if not bank.items:
            notes = "; ".join(f"{name}: {st.get('note')}" for name, st in bank.stats.items())
            raise UserError(f"bench: 0 items built from {len(inputs.trajectories)} usable trajectories ({notes})")
        check_bank(bank, inputs)
        items = _items_table(bank)
        run.write_table("bench/answers_key.parquet", _keys_table(bank))
        run.write_table("bench/items.parquet", items)
        counts = {k: dict(sorted(v.items())) for k, v in bank.counts().items()}
        stats = {"seed": self.seed, "sub_tasks": bank.stats, "counts": counts, "n_profiles": inputs.n_profiles,
                 "n_tasks": inputs.n_tasks, "n_trajectories": len(inputs.trajectories)}
        if inputs.skipped:  # only then, so a clean run's stats.json keeps its bytes
            stats["skipped_trajectories"] = inputs.skipped
        run.write_json("bench/stats.json", stats)
        return {"n_items": len(bank.items), "sub_tasks": bank.stats, "counts": counts,
                "counts_table": counts_table(items)}


class BenchStage(Stage):
    """Bench: one item, the bank (built in the driver: a pure function of the run's trajectories, ≈ 5 s for 640 on
    one core). :meth:`check` loads the inputs; :class:`BankWorker` builds, checks and writes the bank; :meth:`finish`
    prints the summary.

    A trajectory whose ``meta.json`` or Engram is malformed is left out (one bad trajectory never stops the
    stage): it is listed with the error naming the file and field in ``bench/stats.json``
    (``skipped_trajectories``), in the ``run.json`` record and on stdout.

    The record: ``{"n_items", "seed", "sub_tasks", "counts", "skipped_trajectories"}`` and the runner's fields.

    Raises:
        UserError: an unknown profile/task id in the config (short ids such as ``p1`` resolve as in generate), no
            usable trajectory (:meth:`check`), or a bank that could not be built (:meth:`finish`, naming the
            error row: no item built; a bank that fails its validity check, a builder bug, keeps its traceback in
            ``errors/bench.parquet``).
        StorageError: ``trajectories/index.parquet`` is missing (run the generate stage first).
    """

    name = STAGE
    Config = BenchConfig
    in_process = True
    resumable = False
    steps = ("banks",)

    def check(self) -> None:
        """Load the bank's inputs: the run's trajectories (of the configured profiles and tasks) and the sets."""
        config, opts, run = self.config, self.opts, self.run
        self.seed = opts.seed if opts.seed is not None else config.seed
        profiles_dir, tasks_dir = config.profiles_dir, config.tasks_dir
        held_p: list[str] = []
        held_t: list[str] = []
        if run.exists("run.json"):  # default to the profile/task sets the trajectories were generated from
            from filegram_ray.schema.meta import read_manifest

            gen = (read_manifest(run).get("stages") or {}).get("generate") or {}
            if profiles_dir is None and gen.get("profiles_dir"):
                profiles_dir = gen["profiles_dir"]
                print(f"bench: using the profile set the run was generated from: {profiles_dir}")
            if tasks_dir is None and gen.get("tasks_dir"):
                tasks_dir = gen["tasks_dir"]
            if gen:
                # the ids the run holds: default counts scale to them (each builder's COUNTS: the paper's count ×
                # profiles × tasks / (20 × 32)), distractor profiles still come from the whole set; a run generated
                # before the record held them: the ids of its trajectory index
                held_p, held_t = list(gen.get("profiles") or []), list(gen.get("tasks") or [])
                if (not held_p or not held_t) and run.exists("trajectories/index.parquet"):
                    idx = run.read_table("trajectories/index.parquet")
                    if {"profile_id", "task_id"} <= set(idx.columns):
                        held_p = held_p or sorted({str(x) for x in idx["profile_id"].to_list()})
                        held_t = held_t or sorted({str(x) for x in idx["task_id"].to_list()})
        inputs = load_bench_inputs(run, profiles_dir=profiles_dir, tasks_dir=tasks_dir,
                                   profile_ids=config.profiles)
        inputs = dataclasses.replace(inputs, run_profiles=frozenset(held_p), run_tasks=frozenset(held_t))
        if config.tasks:
            from filegram_ray.config import match_ids

            keep = set(match_ids(config.tasks, [t.task_id for t in inputs.tasks], "tasks", "the task set"))
            inputs = dataclasses.replace(
                inputs, tasks=[t for t in inputs.tasks if t.task_id in keep],
                trajectories=[t for t in inputs.trajectories if t.task_id in keep],
                skipped=[s for s in inputs.skipped if s["trajectory_id"].rpartition("/")[2] in keep],
                recordings={k: v for k, v in inputs.recordings.items() if k.rsplit("/", 1)[-1] in keep})
        skipped = inputs.skipped
        if not inputs.trajectories:  # 0 of N: a bank built from nothing must not look like a success
            bad = (f"; {len(skipped)} left out for a malformed file, first: {skipped[0]['error']}" if skipped else "")
            raise UserError(f"bench: no usable trajectory for {len(inputs.profiles)} profiles x {len(inputs.tasks)} "
                            f"tasks in {run.url('trajectories/index.parquet')} (none generated with status ok, or "
                            f"the configured profiles/tasks select none{bad})")
        self.inputs = inputs

    def items(self, step: str) -> list[dict[str, Any]]:
        return [{"unit_id": "bank"}]

    def worker(self, step: str) -> WorkerSpec:
        return WorkerSpec(BankWorker, {"run": self.run, "inputs": self.inputs, "seed": self.seed,
                                       "sub_tasks": self.opts.sub_tasks, "counts": self.opts.counts})

    def finish(self, rows: list[Row]) -> dict[str, Any]:
        (row,) = rows
        if not row.ok:
            raise UserError(f"bench: the bank could not be built: {row.get('error_type')}: {row.get('error')} "
                            f"(traceback in {self.run.url('errors/bench.parquet')})")
        inputs, skipped = self.inputs, self.inputs.skipped
        print(f"bench: {row['n_items']} items from {inputs.n_profiles} profiles × {inputs.n_tasks} tasks "
              f"({len(inputs.trajectories)} usable trajectories), seed {self.seed}; targets scaled to that set "
              "(VisGrd's is the paper's 100, bounded by the recordings)"
              + (f", distractor profiles drawn from all {len(inputs.profiles)}"
                 if inputs.n_profiles < len(inputs.profiles) else ""))
        for sk in skipped:
            print(f"bench: left out {sk['trajectory_id']}: {sk['error']}")
        print(f"{'sub-task':<10} {'target':>7} {'built':>7}  note")
        for name, st in row["sub_tasks"].items():
            print(f"{name:<10} {st['target']:>7} {st['built']:>7}  {st['note']}")
        print(row["counts_table"])
        return {"seed": self.seed, "n_items": row["n_items"], "sub_tasks": row["sub_tasks"], "counts": row["counts"],
                "skipped_trajectories": skipped}


class BankValidityError(RuntimeError):
    """A built bank fails its validity check (a builder bug, not a user mistake: it keeps its traceback)."""


def check_bank(bank: Bank, inputs) -> None:
    """Run :func:`~filegram_ray.bench.validate.validate_items` on ``bank`` with the set's profile ids and names.

    Raises:
        BankValidityError: any problem (the first ten are named)."""
    from filegram_ray.bench.validate import validate_items

    problems = validate_items(bank.items, bank.keys, profile_ids=[p.profile_id for p in inputs.profiles],
                              profile_names=[getattr(p, "name", "") for p in inputs.profiles])
    if problems:
        shown = "; ".join(f"{p.question_id} {p.code}: {p.detail}" for p in problems[:10])
        raise BankValidityError(f"bench: the built bank fails its validity check ({len(problems)} problems): {shown}")


run_bench = stage_function(BenchStage)
