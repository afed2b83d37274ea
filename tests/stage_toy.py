"""A toy stage for tests/test_stage_contract.py: adding a stage is its class and one line of ``STAGES``.

Units are the integers ``0 … n-1`` (``toy.n``); the worker writes ``toy/<unit>.txt`` holding the unit's square and
raises on ``toy.fail_on``; ``finish`` writes ``toy/index.json`` (the squares of the finished units).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from filegram_ray.stages.base import Row, Stage, WorkerSpec

CLOSED: list[str] = []  # run directories whose stage instance was closed (in this process)


class ToyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = Field(4, ge=0, description="number of units")
    fail_on: int | None = Field(None, description="the unit whose worker raises")
    serial: bool = Field(False, description="run in this process without Ray")
    executor: str | None = Field(None, description="actor-pool | ray-data")
    force: bool = Field(False, description="redo finished units")


class ToyWorker:
    def __init__(self, run_uri: str, fail_on: int | None):
        from filegram_ray.storage import RunDir

        self.run, self.fail_on, self.ready = RunDir(run_uri), fail_on, False

    def setup(self) -> None:
        self.ready = True

    def process(self, unit: dict[str, Any]) -> dict[str, Any]:
        if not self.ready:
            raise RuntimeError("setup() was not called")
        k = int(unit["k"])
        if k == self.fail_on:
            raise ValueError(f"unit {k} is the one that fails")
        self.run.write_bytes(f"toy/{k}.txt", f"{k * k}\n".encode())
        return {"square": k * k}


class ToyStage(Stage):
    name = "toy"
    Config = ToyConfig
    starts_run = True  # it reads nothing of a run

    @classmethod
    def add_arguments(cls, parser) -> None:
        parser.add_argument("--n", type=int, default=None, help="number of units")

    @classmethod
    def from_arguments(cls, args) -> tuple[dict[str, Any], dict[str, Any]]:
        return {}, ({"n": args.n} if args.n is not None else {})

    def plan(self) -> list[dict[str, Any]]:
        return [{"unit_id": f"u{k}", "k": k} for k in range(self.opts.n)]

    def worker(self) -> WorkerSpec:
        return WorkerSpec(ToyWorker, {"run_uri": self.run.uri, "fail_on": self.opts.fail_on}, num_actors=2,
                          num_cpus=0.5)

    def finish(self, rows: list[Row]) -> dict[str, Any]:
        squares = {r.unit: r["square"] for r in rows if r.ok}
        self.run.write_json("toy/index.json", squares)
        return {"squares": len(squares)}

    def close(self) -> None:
        CLOSED.append(self.run.uri)
