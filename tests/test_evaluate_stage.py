"""The evaluate stage end to end on a hand-made run: answers → scores → summary → report, resumability, errors."""

from __future__ import annotations

import polars as pl
import pytest
from evaluate_fixtures import META_MARKER, PROFILES, make_run

from filegram_ray.config import load_config
from filegram_ray.evaluate.scoring import RubricJudge, likert_to_100, summarise
from filegram_ray.evaluate.stage import load_items, public_view, run_evaluate

FAST_METHODS = ["no_context", "full_context", "eager_summarization"]


def _cfg(root, **section):
    base = {"methods": FAST_METHODS, "executor": "serial", "plots": True, "sample_per_sub_task": None,
            "backbone": "lexical"}  # whole bank; the plumbing reader (the encoder: test_encoder_reader.py)
    base.update(section)
    return load_config(overrides={"run_dir": str(root), "evaluate": base})


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval_run")
    run = make_run(root, n_filler=150)
    info = run_evaluate(_cfg(root))
    return run, info, run.read_table("results/results.parquet")


def test_results_one_row_per_method_and_item(evaluated):
    run, info, res = evaluated
    items = load_items(run)
    assert info["n_items"] == len(items) == 157
    counts = dict(res.group_by("method").len().iter_rows())
    assert {m: counts[m] for m in [*FAST_METHODS, "oracle", "random", "gold"]} == {
        m: 157 for m in [*FAST_METHODS, "oracle", "random", "gold"]}
    # reader validity rows: option order asks every multiple-choice item again; wrong user asks the items that have
    # another profile's memory (the two-user fixture's pair items have none); no "empty" row beside No Context
    assert counts["order"] == sum(1 for it in items if it["choices"])
    assert 0 < counts["wrong_user"] <= 157 and "empty" not in counts
    ok = res.filter(pl.col("status") == "ok")
    assert ok.height == res.height, res.filter(pl.col("status") != "ok")["error"].to_list()[:3]


def test_validity_rows_oracle_100_random_near_chance(evaluated):
    run, _, res = evaluated
    summary = run.read_table("results/summary.parquet")
    by = {r["method"]: r for r in summary.to_dicts()}
    assert by["oracle"]["avg"] == 100.0
    assert by["oracle"]["ProfRec"] == 100.0  # reference text judged 5 → (5−1)/4·100
    rnd = res.filter((pl.col("method") == "random") & ~pl.col("is_open"))
    chance = float((1.0 / rnd["n_choices"].cast(pl.Float64)).mean() * 100)
    assert abs(by["random"]["avg"] - chance) < 15.0, (by["random"]["avg"], chance)
    # the score is computed from the recorded answers, not typed in
    recomputed = 100.0 * float((rnd["choice"] == rnd["correct"]).mean())
    assert by["random"]["avg"] == pytest.approx(recomputed)


def test_summary_matches_results(evaluated):
    _, _, res = evaluated
    summary = summarise(res)
    fc = res.filter((pl.col("method") == "full_context") & (pl.col("sub_track") == "AttrRec"))
    row = summary.filter(pl.col("method") == "full_context").to_dicts()[0]
    assert row["AttrRec"] == pytest.approx(fc["score"].mean())
    epi = res.filter((pl.col("method") == "full_context") & (pl.col("channel") == "episodic"))
    assert row["episodic"] == pytest.approx(epi["score"].mean())
    assert row["tokens_in"] > 0 and row["tokens_out"] > 0
    nc = summary.filter(pl.col("method") == "no_context").to_dicts()[0]
    assert nc["tokens_out"] == 0


def test_report_and_plots_written(evaluated):
    run, _, _ = evaluated
    md = run.read_text("results/report.md")
    assert "| Method | In. | Out. | AttrRec |" in md
    assert "Oracle (validity)" in md and "Random (validity)" in md and "(s−1)/4·100" in md
    for png in ("results/subtasks.png", "results/channels.png"):
        assert run.read_bytes(png)[:8] == b"\x89PNG\r\n\x1a\n"


