"""Argument parsing shared by the thin job scripts in ``jobs/``.

Every job takes the same core options so it runs unchanged on a laptop (``python jobs/X.py``) and on a cluster
(``ray job submit --working-dir . -- python jobs/X.py``): ``--config``, ``--run-dir``, ``--seed``,
``--address``, ``--serial`` (``executor: serial`` for the stages it runs) and repeated ``--set key.sub=value``
overrides.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: building a parser (`filegram X --help`) needs no pydantic (fast --help)
    from filegram_ray.config import PipelineConfig


def at_least_one(text: str) -> int:
    """argparse type for a count (``--num-actors``, ``filegram profiles new --n``): a whole number ≥ 1, else
    argparse's one-line usage error (exit 2)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ 1, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ 1, got {n}")
    return n


def add_common_options(p: argparse.ArgumentParser, *, serial: bool = True) -> argparse.ArgumentParser:
    """Add the options every stage job accepts to ``p`` (a parser or a ``filegram`` subcommand)."""
    p.add_argument("--config", default=None, help="pipeline YAML (default: conf/default.yaml)")
    p.add_argument("--run-dir", default=None,
                   help="run directory: local path or fsspec URI (s3://…); default: run_dir of the config")
    p.add_argument("--seed", type=int, default=None, help="master seed (default: the seed the run directory was made with (run.json), else the config's seed; 7 in conf/default.yaml). Another seed on an existing run directory is refused")
    p.add_argument("--address", default=None,
                   help="Ray address (default: RAY_ADDRESS, set by `ray job submit`, else a local Ray)")
    if serial:
        p.add_argument("--serial", action="store_true",
                       help="run the stage in this process without Ray, the same as --set <section>.executor=serial "
                       "(debugging; what local_mode was for)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set generate.num_actors=4 (repeatable)")
    return p


