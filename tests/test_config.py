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