def test_cached_state_and_rerun_skips_done_units(evaluated, monkeypatch):
    run, _, res = evaluated
    assert run.walk_files("results/cache/full_context")
    done = run.done_records("evaluate")
    assert len(done) == len(FAST_METHODS) * res.filter(pl.col("method") == "no_context")["cache_key"].n_unique()
    from filegram_ray.methods import baselines

    def boom(self, views):
        raise AssertionError("ingest must not run again on a resumed evaluate")

    monkeypatch.setattr(baselines.FullContext, "ingest", boom)
    info = run_evaluate(_cfg(run.root))
    again = run.read_table("results/results.parquet")
    assert info["n_failed_units"] == 0
    assert again.sort(["method", "question_id"])["score"].to_list() == \
        res.sort(["method", "question_id"])["score"].to_list()


def test_contexts_hold_no_ground_truth(evaluated):
    run, _, _ = evaluated
    import pickle

    for path in run.walk_files("results/cache"):
        blob = repr(pickle.loads(run.read_bytes(path)))
        for secret in (*PROFILES, META_MARKER):
            assert secret not in blob, (path, secret)
    for item in load_items(run):
        pv = repr(public_view(item))
        assert all(p not in pv for p in PROFILES)


def test_failing_unit_becomes_error_rows(tmp_path):
    """A broken events.json fails the units whose context uses it; every other unit completes."""
    run = make_run(tmp_path)
    run.write_text("trajectories/p2_minimal/T-01/events.json", "{not json")
    info = run_evaluate(_cfg(tmp_path, methods=["full_context"], validity=False))
    res = run.read_table("results/results.parquet")
    errs = {r["question_id"]: r["error"] for r in res.filter(pl.col("status") == "error").iter_rows(named=True)}
    assert "TraceDis-00001" in errs and "invalid JSON" in errs["TraceDis-00001"]
    assert "BehavFP-00001" in errs  # its single-trajectory context is the same broken file
    assert res.filter(pl.col("status") == "ok").height == res.height - len(errs) > 0
    assert info["n_failed_units"] == 2
    failed = run.read_text("results/report.md").split("## Failed items")[1]
    assert "the method failed to ingest or retrieve" in failed and "invalid JSON" in failed


def test_item_level_failure_does_not_sink_unit(tmp_path, monkeypatch):
    run = make_run(tmp_path)
    from filegram_ray.llm import backbones

    orig = backbones.LexicalBackbone.answer

    def flaky(self, item, context):
        if item["question_id"] == "AttrRec-00001":
            raise RuntimeError("backbone exploded")
        return orig(self, item, context)

    monkeypatch.setattr(backbones.LexicalBackbone, "answer", flaky)
    run_evaluate(_cfg(tmp_path, methods=["no_context"], validity=False, backbone="lexical"))  # the reader patched
    res = run.read_table("results/results.parquet")
    bad = res.filter(pl.col("status") == "error")
    assert bad["question_id"].to_list() == ["AttrRec-00001"] and "backbone exploded" in bad["error"][0]
    assert bad["score"][0] is None  # never answered: no score, not a wrong answer
    # ProfRec shares AttrRec-00001's context spec and still got answered
    assert res.filter(pl.col("question_id") == "ProfRec-00001")["status"][0] == "ok"


def test_rubric_judge_and_rescaling():
    j = RubricJudge()
    item = {"metadata": {"attribute": "output_detail"}}
    assert j.judge(item, "detailed", "detailed") == 5
    assert j.judge(item, "detailed", "Detailed: files average 3200 chars") == 5
    assert j.judge(item, "detailed", "They are detailed.") == 4
    assert j.judge(item, "detailed", "detailed or concise") == 3
    assert j.judge(item, "detailed", "concise") == 2
    assert j.judge(item, "detailed", "no idea") == 1
    assert j.judge({"metadata": {"attribute": "role"}}, "data analyst", "a data analyst") == 5
    assert [likert_to_100(s) for s in (1, 3, 5)] == [0.0, 50.0, 100.0]
    with pytest.raises(ValueError):
        likert_to_100(6)


def test_unknown_method_is_a_clear_error(tmp_path):
    make_run(tmp_path)
    with pytest.raises(ValueError, match="unknown"):
        run_evaluate(_cfg(tmp_path, methods=["nope"]))


