"""Config shapes and ids are checked when the config (or the profile set) loads: a section replaced by a scalar, an
empty id list, a wrong-shaped list, an id that is a path — each one line naming the key or the file and field, exit
code 2, before any work (cases REL2-CONFIG-set-section-scalar-accepted, REL2-CONFIG-profile-id-path-accepted)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from filegram_ray.config import load_config
from filegram_ray.jobargs import run_job
from filegram_ray.profiles import ProfileError, load_profiles
from filegram_ray.schema.profile import id_problem

ROOT = Path(__file__).resolve().parents[1]


def _generate_job():
    spec = importlib.util.spec_from_file_location("job_generate_shapes", ROOT / "jobs" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("overrides, key", [
    (["generate=5"], "generate"),
    (["generate=null"], "generate"),
    (["encode=[1, 2]"], "encode"),
    (["evaluate=text"], "evaluate"),
    (["generate=5", "generate.executor=serial"], "generate"),  # a job's own --serial comes after the user's --set
    (["ray=3", "ray.address=x"], "ray"),
    (["profiles=[]"], "profiles"),
    (["tasks=[]"], "tasks"),
    (["profiles=p1"], "profiles"),
    (["profiles=[[p1]]"], "profiles"),
    (["tasks={a: 1}"], "tasks"),
    (["profiles=[../../x]"], "profiles"),
    (["tasks=[a/b]"], "tasks"),
    (['profiles=["p1\\u0007"]'], "profiles"),
])
def test_rel2_config_set_section_scalar_accepted_wrong_shapes_are_one_line(overrides, key):
    """REL2-CONFIG-set-section-scalar-accepted: each wrong shape is refused in one line naming the key and the
    --set that gave it (generate=5 and profiles=[] used to run with defaults / every profile)."""
    with pytest.raises(ValueError) as info:
        load_config(None, overrides)
    msg = str(info.value)
    assert "\n" not in msg
    assert f": {key}" in msg and f"--set {overrides[0].split('=')[0]}=" in msg


def test_rel2_config_set_section_scalar_accepted_jobs_exit_2_before_work(tmp_path, capsys):
    """The case's commands: exit 2, one line on stderr naming generate / profiles, no run directory made."""
    gen = _generate_job()
    for argv, key in ((["--profiles", "p1", "--tasks", "T-01", "--set", "generate=5"], "generate"),
                      (["--profiles", "p1", "--tasks", "T-01", "--set", "generate=null"], "generate"),
                      (["--tasks", "T-01", "--set", "profiles=[]"], "profiles")):
        run = tmp_path / key
        rc = run_job(gen.main, ["--run-dir", str(run), "--serial", *argv])
        err = capsys.readouterr().err.strip()
        assert rc == 2, err
        assert err.count("\n") == 0 and err.startswith("error: ") and f": {key}:" in err
        assert not run.exists()


def test_right_shapes_still_load():
    cfg = load_config(None, ["generate.num_actors=2", "generate.executor=serial", "profiles=[p1, p2_x.y-z]",
                             "tasks=null", "ray.num_cpus=2"])
    assert cfg.section("generate")["num_actors"] == 2 and cfg.profiles == ["p1", "p2_x.y-z"] and cfg.tasks is None


@pytest.mark.parametrize("bad", ["../../../../tmp/cfgt/ESCAPED", "a/b", "/abs", "", ".", "..", "p1\n", "p1\x00",
                                 "p\u2028x", "p1 x", "-p1", "x" * 129, "p1\\x"])
def test_rel2_config_profile_id_path_accepted_refused_naming_file_and_field(tmp_path, bad, capsys):
    """REL2-CONFIG-profile-id-path-accepted: a profile file whose profile_id is a path (or empty, dot-only, with
    control characters) is refused when the set loads, naming the file and the field; the CLI exits 2."""
    import yaml

    d = tmp_path / "set"
    d.mkdir()
    data = yaml.safe_load((ROOT / "conf" / "profiles" / "p1_methodical.yaml").read_text(encoding="utf-8"))
    data["profile_id"] = bad
    f = d / "p1_methodical.yaml"
    f.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    with pytest.raises(ProfileError) as info:
        load_profiles(d)
    msg = str(info.value)
    assert msg.startswith(f"{f}: field 'profile_id':") and "\n" not in msg
    from filegram_ray.cli import main

    rc = run_job(main, ["profiles", "list", "--dir", str(d)])
    err = capsys.readouterr().err
    assert rc == 2 and "field 'profile_id'" in err and str(f) in err


def test_rel2_config_profile_id_path_accepted_generate_refuses_before_work(tmp_path, capsys):
    """generate with such a profile set ends with exit 2 naming the file; no trajectory is written."""
    d = tmp_path / "set"
    d.mkdir()
    src = (ROOT / "conf" / "profiles" / "p1_methodical.yaml").read_text(encoding="utf-8")
    lines = ["profile_id: ../../../escaped" if ln.startswith("profile_id:") else ln for ln in src.splitlines()]
    (d / "p1_methodical.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = tmp_path / "run"
    rc = run_job(_generate_job().main, ["--run-dir", str(run), "--serial", "--profiles-dir", str(d),
                                         "--tasks", "T-01", "--set", "workspace.tts=tone"])
    err = capsys.readouterr().err
    assert rc == 2 and "p1_methodical.yaml: field 'profile_id'" in err
    assert not (run / "trajectories").exists()
    assert not (tmp_path / "escaped").exists()


def test_one_id_rule_accepts_the_bundled_ids():
    from filegram_ray.tasks import load_tasks

    ids = [p.profile_id for p in load_profiles()] + [t.task_id for t in load_tasks()]
    assert len(ids) == 52 and all(id_problem(i) is None for i in ids)
    assert id_problem("../x") and id_problem("") and id_problem(3)


def test_bundled_profile_dir_copy_still_loads(tmp_path):
    shutil.copytree(ROOT / "conf" / "profiles", tmp_path / "p")
    assert len(load_profiles(tmp_path / "p")) == 20


@pytest.mark.parametrize("bad", ["../../x", "T-01/..", "/T-01", "", "T-01\n", "T-01\x00"])
def test_rel2_config_profile_id_path_accepted_task_ids_too(tmp_path, bad):
    """REL2-CONFIG-profile-id-path-accepted, task side: a task file whose task_id is a path or holds a control
    character is refused when the set loads, naming the file and the field."""
    import yaml

    from filegram_ray.tasks import TaskError, load_tasks

    src = sorted((ROOT / "conf" / "tasks").glob("*.yaml"))[0]
    data = yaml.safe_load(src.read_text(encoding="utf-8"))
    data["task_id"] = bad
    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    with pytest.raises(TaskError) as info:
        load_tasks(tmp_path)
    assert str(info.value).startswith(f"{f}: field 'task_id':")
