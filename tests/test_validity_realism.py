"""Issue #28 measures on small synthetic tables with known answers: η², one-feature trees, count rules, the
count-rule answerer, motivation (searches, inspections, sourced sentences) and perturbation visibility."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from filegram_ray.validity.motivation import SourceText, action_checks, motivation, sentences
from filegram_ray.validity.realism import check_lines, perturbation_visibility
from filegram_ray.validity.separability import (
    CountRuleAnswerer,
    best_single_feature,
    eta_squared,
    rule_tiers,
    separability,
    task_tier_eta2,
)


@dataclass
class FakeSession:
    """The attributes the measures read from a :class:`filegram_ray.validity.core.Session`."""

    profile_id: str
    task_id: str
    tiers: dict[str, str]
    proc: dict = field(default_factory=dict)
    perturbation: dict | None = None
    fp: np.ndarray = field(default_factory=lambda: np.zeros(17))
    task_type: str = "understand"
    trajectory_id: str = ""

    @property
    def effective(self):
        t = dict(self.tiers)
        if self.perturbation:
            t[self.perturbation["dimension"]] = self.perturbation["to"]
        return t


DELETES = {"L": 3, "M": 1, "R": 0}


def _sessions(n_profiles: int, tasks: list[str], deletes, seed: int = 0) -> list[FakeSession]:
    """Profiles with random E tiers (other tiers M); ``deletes(tier, rng)`` gives a session's delete count."""
    rng = random.Random(seed)
    out = []
    for p in range(n_profiles):
        tiers = {d: "M" for d in "ABCDEF"}
        tiers["E"] = "LMR"[p % 3]
        for t in tasks:
            proc = {"version_strategy": {"total_deletes": deletes(tiers["E"], rng)},
                    "reading_strategy": {"total_searches": rng.randint(0, 5), "total_browses": rng.randint(0, 5)}}
            out.append(FakeSession(f"p{p:02d}", t, tiers, proc, trajectory_id=f"p{p:02d}/{t}"))
    return out


def test_eta_squared_is_one_for_a_deterministic_feature_and_near_zero_for_noise():
    groups = [g for g in range(6) for _ in range(200)]
    assert eta_squared([g * 2.0 for g in groups], groups) == pytest.approx(1.0)
    noise = np.random.default_rng(0).normal(size=len(groups))
    assert eta_squared(noise, groups) < 0.02
    assert np.isnan(eta_squared([3.0] * 10, list(range(10))))  # a constant feature explains nothing
    # half the variance between two groups, half within
    assert eta_squared([0, 2, 10, 12], ["a", "a", "b", "b"]) == pytest.approx(100 / 104)


def test_task_tier_eta2_finds_a_tier_quota_and_not_a_noisy_tendency():
    tasks = [f"T-{i:02d}" for i in range(1, 9)]
    quota = _sessions(30, tasks, lambda tier, rng: DELETES[tier])
    noisy = _sessions(30, tasks, lambda tier, rng: max(0, round(rng.gauss(DELETES[tier] * 0.3, 1.5))), seed=1)
    name = "version_strategy.total_deletes"
    q = task_tier_eta2(quota, [name])[name]
    assert q["eta2"] == pytest.approx(1.0) and q["dimension"] == "E"
    assert task_tier_eta2(noisy, [name])[name]["eta2"] < 0.6
    # two sessions per cell: no figure rather than a near-1 η² that noise alone would give
    tiny = _sessions(2, tasks, lambda tier, rng: rng.random())
    assert task_tier_eta2(tiny, [name])[name]["eta2"] is None


def test_one_feature_tree_reaches_one_on_separable_data_and_chance_on_noise():
    rng = np.random.default_rng(0)
    y = np.array(["L", "M", "R"] * 100)
    sep = np.where(y == "L", 5.0, np.where(y == "M", 2.0, 0.0))
    X = np.column_stack([rng.normal(size=300), sep])
    res = best_single_feature(X, y, X, y, ["noise", "deletes"])
    assert res["feature"] == "deletes" and res["accuracy"] == 1.0
    Xn = rng.normal(size=(300, 1))
    Xn2 = rng.normal(size=(300, 1))
    assert best_single_feature(Xn, y, Xn2, y, ["noise"])["accuracy"] < 0.5


def test_separability_cross_set_and_within_set():
    tasks = ["T-01", "T-02", "T-03", "T-04"]
    quota1 = _sessions(15, tasks, lambda tier, rng: DELETES[tier], seed=1)
    quota2 = _sessions(15, tasks, lambda tier, rng: DELETES[tier], seed=2)
    cross = separability(quota2, quota1)
    assert cross["E"]["accuracy"] == 1.0 and cross["E"]["feature"] == "version_strategy.total_deletes"
    assert separability(quota2)["E"]["accuracy"] == 1.0  # leave-profiles-out
    # every other dimension is M for all: a tree reads "M" with accuracy 1 = chance, not a tier signal
    assert cross["A"]["chance"] == 1.0
    few = separability(quota2[:8])
    assert "too few profiles" in few["E"]["na"]