def test_llm_judge_without_a_language_model_is_refused_before_any_answer(tmp_path):
    """``judge: llm`` with the lexical reader and no ``judge_backbone`` is refused by the stage's check, naming the
    key, before a unit is answered (it used to fail only after every answer was in)."""
    make_run(tmp_path)
    with pytest.raises(ValueError, match=r"^evaluate\.judge: 'llm' needs a language model"):
        run_evaluate(_cfg(tmp_path, methods=["no_context"], judge="llm"))
    assert not (tmp_path / "results").exists() and not (tmp_path / "_done" / "evaluate").exists()


def test_multimodal_items_see_recovered_derivative_text(tmp_path):
    """FileGrd (multimodal setting): created content comes from the rendered derivative (a real PDF, read back with
    pypdf), not from the blob; the ``md`` derivative (the source Markdown) is not shown."""
    import pickle

    from rendering.renderers import build
    from rendering.sections import split_sections

    run = make_run(tmp_path)
    rows = []
    for task in ("T-01", "T-02", "T-03"):
        stem = f"derivatives/{PROFILES[0]}/{task}/reports__2024__q1__review"
        sec = split_sections(f"# Rendered page of review {task}\n\nFigures shown as a chart.\n").sections[0]
        run.write_bytes(f"{stem}/s00.pdf", build("pdf", sec).data)
        run.write_text(f"{stem}/s00.md", f"Markdown source of review {task}")
        for fmt, ext in (("pdf", "pdf"), ("md", "md")):
            rows.append({"trajectory_id": f"{PROFILES[0]}/{task}", "source": "reports/2024/q1/review.md",
                         "section_index": 0, "format": fmt, "path": f"{stem}/s00.{ext}", "status": "ok",
                         "caption": "", "transcript": ""})
    run.write_table("derivatives/index.parquet", pl.DataFrame(rows))
    info = run_evaluate(_cfg(tmp_path, methods=["full_context"], validity=False, sub_tracks=["FileGrd"]))
    assert info["multimodal_content"] == "derivatives"
    (cache,) = run.walk_files("results/cache/full_context")
    assert "multimodal-derivatives__" in cache
    text = "\n".join(pickle.loads(run.read_bytes(cache))["blocks"])
    assert "[rendered pdf]" in text and "Rendered page of review T-02" in text
    assert "Markdown source of review" not in text and "[rendered md]" not in text
    assert "| revenue | 12 |" not in text  # the created blob itself is not shown


def test_filegramos_ablations_share_ingest_state(tmp_path):
    from filegram_ray.evaluate.plan import plan_units

    run = make_run(tmp_path)
    plan = plan_units(load_items(run), ["filegramos", "filegramos_no_semantic", "full_context"], "strip")
    fg = [u["cache_path"] for u in plan["filegramos"]]
    assert fg == [u["cache_path"] for u in plan["filegramos_no_semantic"]]
    assert all(p.startswith("results/cache/filegramos/") for p in fg)
    assert [u["unit_id"] for u in plan["filegramos"]] != [u["unit_id"] for u in plan["filegramos_no_semantic"]]
    assert all(u["cache_path"].startswith("results/cache/full_context/") for u in plan["full_context"])


def test_changing_the_backbone_never_reuses_answers(tmp_path):
    make_run(tmp_path)
    run_evaluate(_cfg(tmp_path, methods=["no_context"], plots=False))
    run_evaluate(_cfg(tmp_path, methods=["no_context"], plots=False, backbone="random"))
    res = pl.read_parquet(tmp_path / "results" / "results.parquet").filter(pl.col("method") == "no_context")
    assert res.height and set(res["backbone"].to_list()) == {"random"}


def test_unreachable_backbone_fails_fast_with_its_url(tmp_path):
    make_run(tmp_path)
    spec = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "none", "retries": 0, "timeout": 5}
    with pytest.raises(ValueError, match="not answering"):
        run_evaluate(_cfg(tmp_path, methods=["no_context"], plots=False, backbone=spec))


