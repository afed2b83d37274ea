"""Statistics of the report (issue #30 item 1) and the paper's findings as tests (item 4), on synthetic tables whose
answers are known."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from filegram_ray.evaluate.findings import decide_findings, findings_lines
from filegram_ray.evaluate.items import item_profile
from filegram_ray.stats import (
    bootstrap_ci,
    cell_intervals,
    holm,
    items_for_difference,
    items_for_paired,
    mcnemar_exact,
    paired_bootstrap,
    paired_table,
    paired_test,
)


def test_mcnemar_exact_known_values():
    # b = 10, c = 2: P(X ≤ 2 | n = 12, ½) = (1 + 12 + 66) / 4096; two-sided doubles it
    assert mcnemar_exact(10, 2) == pytest.approx(2 * 79 / 4096)
    assert mcnemar_exact(2, 10) == pytest.approx(2 * 79 / 4096)
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(8, 0) == pytest.approx(2 / 256)  # all discordant one way: 2 · ½⁸
    with pytest.raises(ValueError, match="negative"):
        mcnemar_exact(-1, 3)


def _clustered(rng, n_profiles, per, mu, between=10.0, within=5.0):
    vals, cl = [], []
    for p in range(n_profiles):
        m = mu + rng.normal(0, between)
        vals += list(m + rng.normal(0, within, per))
        cl += [f"p{p}"] * per
    return vals, cl


def test_profile_bootstrap_covers_the_truth_and_is_wider_than_item_resampling():
    rng = np.random.default_rng(11)
    covered, widths, naive = 0, [], []
    for rep in range(60):
        vals, cl = _clustered(rng, 25, 8, mu=50.0)
        mean, lo, hi = bootstrap_ci(vals, cl, n_boot=1000, seed=rep)
        covered += lo <= 50.0 <= hi
        widths.append(hi - lo)
        _, nlo, nhi = bootstrap_ci(vals, [str(i) for i in range(len(vals))], n_boot=1000, seed=rep)
        naive.append(nhi - nlo)
    assert covered / 60 >= 0.85, covered  # nominal 95 %; ≥ 85 % allows the Monte-Carlo error of 60 reps
    # items of one profile are correlated: resampling items would claim a much narrower interval
    assert np.mean(widths) > 1.8 * np.mean(naive), (np.mean(widths), np.mean(naive))


def test_bootstrap_is_seeded_and_handles_edges():
    vals, cl = _clustered(np.random.default_rng(1), 10, 5, mu=30.0)
    assert bootstrap_ci(vals, cl, seed=4) == bootstrap_ci(vals, cl, seed=4)
    assert bootstrap_ci(vals, cl, seed=4) != bootstrap_ci(vals, cl, seed=5)
    assert bootstrap_ci([], []) == (None, None, None)
    assert bootstrap_ci([40.0, 60.0], ["a", "a"]) == (50.0, 50.0, 50.0)  # one profile: nothing to resample
    with pytest.raises(ValueError, match="2 values but 1 clusters"):
        bootstrap_ci([1.0, 2.0], ["a"])


def test_paired_bootstrap_detects_a_shift_and_not_noise():
    rng = np.random.default_rng(3)
    cl = [f"p{i // 4}" for i in range(200)]
    shifted = list(8.0 + rng.normal(0, 10, 200))
    mean, lo, hi, p = paired_bootstrap(shifted, cl, seed=0)
    assert lo > 0 and p < 0.01 and lo < 8.0 < hi
    noise = list(rng.normal(0, 10, 200))
    _, lo, hi, p = paired_bootstrap(noise, cl, seed=0)
    assert lo < 0 < hi and p > 0.05
    assert paired_bootstrap([5.0, 6.0], ["a", "a"])[3] is None  # one profile: no test


def test_holm_known_values():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, None, 0.01]) == [pytest.approx(0.5), None, pytest.approx(0.02)]
    assert holm([0.2, 0.3]) == pytest.approx([0.4, 0.4])  # step-down keeps the adjusted values monotone
    assert holm([0.9, 0.8]) == [1.0, 1.0]  # capped at 1


def test_sample_sizes_match_the_formulas():
    # two proportions 0.5 vs 0.6, α = 0.05 two-sided, power 0.8: (1.96·√(2·.55·.45) + 0.8416·√(.25+.24))² / .01
    assert items_for_difference(0.5, 0.10) == 388
    assert items_for_difference(0.95, 0.10) == items_for_difference(0.85, 0.10)  # moved inside [0, 1]
    # McNemar, ψ = 0.3, δ = 0.1 (Connor 1987): (1.96·√.3 + 0.8416·√.29)² / .01
    assert items_for_paired(0.3, 0.1) == 234
    assert items_for_paired(0.3, 0.0) is None


def _results(scores: dict[str, dict[str, float]], *, sub="AttrRec", channel="procedural", n_choices=4,
             is_open=False, per_profile=5) -> pl.DataFrame:
    rows = []
    for m, by_q in scores.items():
        for i, (q, s) in enumerate(sorted(by_q.items())):
            rows.append({"method": m, "question_id": q, "sub_track": sub, "channel": channel, "setting": "text",
                         "is_open": is_open, "score": s, "status": "ok", "n_choices": n_choices,
                         "profile": f"p{i // per_profile}", "text_twin": "", "correct": "A"})
    return pl.DataFrame(rows)


def test_paired_test_is_mcnemar_on_the_same_items():
    qs = [f"q{i:03d}" for i in range(60)]
    base = {q: 0.0 for q in qs}
    meth = {q: (100.0 if i < 10 else 0.0) for i, q in enumerate(qs)}
    base.update({qs[-1]: 100.0, qs[-2]: 100.0})  # c = 2 items only the baseline gets right
    res = _results({"no_context": base, "m": meth})
    t = paired_test(res, "m", "no_context")
    assert (t["test"], t["b"], t["c"], t["n"]) == ("mcnemar", 10, 2, 60)
    assert t["p"] == pytest.approx(mcnemar_exact(10, 2))
    assert t["diff"] == pytest.approx(100 * 8 / 60)
    tab = paired_table(res, ["no_context", "m"], ["no_context", "filegramos"])
    assert tab.height == 1 and tab["p_holm"][0] == pytest.approx(t["p"]) and tab["distinguishable"][0]


def test_each_pair_is_tested_once_across_the_baselines_families():
    """A pair of two baselines sits in the first one's family only (FileGramOS vs No Context, not also No Context vs
    FileGramOS), so it is neither listed twice nor Holm-corrected in two families."""
    qs = [f"q{i:03d}" for i in range(60)]
    res = _results({"no_context": {q: 0.0 for q in qs}, "filegramos": {q: (100.0 if i < 30 else 0.0)
                                                                       for i, q in enumerate(qs)},
                    "m": {q: (100.0 if i < 10 else 0.0) for i, q in enumerate(qs)}})
    tab = paired_table(res, ["no_context", "m", "filegramos"], ["no_context", "filegramos"])
    pairs = [(r["method"], r["baseline"]) for r in tab.filter(pl.col("scope") == "avg").iter_rows(named=True)]
    assert sorted(pairs) == [("filegramos", "no_context"), ("m", "filegramos"), ("m", "no_context")]


def test_cell_intervals_cover_each_column():
    qs = [f"q{i:03d}" for i in range(40)]
    res = _results({"a": {q: (100.0 if i % 2 else 0.0) for i, q in enumerate(qs)}})
    iv = cell_intervals(res, sub_tasks=["AttrRec"], channels=["procedural", "semantic", "episodic"], n_boot=500)
    cells = set(iv["cell"].to_list())
    assert {"AttrRec", "procedural", "avg"} <= cells
    avg = iv.filter(pl.col("cell") == "avg").to_dicts()[0]
    assert avg["mean"] == 50.0 and avg["lo"] < 50.0 < avg["hi"] and avg["n_profiles"] == 8


def test_item_profile_routing():
    assert item_profile({"profile_id": "p1", "context": {"trajectories": ["p9/T-01"]}}) == "p1"
    assert item_profile({"profile_id": "", "context": {"trajectories": ["p9/T-01", "p2/T-01"]}}) == "p9"
    assert item_profile({"question_id": "q1"}) == "q1"


def _f1_table(order: list[str], n=200) -> pl.DataFrame:
    """Accuracy falling in the given order (90, 70, 50, …), items from 40 profiles."""
    rng = np.random.default_rng(5)
    qs = [f"q{i:04d}" for i in range(n)]
    accs = [0.9, 0.7, 0.45, 0.4, 0.35, 0.3]
    return _results({m: {q: 100.0 * (rng.random() < a) for q in qs} for m, a in zip(order, accs)})


def test_findings_f1_holds_fails_and_undecided():
    methods = ["filegramos", "evermemos", "mem0", "zep", "memos", "simplemem"]
    f1 = decide_findings(_f1_table(methods), methods)[0]
    assert f1["id"] == "F1" and f1["verdict"] == "holds", f1
    rev = ["evermemos", "filegramos", "mem0", "zep", "memos", "simplemem"]
    assert decide_findings(_f1_table(rev), methods)[0]["verdict"] == "fails"
    small = _f1_table(methods, n=12)
    f1 = decide_findings(small, methods)[0]
    assert f1["verdict"] == "undecided" and f1["items"] and f1["items"] > 12
    # a finding whose methods were not evaluated says so
    f1 = decide_findings(small, ["filegramos", "mem0"])[0]
    assert f1["verdict"] == "undecided" and f1["missing"] == ["evermemos"]
    md = "\n".join(findings_lines(decide_findings(small, methods)))
    assert "## The paper's findings, tested" in md and "| F1 " in md and "not evaluated" in md


def test_findings_f2_thresholds_and_f3_equivalence():
    rng = np.random.default_rng(9)
    qs = [f"q{i:04d}" for i in range(300)]
    hi = {q: 100.0 * (rng.random() < 0.9) for q in qs}
    res = pl.concat([
        _results({"evermemos": hi, "filegramos": hi, "mem0": {q: 100.0 * (rng.random() < 0.34) for q in qs},
                  "simplemem": {q: 100.0 * (rng.random() < 0.3) for q in qs}}, sub="AnomDet", channel="episodic",
                 n_choices=3),
        _results({"filegramos": {f"t{q}": v for q, v in hi.items()},
                  "full_context": {f"t{q}": v for q, v in hi.items()}}, sub="TraceDis")])
    by = {f["id"]: f for f in decide_findings(res, ["evermemos", "filegramos", "mem0", "simplemem",
                                                    "full_context"])}
    assert by["F2"]["verdict"] == "holds", by["F2"]
    assert by["F3"]["verdict"] == "holds", by["F3"]  # identical answers: difference 0 [0, 0]


def _with_reader(res: pl.DataFrame, reads: bool) -> pl.DataFrame:
    """``res`` plus the validity rows of a reader on the same items: No Context at 30 %, gold evidence at 95 % (a
    reader that reads) or 55 % (one that matches words: told the answer, it does not give it), the wrong user's
    memory answering exactly as No Context, and the option-order row keeping FileGramOS's every answer."""
    rng = np.random.default_rng(17)
    qs = sorted(set(res["question_id"].to_list()))
    floor = {q: 100.0 * (rng.random() < 0.3) for q in qs}
    extra = _results({"no_context": floor, "gold": {q: 100.0 * (rng.random() < (0.95 if reads else 0.55))
                                                    for q in qs}, "wrong_user": dict(floor)})
    out = pl.concat([res, extra], how="diagonal")
    # keys spread evenly over the four letters; a wrong answer is the letter after the key
    key = {q: "ABCD"[i % 4] for i, q in enumerate(qs)}
    out = out.with_columns(correct=pl.col("question_id").replace_strict(key))
    out = out.with_columns(choice=pl.when(pl.col("score") == 100.0).then(pl.col("correct")).otherwise(
        pl.col("correct").replace_strict({"A": "B", "B": "C", "C": "D", "D": "A"})))
    order = out.filter(pl.col("method") == "filegramos").with_columns(
        method=pl.lit("order"), shift=pl.lit(1),
        shown_choice=pl.col("choice").replace_strict({"A": "B", "B": "C", "C": "D", "D": "A"}))
    return pl.concat([out, order], how="diagonal")