def common_parser(description: str, *, serial: bool = True) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` with the options every stage job accepts."""
    return add_common_options(argparse.ArgumentParser(description=description), serial=serial)


def config_from_args(args: argparse.Namespace, extra: dict[str, Any] | None = None,
                     sections: list[str] | tuple[str, ...] | None = None) -> PipelineConfig:
    """Load the config named by ``args`` and apply ``--run-dir``, ``--seed``, ``--address``, ``--set`` and
    ``--serial`` as ``<section>.executor=serial`` for each of ``sections`` (the sections of the stages the job runs;
    default: every stage's) — the one executor setting every stage reads from its config section. Only ``sections``
    are validated against their stage's model (:func:`~filegram_ray.config.load_config`): a job imports no module
    of a stage it does not run."""
    from filegram_ray.config import PipelineConfig, load_config, stage_sections

    overrides = list(args.overrides or [])
    if getattr(args, "serial", False):
        overrides += [f"{sec}.executor=serial" for sec in (sections if sections is not None else stage_sections())]
    cfg = load_config(args.config, overrides, sections)
    upd: dict[str, Any] = {}
    if args.run_dir:
        upd["run_dir"] = args.run_dir
    recorded = _recorded_config(args.run_dir or cfg.run_dir, cfg.storage_options)
    given = lambda key: any(o.strip().startswith(f"{key}=") for o in overrides)  # noqa: E731
    if args.seed is not None:
        upd["seed"] = args.seed
    elif not given("seed"):
        # no seed asked for: continue the run with the seed it was made with (a second seed would mix two plans)
        seed = recorded.get("seed")
        if seed is not None and int(seed) != cfg.seed:
            print(f"using the run's seed {seed} (run.json)", file=sys.stderr)
            upd["seed"] = int(seed)
    for key in ("profiles", "tasks"):
        # no set asked for: continue the run with its recorded profile/task set (not every id of the set dir);
        # an explicit set is used as given (generate adds its units to the run, later stages select)
        if (extra or {}).get(key) is not None or given(key):
            continue
        ids = recorded.get(key)
        if isinstance(ids, list) and ids and ids != getattr(cfg, key):
            print(f"using the run's {key} {' '.join(map(str, ids))} (run.json)", file=sys.stderr)
            upd[key] = [str(i) for i in ids]
    for key in ("profiles_dir", "tasks_dir"):
        # no set directory asked for: continue with the one the run was generated from (a fresh-eyes finding: a
        # bare rerun of generate on a run made with --profiles-dir regenerated it from conf/profiles)
        if (extra or {}).get(key) is not None or given(key) or getattr(cfg, key) is not None:
            continue
        d = recorded.get(key)
        if isinstance(d, str) and d:
            print(f"using the run's {key} {d} (run.json)", file=sys.stderr)
            upd[key] = d
    if args.address:
        upd["ray"] = {**cfg.ray.model_dump(), "address": args.address}
    for k, v in (extra or {}).items():
        if v is not None:
            upd[k] = v
    if upd:
        data = cfg.model_dump()
        for k, v in upd.items():
            data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) and isinstance(data.get(k), dict) else v
        cfg = PipelineConfig.model_validate(data)
    return cfg


def _recorded_config(run_dir: str, storage_options: dict[str, Any]) -> dict[str, Any]:
    """The config snapshot of an existing run directory's ``run.json`` (``{}`` for a new or unreadable one), its
    ``profiles``/``tasks`` taken from the generate stage's record when there is one (the run's sets), else from the
    snapshot once the seed stage finished, else left out (a refused job's snapshot is not the run's set); its
    ``profiles_dir``/``tasks_dir`` from the generate stage's record only (None before generate)."""
    import os

    from filegram_ray.storage import RunDir, StorageError

    if "://" not in run_dir and not os.path.isdir(run_dir):
        return {}  # a new local run directory (not created here)
    try:
        run = RunDir(run_dir, storage_options)
        data = run.read_json("run.json") if run.exists("run.json") else {}
    except (StorageError, OSError, ValueError):  # an unreadable run.json is reported by the stage itself
        return {}
    except Exception:  # noqa: BLE001 - a remote store's client error (e.g. no credentials yet): the stage reports it
        if "://" in run_dir:
            return {}
        raise
    cfg = data.get("config") if isinstance(data, dict) else None
    cfg = dict(cfg) if isinstance(cfg, dict) else {}
    stages = (data.get("stages") or {}) if isinstance(data, dict) else {}
    gen = stages.get("generate") if isinstance(stages, dict) else None
    for key in ("profiles_dir", "tasks_dir"):  # the set directories the run was generated from, else none
        cfg[key] = gen.get(key) if isinstance(gen, dict) else None
    for key in ("profiles", "tasks"):
        if isinstance(gen, dict) and key in gen:  # the sets the run was generated from (engine.generate.run_sets)
            cfg[key] = gen[key]
        elif not (isinstance(stages, dict) and isinstance(stages.get("seed"), dict)):
            # the snapshot's sets count only once seed finished with them (seed checks them); a job that was
            # refused wrote its snapshot too, and its unknown id must not pass to the next job
            cfg.pop(key, None)
    return cfg


def run_job(main, argv=None) -> int:
    """Run a job's ``main``; a user mistake (:class:`filegram_ray.errors.UserError`: bad option value, unknown id,
    missing input, unwritable run directory; an invalid config) ends with one line naming the problem and exit
    code 2; any other exception is an internal error and keeps its traceback (exit 1); Ctrl-C ends with exit
    code 130 (every stage resumes where it stopped)."""
    import logging
    import sys

    from pydantic import ValidationError

    from filegram_ray.errors import UserError
    from filegram_ray.runtime import Interruption, end_process

    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:  # `filegram -v` keeps them
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # model loading's bar (read at transformers import)
    with Interruption() as intr:
        try:
            return _run_main(main, argv, ValidationError, UserError)
        except BaseException:
            if intr.signal_number is None:
                raise
            # an exception raised while Ray unwound the interrupt (BR-23: "release unlocked lock") is the interrupt
            print("\ninterrupted: finished units are kept; run the same command again to resume", file=sys.stderr)
            end_process(128 + intr.signal_number)
        finally:
            if intr.signal_number is not None:  # Ray Data's threads must not keep a stopped stage alive
                end_process(128 + intr.signal_number)
    return 130  # pragma: no cover - end_process does not return


def _run_main(main, argv, ValidationError, UserError) -> int:  # noqa: N803 - exception classes
    try:
        rc = int(main(argv) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers below, not at interpreter exit
        return rc
    except KeyboardInterrupt:
        print("\ninterrupted: finished units are kept; run the same command again to resume", file=sys.stderr)
        return 130
    except ValidationError as exc:
        errs = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
                         for e in exc.errors())
        print(f"error: invalid configuration ({exc.title}): {errs}", file=sys.stderr)
        return 2
    except (UserError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError) as exc:
        # the user's mistake (a bad option, id, config value, input file, or a path they named): one line. Any
        # other ValueError / KeyError / OSError is a bug of ours and keeps its traceback (exit 1).
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like: the reader had enough
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - Python flushes stdout at exit; nothing may write
        except OSError:
            pass
        return 0
    except OSError as exc:
        import errno

        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            raise  # an internal error keeps its traceback
        # the machine's disk, not our code: a full or read-only disk is one line (the rerun resumes)
        print(f"error: {exc.strerror or exc}: {exc.filename or 'the run directory'} (free space and run the same "
              "command again: finished units are kept)", file=sys.stderr)
        return 2
    except Exception as exc:
        if type(exc).__module__.split(".")[0] not in _STORE_CLIENTS:
            raise  # an internal error keeps its traceback
        # an object store's client refused (no credentials, no bucket, no access): the user's setup, one line
        print(f"error: run directory store: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


#: packages whose errors mean an object store refused the run directory (credentials, bucket, permissions)
_STORE_CLIENTS = frozenset({"botocore", "boto3", "aiobotocore", "s3fs", "gcsfs", "google", "adlfs", "azure"})