def test_rerun_on_a_subset_and_back(tmp_path):
    """A unit answered for more items than this run asks for is filtered; one answered for fewer is redone."""
    make_run(tmp_path)
    both = run_evaluate(_cfg(tmp_path, methods=["no_context"], plots=False, sub_tracks=["AttrRec", "ProfRec"]))
    one = run_evaluate(_cfg(tmp_path, methods=["no_context"], plots=False, sub_tracks=["AttrRec"]))
    res = pl.read_parquet(tmp_path / "results" / "results.parquet").filter(pl.col("method") == "no_context")
    assert one["n_items"] < both["n_items"] and res.height == one["n_items"]
    again = run_evaluate(_cfg(tmp_path, methods=["no_context"], plots=False, sub_tracks=["AttrRec", "ProfRec"]))
    res = pl.read_parquet(tmp_path / "results" / "results.parquet").filter(pl.col("method") == "no_context")
    assert res.height == again["n_items"] == both["n_items"]


def test_second_evaluate_with_other_methods_keeps_the_earlier_rows(tmp_path, capsys):
    """evaluate --methods no_context, then --methods full_context: report.md and results.parquet cover both (the
    earlier answers are reused, nothing re-answered); on another item selection the earlier method is left out,
    and said so."""
    make_run(tmp_path)
    run_evaluate(_cfg(tmp_path, methods=["no_context"], plots=False))
    info = run_evaluate(_cfg(tmp_path, methods=["full_context"], plots=False))
    assert info["earlier_methods"] == ["no_context"] and set(info["time_by_method"]) == {"full_context"}
    res = pl.read_parquet(tmp_path / "results" / "results.parquet")
    for m in ("no_context", "full_context"):
        assert res.filter(pl.col("method") == m).height == info["n_items"]
    report = (tmp_path / "results" / "report.md").read_text()
    assert "| No Context" in report and "| Full Context" in report
    assert report.index("| No Context") < report.index("| Full Context")  # the paper's order, not the run order
    assert "earlier evaluate of this run" in report
    sub = run_evaluate(_cfg(tmp_path, methods=["full_context"], plots=False, sub_tracks=["AttrRec", "ProfRec"]))
    # no_context's units cover more items than asked: complete for this selection too, so it stays
    assert sub["earlier_methods"] == ["no_context"]
    other_bb = run_evaluate(_cfg(tmp_path, methods=["full_context"], plots=False, backbone="random"))
    assert other_bb["earlier_methods"] == [] and "no_context" not in set(
        pl.read_parquet(tmp_path / "results" / "results.parquet")["method"].to_list())
    fresh = tmp_path / "fresh"
    make_run(fresh)
    run_evaluate(_cfg(fresh, methods=["no_context"], plots=False, sub_tracks=["AttrRec"]))
    capsys.readouterr()
    wider = run_evaluate(_cfg(fresh, methods=["full_context"], plots=False))
    assert wider["earlier_methods"] == [] and wider["earlier_left_out"] == ["no_context"]
    assert "earlier results of no_context left out of the report" in capsys.readouterr().out


def test_one_methods_failing_ingest_fails_only_its_own_units(tmp_path, monkeypatch):
    """The CPU path answers all methods of a context spec in one SpecWorker unit: a method whose ingest raises
    fails its own units (error rows, no _done record), the other methods of the same specs finish, each spec's
    views are built once for all methods, and a rerun retries only the failed method's units."""
    from filegram_ray.evaluate import worker
    from filegram_ray.methods import baselines

    run = make_run(tmp_path)
    built = []
    real_build = worker.build_unit_views
    monkeypatch.setattr(worker, "build_unit_views", lambda *a, **k: built.append(a[1]["unit_id"]) or real_build(*a, **k))

    def boom(self, views):
        raise RuntimeError("planted ingest failure")

    monkeypatch.setattr(baselines.FullContext, "ingest", boom)
    info = run_evaluate(_cfg(tmp_path, methods=["no_context", "full_context"], validity=False, plots=False))
    res = run.read_table("results/results.parquet")
    n_specs = res.filter(pl.col("method") == "no_context")["cache_key"].n_unique()
    assert len(built) == len(set(built)) == n_specs  # one view build per spec, for both methods
    fc, nc = (res.filter(pl.col("method") == m) for m in ("full_context", "no_context"))
    assert set(fc["status"].to_list()) == {"error"} and "planted ingest failure" in fc["error"][0]
    assert set(nc["status"].to_list()) == {"ok"}
    assert info["n_failed_units"] == n_specs and info["units"]["failed"] == n_specs
    assert len(run.done_records("evaluate")) == n_specs  # only no_context's units are done
    monkeypatch.undo()
    info = run_evaluate(_cfg(tmp_path, methods=["no_context", "full_context"], validity=False, plots=False))
    assert info["n_failed_units"] == 0 and info["units"]["done"] == n_specs and info["units"]["skipped"] == n_specs
    assert set(run.read_table("results/results.parquet")["status"].to_list()) == {"ok"}