def test_the_reader_gate_decides_findings_and_markers_both_ways():
    """Issue 52 item 1: a finding is decided, and a method marked ◆, only by a reader whose validity rows say it
    reads. The same method rows: with a reader that reads, F1 holds and FileGramOS carries ◆; with one that does not
    give the answer it is told (gold evidence 55 %), every finding is "not tested: the reader cannot rank" with its
    figures kept, and no paired row is marked although the tests are as significant as before."""
    from filegram_ray.evaluate.reader_validity import reader_gate
    from filegram_ray.evaluate.report import report_statistics

    methods = ["filegramos", "evermemos", "mem0", "zep", "memos", "simplemem"]
    good = report_statistics(_with_reader(_f1_table(methods), reads=True))
    assert good["reader"]["gate"]["reads"], good["reader"]["gate"]
    assert good["findings"][0]["verdict"] == "holds"
    marked = good["paired"].filter(pl.col("mark"))["method"].to_list()
    assert "filegramos" in marked
    bad = report_statistics(_with_reader(_f1_table(methods), reads=False))
    gate = bad["reader"]["gate"]
    assert not gate["reads"] and [c["check"] for c in gate["checks"] if not c["ok"]] == ["gold_per_sub_task",
                                                                                "headroom_per_sub_task"]
    assert "AttrRec" in gate["why"] and bad["reader"]["can_rank"] is False
    assert {f["verdict"] for f in bad["findings"]} == {"not tested"}
    f1 = bad["findings"][0]
    assert f1["not_tested"] == "the reader cannot rank" and f1["claims"][0]["diff"] > 0  # the figures stay
    assert bad["paired"]["distinguishable"].any() and not bad["paired"]["mark"].any()
    md = "\n".join(findings_lines(bad["findings"]))
    assert "**holds**" not in md and "**fails**" not in md and "not tested**: the reader cannot rank" in md
    # each check on its own fails the gate
    ok = good["reader"]
    assert reader_gate({**ok, "wrong_user": {**ok["wrong_user"], "falls_to_floor": False}})["reads"] is False
    assert reader_gate({**ok, "order": {**ok["order"], "consistency": 40.0}})["reads"] is False
    assert reader_gate({**ok, "headroom": 10.0})["reads"] is False
    assert reader_gate({**ok, "floor": {**ok["floor"], "n_profiles": 2}})["reads"] is False
    assert reader_gate({**ok, "order": {}})["why"].startswith("option order not measured")
    skewed = [{**b, "answers": b["keys"] + 8.0} if b["letter"] == "A" else b for b in ok["order"]["bias"]]
    assert reader_gate({**ok, "order": {**ok["order"], "bias": skewed, "n": 400}})["why"].startswith(
        "one shown letter")
    # 6.7 points on 45 items is what a position-free reader shows by chance: not a preference for a position
    noise = [{"letter": "A", "answers": 31.1, "keys": 24.4}, {"letter": "B", "answers": 20.0, "keys": 26.7},
             {"letter": "C", "answers": 24.4, "keys": 24.4}, {"letter": "D", "answers": 24.4, "keys": 24.4}]
    assert reader_gate({**ok, "order": {**ok["order"], "bias": noise, "n": 45}})["reads"] is True
    low = [{**r, "headroom": 30.0} if r["sub_task"] == "AttrRec" else r for r in ok["sub_tasks"]]
    assert "AttrRec (+30.0)" in reader_gate({**ok, "sub_tasks": low})["why"]


