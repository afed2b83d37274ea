"""``filegram view``: the static site built from a small evaluated run, checked as files and in headless Chromium.

The run is the hand-made one of tests/evaluate_fixtures.py (2 profiles × 3 tasks), evaluated with two cheap methods
and the lexical reader; Engrams come from the real encoder (:func:`filegram_ray.memory.engram.encode_engram`).
Browser tests drive Debian's chromium through Selenium with the driver path set (no Selenium Manager, no browser
download); they skip, saying why, where chromium or chromedriver is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from evaluate_fixtures import META_MARKER, PROFILES, TASKS, make_run

from filegram_ray.config import load_config
from filegram_ray.evaluate.stage import run_evaluate
from filegram_ray.storage import RunDir, StorageError
from filegram_ray.view.build import build_view, site_name

METHODS = ["no_context", "full_context"]
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
PERTURBED = f"{PROFILES[1]}/{TASKS[2]}"


def _evaluated_run(root: Path) -> RunDir:
    from filegram_ray.memory.engram import encode_engram

    run = make_run(root, n_filler=12)
    for p in PROFILES:
        for t in TASKS:
            base = root / "trajectories" / p / t
            events = json.loads((base / "events.json").read_text())
            run.write_json(f"engrams/{p}/{t}.json", encode_engram(events, f"{p}/{t}", t, base / "media")
                           .model_dump(mode="json"))
    meta = run.read_json(f"trajectories/{PERTURBED}/meta.json")
    meta["perturbation"] = {"dimension": "C", "tier": "M"}
    run.write_json(f"trajectories/{PERTURBED}/meta.json", meta)
    run_evaluate(load_config(overrides={"run_dir": str(root), "evaluate": {
        "methods": METHODS, "executor": "serial", "plots": True, "sample_per_sub_task": None,
        "backbone": "lexical"}}))
    return run


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("view_run")
    run = _evaluated_run(root)
    index = build_view(run)
    return run, Path(index).parent


def _data(path: Path, var: str):
    text = path.read_text(encoding="utf-8")
    prefix = f"window.{var} = "
    assert text.startswith(prefix)
    return json.loads(text[len(prefix):].rstrip().rstrip(";"))


def _ctx_text(out: Path, ref: str) -> str:
    text = (out / "data/ctx" / f"{ref}.js").read_text(encoding="utf-8")
    prefix = f'(window.FG_CTX = window.FG_CTX || {{}})["{ref}"] = '
    assert text.startswith(prefix)
    return json.loads(text[len(prefix):].rstrip().rstrip(";"))


def test_site_files_hold_every_item_trajectory_and_context(site):
    run, out = site
    results = run.read_table("results/results.parquet")
    for page in ("index", "items", "item", "trajectories", "trajectory", "run"):
        assert (out / f"{page}.html").stat().st_size > 0
    idx = _data(out / "data/items_index.js", "FG_ITEMS")
    assert {r[0] for r in idx["rows"]} == set(results["question_id"])
    qid = "AttrRec-00001"
    item = _data(out / "data/items" / f"{site_name(qid)}.js", "FG_ITEM")
    by_method = {a["method"]: a for a in item["answers"]}
    ctx = run.read_table(next(f for f in run.walk_files("results/contexts/lexical/full_context")))
    full = _ctx_text(out, by_method["full_context"]["context_ref"])
    assert "Quarterly review" in full and len(full) == by_method["full_context"]["context_chars"]
    assert _ctx_text(out, by_method["no_context"]["context_ref"]) == ""
    assert by_method["full_context"]["context_tokens"] > 0 and ctx.height >= 1
    assert by_method["oracle"]["context_ref"] is None  # validity rows return no context
    assert item["key"] == "A" and item["choices"][0].startswith("deeply nested")
    traj = _data(out / "data/traj" / f"{site_name(PROFILES[0] + '/T-01')}.js", "FG_T")
    events = run.read_json(f"trajectories/{PROFILES[0]}/T-01/events.json")
    assert [e["type"] for e in traj["events"]] == [e["event_type"] for e in events]
    write = next(e for e in traj["events"] if e["type"] == "file_write")
    assert write["snapshot"].startswith("# Quarterly review")
    assert any(e["diff"] and "+cost | 8" in e["diff"] for e in traj["events"] if e["type"] == "file_edit")
    assert "<svg" in traj["fingerprint_svg"] and traj["fingerprint_svg"].count("<rect") == 17
    stages = (out / "run.html").read_text().split('id="stages"')[1].split("</table>")[0]
    assert "<td>evaluate</td>" in stages and "error rows" in stages  # run.json's evaluate record
    for f in out.rglob("*"):  # meta.json's other fields (ground truth of the simulation) stay out of the site
        assert not f.is_file() or META_MARKER.encode() not in f.read_bytes(), f
    pert = _data(out / "data/traj" / f"{site_name(PERTURBED)}.js", "FG_T")
    assert pert["perturbation"] == {"dimension": "C", "tier": "M"}


def test_same_run_same_bytes_and_no_half_written_site(site, tmp_path):
    run, _ = site
    a, b = Path(build_view(run, tmp_path / "a")).parent, Path(build_view(run, tmp_path / "b")).parent
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_older_run_without_intervals_shows_plain_table_and_says_so(site, tmp_path):
    run, _ = site
    old = RunDir(str(tmp_path / "old"))
    for rel in ("results/summary.parquet", "results/results.parquet", "bench/items.parquet", "run.json"):
        old.write_bytes(rel, run.read_bytes(rel))
    index = Path(build_view(old)).read_text()
    assert "intervals are missing" in index
    assert "no_context" in index and "[" not in index.split('id="results"')[1].split("</table>")[0]
    assert "no contexts" in (Path(old.root) / "view/items.html").read_text()


def test_object_store_run_gets_its_view_inside_the_run(site):
    run, _ = site
    mem = RunDir("memory://view-test-run")
    for rel in run.walk_files(""):
        if rel.startswith(("results/summary", "results/intervals", "results/results.", "bench/", "run.json",
                           "trajectories/")):
            mem.write_bytes(rel, run.read_bytes(rel))
    url = build_view(mem)
    assert url == mem.url("view/index.html") and mem.exists("view/data/items_index.js")
    assert mem.exists(f"view/data/traj/{site_name(PERTURBED)}.js")


def test_not_a_run_directory_is_one_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(StorageError, match="not a run directory"):
        build_view(str(tmp_path / "empty"))
    with pytest.raises(StorageError, match="no such run directory"):
        build_view(str(tmp_path / "typo"))
    assert not (tmp_path / "typo").exists()  # a mistyped path is not created


def test_unreadable_trajectory_is_an_error_entry_not_a_failed_build(site, tmp_path):
    """One trajectory with a broken events.json: the site is built, that trajectory's entry carries the message
    naming its file, the others are intact."""
    run, _ = site
    bad = RunDir(str(tmp_path / "bad"))
    for rel in run.walk_files("trajectories"):
        bad.write_bytes(rel, run.read_bytes(rel))
    broken = f"trajectories/{PROFILES[0]}/T-02/events.json"
    bad.write_bytes(broken, b'[{"event_type": "file_read", ')
    out = Path(build_view(bad)).parent
    index = _data(out / "data/traj_index.js", "FG_TRAJ")
    errors = {r[0]: r[7] for r in index}
    assert len(errors) == len(PROFILES) * len(TASKS)
    assert "events.json" in errors[f"{PROFILES[0]}/T-02"]
    assert [t for t, e in errors.items() if e] == [f"{PROFILES[0]}/T-02"]


def test_cli_prints_the_path_to_open(site, tmp_path, capsys):
    from filegram_ray.cli import main

    run, _ = site
    assert main(["view", run.root, "--out", str(tmp_path / "site")]) == 0
    assert capsys.readouterr().out.strip() == f"open {tmp_path / 'site' / 'index.html'}"


# ------------------------------------------------------------------------------------------------ real browser
def _browser():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if missing:
        pytest.skip(f"headless browser tests need Debian's chromium and chromium-driver ({', '.join(missing)} "
                    "missing: apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (dev extra)")
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager look for a browser or driver
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000",
                "--disable-gpu"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)


@pytest.fixture(scope="module")
def browser():
    driver = _browser()
    yield driver
    driver.quit()


def _wait(driver, css, timeout=10.0):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))
    return driver.find_elements(By.CSS_SELECTOR, css)


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    """Where screenshots go: $FILEGRAM_VIEW_SHOTS (docs/img/ was filled that way) or a temporary folder."""
    out = Path(os.environ.get("FILEGRAM_VIEW_SHOTS") or tmp_path_factory.mktemp("view_shots"))
    out.mkdir(parents=True, exist_ok=True)
    return out


def _shot(driver, out: Path, name: str) -> Path:
    driver.save_screenshot(str(out / name))
    assert (out / name).stat().st_size > 1000
    return out / name


def test_browser_results_table_one_row_per_method_with_intervals(site, browser, shots):
    run, out = site
    browser.get((out / "index.html").as_uri())
    rows = _wait(browser, "#results tbody tr")
    assert [r.get_attribute("data-method") for r in rows] == \
        [m for m in run.read_table("results/summary.parquet")["method"] if m in METHODS]
    for r in rows:  # two profiles: no interval beside a score (too few distinct resamples), as in the report
        assert "[" not in r.text and "n/a" not in r.text
    assert "none from fewer than 5 profiles" in browser.find_element("css selector", "#results").find_element(
        "xpath", "preceding-sibling::p[1]").text
    validity = [r.get_attribute("data-method") for r in _wait(browser, "#validity tbody tr")]
    assert "oracle" in validity and "random" in validity
    header = _wait(browser, "#results thead th")[3]  # first score column: click sorts
    header.click()
    header.click()
    assert len(_wait(browser, "#results tbody tr")) == len(rows)
    _shot(browser, shots, "view-results.png")


def test_intervals_from_five_profiles_are_shown_and_from_fewer_are_not(site, tmp_path):
    """The viewer's cells carry the report's 95 % interval only where it rests on ≥ 5 profiles."""
    import shutil

    import polars as pl

    from filegram_ray.view.build import results_section

    run, _ = site
    shutil.copytree(Path(run.uri) / "results", tmp_path / "results")
    iv = pl.read_parquet(tmp_path / "results" / "intervals.parquet")
    assert iv["n_profiles"].max() < 5
    few = results_section(RunDir(str(tmp_path)))
    assert all(c.get("lo") is None for r in few["rows"] for c in r["cells"].values())
    assert all(p["lo"] is None for p in few["paired"])
    iv.with_columns(pl.lit(6, pl.Int64).alias("n_profiles")).write_parquet(tmp_path / "results" / "intervals.parquet")
    many = results_section(RunDir(str(tmp_path)))
    shown = [c for r in many["rows"] for c in r["cells"].values() if c.get("lo") is not None]
    assert shown and all(c["lo"] <= c["mean"] <= c["hi"] for c in shown)


def test_browser_item_page_shows_two_methods_contexts_side_by_side(site, browser, shots):
    _, out = site
    browser.get((out / "items.html").as_uri())
    links = _wait(browser, "#items tbody a")
    assert len(links) >= 10
    browser.get((out / "item.html").as_uri() + f"?id={site_name('AttrRec-00001')}&a=full_context&b=no_context")
    left = _wait(browser, "#left pre.context")[0]
    right = _wait(browser, "#right pre.context")[0]
    assert "Quarterly review" in left.text  # Full Context hands the reader the sessions
    assert right.text == "(empty context)"  # No Context hands it nothing
    assert "How does this user organise" in browser.find_element("id", "question").text
    assert "tokens" in browser.find_element("css selector", "#left .answer").text
    _shot(browser, shots, "view-item.png")


def test_browser_trajectory_timeline_lists_its_events(site, browser, shots):
    run, out = site
    tid = f"{PROFILES[0]}/T-01"
    browser.get((out / "trajectory.html").as_uri() + f"?id={site_name(tid)}")
    rows = _wait(browser, "#timeline tbody tr")
    events = run.read_json(f"trajectories/{tid}/events.json")
    assert len(rows) == len(events)
    assert "file_write" in rows[[e["event_type"] for e in events].index("file_write")].text
    assert _wait(browser, "#fingerprint svg")
    browser.get((out / "trajectories.html").as_uri())
    assert any("yes" in r.text for r in _wait(browser, "#trajs tbody tr"))  # the perturbed one is marked
    browser.get((out / "trajectory.html").as_uri() + f"?id={site_name(tid)}")
    _wait(browser, "#timeline tbody tr")
    browser.find_element("css selector", "#timeline details summary").click()  # open the first snapshot
    _shot(browser, shots, "view-trajectory.png")


def test_browser_full_size_index_loads_under_two_seconds(site, browser, tmp_path):
    """A default run's size (≈ 7K answer rows over 16 methods, 640 trajectories): the list pages load their index
    data and draw the first page in < 2 s."""
    _, out = site
    big = tmp_path / "big"
    shutil.copytree(out, big)
    rows = [[f"Q{i:05d}", f"Q{i:05d}", "AttrRec", "procedural", "text",
             {f"m{k:02d}": [str((i + k) % 2), 100.0 * ((i + k) % 2)] for k in range(16)}, False]
            for i in range(440)]  # 440 items × 16 methods = 7,040 answer rows
    (big / "data/items_index.js").write_text("window.FG_ITEMS = " + json.dumps(
        {"methods": [f"m{k:02d}" for k in range(16)], "rows": rows, "sub_tasks": ["AttrRec"]}) + ";")
    (big / "data/traj_index.js").write_text("window.FG_TRAJ = " + json.dumps(
        [[f"p{i // 20:02d}/T-{i % 20:02d}", f"p{i // 20:02d}__T-{i % 20:02d}", f"p{i // 20:02d}", f"T-{i % 20:02d}",
          40, i % 5 == 0, False, ""] for i in range(640)]) + ";")
    for page, css in (("items", "#items tbody tr"), ("trajectories", "#trajs tbody tr"), ("index", "#results tr")):
        t0 = time.perf_counter()
        browser.get((big / f"{page}.html").as_uri())
        _wait(browser, css)
        secs = time.perf_counter() - t0
        assert secs < 2.0, f"{page}.html took {secs:.2f} s"


def test_pipeline_ends_by_printing_the_viewer_path(tmp_path, capsys):
    """`filegram pipeline` that ran evaluate builds RUN/view and prints "open RUN/view/index.html" last."""
    from filegram_ray.cli import main

    make_run(tmp_path / "run", n_filler=0)
    rc = main(["pipeline", "--only", "evaluate", "--serial", "--run-dir", str(tmp_path / "run"),
               "--set", "evaluate.methods=[no_context]", "--set", "evaluate.plots=false",
               "--set", "evaluate.sample_per_sub_task=null"])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == f"open {tmp_path / 'run' / 'view' / 'index.html'}"
    assert (tmp_path / "run" / "view" / "data" / "items_index.js").exists()


@pytest.mark.slow
def test_language_model_path_records_the_context_the_model_was_shown(ray_local, tmp_path):
    """Through evaluate's ray.data.llm answering path (a real local HTTP stub server): results/contexts/ holds, per
    item, the context text that went into the model's prompt, and the item page data carries it."""
    from scripted_chat_server import ScriptedChatServer, completion

    run = make_run(tmp_path / "run")
    with ScriptedChatServer(lambda req, _n: completion("A" if "grammar" in req else "Answer: A")) as srv:
        backbone = {"kind": "openai", "base_url": srv.base_url, "model": "m", "batch_size": 8, "max_retries": 0}
        run_evaluate(load_config(overrides={"run_dir": str(tmp_path / "run"), "evaluate": {
            "methods": ["full_context"], "settings": ["text"], "sample_per_sub_task": None, "plots": False,
            "backbone": backbone, "ingest_llm": False, "num_actors": 1, "judge": "rubric", "validity": False}}))
        # context first (evaluate/answer.py): the memory context rides in the system message, the question last
        prompts = ["\n".join(m.get("content") or "" for m in r["messages"]) for r in srv.requests if r.get("messages")]
    tables = [run.read_table(f) for f in run.walk_files("results/contexts") if f.endswith(".parquet")]
    assert tables and all("/full_context/" in f for f in run.walk_files("results/contexts"))
    texts = [t for tab in tables for t in tab["context_text"]]
    assert texts and all(t and any(t in p for p in prompts) for t in texts)
    out = Path(build_view(run)).parent
    item = _data(out / "data/items" / f"{site_name('AttrRec-00001')}.js", "FG_ITEM")
    ref = next(a["context_ref"] for a in item["answers"] if a["method"] == "full_context")
    assert _ctx_text(out, ref) in texts