def test_rule_tiers_read_the_issue_rules():
    proc = {"reading_strategy": {"total_searches": 4, "total_browses": 0},
            "output_detail": {"total_output_chars": 12000},
            "directory_style": {"max_dir_depth": 3},
            "edit_strategy": {"total_edits": 6, "avg_lines_changed": 4.0},
            "version_strategy": {"total_deletes": 1},
            "cross_modal_behavior": {"image_files_created": 0, "markdown_table_rows": 7}}
    assert rule_tiers(proc) == {"A": "M", "B": "L", "C": "L", "D": "L", "E": "M", "F": "M"}
    assert rule_tiers({}) == {"A": "L", "B": "R", "C": "R", "D": "R", "E": "R", "F": "R"}


def test_count_rule_answerer_reads_shift_and_impostor_from_counts():
    from filegram_ray.bench.vocab import TIER_SHORT

    base = {"A": "L", "B": "M", "C": "R", "D": "R", "E": "R", "F": "R"}
    tiers = {f"s{i}": dict(base) for i in range(5)}
    tiers["s5"] = {**base, "E": "M"}  # the perturbed / impostor session deletes one file
    ans = CountRuleAnswerer(tiers.__getitem__, seed=3)
    right = f"{TIER_SHORT['E']['R']} → {TIER_SHORT['E']['M']}"
    choices = {"A": f"{TIER_SHORT['C']['R']} → {TIER_SHORT['C']['M']}", "B": right,
               "C": f"{TIER_SHORT['E']['M']} → {TIER_SHORT['E']['R']}"}
    assert ans.answer_shiftana("q1", choices, [f"s{i}" for i in range(6)]) == "B"
    labels = [f"Session T-0{i}" for i in range(6)]
    got = ans.answer_anomdet("q2", {chr(65 + i): lab for i, lab in enumerate(labels)}, [f"s{i}" for i in range(6)],
                             labels)
    assert got == "F"
    # nothing to tell apart: a seeded draw, the same for the same question id
    flat = CountRuleAnswerer(lambda t: dict(base), seed=3)
    picks = {flat.answer_shiftana("q1", choices, ["a", "b", "c"]) for _ in range(3)}
    assert len(picks) == 1


def test_action_checks_count_search_hits_and_inspections():
    raw = [{"event_type": "session_start", "target_directory": "/sandbox/x"},
           {"event_type": "file_search", "search_type": "glob", "query": "**/*report*", "files_matched": 1,
            "files_opened_after": []},
           {"event_type": "file_read", "file_path": "/sandbox/x/q3_report.md"},       # the glob's match: opened
           {"event_type": "file_search", "search_type": "grep", "query": "Gomez", "files_matched": 3,
            "files_opened_after": []},
           {"event_type": "file_read", "file_path": "/sandbox/x/other.md"},          # no Gomez in it
           {"event_type": "file_search", "files_matched": 0, "files_opened_after": []},
           {"event_type": "file_read", "file_path": "/sandbox/x/a.md"},
           {"event_type": "file_delete", "file_path": "/sandbox/x/a.md"},           # read first: inspected
           {"event_type": "file_delete", "file_path": "/sandbox/x/junk.tmp"},       # never looked at
           {"event_type": "tool_call", "tool_name": "bash", "tool_parameters": {"command": "ls -la old && head b.txt"}},
           {"event_type": "file_move", "old_path": "/sandbox/x/b.txt", "new_path": "/sandbox/x/arch/b.txt"},
           {"event_type": "file_rename", "old_path": "/sandbox/x/arch/b.txt", "new_path": "/sandbox/x/arch/c.txt"},
           {"event_type": "tool_call", "tool_name": "bash", "tool_parameters": {"command": "ls -l sub/f.md"}},
           {"event_type": "file_move", "old_path": "/sandbox/x/sub/f.md", "new_path": "/sandbox/x/e/f.md"},
           {"event_type": "tool_call", "tool_name": "bash", "tool_parameters": {"command": "ls"}},
           {"event_type": "file_move", "old_path": "/sandbox/x/d.txt", "new_path": "/sandbox/x/e/d.txt"},
           {"event_type": "file_delete", "file_path": "/sandbox/x/g.txt"}]
    texts = {"a.md": ["Cynthia Gomez approved it."], "other.md": ["nothing here"], "q3_report.md": ["x"]}
    r = action_checks(raw, texts.get)
    # the event's files_opened_after is always empty (reference §4): "opened" is read from the order of the log
    assert (r["searches"], r["search_hits"], r["search_opened"]) == (3, 2, 1)
    # a one-file `ls -l` is no look at the file; a listing of its folder shows what a move is decided on (d.txt),
    # but a delete needs the content (g.txt, listed too, was never opened)
    assert (r["changes"], r["inspected"]) == (7, 4)
    assert [m["path"] for m in r["uninspected"]] == ["junk.tmp", "sub/f.md", "g.txt"]


