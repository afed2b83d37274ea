"""Profile model and loaders: the 20 bundled profiles, upstream YAML, malformed input, CLI list output."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from filegram_ray.cli import main
from filegram_ray.profiles import ProfileError, load_profile, load_profiles
from filegram_ray.schema.profile import BEHAVIOURAL_ATTRIBUTES, Profile

UPSTREAM = Path(__file__).resolve().parents[1].parent / "shared" / "upstream-data" / "profiles"
needs_upstream = pytest.mark.skipif(not UPSTREAM.is_dir(),
                                    reason=f"upstream profile files not present at {UPSTREAM}")

# ref §5.3 matrix rows (E = curation column E(m)) and E(y) rhythm, spot checks
MATRIX = {
    "p1_methodical": ("LLLLLM", "phased"), "p3_efficient_executor": ("MRRRMR", "bursty"),
    "p4_structured_analyst": ("MLMLRL", "steady"), "p10_silent_auditor": ("LRRRRM", "steady"),
    "p17_creative_archivist": ("LLLLML", "bursty"), "p20_visual_auditor": ("LRMRRL", "steady"),
}


@pytest.fixture(scope="module")
def profiles() -> list[Profile]:
    return load_profiles()


def test_bundled_set(profiles):
    assert [p.number for p in profiles] == list(range(1, 21))
    byid = {p.profile_id: p for p in profiles}
    for pid, (vec, rhythm) in MATRIX.items():
        assert "".join(byid[pid].tiers.values()) == vec and byid[pid].rhythm == rhythm
    assert sum(p.lang == "zh" for p in profiles) == 10
    assert byid["p5_balanced_organizer"].attributes["cross_modal_behavior"] == "balanced"
    for p in profiles:
        assert list(p.attributes) == list(BEHAVIOURAL_ATTRIBUTES)
        assert set(p.preferences) == set("ABCDEF") and p.persona and p.greeting
        has_cjk = bool(re.search(r"[\u4e00-\u9fff]", p.persona))
        assert has_cjk == (p.lang == "zh"), p.profile_id
    # every tier of every dimension appears in >= 5 profiles (paper; ref §5.3 coverage note)
    for d in "ABCDEF":
        for t in "LMR":
            assert sum(p.tiers[d] == t for p in profiles) >= 5


def test_profile_roundtrip(profiles, tmp_path):
    for p in profiles:
        assert Profile.model_validate_json(p.model_dump_json()) == p
        f = tmp_path / f"{p.profile_id}.yaml"
        f.write_text(yaml.safe_dump(p.model_dump(mode="json"), allow_unicode=True), encoding="utf-8")
        assert load_profile(f) == p


@needs_upstream
def test_upstream_profiles_match_bundled(profiles, tmp_path):
    ups = load_profiles(UPSTREAM)  # tiers from profile_matrix.json
    assert [p.profile_id for p in ups] == [p.profile_id for p in profiles]
    for a, b in zip(profiles, ups):
        assert (a.tiers, a.rhythm, a.attributes, a.name, a.role, a.language) == \
            (b.tiers, b.rhythm, b.attributes, b.name, b.role, b.language)
    for f in UPSTREAM.glob("p*.yaml"):  # header-only conversion (no matrix beside the file)
        shutil.copy(f, tmp_path / f.name)
    for a, b in zip(profiles, load_profiles(tmp_path)):
        assert a.tiers == b.tiers and a.rhythm == b.rhythm


def _write(tmp_path: Path, data: dict, name: str = "bad.yaml") -> Path:
    f = tmp_path / name
    f.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return f


def _good(profiles) -> dict:
    return profiles[0].model_dump(mode="json")


def test_missing_tier(profiles, tmp_path):
    d = _good(profiles)
    del d["tiers"]["E"]
    f = _write(tmp_path, d)
    with pytest.raises(ProfileError, match=r"bad\.yaml: field 'tiers\.E': missing tier"):
        load_profile(f)


def test_a_misspelt_tiers_key_is_named(profiles, tmp_path):
    """A key close to the missing ``tiers`` (``teirs:``) is named in the error, with the key it stands for."""
    d = _good(profiles)
    d["teirs"] = d.pop("tiers")
    with pytest.raises(ProfileError, match=r"bad\.yaml: field 'tiers': missing tier vector "
                                           r"\(unknown key 'teirs': did you mean 'tiers'\?\)"):
        load_profile(_write(tmp_path, d))
    d["notes"] = d.pop("teirs")  # an unknown key far from 'tiers' is not offered as one
    with pytest.raises(ProfileError, match=r"field 'tiers': missing tier vector$"):
        load_profile(_write(tmp_path, d))


def test_a_misspelt_attribute_value_is_refused(profiles, tmp_path):
    """Fresh-eyes finding: `tone: casul` or `documentation: nonsense` loaded silently and the simulator acted as if
    the attribute had its default. A free attribute's value outside its space is refused, naming file, field and
    the allowed values."""
    d = _good(profiles)
    d["attributes"]["tone"] = "casul"
    with pytest.raises(ProfileError, match=r"bad\.yaml: field 'attributes': tone: unknown value 'casul' "
                                           r"\(expected one of professional, friendly, casual\)"):
        load_profile(_write(tmp_path, d))


def test_unknown_tier(profiles, tmp_path):
    d = _good(profiles)
    d["tiers"]["C"] = "X"
    with pytest.raises(ProfileError, match=r"field 'tiers\.C': unknown tier 'X'"):
        load_profile(_write(tmp_path, d))


def test_wrong_type(profiles, tmp_path):
    d = _good(profiles)
    d["tiers"] = ["L", "L"]
    with pytest.raises(ProfileError, match=r"field 'tiers': wrong type"):
        load_profile(_write(tmp_path, d))
    d = _good(profiles)
    d["greeting"] = ["not", "a", "string"]
    with pytest.raises(ProfileError, match=r"bad\.yaml: field 'greeting'"):
        load_profile(_write(tmp_path, d))


def test_duplicate_id(profiles, tmp_path):
    d = _good(profiles)
    _write(tmp_path, d, "a.yaml")
    _write(tmp_path, d, "b.yaml")
    with pytest.raises(ProfileError, match=r"b\.yaml: field 'profile_id': duplicate id 'p1_methodical'"):
        load_profiles(tmp_path)


def test_missing_attribute(profiles, tmp_path):
    d = _good(profiles)
    del d["attributes"]["naming"]
    with pytest.raises(ProfileError, match=r"field 'attributes'.*missing attribute"):
        load_profile(_write(tmp_path, d))


@needs_upstream
def test_upstream_unknown_header_tier(tmp_path):
    text = (UPSTREAM / "p3_efficient_executor.yaml").read_text(encoding="utf-8").replace("B:R", "B:Q", 1)
    f = tmp_path / "p3_efficient_executor.yaml"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(ProfileError, match=r"L/M/R Vector.*\.B': unknown tier 'Q'"):
        load_profile(f)


def test_cli_list(capsys):
    assert main(["profiles", "list"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^p17_creative_archivist\s+Chen Wenjing\s+Museum Curator\s+zh\s+L L L L M L\s+bursty$",
                     out, re.MULTILINE)
    assert "20 profiles" in out


@needs_upstream
def test_cli_list_upstream(capsys):
    assert main(["profiles", "list", "--dir", str(UPSTREAM)]) == 0
    assert re.search(r"^p4_structured_analyst\s+Nakamura Yuki.*\s+M L M L R L\s+steady$",
                     capsys.readouterr().out, re.MULTILINE)