def test_changing_a_methods_options_never_reuses_its_answers(tmp_path, monkeypatch):
    """Answers made with other ``method_options`` are not reused under this run's options and row name (a finished
    VisRAG with the drawn page text was relabelled "VisRAG (OCR)" when OCR was switched on, its numbers unchanged):
    the options are part of the unit, its answer table and its ingest cache; the first options' units stay."""
    make_run(tmp_path)
    calls = []
    from filegram_ray.methods import baselines

    real = baselines.FullContext.ingest

    def counting(self, views):
        calls.append(dict(self.options))
        return real(self, views)

    monkeypatch.setattr(baselines.FullContext, "ingest", counting)
    first = run_evaluate(_cfg(tmp_path, methods=["full_context"], plots=False))
    n_first = len(calls)
    uncapped = pl.read_parquet(tmp_path / "results" / "results.parquet").filter(pl.col("method") == "full_context")
    assert n_first and first["units"]["done"] > 0
    run_evaluate(_cfg(tmp_path, methods=["full_context"], plots=False))  # same options: nothing ingested again
    assert len(calls) == n_first
    other = run_evaluate(_cfg(tmp_path, methods=["full_context"], plots=False,
                              method_options={"full_context": {"cap_chars": 2000}}))
    assert len(calls) == 2 * n_first and all(c == {"cap_chars": 2000} for c in calls[n_first:])
    assert other["steps"]["method × context units"]["skipped"] == 0
    res = pl.read_parquet(tmp_path / "results" / "results.parquet").filter(pl.col("method") == "full_context")
    assert res["tokens_out"].max() < 600 < uncapped["tokens_out"].max()  # the rows are the capped ones
    back = run_evaluate(_cfg(tmp_path, methods=["full_context"], plots=False))  # the first options: kept, reused
    units = back["steps"]["method × context units"]
    assert len(calls) == 2 * n_first and units["skipped"] == units["planned"] > 0


def test_report_has_intervals_paired_tests_headroom_and_findings(evaluated):
    """Issue #30: every report carries 95 % intervals, paired tests, the reader validity rows, the headroom sentence
    and the findings section; the statistics tables are written beside it."""
    run, _, res = evaluated
    md = run.read_text("results/report.md")
    head = md.split("| Method |", 1)[0]
    assert "**Reader headroom:" in head  # the report opens with it
    for section in ("## Intervals", "## Paired tests", "## Reader validity", "## Power: items needed per sub-task",
                    "## The paper's findings, tested"):
        assert section in md, section
    assert "Gold evidence (validity)" in md and "Wrong user (validity)" in md and "Option order (validity)" in md
    iv = run.read_table("results/intervals.parquet")
    avg = iv.filter((pl.col("method") == "full_context") & (pl.col("cell") == "avg")).to_dicts()[0]
    assert avg["lo"] <= avg["mean"] <= avg["hi"]
    ok = res.filter((pl.col("method") == "full_context") & ~pl.col("is_open"))
    assert avg["mean"] == pytest.approx(ok["score"].mean())
    paired = run.read_table("results/paired.parquet")
    # validity rows never count as methods: not compared, not in a Holm family
    assert set(paired["method"].to_list()) <= {"full_context", "eager_summarization"}
    assert set(paired["baseline"].to_list()) == {"no_context"}
    import json

    found = json.loads(run.read_text("results/findings.json"))
    assert [f["id"] for f in found["findings"]] == ["F1", "F2", "F3", "F4", "F5", "F6"]
    # the lexical reader on 2 profiles does not pass its gate: no finding is decided
    assert found["reader"]["can_rank"] is False and found["reader"]["gate"]["reads"] is False
    assert all(f["verdict"] == "not tested" for f in found["findings"])
    assert found["reader"]["headroom"] == pytest.approx(found["reader"]["ceiling"]["mean"]
                                                        - found["reader"]["floor"]["mean"])