def test_sentences_and_sourced_facts():
    text = ("# Report\n\n| a | b |\n|---|---|\n| Revenue | 4,120 |\n\n- Revenue grew to 4,120 units in March. "
            "Cynthia Gomez approved the plan.\n- It is nice.\n```\ncode here is not prose\n```\n"
            "The quarterly channel checks show stable demand across regions.\n")
    got = sentences(text)
    assert got == ["Revenue ; 4,120", "Revenue grew to 4,120 units in March.", "Cynthia Gomez approved the plan.",
                   "It is nice.", "The quarterly channel checks show stable demand across regions."]
    src = SourceText(["Sales: 4120 units. Notes by Cynthia Gomez.",
                      "Our quarterly channel checks show stable demand in Asia."])
    assert [src.fact(s) for s in got] == ["number", "number", "name", None, "span"]
    # a list of the files read is not a fact, even when the inputs mention those names
    named = SourceText(["see sector watchlist 2024 10 22 and channel checks summary md for details"])
    assert named.fact("Read for the task: sector_watchlist_2024_10_22.md, channel_checks_summary (1).md") is None
    zh = SourceText(["本季度渠道检查显示各地区需求保持稳定。"])
    assert zh.fact("结论：本季度渠道检查显示各地区需求保持稳定") == "span"
    assert zh.fact("结论：我们认为情况总体来说还是不错的") is None
    # in Chinese a number, a name or a file name stands next to CJK characters (word characters for ``\b``): their
    # edges are where ASCII letters and digits end
    mixed = SourceText(["Hearing on 2024-08-20. TSMC and Laura Chen confirmed; see memo_2024_09.md"])
    assert mixed.fact("请在2024-08-20前提交材料") == "number"
    assert mixed.fact("TSMC方面表示同意") == "name" and mixed.fact("由Laura Chen负责跟进") == "name"
    assert mixed.fact("另见memo_2024_09.md中的说明") is None  # a file name is not a fact taken from a file
    assert mixed.fact("请在20240820前提交") is None  # another number, not a longer match of the read one


def test_one_count_against_the_acting_tier(tmp_path: Path):
    """acting_count_accuracy reads each session's acting tier from its meta.json: a count that follows the acting
    tier reads it (1.0), one drawn without regard to it stays near chance (under the 0.75 bound)."""
    from types import SimpleNamespace

    from filegram_ray.validity.realism import ACTING_COUNT_BOUND, acting_count_accuracy

    rng = random.Random(3)
    sessions = []
    for p in range(12):
        for t in range(6):
            tiers = {d: rng.choice("LMR") for d in "ABCDEF"}
            base = tmp_path / "trajectories" / f"g{p:02d}" / f"T-{t:02d}"
            base.mkdir(parents=True)
            (base / "meta.json").write_text(json.dumps({"acting_tiers": tiers}))
            proc = {"reading_strategy": {"total_searches": "LMR".index(tiers["A"]) * 3 + rng.random()},
                    "directory_style": {"max_dir_depth": rng.randint(0, 3)}}
            sessions.append(SimpleNamespace(profile_id=f"g{p:02d}", task_id=f"T-{t:02d}", proc=proc))
    sessions.append(SimpleNamespace(profile_id="g99", task_id="T-00", proc={}))  # no meta.json: left out
    got = acting_count_accuracy(sessions, str(tmp_path))
    assert got["A"] == {"accuracy": 1.0, "count": "total_searches", "n": 72}
    assert got["C"]["accuracy"] < ACTING_COUNT_BOUND and got["C"]["count"] == "max_dir_depth"
    few = acting_count_accuracy(sessions[:6 * 4], str(tmp_path))
    assert few["A"] == {"na": "fewer than 5 profiles with acting tiers"}


def test_motivation_on_a_tiny_run_directory(tmp_path: Path):
    """A run directory with one session: it reads half of one input, writes one report and deletes an unread file."""
    ws = tmp_path / "workspaces" / "T-01" / "files"
    ws.mkdir(parents=True)
    (ws / "notes.md").write_text("Line one says the budget is 5,400 euros.\nLine two names Maria Lopez.\n")
    (ws / "old.tmp").write_text("x")
    traj = tmp_path / "trajectories" / "p1" / "T-01"
    (traj / "outputs").mkdir(parents=True)
    (traj / "outputs" / "report.md").write_text("The budget is 5,400 euros.\nMaria Lopez leads it now.\n"
                                                "Everything is going well today.\n")
    raw = [{"event_type": "session_start", "target_directory": "/s"},
           {"event_type": "file_read", "file_path": "/s/notes.md", "view_range": [1, 1]},
           {"event_type": "file_write", "file_path": "/s/report.md", "operation": "create"},
           {"event_type": "file_delete", "file_path": "/s/old.tmp"}]
    (traj / "events_raw.json").write_text(json.dumps(raw))
    empty = tmp_path / "trajectories" / "p3" / "T-01"  # reads nothing, writes a report: not counted
    (empty / "outputs").mkdir(parents=True)
    (empty / "outputs" / "r.md").write_text("A plan with five words or more.\n")
    (empty / "events_raw.json").write_text(json.dumps([raw[0], raw[2]]))
    bad = tmp_path / "trajectories" / "p4" / "T-01"  # a field of the wrong type: left out and named
    bad.mkdir(parents=True)
    (bad / "events_raw.json").write_text(json.dumps([{"event_type": "file_search", "files_matched": "many"}]))
    m = motivation(tmp_path, [("p1", "T-01"), ("p2", "T-01"), ("p3", "T-01"), ("p4", "T-01")])
    assert m["skipped"][1]["trajectory_id"] == "p4/T-01" and "malformed event field" in m["skipped"][1]["error"]
    assert m["counts"]["sessions_without_input_read"] == 1
    # line 2 (Maria Lopez) was not read: only the budget sentence is sourced
    assert m["counts"]["sentences"] == 3 and m["counts"]["sourced"] == 1
    assert m["sourced_sentences"] == pytest.approx(1 / 3)
    assert m["inspected_before_change"] == 0.0 and np.isnan(m["search_hits"])
    assert m["skipped"][0]["trajectory_id"] == "p2/T-01" and "events_raw.json" in m["skipped"][0]["error"]


