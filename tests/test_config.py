"""Pipeline configuration loading and overrides."""

from __future__ import annotations

import pytest

from filegram_ray.config import load_config, parse_override


def test_default_config_loads():
    cfg = load_config()
    assert cfg.seed == 7
    assert cfg.run_dir == "runs/default"
    assert cfg.ray.address is None


def test_overrides_reach_stage_sections(tmp_path):
    cfg = load_config(overrides=["seed=11", "generate.num_actors=4", f"run_dir={tmp_path}"])
    assert cfg.seed == 11
    assert cfg.section("generate")["num_actors"] == 4
    assert cfg.section("generate")["perturb"] is True  # the rest of the section is kept
    assert cfg.run().root == str(tmp_path)


def test_bad_config_names_the_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("seed: [1, 2]\n")
    with pytest.raises(ValueError, match="c.yaml"):
        load_config(p)
    with pytest.raises(FileNotFoundError):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ValueError, match="key.sub=value"):
        parse_override("no-equals-sign")


@pytest.mark.parametrize("override, expected", [
    ("workspace.tts=foo", "--set workspace.tts=foo: workspace.tts: Input should be 'auto' or 'tone'"),
    ("workspce.tts=tone", "--set workspce.tts=tone: workspce: unknown key (allowed: run_dir, "),
    ("sed=3", "--set sed=3: sed: unknown key (allowed: run_dir, "),
    ("generate.num_actor=3", "--set generate.num_actor=3: generate.num_actor: unknown key (allowed: executor, num_actors, "),
    ("seed=seven", "--set seed=seven: seed: Input should be a valid integer"),
    ("render.pools.documents.sizee=3",
     "--set render.pools.documents.sizee=3: render.pools.documents.sizee: unknown key (allowed: formats, size)"),
    ("generate=5", "--set generate=5: generate: must be a mapping of generate options"),
])
def test_set_mistakes_are_one_line_errors_naming_the_override(override, expected):
    """A --set mistake in any section (every section is validated when no stage is named) is refused at load in one
    line naming the override, the
    key and the allowed keys or values, and reaches the user as exit 2 through run_job."""
    with pytest.raises(ValueError) as exc:
        load_config(overrides=[override])
    msg = str(exc.value)
    assert msg.startswith(expected) and "\n" not in msg and "default.yaml" not in msg


def test_bad_file_value_names_file_and_field_in_one_line(tmp_path, capsys):
    p = tmp_path / "c.yaml"
    p.write_text("seed: 7\nencode:\n  embed_actor: 2\n")
    with pytest.raises(ValueError) as exc:
        load_config(p, ["seed=8"])
    assert str(exc.value).startswith(f"{p}: encode.embed_actor: unknown key (allowed: ")
    from filegram_ray.jobargs import run_job

    def main(_argv):
        load_config(overrides=["seed=seven"])

    assert run_job(main, []) == 2
    err = capsys.readouterr().err
    assert err == "error: --set seed=seven: seed: Input should be a valid integer, unable to parse string as an " \
                  "integer\n"


def test_shipped_configs_load():
    from filegram_ray.paths import conf_dir

    for f in sorted(conf_dir().glob("*.yaml")):
        load_config(f)


def test_a_job_validates_only_the_sections_of_its_stages(tmp_path):
    """Loading the config of the generate door imports the seed and generate stage modules only (the default config
    has every section); a bad key of another stage's section is that stage's refusal, not generate's."""
    import os
    import subprocess
    import sys

    from filegram_ray.errors import UserError

    code = ("import sys; from filegram_ray.config import load_config; "
            "load_config(None, ['evaluate.nosuch=1'], sections=['workspace', 'generate']); "
            "from filegram_ray.stage_list import STAGES; "
            "print(sorted(s.name for s in STAGES if s.target.partition(':')[0] in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.split("\n")[0] == "['generate', 'seed']"
    with pytest.raises(UserError, match=r"evaluate\.nosuch: unknown key"):
        load_config(None, ["evaluate.nosuch=1"], sections=["evaluate"])
    with pytest.raises(UserError, match="generate: must be a mapping of generate options"):
        load_config(None, ["generate=5"], sections=["workspace"])