def test_wrong_user_row_falls_to_no_context(evaluated):
    """The wrong-user row (the memory method's memory of another profile) is indistinguishable from No Context:
    inside its interval's reach and not significant in a paired test; gold evidence lifts the same reader far
    above both. On this run's 2 profiles whether it "falls" is undecided (no interval means much), and the gate
    says so."""
    run, _, res = evaluated
    import json

    reader = json.loads(run.read_text("results/findings.json"))["reader"]
    wu, floor = reader["wrong_user"], reader["floor"]
    assert wu["n"] > 100 and wu["falls_to_floor"] is None and (wu["p"] is None or wu["p"] >= 0.05), (wu, floor)
    gate = {c["check"]: c for c in reader["gate"]["checks"]}
    assert not gate["wrong_user"]["ok"] and "undecided" in gate["wrong_user"]["why"]
    assert "Wrong user: Avg" in run.read_text("results/report.md") and "undecided: 2 profile(s)" in \
        run.read_text("results/report.md")
    assert wu["lo"] <= floor["hi"] and floor["lo"] <= wu["hi"]
    assert reader["ceiling"]["lo"] > floor["hi"] and reader["headroom"] > 20
    # ground truth reaches only the gold row: the wrong-user and order rows' contexts come from method states
    assert res.filter(pl.col("method") == "wrong_user")["cache_key"].str.len_chars().min() > 0


def test_job_progress_counts_contexts_and_the_summary_counts_method_units(tmp_path, capsys):
    """Fresh-eyes finding: the progress line said "[evaluate] 13/13 units" while the record said 39 planned. The
    progress line counts the stage's items, method × context units, whatever the tasks (a context holding every
    method's unit for it), and so do the closing line and the record."""
    import json
    import re

    from filegram_ray.jobargs import run_job
    from filegram_ray.stages.cli import stage_main

    make_run(tmp_path)
    argv = ["--run-dir", str(tmp_path), "--serial", "--set", "evaluate.methods=[no_context,full_context]",
            "--set", "evaluate.plots=false"]
    assert run_job(lambda a: stage_main("evaluate", a), argv) == 0
    out = capsys.readouterr()
    progress = re.findall(r"\[evaluate\] (\d+)/(\d+) method × context units", out.err)
    units = re.search(r"× 2 methods, (\d+) units \(method × context; 0 done earlier\)", out.out)
    assert progress and units, (out.err[-1500:], out.out[-1500:])
    rec = json.loads((tmp_path / "run.json").read_text())["stages"]["evaluate"]
    planned = rec["steps"]["method × context units"]["planned"]  # the stage's first step (reader checks after)
    assert rec["units"]["planned"] == sum(s["planned"] for s in rec["steps"].values())
    assert progress[-1] == (str(planned), str(planned)) and int(units.group(1)) == planned and planned % 2 == 0


def test_findings_and_the_viewer_say_when_the_bank_changed_after_evaluate(tmp_path, capsys):
    """Fresh-eyes finding: bench → evaluate → bench again (more items) → `filegram view` / `filegram findings`
    showed the earlier results without a word. evaluate records the bank's digest; both now say when the current
    bench/items.parquet is another bank, and say nothing while it is the one answered."""
    from filegram_ray.cli import main
    from filegram_ray.storage import RunDir
    from filegram_ray.view.build import results_section

    run = make_run(tmp_path)
    info = run_evaluate(_cfg(tmp_path, methods=["no_context"], plots=False))
    assert len(info["bank_sha256"]) == 16
    assert main(["findings", str(tmp_path)]) == 0
    assert "changed after the last evaluate" not in capsys.readouterr().out
    assert "changed after" not in results_section(RunDir(str(tmp_path)))["note"]
    items = run.read_table("bench/items.parquet")
    run.write_table("bench/items.parquet", items.head(items.height - 1))  # the bench stage rebuilt another bank
    assert main(["findings", str(tmp_path)]) == 0
    assert ("note: bench/items.parquet changed after the last evaluate (the bench stage ran again): these results "
            "answer the earlier item bank") in capsys.readouterr().out
    assert "rerun the evaluate stage for the current one" in results_section(RunDir(str(tmp_path)))["note"]