def test_serve_answers_on_loopback_only(site):
    import threading
    import urllib.request

    from filegram_ray.view.build import make_server

    _, out = site
    with make_server(out, 0) as httpd:
        host, port = httpd.server_address[:2]
        assert host == "127.0.0.1"
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/items_index.js", timeout=10) as resp:
                assert resp.read() == (out / "data/items_index.js").read_bytes()
        finally:
            httpd.shutdown()


# ------------------------------------------------------------------------------- the viewer tells the truth
def _expected_outcome(r: dict, is_open: bool) -> str:
    """What an answer row of results.parquet says, read independently of the viewer: error rows were never
    answered; multiple choice is right or wrong; an open-ended answer's judge score (0–100) is right at 75+
    (Likert 4–5), wrong at 25 or less (Likert 1–2), partial between."""
    if r["status"] != "ok":
        return "e"
    if not is_open:
        return "1" if r["is_correct"] else "0"
    return "e" if r["score"] is None else "1" if r["score"] >= 75 else "0" if r["score"] <= 25 else "p"


def test_open_ended_items_show_their_judge_score_the_oracle_right(site):
    """Issue 52 item 7: open-ended items showed as wrong for every method, the oracle included (it scored 100)."""
    run, out = site
    res = run.read_table("results/results.parquet")
    open_ids = set(res.filter(res["is_open"])["question_id"].to_list())
    assert open_ids  # the hand-made bench has open-ended items
    idx = _data(out / "data/items_index.js", "FG_ITEMS")
    rows = {r[0]: r for r in idx["rows"]}
    for r in res.iter_rows(named=True):
        shown = rows[r["question_id"]]
        assert shown[6] == (r["question_id"] in open_ids)
        assert shown[5][r["method"]][0] == _expected_outcome(r, shown[6]), (r["method"], r["question_id"])
    oracle_open = res.filter(res["is_open"] & (res["method"] == "oracle"))
    assert oracle_open.height and set(oracle_open["score"].to_list()) == {100.0}
    assert all(rows[q][5]["oracle"][0] == "1" for q in oracle_open["question_id"].to_list())


