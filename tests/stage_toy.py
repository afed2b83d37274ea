"""A toy stage for tests/test_stage_contract.py: adding a stage is its class and one line of ``STAGES``.

Items are the integers ``0 … n-1`` (``toy.n``), grouped into tasks of ``toy.batch`` items; the worker writes
``toy/<k>.txt`` holding the item's square and raises on ``toy.fail_on``; with ``toy.input`` every item names that
run path as its input; ``finish`` writes ``toy/index.json`` (the
squares of the finished items) and reports the items squared now from the runner's counts.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from filegram_ray.stages.base import Row, Stage, StageOptions, WorkerSpec

CLOSED: list[str] = []  # run directories whose stage instance was closed (in this process)
TASK_SIZES: list[int] = []  # the size of every task a worker was given (serial executor: this process)


class ToyConfig(StageOptions):
    n: int = Field(4, ge=0, description="number of items")
    batch: int = Field(2, ge=1, description="items per task")
    fail_on: int | None = Field(None, description="the item whose worker raises")
    force: bool = Field(False, description="redo finished items")
    input: str | None = Field(None, description="a run path every item names as its input (its bytes decide them)")


class ToyWorker:
    def __init__(self, run_uri: str, fail_on: int | None):
        from filegram_ray.storage import RunDir

        self.run, self.fail_on, self.ready = RunDir(run_uri), fail_on, False

    def setup(self) -> None:
        self.ready = True

    def process_task(self, items: list[dict[str, Any]]):
        TASK_SIZES.append(len(items))
        for item in items:
            try:
                yield item["unit_id"], self.process(item)
            except Exception as exc:  # noqa: BLE001 - reported as the item's error row by the executor
                yield item["unit_id"], exc

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        if not self.ready:
            raise RuntimeError("setup() was not called")
        k = int(item["k"])
        if k == self.fail_on:
            raise ValueError(f"item {k} is the one that fails")
        self.run.write_bytes(f"toy/{k}.txt", f"{k * k}\n".encode())
        return {"square": k * k}


class ToyStage(Stage):
    name = "toy"
    Config = ToyConfig
    starts_run = True  # it reads nothing of a run
    steps = ("squares",)

    @classmethod
    def add_arguments(cls, parser) -> None:
        parser.add_argument("--n", type=int, default=None, help="number of items")

    @classmethod
    def from_arguments(cls, args) -> tuple[dict[str, Any], dict[str, Any]]:
        return {}, ({"n": args.n} if args.n is not None else {})

    def items(self, step: str) -> list[dict[str, Any]]:
        extra = {"inputs": [self.opts.input]} if self.opts.input else {}
        return [{"unit_id": f"u{k}", "k": k, "outputs": [f"toy/{k}.txt"], **extra} for k in range(self.opts.n)]

    def tasks(self, step: str, items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        b = self.opts.batch
        return [items[i:i + b] for i in range(0, len(items), b)]

    def worker(self, step: str) -> WorkerSpec:
        return WorkerSpec(ToyWorker, {"run_uri": self.run.uri, "fail_on": self.opts.fail_on}, num_actors=2,
                          num_cpus=0.5)

    def finish(self, rows: list[Row]) -> dict[str, Any]:
        squares = {r.unit: r["square"] for r in rows if r.ok}
        self.run.write_json("toy/index.json", squares)
        return {"squares": len(squares), "squared_now": self.counts["squares"].done}

    def close(self) -> None:
        CLOSED.append(self.run.uri)