def test_a_trajectory_generated_again_is_ingested_and_answered_again(tmp_path, monkeypatch):
    """Units (and their ingest caches) are tied to the bytes of the trajectories they read: after one trajectory is
    rewritten with other content, exactly the units whose context spec holds it ingest again; the others keep their
    answers. Found on a run generated again by a newer simulator (2026-12-07)."""
    import json

    from filegram_ray.methods import baselines

    run = make_run(tmp_path)
    run_evaluate(_cfg(tmp_path, methods=["full_context"], plots=False))
    units = run.read_table("results/results.parquet")
    tid = sorted(run.listdir("trajectories/" + PROFILES[0]))[0]
    tid = f"{PROFILES[0]}/{tid}"
    items = load_items(run)
    specs = {(it["setting"], json.dumps(it["context"], sort_keys=True)): it for it in items}  # one unit each
    holding = [k for k, it in specs.items() if tid in it["context"]["trajectories"]]
    assert holding and len(holding) < len(specs)
    path = f"trajectories/{tid}/events.json"
    events = run.read_json(path)
    run.write_text(path, json.dumps(events[:-1]))  # one event fewer: other content, the same path

    ingested: list[int] = []
    real = baselines.FullContext.ingest

    def counting(self, views):
        ingested.append(len(views))
        return real(self, views)

    monkeypatch.setattr(baselines.FullContext, "ingest", counting)
    info = run_evaluate(_cfg(tmp_path, methods=["full_context"], plots=False))
    assert info["n_failed_units"] == 0
    assert len(ingested) == len(holding)  # only the specs that read the rewritten trajectory
    again = run.read_table("results/results.parquet")
    assert again.height == units.height
    ingested.clear()
    run_evaluate(_cfg(tmp_path, methods=["full_context"], plots=False))
    assert ingested == []  # and then nothing again


def test_a_multimodal_units_content_is_its_own_trajectories_derivatives(tmp_path):
    """Review finding (2026-12-07): the whole render index in every multimodal unit's digest made one re-rendered
    trajectory re-answer every multimodal unit. A unit's digest moves with its own trajectories' derivatives only,
    and not at all when the Multimodal setting strips them."""
    from filegram_ray.evaluate.multimodal import DERIVATIVES_INDEX
    from filegram_ray.evaluate.plan import content_digest

    run = make_run(tmp_path)
    a, b = [f"{p}/{sorted(run.listdir('trajectories/' + p))[0]}" for p in PROFILES[:2]]

    def index(sha_a: str, sha_b: str) -> None:
        run.write_table(DERIVATIVES_INDEX, pl.DataFrame(
            [{"unit_id": f"{t}/out.md#00.pdf", "trajectory_id": t, "sha256": s, "status": "ok"}
             for t, s in ((a, sha_a), (b, sha_b))] +
            [{"unit_id": f"{b}/x.md#plan", "trajectory_id": b, "sha256": "", "status": "error"}]))

    spec = {"kind": "single_trajectory", "trajectories": [a]}
    index("1", "1")
    mm, strip, text = (content_digest(run, "derivatives")(spec, "multimodal"),
                       content_digest(run, "strip")(spec, "multimodal"), content_digest(run)(spec, "text"))
    assert len({mm, strip, text}) == 2 and strip == text
    index("1", "2")  # another trajectory re-rendered
    assert content_digest(run, "derivatives")(spec, "multimodal") == mm
    index("3", "2")  # this one re-rendered
    assert content_digest(run, "derivatives")(spec, "multimodal") != mm
    assert content_digest(run, "strip")(spec, "multimodal") == strip