def test_perturbation_visibility_auc():
    rng = np.random.default_rng(0)
    sess = []
    for p in range(4):
        for t in range(8):
            fp = np.abs(rng.normal(1.0, 0.1, size=17))
            pert = None
            if t == p + 2:  # each profile perturbed on another task
                pert = {"dimension": "E", "from": "R", "to": "L"}
                fp[12:14] += 20.0  # a large shift of the E columns
            sess.append(FakeSession(f"p{p}", f"T-{t:02d}", {d: "M" for d in "ABCDEF"}, fp=fp, perturbation=pert))
    vis = perturbation_visibility(sess)
    assert vis["n_perturbed"] == 4 and vis["auc"] == 1.0 and vis["by_dimension"] == {"E": 1.0}


def test_check_lines_mark_pass_fail_and_na():
    res = {"checks": [{"name": "x", "value": 0.5, "bound": 0.8, "op": "<=", "pass": True, "note": ""},
                      {"name": "y", "value": 0.95, "bound": 0.8, "op": "<=", "pass": False, "note": "n"},
                      {"name": "z", "value": None, "bound": 0.9, "op": ">=", "pass": None, "note": "why"}],
           "tau_flags": {"tau": 1.5, "precision": 0.6, "recall": 0.3},
           "flag_reason": {"delta_perturbed": 3.0, "delta_unperturbed": 2.0, "cutoff": 4.0,
                           "perturbed_below_cutoff": 0.7},
           "rule_sessions": {d: 0.5 for d in "ABCDEF"}}
    lines = check_lines(res)
    assert lines[0].split()[0] == "PASS" and lines[1].split()[0] == "FAIL" and lines[2].split()[0] == "n/a"
    assert "reason:" in lines[3] and "0.700 of the perturbed sessions" in lines[3]