def test_a_method_with_no_result_gets_no_score_marker_or_finding():
    """Issue 52 item 2 (BR3-04): error rows have no score; a method whose items mostly failed has no result: no
    cell, no ◆, no paired test and no finding verdict, even under a reader that reads."""
    from filegram_ray.evaluate.report import report_statistics
    from filegram_ray.evaluate.scoring import summarise

    methods = ["filegramos", "evermemos", "mem0", "zep", "memos", "simplemem"]
    res = _with_reader(_f1_table(methods), reads=True)
    # evermemos: 80 % of its items failed on the server (no score), the rest answered
    res = res.with_columns(
        status=pl.when((pl.col("method") == "evermemos") & (pl.col("question_id") < "q0160")).then(pl.lit("error"))
        .otherwise(pl.col("status")),
        error=pl.when((pl.col("method") == "evermemos") & (pl.col("question_id") < "q0160"))
        .then(pl.lit("status reply: HTTP 400: request (9057 tokens) exceeds the available context size (2000 "
                     "tokens), try increasing it")).otherwise(pl.lit("")))
    res = res.with_columns(score=pl.when(pl.col("status") == "ok").then(pl.col("score")))
    st = report_statistics(res, budget_chars=None)
    assert st["failures"]["failed"] == ["evermemos"] and "evermemos" not in st["methods"]
    fail = st["failures"]["methods"]["evermemos"]
    assert fail["causes"] == {"context_overflow": 160} and "max_context_chars=5400" in fail["hint"]  # 0.9 × 2,000 × 3.0
    assert "evermemos" not in st["paired"]["method"].to_list()
    f1 = st["findings"][0]
    assert f1["verdict"] == "not tested" and f1["failed"] == ["evermemos"] and "no result" in f1["not_tested"]
    res = res.with_columns(cache_key=pl.lit("k"), tokens_in_memory=pl.lit(0), tokens_out=pl.lit(0))
    summ = summarise(res).filter(pl.col("method") == "evermemos").to_dicts()[0]
    assert summ["failed"] and summ["n_errors"] == 160 and summ["n_scored"] == 40


