"""Pairs, generated profile sets and the perturbation plan (ref §5.3, §5.6, §5.7)."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from filegram_ray.cli import main
from filegram_ray.profiles import load_profiles
from filegram_ray.profiles.generate import balanced_vectors, build_profile_set, write_profile_set
from filegram_ray.profiles.pairs import (
    distance_histogram,
    distractor_candidates,
    fine_pairs,
    hamming,
    macro_pairs,
)
from filegram_ray.profiles.perturbation import CANDIDATE_TASKS, TASK_ACTIVE_DIMS, plan_perturbations
from filegram_ray.schema.profile import DETERMINISTIC_ATTRIBUTES

# ref §5.7 table, rhythm-E convention, as printed there
REF_57 = {
    "p1": "t16 E L→M; t18 C L→M; t22 F M→L; t26 A L→M; t29 D L→M",
    "p2": "t12 B L→M; t18 E L→M; t22 B L→M; t24 B L→M; t29 C R→M",
    "p3": "t12 C R→M; t16 E R→M; t22 F R→M; t24 A M→R; t26 F R→M",
    "p4": "t12 C M→L; t16 A M→L; t22 A M→R; t29 C M→L; t31 F L→M",
    "p5": "t16 E M→R; t18 E M→L; t22 B M→L; t26 C M→L; t29 D M→R",
    "p6": "t12 C L→M; t22 F R→M; t24 A R→M; t26 A R→M; t31 B M→R",
    "p7": "t12 D M→R; t18 E R→M; t22 A L→M; t29 C M→L; t31 C M→L",
    "p8": "t12 B R→M; t16 E M→R; t24 A R→M; t26 F R→M; t29 D L→M",
    "p9": "t12 B M→R; t16 E L→M; t22 B M→L; t29 D M→L; t31 F L→M",
    "p10": "t16 A L→M; t18 C R→M; t22 F M→L; t26 A L→M; t29 C R→M",
    "p11": "t12 C L→M; t16 E L→M; t26 A M→R; t29 A M→R; t31 C L→M",
    "p12": "t22 B L→M; t24 E R→M; t26 C R→M; t29 D L→M; t31 F M→R",
    "p13": "t12 D M→R; t16 E L→M; t22 F L→M; t24 A L→M; t31 C L→M",
    "p14": "t16 B R→M; t18 C L→M; t26 A M→R; t29 C L→M; t31 C L→M",
    "p15": "t16 A R→M; t24 B L→M; t26 C M→L; t29 C M→L; t31 F M→L",
    "p16": "t12 C R→M; t16 E L→M; t24 A M→L; t29 D M→R; t31 F R→M",
    "p17": "t16 A L→M; t18 D L→M; t24 A L→M; t26 C L→M; t29 A L→M",
    "p18": "t12 B R→M; t16 A R→M; t18 C R→M; t24 E L→M; t31 F M→R",
    "p19": "t12 D M→L; t16 A M→L; t24 A M→R; t29 D M→L; t31 C R→M",
    "p20": "t12 B R→M; t24 B R→M; t26 C M→L; t29 C M→L; t31 B R→M",
}
# ref §5.1: profiles whose matrix E is rhythm E with M<->R exchanged
SWAPPED = {"p3", "p4", "p5", "p6", "p7", "p8", "p10", "p12", "p14", "p15", "p17", "p19", "p20"}
SWAP = {"L": "L", "M": "R", "R": "M"}


@pytest.fixture(scope="module")
def bundled():
    return load_profiles()


def test_bundled_pair_histogram(bundled):
    assert distance_histogram(bundled) == {0: 0, 1: 3, 2: 12, 3: 34, 4: 63, 5: 51, 6: 27}  # ref §5.3
    fine = fine_pairs(bundled)
    assert len(fine) == 15 and len(macro_pairs(bundled)) == 78
    d1 = {frozenset(p[:2]) for p in fine if p[2] == 1}
    assert d1 == {frozenset(x) for x in [("p5_balanced_organizer", "p15_thorough_surveyor"),
                                          ("p9_visual_organizer", "p13_visual_architect"),
                                          ("p16_phased_minimalist", "p19_agile_pragmatist")]}
    byid = {p.profile_id: p for p in bundled}
    assert hamming(byid["p17_creative_archivist"], byid["p18_decisive_scanner"]) == 6  # ref §5.6


def test_distractor_candidates(bundled):
    target = bundled[0]
    cands = distractor_candidates(target, bundled, min_shared=3)
    assert cands and target not in cands
    shared = [6 - hamming(target, c) for c in cands]
    assert all(s >= 3 for s in shared) and shared == sorted(shared, reverse=True)
    assert len(distractor_candidates(target, bundled, min_shared=0)) == 19
    with pytest.raises(ValueError, match="min_shared"):
        distractor_candidates(target, bundled, min_shared=7)


def test_upstream_plan_matches_reference_table(bundled):
    expected = {}
    for pn, row in REF_57.items():
        for item in row.split(";"):
            key, dim, shift = item.split()
            fr, to = shift.split("→")
            if dim == "E" and pn in SWAPPED:
                fr, to = SWAP[fr], SWAP[to]
            expected[(pn, f"T-{key[1:]}")] = (dim, fr, to)
    plan = plan_perturbations(bundled, scheme="upstream")
    got = {(pid.split("_")[0], tid): (p.dimension, p.from_, p.to) for (pid, tid), p in plan.items()}
    assert got == expected
    assert plan == plan_perturbations(bundled)  # default for p<N>_ ids is upstream


def _check_plan_rules(profiles, plan, e_exceptions=()):
    byid = {p.profile_id: p for p in profiles}
    per = Counter(pid for pid, _ in plan)
    assert set(per) == set(byid) and set(per.values()) == {5}
    for (pid, tid), pert in plan.items():
        key = f"t{tid[2:]}"
        assert key in CANDIDATE_TASKS and pert.dimension in TASK_ACTIVE_DIMS[key]
        assert pert.from_ == byid[pid].tiers[pert.dimension]  # curation tiers
        if (pid, tid) in e_exceptions:  # rhythm M->L converted to curation (ref §5.7 conversion rule)
            assert (pert.dimension, pert.from_, pert.to) == ("E", "R", "L")
            continue
        assert (pert.from_, pert.to) in {("L", "M"), ("R", "M"), ("M", "L"), ("M", "R")}


def test_seeded_plan_rules_and_determinism(bundled):
    a = plan_perturbations(bundled, seed=3, scheme="seeded")
    _check_plan_rules(bundled, a)
    # the swap conversion turns p5's rhythm shift M->L on T-18 into curation R->L: the only two-tier jump
    _check_plan_rules(bundled, plan_perturbations(bundled, scheme="upstream"),
                      e_exceptions={("p5_balanced_organizer", "T-18")})
    assert a == plan_perturbations(bundled, seed=3, scheme="seeded")
    assert a != plan_perturbations(bundled, seed=4, scheme="seeded")
    with pytest.raises(ValueError, match="scheme"):
        plan_perturbations(bundled, scheme="other")


def test_balanced_vectors_cover_every_tier():
    vecs = balanced_vectors(50, seed=1)
    for d in "ABCDEF":
        assert sorted(Counter(v[d] for v in vecs).values()) == [16, 17, 17]
    assert len({tuple(v.values()) for v in vecs}) == 50  # duplicates repaired


def test_new_profile_set_loads_back_and_is_byte_stable(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["profiles", "new", "--n", "40", "--seed", "7", "--out", str(a)]) == 0
    write_profile_set(build_profile_set(40, 7), b, 7)
    files = sorted(p.name for p in a.iterdir())
    assert files == sorted(p.name for p in b.iterdir()) and len(files) == 41
    for name in files:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    profiles = load_profiles(a)
    assert len(profiles) == 40 and Counter(p.lang for p in profiles) == {"en": 20, "zh": 20}
    for p in profiles:
        for attr, (dim, table) in DETERMINISTIC_ATTRIBUTES.items():
            assert p.attributes[attr] == table[p.tiers[dim]]
        if p.lang == "zh":
            assert re.search(r"[\u4e00-\u9fff]", p.persona)
    pairs = json.loads((a / "pairs.json").read_text(encoding="utf-8"))
    byid = {p.profile_id: p for p in profiles}
    assert pairs["fine"] and pairs["macro"]
    for x, y, d in pairs["fine"]:
        assert d == hamming(byid[x], byid[y]) and 1 <= d <= 2
    for x, y, d in pairs["macro"]:
        assert d == hamming(byid[x], byid[y]) and d >= 5
    assert len(pairs["fine"]) == len(fine_pairs(profiles))
    _check_plan_rules(profiles, plan_perturbations(profiles, seed=7))  # g-ids -> seeded scheme
    other = tmp_path / "c"
    write_profile_set(build_profile_set(40, 8), other, 8)
    assert (other / "g0001.yaml").read_bytes() != (a / "g0001.yaml").read_bytes()


def test_cli_perturbations(capsys):
    assert main(["profiles", "perturbations"]) == 0
    out = capsys.readouterr().out
    # E is converted to curation (rhythm row in ref §5.7: "t16 E M→R; t18 E M→L")
    assert re.search(r"^p5_balanced_organizer\s+T-16 E R->M; T-18 E R->L; T-22 B M->L", out, re.MULTILINE)
    assert "per task: T-12 13, T-16 15, T-18 8, T-22 11, T-24 12, T-26 12, T-29 16, T-31 13 (=100)" in out
    assert "per dim:  A 22, B 15, C 26, D 11, E 13, F 13" in out
    # fresh-eyes finding: the two-tier E shift (README: "by one tier") is named and explained, and the footer says
    # that the generate stage moves or drops a shift that would change nothing
    assert "two-tier shifts: p5_balanced_organizer T-18 E R->L (upstream computes E shifts on the rhythm tier" in out
    assert "moves one that changes nothing to the task's next active dimension, or drops it" in out


@pytest.mark.parametrize("n", ["0", "-3", "two"])
def test_new_profile_set_with_no_profiles_is_a_usage_error(tmp_path, capsys, n):
    """Review finding (helper-28): `filegram profiles new --n 0` ended in a ValueError traceback; a count under 1
    or not a number is now argparse's one-line usage error (exit 2), and nothing is written."""
    with pytest.raises(SystemExit) as exc:
        main(["profiles", "new", "--n", n, "--out", str(tmp_path / "set")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --n:" in err and "Traceback" not in err and not (tmp_path / "set").exists()
