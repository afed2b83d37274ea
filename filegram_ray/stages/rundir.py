"""What a stage checks of its run directory before it starts, and undoes when it started one in vain: a missing
local directory refused for a stage that reads a run (:func:`refuse_missing_run`), the run's seed
(:func:`check_run_seed`), a failed start forgotten (:func:`forget_failed_start`)."""

from __future__ import annotations

import logging
import os

from filegram_ray.errors import UserError

log = logging.getLogger(__name__)

__all__ = ["recorded_seed", "check_run_seed", "refuse_missing_run", "missing_local_dir", "missing_lock_file",
           "forget_failed_start"]


def recorded_seed(run) -> int | None:
    """The master seed a run directory was made with (``run.json`` → ``config.seed``), or None for a new run."""
    if not run.exists("run.json"):
        return None
    from filegram_ray.schema.meta import read_manifest

    cfg = read_manifest(run).get("config") or {}
    return int(cfg["seed"]) if isinstance(cfg, dict) and cfg.get("seed") is not None else None


def check_run_seed(run, config, check_ids: bool = False) -> None:
    """Refuse a config whose seed differs from the run directory's recorded seed; record it on a new run.

    A run directory holds the outputs of one plan: a stage run with another seed would add units of a second
    plan beside those of the first (REL-render-rerun-without-seed-mixes-derivatives). The job scripts default
    ``--seed`` to the recorded one (:func:`filegram_ray.jobargs.config_from_args`).

    Raises:
        ValueError: the seeds differ (names both and the run directory); with ``check_ids`` (a stage that may
            start a run, on a new one), a profile or task id that the config's sets do not have
            (:func:`~filegram_ray.config.check_sets`), before anything is written. Other stages check ids against
            the run's own outputs.
    """
    seed = recorded_seed(run)
    if seed is None:
        from filegram_ray.config import check_sets
        from filegram_ray.schema.meta import RunManifest, read_manifest

        if check_ids:  # a stage that starts the run: an unknown profile/task id is refused before it is recorded
            check_sets(config)

        man = RunManifest.model_validate(read_manifest(run))
        man.config = config.model_dump(mode="json")
        man.seed = int(config.seed)
        run.write_json("run.json", man.model_dump(mode="json"))
        return
    if seed != int(config.seed):
        raise UserError(f"{run.uri} was made with seed {seed} (run.json) but this run asks for seed {config.seed}: "
                         f"a run directory holds one plan — rerun with --seed {seed}, or use a new --run-dir")


def refuse_missing_run(config, stage: str, may_start: bool) -> None:
    """Refuse a stage that reads a run's outputs (``may_start`` false) on a local run directory that does not
    exist, before anything (``RunDir``, its lock, ``run.json``) creates it; a file in its place is refused for every
    stage. Remote URIs are not checked.

    Raises:
        NotADirectoryError: ``--run-dir`` names a file. FileNotFoundError: names the directory and the stage.
    """
    path = _local_run_path(config)
    if path is None:
        return
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotADirectoryError(f"--run-dir {path} is a file, not a run directory")
    if not may_start and not os.path.isdir(path):
        raise FileNotFoundError(f"run directory {path} does not exist: the {stage} stage reads a run's outputs — "
                                "run the pipeline (or jobs/generate.py) on it first, or pass the --run-dir of an "
                                "existing run")


def _local_run_path(config) -> str | None:
    """The absolute local path of ``config.run_dir`` (``file://`` or a plain path); None for an object store."""
    from filegram_ray.storage import local_run_path

    return local_run_path(config.run_dir)


def missing_local_dir(config) -> bool:
    """Whether ``config.run_dir`` is a local directory that does not exist yet (this job will create it)."""
    path = _local_run_path(config)
    return path is not None and not os.path.isdir(path)


def missing_lock_file(config) -> bool:
    """Whether ``config.run_dir`` is local and has no ``.lock`` file yet (this job's lock will create it)."""
    path = _local_run_path(config)
    return path is not None and not os.path.exists(os.path.join(path, ".lock"))


def forget_failed_start(run, created_dir: bool, created_lock: bool = False) -> None:
    """After a job that started a run failed before finishing any unit: remove the ``run.json`` it wrote (the seed
    and set it recorded must not pin the directory: a corrected command, another ``--seed`` included, starts it
    afresh); the lock file when the job created it (a stage refused on a folder that is not a run leaves it as it
    was); and, when the job created the directory, the then empty directory. Nothing is removed once a unit is
    done (``_done/``) or a stage recorded itself: from then on the run holds outputs of that plan. Never raises."""
    try:
        if run.listdir("_done"):
            return
        if run.exists("run.json"):
            data = run.read_json("run.json")
            if isinstance(data, dict) and data.get("stages"):
                return
            run.remove("run.json", recursive=False)
        if (created_dir or created_lock) and run.is_local:
            lock = os.path.join(run.root, ".lock")
            if os.path.exists(lock):
                os.remove(lock)
        if created_dir and run.is_local:
            os.rmdir(run.root)  # only when empty: anything else written stays
    except Exception as exc:  # noqa: BLE001 - clean-up never hides the job's own error
        log.debug("could not forget the failed start of %s: %s", run.uri, exc)