def test_browser_items_filter_counts_match_results_parquet(site, browser):
    """Each answer filter of the Items page returns exactly the items results.parquet says: for the oracle, "right"
    is every item and "wrong" none; over all methods, "wrong" is not every open-ended item."""
    from selenium.webdriver.support.ui import Select

    run, out = site
    res = run.read_table("results/results.parquet")
    is_open = {r["question_id"]: r["is_open"] for r in res.iter_rows(named=True)}
    outcomes: dict[str, dict[str, str]] = {}
    for r in res.iter_rows(named=True):
        outcomes.setdefault(r["question_id"], {})[r["method"]] = _expected_outcome(r, is_open[r["question_id"]])
    browser.get((out / "items.html").as_uri())
    _wait(browser, "#items tbody tr")
    count = browser.find_element("id", "count")
    for method in ("", "oracle", "no_context"):
        Select(browser.find_element("id", "f-method")).select_by_value(method)
        for code in ("1", "0", "p", "e"):
            Select(browser.find_element("id", "f-correct")).select_by_value(code)
            want = sum(1 for by in outcomes.values() if (by.get(method) == code if method else code in by.values()))
            assert count.text == f"{want} of {len(outcomes)} items", (method, code)
    Select(browser.find_element("id", "f-method")).select_by_value("oracle")
    Select(browser.find_element("id", "f-correct")).select_by_value("1")
    assert count.text == f"{len(outcomes)} of {len(outcomes)} items"  # the oracle is right on every item
    Select(browser.find_element("id", "f-correct")).select_by_value("0")
    assert count.text == f"0 of {len(outcomes)} items" and sum(is_open.values()) > 0  # open-ended ones included