def test_measurement_page_replaces_only_its_own_section(tmp_path: Path):
    """bench_validity.py keeps the 'before' figures when it writes 'after', and a rerun replaces its section."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_validity", Path(__file__).parent / "benchmarks" / "bench_validity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    page = tmp_path / "m.md"
    mod.write_page("## before — t1\n\nold figures\n", "before", page)
    mod.write_page("## after — t2\n\nfirst after\n", "after", page)
    mod.write_page("## after — t3\n\nsecond after\n", "after", page)
    text = page.read_text()
    assert text.startswith("# Behaviour validity") and text.count("## before") == 1 and "old figures" in text
    assert text.count("## after") == 1 and "second after" in text and "first after" not in text
    assert not list(tmp_path.glob("*.tmp"))


def _bench_inputs(vectors: dict[str, str], probed: tuple[str, ...] = (), fingerprints: bool = True):
    """Bench inputs: one profile per vector, 10 tasks each probing ``probed``; u1's T-02 is a real C L→M shift.
    ``fingerprints=False``: no fingerprint anywhere (a bench without encode)."""
    from filegram_ray.bench.inputs import BenchInputs, ProfileRec, TaskRec, TrajRec

    tasks = [f"T-{i:02d}" for i in range(1, 11)]
    profiles = [ProfileRec(profile_id=p, name=p, role="Analyst", language="English",
                           tiers=dict(zip("ABCDEF", v, strict=True)), attributes={}) for p, v in vectors.items()]
    trajs = []
    for k, p in enumerate(profiles):
        for j, t in enumerate(tasks):
            pert = {"dimension": "C", "from": "L", "to": "M"} if (p.profile_id, t) == ("u1", "T-02") else None
            trajs.append(TrajRec(trajectory_id=f"{p.profile_id}/{t}", profile_id=p.profile_id, task_id=t,
                                 perturbation=pert, shift_real=True if pert else None,
                                 fingerprint=tuple(float((100 * k + j) * 7 + i) for i in range(17))
                                 if fingerprints else None))
    return BenchInputs(profiles=profiles, trajectories=trajs,
                       tasks=[TaskRec(task_id=t, type="understand", dimensions=probed) for t in tasks])


def test_anomdet_impostors_come_from_fine_grained_pairs():
    """Issue #28 (item design, reference §9.2): an impostor differs from the user in 1–2 dimensions when the set
    has such a profile; only a user without one falls back to the nearest profile sharing ≥ 3 dimensions."""
    from filegram_ray.bench.builders import anomdet

    vecs = {"u1": "LLLLLL", "u2": "MLLLLL", "u3": "MMMLLL", "u4": "RRRRRR", "u5": "RRRMMM"}
    drafts = anomdet.build(_bench_inputs(vecs), seed=5, target=60)
    imp = {}
    for d in drafts:
        imp.setdefault(d.profile_id, set()).add(d.facts["impostor_profile"])
    assert imp["u1"] == {"u2"}           # u2 is 1 apart; u3 (3 apart) shares 3 but is no fine pair
    assert imp["u2"] == {"u1", "u3"}     # 1 and 2 apart
    assert imp["u3"] == {"u2"}           # 2 apart; u1 is 3 apart
    assert imp["u4"] == {"u5"} and imp["u5"] == {"u4"}  # no fine pair: the nearest sharing ≥ 3 (3 apart)


def test_shiftana_distractors_prefer_the_tasks_probed_dimensions():
    """Issue #28 (item design), a bench without fingerprints (no encode stage): the other-dimension options are
    shifts the task could have shown (its probed dimensions, reference §5.7) before the rest."""
    from filegram_ray.bench.builders import shiftana
    from filegram_ray.bench.vocab import TIER_SHORT

    vecs = {"u1": "MMLMMM", "u2": "MMMMMM"}
    drafts = shiftana.build(_bench_inputs(vecs, probed=("C", "A", "F"), fingerprints=False), seed=3, target=100)
    assert drafts
    dim_of = {f"{TIER_SHORT[d][a]} → {TIER_SHORT[d][b]}": d for d in "ABCDEF" for a in "LMR" for b in "LMR"
              if a != b}
    for d in drafts:
        others = [dim_of[x] for x in d.distractors if dim_of[x] != "C"]
        k = len(d.distractors) + 1
        # A and F are M (two directions each): up to 4 probed options fill every slot before another dimension
        assert set(others) <= {"A", "F"} if k - 2 <= 4 else {"A", "F"} <= set(others)


def test_shiftana_offers_the_changes_the_session_acted_first_without_fingerprints():
    """Issue #28 (item design), a bench without fingerprints (no encode stage): a dimension the perturbed session
    acted one tier off the user's usual tier by the user's own variation (``meta.json`` acting_tiers) is the first
    false option; the opposite direction of the true shift follows."""
    import dataclasses

    from filegram_ray.bench.builders import shiftana
    from filegram_ray.bench.vocab import TIER_SHORT

    inputs = _bench_inputs({"u1": "MMLMMM", "u2": "MMMMMM"}, probed=("C", "A", "F"), fingerprints=False)
    acting = {"A": "M", "B": "M", "C": "M", "D": "L", "E": "M", "F": "R"}  # D and F went against type
    inputs = dataclasses.replace(inputs, trajectories=[dataclasses.replace(t, acting_tiers=acting) if t.perturbed
                                                       else t for t in inputs.trajectories])
    drafts = shiftana.build(inputs, seed=3, target=100)
    assert {len(d.distractors) + 1 for d in drafts} == {3, 4, 5, 6}
    shown = {f"{TIER_SHORT['F']['M']} → {TIER_SHORT['F']['R']}", f"{TIER_SHORT['D']['M']} → {TIER_SHORT['D']['L']}"}
    reverse = f"{TIER_SHORT['C']['M']} → {TIER_SHORT['C']['L']}"
    for d in drafts:
        k = len(d.distractors) + 1
        if k == 3:  # two slots: both shown changes, F (probed) before D
            assert set(d.distractors) == shown
        else:
            assert d.distractors[:3] == [f"{TIER_SHORT['F']['M']} → {TIER_SHORT['F']['R']}",
                                         f"{TIER_SHORT['D']['M']} → {TIER_SHORT['D']['L']}", reverse]


def _with_fingerprints(inputs, fp):
    import dataclasses

    return dataclasses.replace(inputs, trajectories=[dataclasses.replace(t, fingerprint=fp(t))
                                                     for t in inputs.trajectories])


def test_shiftana_offers_the_changes_the_session_shows_most_first():
    """Issue #28 (item design): the false options are the other one-tier changes ranked by how far the shown
    session moved toward each from the baseline (bench/observed.py, per-task z along the direction from the
    user's tier to the option's, learnt from the run's profiles). Here u1's perturbed session (C L→M) also reads
    like a D-L session: "D M→L" is the first false option; D M→R (moved away) and the reversed true shift come
    after every option the session does not contradict."""
    from filegram_ray.bench.builders import shiftana
    from filegram_ray.bench.observed import DIM_COLUMNS
    from filegram_ray.bench.vocab import TIER_SHORT

    inputs = _bench_inputs({"u1": "MMLMMM", "u2": "MMMLMM", "u3": "MMMRMM", "u4": "MMMMMM"}, probed=("C",))
    tiers = {p.profile_id: p.tiers for p in inputs.profiles}

    def fp(t):
        c = 20.0 if t.trajectory_id == "u1/T-02" else {"L": 1.0, "M": 20.0}[tiers[t.profile_id]["C"]]
        d = 1.0 if t.trajectory_id == "u1/T-02" else {"L": 1.0, "M": 10.0, "R": 100.0}[tiers[t.profile_id]["D"]]
        j = int(t.task_id[2:])
        return tuple(c if i in DIM_COLUMNS["C"] else d if i in DIM_COLUMNS["D"] else float(j + i) for i in range(17))

    drafts = [x for x in shiftana.build(_with_fingerprints(inputs, fp), seed=3, target=100) if x.profile_id == "u1"]
    assert {len(x.distractors) + 1 for x in drafts} == {3, 4, 5, 6}
    for x in drafts:
        assert x.correct == f"{TIER_SHORT['C']['L']} → {TIER_SHORT['C']['M']}"
        assert x.distractors[0] == f"{TIER_SHORT['D']['M']} → {TIER_SHORT['D']['L']}"
        assert f"{TIER_SHORT['D']['M']} → {TIER_SHORT['D']['R']}" not in x.distractors
        assert f"{TIER_SHORT['C']['M']} → {TIER_SHORT['C']['L']}" not in x.distractors


def test_shiftana_keeps_the_baseline_along_which_the_shift_shows_least(monkeypatch):
    """Issue #28 (item design): of the baseline samples drawn, the item keeps the one from which the perturbed
    session moved least toward the target tier — the shift must be told from the user's usual spread, not read off
    one conspicuous count. u1's C columns vary from task to task; with many draws the kept 8-of-9 baseline is the
    least revealing of the nine possible, with one draw it often is not."""
    import itertools

    from filegram_ray.bench.builders import shiftana
    from filegram_ray.bench.observed import DIM_COLUMNS, ObservedView

    inputs = _bench_inputs({"u1": "MMLMMM", "u2": "MMMMMM", "u3": "MMMMMM", "u4": "MMMMMM"}, probed=("C",))
    level = {"u2": 40.0, "u3": 5.0, "u4": 20.0}

    def fp(t):
        j = int(t.task_id[2:])
        c = level.get(t.profile_id, 30.0 if t.task_id == "T-02" else float((7 * j) % 11))
        return tuple(c if i in DIM_COLUMNS["C"] else float(j + i) for i in range(17))

    inputs = _with_fingerprints(inputs, fp)
    view, by = ObservedView(inputs), {t.trajectory_id: t for t in inputs.trajectories}
    sess, clean = by["u1/T-02"], [t for t in inputs.trajectories_of("u1") if not t.perturbed]
    least = min(view.departure(sess, list(b), "C", "L", "M") for b in itertools.combinations(clean, 8))

    def departures():
        return [view.departure(sess, [by[t] for t in x.context.trajectories[:-1]], "C", "L", "M")
                for x in shiftana.build(inputs, seed=3, target=100)]

    monkeypatch.setattr(shiftana, "BASELINE_DRAWS", 60)
    many = departures()
    assert len(many) == 4 and all(d == pytest.approx(least) for d in many)
    monkeypatch.setattr(shiftana, "BASELINE_DRAWS", 1)
    assert any(d > least + 1e-6 for d in departures())


def test_item_sessions_compare_like_with_like(monkeypatch):
    """Issue #28 (item design): AnomDet's user sessions come first from tasks that probe a dimension where user and
    impostor differ, so a task that exercises a dimension is not what sets the impostor apart. ShiftAna's baseline is
    drawn from all of the user's sessions: one drawn from the tasks that probe the shifted dimension named the
    answer's dimension to a reader of the session list (its fingerprints are compared per task anyway)."""
    import dataclasses

    from filegram_ray.bench.builders import anomdet, shiftana
    from filegram_ray.bench.inputs import TaskRec

    inputs = _bench_inputs({"u1": "LLLLLL", "u2": "MLLLLL"})
    probing = {"T-02", "T-04", "T-05", "T-06", "T-07", "T-08"}  # probe A and C; the others probe B only
    inputs = dataclasses.replace(inputs, tasks=[TaskRec(task_id=t.task_id, type="understand",
                                                        dimensions=("A", "C") if t.task_id in probing else ("B",))
                                                for t in inputs.tasks])
    missing = set()
    monkeypatch.setattr(shiftana, "BASELINE_DRAWS", 1)  # the draw itself, before the filter picks among draws
    for seed in range(1, 6):
        sa = shiftana.build(inputs, seed=seed, target=100)
        assert sa
        for d in sa:  # the shift is C; 9 clean sessions of u1, 5 of them probe C: 8 shown, whatever they probe
            base = {t.split("/")[1] for t in d.context.trajectories[:-1]}
            assert len(base) == shiftana.MAX_BASELINE
            missing |= (probing - {"T-02"}) - base
    assert missing  # some baseline leaves a C-probing session out (probing-first would show all five every time)
    ad = anomdet.build(inputs, seed=1, target=40)
    assert ad
    for d in ad:  # u1 and u2 differ on A: user sessions from A-probing tasks while there are enough
        imp = d.facts["impostor"]
        user = [t for t in d.context.trajectories if t != imp]
        like = [t for t in user if t.split("/")[1] in probing]
        assert len(like) == min(len(user), len(probing - {imp.split("/")[1]} - ({"T-02"} if d.profile_id == "u1"
                                                                                   else set())))


def test_observed_view_measures_distance_in_task_sds():
    """The memory-less view of shown sessions (bench/observed.py): per-task standardised log1p fingerprints, and
    the distance of one session from the mean of others over the columns of the dimensions asked about."""
    import dataclasses
    import math

    import numpy as np

    from filegram_ray.bench.observed import DIM_COLUMNS, ObservedView

    inputs = _bench_inputs({"u1": "MMMMMM", "u2": "MMLMMM", "u3": "MMMMMM", "u4": "MMLMMM"}, fingerprints=False)

    def fp(t):  # C columns: 1 or 20 by profile, u1's T-05 far off; every other column the same for a task
        j = int(t.task_id[2:])
        c = 20.0 if t.profile_id in ("u2", "u4") else (300.0 if t.trajectory_id == "u1/T-05" else 1.0)
        return tuple(c if i in DIM_COLUMNS["C"] else float(j + i) for i in range(17))

    inputs = dataclasses.replace(inputs, trajectories=[dataclasses.replace(t, fingerprint=fp(t))
                                                       for t in inputs.trajectories])
    view = ObservedView(inputs)
    z = np.stack([view.z[f"u{k}/T-03"] for k in range(1, 5)])
    assert np.allclose(z.mean(axis=0), 0.0) and np.allclose(z[:, DIM_COLUMNS["C"]], [[-1.0] * 3, [1.0] * 3] * 2)
    assert np.allclose(z[:, 0], 0.0)  # a feature every session of the task shares stays 0
    by = {t.trajectory_id: t for t in inputs.trajectories}
    others = [by[f"u1/T-0{j}"] for j in (1, 3, 4)]
    z5 = (math.log1p(300.0) - np.mean([math.log1p(300.0), math.log1p(20.0), 1 * math.log1p(1.0), math.log1p(20.0)]))
    z5 /= np.std([math.log1p(300.0), math.log1p(20.0), math.log1p(1.0), math.log1p(20.0)])
    assert view.distance(by["u1/T-05"], others, ["C"]) == pytest.approx(math.sqrt(3) * (z5 + 1.0))
    assert view.distance(by["u1/T-05"], others, ["A", "B"]) == pytest.approx(0.0, abs=1e-9)
    assert view.distance(by["u1/T-06"], others, ["C"]) == pytest.approx(0.0, abs=1e-9)
    assert view.distance(by["u1/T-05"], others, []) == 0.0
    bare = _bench_inputs({"u1": "MMMMMM"}, fingerprints=False)
    assert ObservedView(bare).distance(bare.trajectories[0], bare.trajectories[1:3], ["C"]) is None


def test_anomdet_keeps_the_impostor_session_that_matches_the_shared_habits(monkeypatch):
    """Issue #28 (item design): of the impostor sessions drawn, the item keeps the one nearest the shown user
    sessions on the dimensions the two profiles share — the differing habit must give it away, not how the
    impostor happened to act on a habit both have."""
    import dataclasses

    from filegram_ray.bench.builders import anomdet
    from filegram_ray.bench.observed import DIM_COLUMNS

    monkeypatch.setattr(anomdet, "IMPOSTOR_DRAWS", 100)  # every candidate session is drawn
    inputs = _bench_inputs({"u1": "LLLLLL", "u2": "MLLLLL"}, probed=("A",), fingerprints=False)

    def fp(t):  # A (where they differ): u2 reads 5, u1 0; shared B..F: u1 1, u2 1 on T-03 only, else 50
        a = 5.0 if t.profile_id == "u2" else 0.0
        shared = 1.0 if t.profile_id == "u1" or t.task_id == "T-03" else 50.0
        return tuple(a if i in DIM_COLUMNS["A"] else shared for i in range(17))

    inputs = dataclasses.replace(inputs, trajectories=[dataclasses.replace(t, fingerprint=fp(t))
                                                       for t in inputs.trajectories])
    drafts = [d for d in anomdet.build(inputs, seed=2, target=20) if d.profile_id == "u1"]
    assert drafts and {d.facts["impostor"] for d in drafts} == {"u2/T-03"}
    bare = dataclasses.replace(inputs, trajectories=[dataclasses.replace(t, fingerprint=None)
                                                     if t.trajectory_id == "u2/T-03" else t
                                                     for t in inputs.trajectories])
    assert "u2/T-03" not in {d.facts["impostor"] for d in anomdet.build(bare, seed=2, target=20)
                             if d.profile_id == "u1"}  # a draw without fingerprint ranks after those with one
    monkeypatch.setattr(anomdet, "IMPOSTOR_DRAWS", 1)  # one draw: any of u2's sessions
    one = {d.facts["impostor"] for d in anomdet.build(inputs, seed=2, target=20) if d.profile_id == "u1"}
    assert len(one) > 1


def test_memory_rule_answerer_tells_a_habitual_deviation_from_a_shift():
    """The reference answerer of the items' design: a change the session shows on a dimension where this user often
    reads that way (their own variation) is less surprising than one they never show — the count rule, which sees
    only the shown sessions, cannot tell the two apart."""
    from filegram_ray.bench.vocab import TIER_SHORT
    from filegram_ray.validity.separability import CountRuleAnswerer, MemoryRuleAnswerer

    usual = {"A": "M", "B": "M", "C": "M", "D": "M", "E": "M", "F": "M"}
    tiers = {f"u/T-{i:02d}": dict(usual) for i in range(1, 13)}
    for i in (1, 3, 5, 7):  # this user reads A as L in a third of their sessions
        tiers[f"u/T-{i:02d}"]["A"] = "L"
    tiers["u/T-12"] = {**usual, "A": "L", "E": "L"}  # the asked-about session: A (habitual) and E (new) changed
    choices = {"A": f"{TIER_SHORT['A']['M']} → {TIER_SHORT['A']['L']}",
               "B": f"{TIER_SHORT['E']['M']} → {TIER_SHORT['E']['L']}"}
    shown = ["u/T-02", "u/T-04", "u/T-12"]
    mem = MemoryRuleAnswerer(tiers.__getitem__, lambda p: sorted(tiers))
    assert mem.answer_shiftana("q", choices, shown, profile_id="u") == "B"
    count = CountRuleAnswerer(tiers.__getitem__)
    assert {count.answer_shiftana(f"q{i}", choices, shown) for i in range(20)} == {"A", "B"}  # a tie, drawn


def test_rule_answerer_margin_carries_a_profile_bootstrap_interval():
    """accuracy − chance comes with its 95 % interval over profiles (a profile's items share its sessions): wide
    when the profiles disagree, a point when they all score the same, None with one profile."""
    from types import SimpleNamespace

    from filegram_ray.bench.vocab import TIER_SHORT
    from filegram_ray.validity.separability import CountRuleAnswerer, score_rule_answerer

    base = {"A": "L", "B": "M", "C": "R", "D": "R", "E": "R", "F": "R"}
    shifted = {**base, "E": "M"}
    choices = [f"{TIER_SHORT['C']['R']} → {TIER_SHORT['C']['M']}", f"{TIER_SHORT['E']['R']} → {TIER_SHORT['E']['M']}",
               f"{TIER_SHORT['E']['M']} → {TIER_SHORT['E']['R']}"]
    tiers, items, keys = {}, [], {}
    for u in range(10):
        for j in range(4):
            ids = [f"u{u}/b{j}{i}" for i in range(4)] + [f"u{u}/s{j}"]
            for t in ids[:-1]:
                tiers[t] = dict(base)
            tiers[ids[-1]] = dict(shifted if u < 5 else base)  # half the users' shifts show in the counts
            qid = f"ShiftAna-{u:02d}{j}"
            items.append(SimpleNamespace(sub_track="ShiftAna", choices=choices, question_id=qid, profile_id=f"u{u}",
                                         context=SimpleNamespace(trajectories=ids, labels=[])))
            keys[qid] = "B"
    res = score_rule_answerer(items, keys, CountRuleAnswerer(tiers.__getitem__, seed=1))["ShiftAna"]
    assert res["n"] == 40 and res["n_profiles"] == 10
    assert res["chance"] == pytest.approx(1 / 3)
    lo, hi = res["interval"]
    assert lo < res["margin"] < hi and hi - lo > 0.1
    one = score_rule_answerer(items[:4], keys, CountRuleAnswerer(tiers.__getitem__, seed=1))["ShiftAna"]
    assert one["margin"] == pytest.approx(2 / 3) and one["interval"] is None
    same = score_rule_answerer(items[:20], keys, CountRuleAnswerer(tiers.__getitem__, seed=1))["ShiftAna"]
    assert same["interval"] == pytest.approx([2 / 3, 2 / 3])


def test_recovery_note_counts_missed_profiles_against_the_bound():
    """A recovery figure moves by one profile in n: its check line says how many were missed and how many the
    0.90 bound allows (3 of 30, 6 of 60), so 0.867 on 30 profiles reads as one miss too many."""
    from filegram_ray.validity.realism import _missed_note

    assert _missed_note(27 / 30, 30) == "3 of 30 profiles read as another tier; the bound allows 3"
    assert _missed_note(26 / 30, 30) == "4 of 30 profiles read as another tier; the bound allows 3"
    assert _missed_note(55 / 60, 60) == "5 of 60 profiles read as another tier; the bound allows 6"
    assert _missed_note(None, 30) == "" and _missed_note(float("nan"), 30) == "" and _missed_note(1.0, 0) == ""


def test_check_line_shows_enough_digits_to_agree_with_its_verdict():
    """Review finding (helper-28): 0.7997 against ">= 0.8" printed "FAIL   0.800 >= 0.8", a line that contradicts
    itself; a value whose 3-decimal form would pass the other way is printed with 5 decimals."""
    res = {"checks": [{"name": "s", "value": 0.79970, "bound": 0.8, "op": ">=", "pass": False, "note": ""},
                      {"name": "t", "value": 0.80004, "bound": 0.8, "op": "<=", "pass": False, "note": ""},
                      {"name": "u", "value": 0.812, "bound": 0.8, "op": ">=", "pass": True, "note": ""}],
           "tau_flags": {"tau": 1.5, "precision": 0.6, "recall": 0.3},
           "flag_reason": {"delta_perturbed": 3.0, "delta_unperturbed": 2.0, "cutoff": 4.0,
                           "perturbed_below_cutoff": 0.7},
           "rule_sessions": {d: 0.5 for d in "ABCDEF"}}
    lines = check_lines(res)
    assert lines[0].split()[:4] == ["FAIL", "0.79970", ">=", "0.8"]
    assert lines[1].split()[:4] == ["FAIL", "0.80004", "<=", "0.8"]
    assert lines[2].split()[:4] == ["PASS", "0.812", ">=", "0.8"]
