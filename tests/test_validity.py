"""Behaviour validity (issue #16): a real mini-run (6 profiles × 3 tasks, a perturbation candidate among them), the
generator's counterfactual check of perturbations, and ``filegram validity RUN`` on the result."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from filegram_ray.config import load_config
from filegram_ray.engine.generate import GenerateWorker, plan_units, run_generate
from filegram_ray.storage import RunDir
from filegram_ray.validity.core import DIM_COLS, DIMENSIONS, TaskScaler, load_sessions
from filegram_ray.validity.report import merge_report, run_validity

#: Six bundled profiles whose upstream plan perturbs T-12 (reference §5.7), so the run holds 6 perturbed units.
PROFILES = ["p2", "p3", "p4", "p7", "p8", "p9"]
#: an understand task, an empty-workspace create task and an iterate task (cheap bundles: no audio or video)
TASKS = ["T-01", "T-03", "T-12"]


def _cfg(run_dir: Path, seed: int = 7, profiles: list[str] = PROFILES, **gen):
    cfg = load_config(None, [f"run_dir={run_dir}", f"seed={seed}"])
    data = cfg.model_dump()
    data.update(profiles=profiles, tasks=TASKS, generate={"executor": "serial", **gen})
    return type(cfg).model_validate(data)


@pytest.fixture(scope="module")
def mini_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("validity") / "run"
    rec = run_generate(_cfg(run_dir))
    assert rec["ok"] == len(PROFILES) * len(TASKS) and rec["error"] == 0
    return run_dir, rec


@pytest.fixture(scope="module")
def cross_run(tmp_path_factory):
    """A second, independently generated run for the cross-set figures (another seed, three of the profiles)."""
    run_dir = tmp_path_factory.mktemp("validity-cross") / "run"
    rec = run_generate(_cfg(run_dir, seed=8, profiles=PROFILES[:3]))
    assert rec["ok"] == 3 * len(TASKS) and rec["error"] == 0
    return run_dir


def _copy_run(src: Path, dst: Path) -> Path:
    """A copy of a generated run to change (the module's runs stay as generated)."""
    import shutil

    shutil.copytree(src, dst)
    return dst


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def test_perturbed_units_carry_a_counterfactual_check(mini_run):
    run_dir, rec = mini_run
    assert rec["perturbed"] == len(PROFILES)
    assert rec["perturbation_check"]["dropped"] == 0
    for pid in PROFILES:
        meta_p = next((run_dir / "trajectories").glob(f"{pid}_*/T-12/meta.json"))
        meta = json.loads(meta_p.read_text())
        check = meta["perturbation_check"]
        assert check["status"] in ("real", "replaced")
        assert meta["perturbation"] == {k: check["applied"][k] for k in ("dimension", "from", "to")}
        # the recorded shift is real: some feature of the perturbed dimension differs from the counterfactual
        assert any(a != b for a, b in check["shift"].values()), check["shift"]
        dim = meta["perturbation"]["dimension"]
        assert len(check["shift"]) == len(DIM_COLS[dim])
        assert len(check["baseline_fingerprint"]) == len(check["fingerprint"]) == 17
    unperturbed = json.loads(next((run_dir / "trajectories").glob("p2_*/T-01/meta.json")).read_text())
    assert unperturbed["perturbation"] is None and unperturbed["perturbation_check"] is None


def test_noop_perturbation_is_replaced_or_dropped(tmp_path):
    """A shift that cannot change anything (A L→L) is caught by the counterfactual run: with an alternative the
    unit is re-planned on the alternative's dimension, without one it is kept unperturbed."""
    from filegram_ray.engine.generate import GenerateConfig

    cfg = _cfg(tmp_path / "run")
    unit = next(u for u in plan_units(cfg, GenerateConfig()) if u["unit_id"].endswith("/T-03")
                and u["unit_id"].startswith("p2_"))
    noop = {"dimension": "A", "from": "L", "to": "L"}
    worker = GenerateWorker(str(tmp_path / "run"))
    alt = {"dimension": "B", "from": "L", "to": "M"}
    r1 = worker.process({**unit, "perturbation": noop, "alternatives": [alt], "verify": True})
    meta = RunDir(str(tmp_path / "run")).read_json(f"trajectories/{unit['unit_id']}/meta.json")
    assert r1["perturbed"] and r1["perturbation_status"] == "replaced"
    assert meta["perturbation"] == alt and [t["real"] for t in meta["perturbation_check"]["tried"]] == [False, True]
    worker2 = GenerateWorker(str(tmp_path / "run2"))
    r2 = worker2.process({**unit, "perturbation": noop, "alternatives": [], "verify": True})
    meta2 = RunDir(str(tmp_path / "run2")).read_json(f"trajectories/{unit['unit_id']}/meta.json")
    assert not r2["perturbed"] and r2["perturbation_status"] == "dropped"
    assert meta2["perturbation"] is None and meta2["perturbation_check"]["planned"] == noop


def test_validity_report_on_a_run(mini_run):
    run_dir, _ = mini_run
    run = RunDir(str(run_dir))
    run.write_text("results/report.md", "# FileGramBench results\n\nsome table\n")
    res = run_validity(str(run_dir))
    assert res["n_sessions"] == len(PROFILES) * len(TASKS) and res["n_profiles"] == len(PROFILES)
    for d in DIMENSIONS:
        lpo = res["lpo"][d]
        assert 0.0 <= lpo["session"] <= 1.0 and 0.0 <= lpo["profile"] <= 1.0
        assert res["rule"][d]["profile"] is not None
        assert set(res["tau"]["per_dimension_task"][d]) >= {"precision", "recall", "tp", "fp", "fn"}
    pe = res["perturbations"]
    assert pe["n"] == pe["checked"] == len(PROFILES) and pe["no_op"] == 0
    assert res["counts"]["per_traj"]["file_read"]["paper"] == pytest.approx(4541 / 640)
    # the task-outcome, content and tool checks run on every local run, with their bounds
    checks = {c["name"]: c for c in res["realism"]["checks"]}
    assert checks["task outcomes reached"]["value"] >= 0.95 and res["realism"]["outcomes"]["n"] == 18
    assert checks["files holding a tool's marker (viewer notes, line numbers, cuts)"]["value"] == 0
    assert checks["moves or renames onto an existing file (silent overwrites)"]["value"] == 0
    assert checks["output sentences that are an input's sentence verbatim"]["pass"]
    assert {d: v["n"] for d, v in res["realism"]["acting_counts"].items()} == dict.fromkeys("ABCDEF", 18)
    md = run.read_text("results/validity.md")
    for head in ("## 1. Tier recovery", "## 2. Perturbations", "## 3. Deviation flags", "## 4. Aggregate counts"):
        assert head in md
    report = run.read_text("results/report.md")
    assert report.startswith("# FileGramBench results") and "## Behaviour validity" in report
    # a second run replaces the section instead of appending another one
    run_validity(str(run_dir))
    assert run.read_text("results/report.md").count("## Behaviour validity") == 1
    assert json.loads(run.read_text("results/validity.json"))["n_sessions"] == res["n_sessions"]


def test_cross_set_recovery_and_cli(mini_run, cross_run, capsys):
    from filegram_ray.cli import main

    run_dir, _ = mini_run
    assert main(["validity", str(run_dir), "--train-run", str(cross_run)]) == 0
    out = capsys.readouterr().out
    assert "validity of" in out and "task-std" in out
    res = json.loads((run_dir / "results" / "validity.json").read_text())
    assert set(res["cross"]) == set(DIMENSIONS)
    # issue #28: every bounded figure is printed with its bound and PASS / FAIL (n/a with a reason)
    checks = res["realism"]["checks"]
    names = [c["name"] for c in checks]
    for d in DIMENSIONS:
        assert f"single-session separability {d}, cross-set" in names
        assert f"profile-level recovery {d}, cross-set" in names
        # one profile is 1 / n of the figure: the note counts the misses against what the bound allows
        rec = next(c for c in checks if c["name"] == f"profile-level recovery {d}, cross-set")
        n = res["cross"][d]["n_profiles"]
        missed = round((1 - rec["value"]) * n)
        assert rec["note"] == f"{missed} of {n} profiles read as another tier; the bound allows {int(n * 0.1 + 1e-9)}"
    for want in ("no-op perturbations", "count-rule answerer ShiftAna", "count-rule answerer AnomDet",
                 "motivation: searches", "motivation: deletes/moves/renames", "motivation: output sentences"):
        assert any(n.startswith(want) for n in names), want
    printed = [ln.split() for ln in out.splitlines() if ln.startswith("    ") and ln.split()[0] in ("PASS", "FAIL", "n/a")]
    assert len(printed) == len(checks)
    for c, ln in zip(checks, printed):
        assert ln[0] == ("n/a" if c["pass"] is None else "PASS" if c["pass"] else "FAIL")
        if c["pass"] is not None:
            ok = {"<=": c["value"] <= c["bound"], ">=": c["value"] >= c["bound"], "==": c["value"] == c["bound"]}
            assert c["pass"] == ok[c["op"]], c
    # 3 tasks a profile leave 2 unperturbed sessions to compare a perturbed one with: visibility is n/a, not a number
    vis = next(c for c in checks if c["name"].startswith("perturbation visible"))
    assert res["realism"]["visibility"]["n_perturbed"] == 0 and vis["pass"] is None and vis["value"] is None
    assert "## 5. Behaviour like a person" in (run_dir / "results" / "validity.md").read_text()
    # --strict: exit 1 exactly when a bounded check FAILs, naming them on stderr (a fresh-eyes finding: a FAIL
    # could not stop a script); without it the command is a report and exits 0 (asserted above)
    failed = [c["name"] for c in checks if c["pass"] is False]
    assert main(["validity", str(run_dir), "--train-run", str(cross_run), "--strict"]) == (1 if failed else 0)
    err = capsys.readouterr().err
    assert all(n in err for n in failed) and (f"{len(failed)} check(s) FAIL" in err) == bool(failed)


def test_task_scaler_standardises_per_task_with_a_floor():
    F = np.array([[0.0] * 17, [1.0] * 17, [100.0] * 17, [101.0] * 17])
    sc = TaskScaler().fit(F, ["a", "a", "b", "b"])
    Z = sc.transform(F, ["a", "a", "b", "b"])
    # per task the two sessions sit symmetrically around 0; the small within-task spread is floored at half the
    # overall spread, so 1 vs 0 chars is not blown up to ±1 SD
    assert np.allclose(Z[0], -Z[1]) and np.allclose(Z[2], -Z[3])
    assert np.all(np.abs(Z) < 1.0)
    assert np.allclose(sc.transform(F[:1], ["unseen"]), (np.log1p(F[:1]) - sc.mu["*"]) / sc.sd["*"])


def test_merge_report_replaces_its_section():
    first = merge_report("# R\n", ["## Behaviour validity", "- a"])
    again = merge_report(first + "tail\n", ["## Behaviour validity", "- b"])
    assert "- a" not in again and "- b" in again and again.endswith("tail\n") and again.count("validity:start") == 1


def test_too_few_profiles_reports_recovery_as_na_not_zero(tmp_path, cross_run, capsys):
    """Fresh-user report: `filegram validity` on a 2-profile run printed recovery 0.00 / 0.00 (the held-out
    profile's tier was never in its training fold). Leave-profiles-out needs ≥ MIN_LPO_PROFILES profiles; below
    that the JSON, validity.md, the report.md section and the printed summary say n/a and why, with no number."""
    from filegram_ray.cli import main
    from filegram_ray.validity.core import MIN_LPO_PROFILES

    run_dir = tmp_path / "run"
    cfg = _cfg(run_dir).model_dump()
    cfg.update(profiles=["p2", "p3"], tasks=["T-01", "T-12"])
    rec = run_generate(type(_cfg(run_dir)).model_validate(cfg))
    assert rec["ok"] == 4
    run = RunDir(str(run_dir))
    run.write_text("results/report.md", "# FileGramBench results\n")
    assert main(["validity", str(run_dir)]) == 0
    out = capsys.readouterr().out
    why = f"too few profiles: 2, need ≥ {MIN_LPO_PROFILES}"
    assert f"n/a ({why})" in out and "--train-run" in out
    rows = [ln.split() for ln in out.splitlines() if ln[:3].strip() in DIMENSIONS and len(ln.split()) > 3]
    assert len(rows) == 6 and all(r[1:3] == ["n/a", "n/a"] for r in rows), rows
    res = json.loads(run.read_text("results/validity.json"))
    for d in DIMENSIONS:
        assert res["lpo"][d] == {"na": why, "n_profiles": 2, "need": MIN_LPO_PROFILES}
        assert res["rule"][d]["profile"] is not None  # the rule classifier needs no held-out split
    md = run.read_text("results/validity.md")
    assert md.count(f"| n/a ({why}) | n/a |") == 6 and "0.00 ✗" not in md.split("## 2.")[0]
    assert f"Tier recovery, leave-profiles-out, session/profile: n/a ({why})" in run.read_text("results/report.md")
    # trained on another run, the cross-set recovery is still a figure
    res = run_validity(str(run_dir), train_run=str(cross_run), write=False)
    assert all(0.0 <= res["cross"][d]["session"] <= 1.0 for d in DIMENSIONS)


def test_a_bad_field_in_one_trajectory_leaves_it_out_and_all_bad_is_one_line(tmp_path, capsys):
    """Fresh-user report (helper-26): a wrong-typed field inside one trajectory's meta.json ("perturbation":
    "junk", an unknown dimension, a bad baseline fingerprint) or events.json (an event that is a number) ended
    `filegram validity` with a traceback. Now that trajectory is left out and named with the file and field; a run
    whose every trajectory is unreadable is a one-line error, exit 2."""
    from filegram_ray.cli import main
    from filegram_ray.validity.core import load_sessions

    run_dir = tmp_path / "run"
    cfg = _cfg(run_dir).model_dump()
    cfg.update(profiles=["p2", "p3"], tasks=["T-01", "T-12"])
    assert run_generate(type(_cfg(run_dir)).model_validate(cfg))["ok"] == 4
    trajs = run_dir / "trajectories"

    def set_meta(rel, **fields):
        path = next(trajs.glob(rel.replace("/", "_*/"))) / "meta.json"
        meta = json.loads(path.read_text())
        meta.update(fields)
        path.write_text(json.dumps(meta))

    set_meta("p2/T-01", perturbation="junk")
    set_meta("p2/T-12", perturbation={"dimension": "Q", "to": "L"})
    set_meta("p3/T-01", perturbation_check={"baseline_fingerprint": [1, 2]})
    got = load_sessions(str(run_dir))
    assert [s.trajectory_id.split("_")[0] + s.trajectory_id[-5:] for s in got.sessions] == ["p3/T-12"]
    errs = {x["trajectory_id"].split("_")[0] + x["trajectory_id"][-5:]: x["error"] for x in got.skipped}
    assert "meta.json: field 'perturbation' must be an object" in errs["p2/T-01"]
    assert "field 'perturbation.dimension'" in errs["p2/T-12"] and "'Q'" in errs["p2/T-12"]
    assert "field 'perturbation_check.baseline_fingerprint'" in errs["p3/T-01"]
    (next(trajs.glob("p3_*/T-12")) / "events.json").write_text("[5]")
    capsys.readouterr()
    assert main(["validity", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no finished trajectories" in err[0] and "Traceback" not in err[0], err


def test_a_recorded_set_that_is_gone_is_one_line_naming_the_flag(mini_run, cross_run, tmp_path, capsys):
    """Review finding: a run whose run.json records a profile (task) set that no longer exists was silently scored
    against the bundled conf/profiles. Now it is a one-line error naming the directory, the run and the option to
    pass (--train-profiles-dir for the training run of --cross); a run that records no set keeps the bundled one."""
    from filegram_ray.cli import main
    from filegram_ray.errors import UserError
    from filegram_ray.paths import profiles_dir
    from filegram_ray.validity.core import load_sessions

    run_dir = _copy_run(mini_run[0], tmp_path / "run")
    gone = tmp_path / "gone-profiles"

    def record(key, value):
        _edit_json(run_dir / "run.json", lambda d: d["stages"]["generate"].update({key: value}))

    record("profiles_dir", str(gone))
    with pytest.raises(UserError, match=rf"^{run_dir}: the profile set this run was generated from \({gone}, "
                                        r"recorded in run.json\) no longer exists; pass --profiles-dir DIR"):
        load_sessions(str(run_dir))
    capsys.readouterr()
    assert main(["validity", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(gone) in err[0] and "--profiles-dir" in err[0], err
    # the training run of a cross-set check names its own option, before any measure is computed
    with pytest.raises(UserError, match=rf"{gone}.*pass --train-profiles-dir DIR"):
        run_validity(str(cross_run), train_run=str(run_dir), write=False)
    assert len(load_sessions(str(run_dir), profiles_dir=str(profiles_dir())).sessions) == len(PROFILES) * len(TASKS)
    record("profiles_dir", None)
    record("tasks_dir", str(tmp_path / "gone-tasks"))
    with pytest.raises(UserError, match=r"the task set this run was generated from .*gone-tasks.* pass --tasks-dir"):
        load_sessions(str(run_dir))


def test_a_profile_set_that_contradicts_the_acting_tiers_is_refused(mini_run, tmp_path):
    """Review finding: --profiles-dir naming a set with the same ids but other tiers than the run was generated with
    changed every figure silently. The trajectories' meta.json acting tiers (drawn again from the recorded seed;
    a session may act a neighbouring tier by design) and a perturbation's 'from' now refuse such a set, naming the
    profile, a trajectory, the dimension, both tiers and the set. Old runs without acting_tiers are not checked."""
    import shutil

    import yaml

    from filegram_ray.errors import UserError
    from filegram_ray.paths import profiles_dir
    from filegram_ray.validity.core import load_sessions

    run_dir, _ = mini_run
    pd = tmp_path / "profiles"
    shutil.copytree(profiles_dir(), pd)
    assert len(load_sessions(str(run_dir), profiles_dir=str(pd)).sessions) == len(PROFILES) * len(TASKS)
    pid = "p3_efficient_executor"
    t12 = json.loads((run_dir / "trajectories" / pid / "T-12" / "meta.json").read_text())["perturbation"]
    dim = next(d for d in DIMENSIONS if d != t12["dimension"])  # a dimension no trajectory of p3 perturbs

    def set_tier(d):
        f = pd / f"{pid}.yaml"
        y = yaml.safe_load(f.read_text())
        old = y["tiers"][d]
        y["tiers"][d] = {"L": "R", "R": "L", "M": "L"}[old]
        f.write_text(yaml.safe_dump(y, allow_unicode=True, sort_keys=False))
        return old, y["tiers"][d]

    old, new = set_tier(dim)
    with pytest.raises(UserError) as exc:
        load_sessions(str(run_dir), profiles_dir=str(pd))
    msg = str(exc.value)
    assert msg.startswith(f"profile set {pd} contradicts run {run_dir}: profile '{pid}' has {dim}={new} there, "
                          f"but the run was generated with {dim}={old} (trajectory {pid}/T-"), msg
    assert "acting_tiers" in msg and msg.endswith("pass --profiles-dir with the profile set the run was generated "
                                                  "from") and "\n" not in msg
    # a run made by another simulator version: acting tiers cannot be drawn again, a perturbation's 'from' still
    # names the profile's tier
    other = _copy_run(run_dir, tmp_path / "other-version")
    for meta in other.glob("trajectories/*/*/meta.json"):
        _edit_json(meta, lambda m: m.update(agent_version="persona-simulator/0"))
    load_sessions(str(other), profiles_dir=str(pd))
    set_tier(t12["dimension"])
    with pytest.raises(UserError, match=rf"profile '{pid}' has {t12['dimension']}=.* generated with "
                                        rf"{t12['dimension']}={t12['from']} \(trajectory {pid}/T-12: meta.json "
                                        rf"perturbation from"):
        load_sessions(str(other), profiles_dir=str(pd))
    # an old run without acting_tiers: nothing to compare, no check
    for meta in other.glob("trajectories/*/*/meta.json"):
        _edit_json(meta, lambda m: m.pop("acting_tiers", None))
    assert len(load_sessions(str(other), profiles_dir=str(pd)).sessions) == len(PROFILES) * len(TASKS)


def test_cross_with_the_run_itself_is_refused(mini_run, tmp_path, capsys):
    """Review finding: `filegram validity RUN --cross RUN` scored a set against itself and inflated the cross-set
    figures; any spelling of the same local run (a link, a trailing slash, file://, ..) is now a one-line error."""
    from filegram_ray.cli import main
    from filegram_ray.errors import UserError

    run_dir, _ = mini_run
    link = tmp_path / "link"
    link.symlink_to(run_dir)
    for same in (run_dir, f"{run_dir}/", link, f"file://{run_dir}", run_dir.parent / ".." / run_dir.parent.name
                 / run_dir.name):
        with pytest.raises(UserError, match="^--cross must be a second, independently generated run"):
            run_validity(str(run_dir), train_run=str(same), write=False)
    capsys.readouterr()
    assert main(["validity", str(run_dir), "--cross", str(link)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--cross must be a second, independently generated run" in err[0], err


def test_cross_with_a_copy_of_the_run_is_refused(mini_run, tmp_path):
    """A copy of the run in another folder (or the same seed and profile set generated again: same bytes) holds the
    same trajectories; scored against it, the cross-set figures would be inflated as by the run itself."""
    from filegram_ray.errors import UserError

    copy = _copy_run(mini_run[0], tmp_path / "copy")
    with pytest.raises(UserError, match="holds the same trajectories as"):
        run_validity(str(mini_run[0]), train_run=str(copy), write=False)


def test_cross_with_a_partial_copy_of_the_run_is_refused(mini_run, tmp_path, capsys):
    """Review finding (helper-28): a copy with one trajectory broken, or the same seed and profile set generated on
    part of the tasks, passed --cross because the check asked for exactly the same set of trajectories. Now a run
    sharing at least half of the smaller run's trajectories (same id, byte-equal fingerprint) is refused."""
    from filegram_ray.cli import main
    from filegram_ray.errors import UserError

    copy = _copy_run(mini_run[0], tmp_path / "copy")
    next(copy.glob("trajectories/p4_*/T-01/meta.json")).write_text('["not an object"]')
    n = len(load_sessions(str(mini_run[0])).sessions)
    with pytest.raises(UserError, match=rf"holds the same trajectories as .*\({n - 1} of the {n - 1} of the smaller"):
        run_validity(str(mini_run[0]), train_run=str(copy), write=False)
    capsys.readouterr()
    assert main(["validity", str(copy), "--cross", str(mini_run[0])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "on all or part of its tasks" in err[0], err


def test_trajectories_left_out_of_the_training_run_are_reported(mini_run, cross_run, tmp_path, capsys):
    """Review finding: a trajectory left out of the --cross run was only a log warning; it is now in the result
    (train_skipped), printed by the command and written to validity.md like the run's own."""
    from filegram_ray.cli import main

    train = _copy_run(mini_run[0], tmp_path / "train")
    bad = next(train.glob("trajectories/p4_*/T-01/meta.json"))
    bad.write_text('["not an object"]')
    capsys.readouterr()
    assert main(["validity", str(cross_run), "--cross", str(train)]) == 0
    out = capsys.readouterr().out
    res = json.loads((cross_run / "results" / "validity.json").read_text())
    assert res["skipped"] == [] and [x["error"] for x in res["train_skipped"]] == [
        f"{bad}: expected a JSON object, got list"]
    assert f"left out of the --cross run {train}: 1 trajectories with an unreadable or malformed file" in out
    md = (cross_run / "results" / "validity.md").read_text()
    assert f"Left out of the cross-set training run: 1 trajectories with an unreadable or malformed file (first: {bad}" \
        in md


def _bench_validity():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_validity", Path(__file__).parent / "benchmarks" / "bench_validity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_validity_failed_command_is_its_error_and_one_line(tmp_path):
    """Review finding: `bench_validity.py --tasks T-99` ended in a CalledProcessError traceback while the real
    error was only in the run log. Now the end of the failed command's log is printed, then one line; exit = the
    command's (2, a user error)."""
    import subprocess
    import sys

    script = Path(__file__).parent / "benchmarks" / "bench_validity.py"
    r = subprocess.run([sys.executable, str(script), "--label", "x", "--out", str(tmp_path), "--n", "2", "--tasks",
                        "T-99", "--page", str(tmp_path / "page.md")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "unknown id 'T-99'" in r.stderr and "Traceback" not in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("bench_validity: `filegram pipeline` failed (exit 2)") and "run-101.log" in last, last
    assert not (tmp_path / "page.md").exists()


def test_bench_validity_refuses_equal_seeds_and_no_profiles_before_generating(tmp_path):
    """Review finding (helper-28): `--seeds 5 5` generated a set, then ended in a UserError traceback from filegram
    validity (a run scored against itself); `--n 0` in a ValueError traceback from `filegram profiles new`. Both
    are now one line, exit 2, before anything is generated."""
    import subprocess
    import sys

    script = Path(__file__).parent / "benchmarks" / "bench_validity.py"
    for extra, want in ((["--seeds", "5", "5"], "--seeds 5 5: the two sets must differ"),
                        (["--n", "0"], "--n 0: a profile set needs at least 1 profile")):
        r = subprocess.run([sys.executable, str(script), "--label", "x", "--out", str(tmp_path / "out"), *extra,
                            "--page", str(tmp_path / "page.md")], capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"bench_validity: {want}"), r.stderr
        assert not (tmp_path / "out").exists() and not (tmp_path / "page.md").exists()


def test_bench_validity_refuses_reused_folders_made_with_other_settings(tmp_path, capsys):
    """Review finding: reusing run folders, bench_validity wrote the asked --n / --tasks into its page although the
    reused runs held others. A reused profile set or run made with other settings is refused (one line naming the
    folder and both settings); the page's sizes are what the run holds."""
    import polars as pl

    from filegram_ray.cli import main as filegram

    mod = _bench_validity()
    out = tmp_path / "x"
    prof, run = out / "profiles-101", out / "run-101"
    assert filegram(["profiles", "new", "--n", "2", "--seed", "101", "--out", str(prof)]) == 0
    capsys.readouterr()
    argv = ["--label", "x", "--out", str(tmp_path), "--page", str(tmp_path / "page.md")]
    assert mod.main([*argv, "--n", "3", "--tasks", "T-01"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"bench_validity: {prof}: the reused profile set holds 2 profiles, but --n 3 was asked; pass --n 2, "
                   "or another --out or --label for fresh sets"], err
    pids = sorted(p.stem for p in prof.glob("*.yaml"))
    (run / "trajectories").mkdir(parents=True)
    pl.DataFrame([{"trajectory_id": f"{p}/{t}", "profile_id": p, "task_id": t, "status": "ok"}
                  for p in pids for t in ("T-01", "T-02")]).write_parquet(run / "trajectories" / "index.parquet")
    assert mod.main([*argv, "--n", "2", "--tasks", "T-01"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"bench_validity: {run}: the run holds 2 profiles × 2 tasks (T-01 T-02), but 2 profiles × 1 tasks "
                   "(T-01) were asked (--n, --tasks); pass the settings it was made with, or another --out or --label "
                   "for fresh runs"], err
    assert not (tmp_path / "page.md").exists()
    got = mod.build_set(out, 101, 2, ["T-02", "T-01"], None, False)  # a complete run of these settings: reused
    assert got["reused"] and got["n"] == 2 and got["tasks"] == ["T-01", "T-02"]


def test_bench_validity_label_is_one_folder_whatever_it_holds(tmp_path, capsys):
    """A label such as "fresh pair 2829 / 2830" names the page section as written; its runs go to one folder under
    --out (OUT/fresh_pair_2829_2830), not to two nested ones."""
    mod = _bench_validity()
    prof = tmp_path / "fresh_pair_2829_2830" / "profiles-101"
    from filegram_ray.cli import main as filegram

    assert filegram(["profiles", "new", "--n", "2", "--seed", "101", "--out", str(prof)]) == 0
    capsys.readouterr()
    argv = ["--label", "fresh pair 2829 / 2830", "--out", str(tmp_path), "--page", str(tmp_path / "page.md")]
    assert mod.main([*argv, "--n", "3", "--tasks", "T-01"]) == 2  # refused on the reused set: it was found there
    assert f"bench_validity: {prof}: the reused profile set holds 2 profiles" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh_pair_2829_2830"]