def test_filegram_findings_command(tmp_path, capsys):
    """`filegram findings RUN` decides F1–F6 from RUN/results/results.parquet and writes findings.json — only with
    a reader that passes its validity rows, else every finding is not tested; a missing run or column is one line
    naming it, exit 2."""
    from filegram_ray.cli import main

    methods = ["filegramos", "evermemos", "mem0", "zep", "memos", "simplemem"]
    (tmp_path / "results").mkdir()
    _f1_table(methods).write_parquet(tmp_path / "results" / "results.parquet")
    assert main(["findings", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "F1 NOT TESTED" in out and "not tested: the reader cannot rank" in out and "HOLDS" not in out
    assert "Reader headroom: not measured" in out
    _with_reader(_f1_table(methods), reads=True).write_parquet(tmp_path / "results" / "results.parquet")
    assert main(["findings", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "F1 HOLDS" in out and "F6 UNDECIDED" in out and "not evaluated: filegramos_no_procedural" in out
    import json

    found = json.loads((tmp_path / "results" / "findings.json").read_text())
    assert found["findings"][0]["verdict"] == "holds" and found["methods"] == methods + ["no_context"]
    _f1_table(methods).drop("is_open").write_parquet(tmp_path / "results" / "results.parquet")
    assert main(["findings", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "results/results.parquet" in err and "is_open" in err and "Traceback" not in err
    assert main(["findings", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "nowhere").exists()


def test_findings_f5_twin_drops_and_f6_channel_ablations():
    rows = []
    for i in range(60):
        for m, text, mm in (("filegramos", 100.0, 100.0), ("mem0", 100.0, 0.0), ("no_context", 0.0, 0.0)):
            base = {"method": m, "sub_track": "FileGrd", "channel": "semantic", "is_open": False, "status": "ok",
                    "n_choices": 2, "profile": f"p{i % 20}", "correct": "A"}
            rows.append({**base, "question_id": f"t{i:03d}", "setting": "text", "score": text, "text_twin": ""})
            rows.append({**base, "question_id": f"m{i:03d}", "setting": "multimodal", "score": mm,
                         "text_twin": f"t{i:03d}"})
    by = {f["id"]: f for f in decide_findings(pl.DataFrame(rows), ["no_context", "filegramos", "mem0"])}
    assert by["F5"]["verdict"] == "holds", by["F5"]
    assert by["F5"]["claims"][0]["diff"] == pytest.approx(100.0)  # mem0 loses everything, FileGramOS nothing
    rng = np.random.default_rng(2)
    qs = [f"q{i:03d}" for i in range(150)]
    abl = {"filegramos_no_procedural": 0.4, "filegramos_no_semantic": 0.8, "filegramos_no_episodic": 0.75}
    res = _results({m: {q: 100.0 * (rng.random() < a) for q in qs} for m, a in abl.items()})
    f6 = next(f for f in decide_findings(res, list(abl)) if f["id"] == "F6")
    assert f6["verdict"] == "holds" and len(f6["claims"]) == 2
    flipped = _results({m: {q: 100.0 * (rng.random() < 1.1 - a) for q in qs} for m, a in abl.items()})
    assert next(f for f in decide_findings(flipped, list(abl)) if f["id"] == "F6")["verdict"] == "fails"