def test_browser_results_page_says_the_reader_cannot_rank_and_marks_nothing(site, browser):
    """The lexical reader on 2 profiles cannot rank (results/findings.json): the Results page says so, no method
    carries a ≠ marker, and every finding reads "not tested" as in findings.json."""
    run, out = site
    found = json.loads(run.read_text("results/findings.json"))
    assert found["reader"]["can_rank"] is False
    browser.get((out / "index.html").as_uri())
    assert "cannot rank" in _wait(browser, "#reader-verdict")[0].text
    assert not browser.find_elements("css selector", "#results .mark")
    shown = {r.get_attribute("data-finding"): r.text for r in _wait(browser, "#findings tbody tr")}
    assert set(shown) == {f["id"] for f in found["findings"]}
    for f in found["findings"]:
        assert f["verdict"] == "not tested" and "not tested" in shown[f["id"]]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Two trajectories the real engine wrote (p1, tasks T-01 and T-02, seed 7): Chinese file names (T-01) and
    every kind of file event (moves, copies, context switches, cross-file references, browses, searches)."""
    from filegram_ray.engine.generate import run_generate

    root = tmp_path_factory.mktemp("view_generated")
    cfg = load_config(None, [f"run_dir={root}", "seed=7"])
    data = cfg.model_dump()
    data.update(profiles=["p1"], tasks=["T-01", "T-02"], generate={"executor": "serial"})
    run_generate(type(cfg).model_validate(data))
    run = RunDir(str(root))
    return run, Path(build_view(run)).parent


def test_browser_timeline_shows_what_every_event_touched_in_its_own_script(generated, browser):
    """Issue 52 item 7: 142 of 254 timeline rows showed no path (moves, context switches, cross-file references,
    browses use fields the viewer did not read), and Chinese names drew as boxes where the system has no CJK font.
    Every event whose schema (filegram_ray/schema/events.py) names a path, a file, a directory or a query shows
    each of those values in its row, and the Noto Sans cut served with the site covers every CJK character."""
    from filegram_ray.schema.events import EVENT_MODELS

    run, out = generated
    tids = [f"{p}/{t}" for p in run.listdir("trajectories") if not p.endswith((".parquet", ".json"))
            for t in run.listdir(f"trajectories/{p}")]
    wanted = {"file_move", "context_switch", "cross_file_reference", "file_browse"}

    def cjk_of(events):
        return "".join(sorted({ch for e in events for v in e.values() if isinstance(v, str) for ch in v
                               if ord(ch) >= 0x4E00}))

    by_tid = {t: run.read_json(f"trajectories/{t}/events.json") for t in tids}
    # the trajectory that holds every kind of event the viewer once drew without a path, and one named in Chinese
    tid = next((t for t, ev in by_tid.items() if wanted <= {e["event_type"] for e in ev}), None)
    assert tid is not None, "no trajectory of the run holds a move, a context switch, a reference and a browse"
    cjk_tid = next((t for t, ev in by_tid.items() if cjk_of(ev)), None)
    assert cjk_tid is not None  # p1 names its files in Chinese
    named = ("_path", "_file", "query", "target_directory")
    for t in dict.fromkeys([tid, cjk_tid]):
        events = by_tid[t]
        browser.get((out / "trajectory.html").as_uri() + f"?id={site_name(t)}")
        rows = _wait(browser, "#timeline tbody tr")
        assert len(rows) == len(events)
        checked, types = 0, set()
        for e, row in zip(events, rows):
            fields = [f for f in EVENT_MODELS[e["event_type"]].model_fields if f.endswith(named) or f in named]
            values = [str(e[f]) for f in fields if e.get(f)]
            cell = row.find_elements("css selector", "td")[3].text
            for v in values:
                assert v in cell, (e["event_type"], v, cell)
            checked += bool(values)
            types.add(e["event_type"]) if values else None
        if t == tid:
            assert wanted <= types, types
        assert checked > len(events) // 2
    cjk = cjk_of(by_tid[cjk_tid])
    ok = browser.execute_async_script(
        "var done = arguments[arguments.length - 1], text = arguments[0];"
        "document.fonts.load('14px \"FG NotoSansSC\"', text).then(function (f) {"
        "  done([f.length, document.fonts.check('14px \"FG NotoSansSC\"', text),"
        "        getComputedStyle(document.querySelector('#timeline td')).fontFamily]); });", cjk)
    assert ok[0] >= 1 and ok[1] is True and "FG NotoSansSC" in ok[2], ok
    assert (out / "static/NotoSansSC.ttf").stat().st_size < 2_000_000  # a cut, not the 17 MB font


# ------------------------------------------------------------------------- --out, links, malformed inputs
def test_view_out_refuses_what_it_would_destroy(site, tmp_path, capsys):
    """Issue 52 item 8: `filegram view RUN --out X` deleted whatever X was, exit 0. It now refuses, exit 2 with one
    line and nothing changed, anything but a new or empty folder or an earlier site: a folder of other files, a
    regular file, a link, the run itself, a folder inside the run (RUN/trajectories), a folder holding the run."""
    from filegram_ray.cli import main

    run, _ = site
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    note = tmp_path / "note.txt"
    note.write_text("keep me")
    link = tmp_path / "link"
    link.symlink_to(mine)
    traj_before = sorted(p.relative_to(run.root) for p in Path(run.root, "trajectories").rglob("*"))
    for target in (mine, note, link, Path(run.root), Path(run.root) / "trajectories", Path(run.root).parent):
        assert main(["view", run.root, "--out", str(target)]) == 2, target
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and str(target) in err, err
    assert (mine / "thesis.tex").read_text() == "years of work" and note.read_text() == "keep me"
    assert link.is_symlink() and run.exists("run.json")
    assert sorted(p.relative_to(run.root) for p in Path(run.root, "trajectories").rglob("*")) == traj_before
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["view", run.root, "--out", str(empty)]) == 0  # an empty folder
    assert main(["view", run.root, "--out", str(empty)]) == 0  # and then an earlier site: replaced
    assert (empty / ".filegram-view").is_file() and (empty / "index.html").is_file()


def test_view_copies_no_link_target_into_the_site(site, tmp_path):
    """Issue 52 item 8: a recording or a results PNG that is a link to a file outside the run (/etc/passwd) was
    copied into the site. Links are left out, with a note; the real files still come."""
    run, _ = site
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:SECRET-MARKER-91:/root:/bin/bash\n")
    copy = RunDir(str(tmp_path / "run"))
    shutil.copytree(run.root, copy.root, dirs_exist_ok=True, symlinks=True)
    shutil.rmtree(Path(copy.root) / "view", ignore_errors=True)
    tid = f"{PROFILES[0]}/T-01"
    rec = Path(copy.root) / "recordings" / f"{tid}.mp4"
    rec.parent.mkdir(parents=True)
    rec.symlink_to(secret)
    png = Path(copy.root) / "results/subtasks.png"
    png.unlink()
    png.symlink_to(secret)
    media_dir = Path(copy.root) / "trajectories" / tid / "media"
    blob = next(media_dir.rglob("*.blob"))
    blob.unlink()
    blob.symlink_to(secret)
    out = Path(build_view(copy)).parent
    for f in out.rglob("*"):
        assert not f.is_file() or b"SECRET-MARKER-91" not in f.read_bytes(), f
    assert not (out / "img/subtasks.png").exists() and (out / "img/channels.png").exists()
    assert "link out of the run" in (out / "index.html").read_text()
    traj = _data(out / "data/traj" / f"{site_name(tid)}.js", "FG_T")
    assert "video" not in traj and "link out of the run" in traj["error"]


def test_view_malformed_inputs_are_notes_not_tracebacks(site, tmp_path, capsys):
    """Issue 52 item 8: a run.json that is a list, null question_id / method / context_text in the results, a
    string timestamp in events.json: the site is built (exit 0), each said on its page."""
    import polars as pl

    from filegram_ray.cli import main

    run, _ = site
    bad = RunDir(str(tmp_path / "bad"))
    shutil.copytree(run.root, bad.root, dirs_exist_ok=True)
    shutil.rmtree(Path(bad.root) / "view", ignore_errors=True)
    bad.write_text("run.json", "[1, 2, 3]")
    res = bad.read_table("results/results.parquet")
    res = pl.concat([res, res.head(2).with_columns(question_id=pl.lit(None, pl.Utf8)),
                     res.head(1).with_columns(method=pl.lit(None, pl.Utf8))])
    bad.write_table("results/results.parquet", res)
    ctx_rel = next(f for f in bad.walk_files("results/contexts") if f.endswith(".parquet"))
    ctx = bad.read_table(ctx_rel)
    bad.write_table(ctx_rel, ctx.with_columns(context_text=pl.lit(None, pl.Utf8)))
    tid = f"{PROFILES[0]}/T-01"
    events = bad.read_json(f"trajectories/{tid}/events.json")
    events[1]["timestamp"] = "2026-12-05T09:00:00"
    bad.write_text(f"trajectories/{tid}/events.json", json.dumps(events))
    assert main(["view", bad.root]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    out = Path(bad.root) / "view"
    assert "not a JSON object" in (out / "run.html").read_text()
    assert "3 rows of results/results.parquet have no question id or method" in (out / "items.html").read_text()
    traj = _data(out / "data/traj" / f"{site_name(tid)}.js", "FG_T")
    assert traj["events"][1]["t"] is None and "not a number" in traj["error"]
    assert traj["events"][2]["t"] is not None


def test_killed_view_leaves_a_temporary_folder_the_next_build_removes(site, tmp_path):
    """Issue 52 item 8: a `filegram view` killed mid-build left RUN/.view.tmp-* that no later build removed."""
    import signal
    import subprocess
    import sys

    run, _ = site
    copy = tmp_path / "run"
    shutil.copytree(run.root, copy)
    shutil.rmtree(copy / "view", ignore_errors=True)
    proc = subprocess.Popen([sys.executable, "-m", "filegram_ray.cli", "view", str(copy)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not list(copy.glob(".view.tmp-*")):
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    left = list(copy.glob(".view.tmp-*"))
    assert left, "the build finished before it could be killed"
    stale_old = copy / ".view.tmp-oldformat"  # an older version's name (no pid): removed once an hour old
    stale_old.mkdir()
    os.utime(stale_old, (time.time() - 7200, time.time() - 7200))
    build_view(str(copy))
    assert not list(copy.glob(".view.tmp-*")) and (copy / "view/index.html").exists()
