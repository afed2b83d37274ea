"""Persona simulator: determinism, tier-specific behaviour on real bundles, language, perturbation hiding."""

from __future__ import annotations

import contextlib
import json
import re

import pytest

from filegram_ray.engine.simulator import Persona, simulate_trajectory
from filegram_ray.engine.simulator.calibration import trajectory_features
from filegram_ray.engine.simulator.writer import cjk_ratio


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from filegram_ray.profiles import load_profiles
    from filegram_ray.tasks import load_tasks
    from filegram_ray.workspace.bundle import build_bundle

    root = tmp_path_factory.mktemp("sim")
    profiles = {p.profile_id.split("_")[0]: p for p in load_profiles()}
    tasks = {t.task_id: t for t in load_tasks()}
    bundles = {}
    for tid in ("T-01", "T-09"):
        build_bundle(tasks[tid], 7, root / "ws" / tid)
        bundles[tid] = root / "ws" / tid
    return {"root": root, "profiles": profiles, "tasks": tasks, "bundles": bundles}


def run(world, pid, tid, *, seed=7, pert=None, tag="a"):
    sess = simulate_trajectory(world["profiles"][pid], world["tasks"][tid], world["bundles"][tid],
                               world["root"] / f"work-{tag}", seed=seed, perturbation=pert)
    dest = world["root"] / f"traj-{tag}" / pid / tid
    sess.write_trajectory(dest)
    sess.close()
    return dest


@contextlib.contextmanager
def t01_agent(world, persona, where):
    """A :class:`PersonaAgent` of ``persona`` on T-01 (seed 7) in an engine session under ``where``, closed after."""
    from filegram_ray.engine import EngineSession
    from filegram_ray.engine.simulator.agent import PersonaAgent

    sess = EngineSession(None, where, persona.profile_id, "T-01", seed=1, start_ms=1.7e12)
    try:
        yield PersonaAgent(sess, world["tasks"]["T-01"], persona, 7)
    finally:
        sess.close()


def test_same_seed_same_bytes(world):
    a = run(world, "p5", "T-01", tag="d1")
    b = run(world, "p5", "T-01", tag="d2")
    for name in ("events_raw.json", "events.json", "summary.json", "media/manifest.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    c = run(world, "p5", "T-01", seed=8, tag="d3")
    assert (a / "events_raw.json").read_bytes() != (c / "events_raw.json").read_bytes()


SEEDS = (1, 2, 3, 4, 5, 6)


def mean_features(world, pid, tid, tag, seeds=SEEDS):
    """Mean procedural features of one profile over several sessions (seeds): a profile's tendency."""
    rows = [trajectory_features(run(world, pid, tid, seed=s, tag=f"{tag}{s}")) for s in seeds]
    return {k: sum(r.get(k, 0.0) for r in rows) / len(rows) for k in rows[0]}, rows


def test_tiers_show_as_tendencies_across_sessions(world):
    """Issue #28 item 1: the tier shows in a profile's sessions taken together (TIER_TARGETS §2), while single
    sessions vary: p1 = A-L B-L C-L F-M, p3 = A-M B-R C-R F-R, p5 = A-R B-M C-M."""
    m = {pid: mean_features(world, pid, "T-01", f"t{pid}")[0] for pid in ("p1", "p3", "p5")}
    assert m["p3"]["search_ratio"] > max(m["p1"]["search_ratio"], m["p5"]["search_ratio"])   # A-M searches
    assert m["p5"]["browse_ratio"] > max(m["p1"]["browse_ratio"], m["p3"]["browse_ratio"])   # A-R browses
    assert m["p1"]["revisit_ratio"] > max(m["p3"]["revisit_ratio"], m["p5"]["revisit_ratio"])  # A-L revisits
    assert m["p1"]["total_output_chars"] > m["p5"]["total_output_chars"] > m["p3"]["total_output_chars"]  # B
    assert m["p1"]["dirs_created"] > m["p5"]["dirs_created"] >= m["p3"]["dirs_created"]  # C
    assert m["p1"]["max_dir_depth"] > m["p5"]["max_dir_depth"]
    assert m["p1"]["markdown_table_rows"] > m["p3"]["markdown_table_rows"]  # F-M tables, F-R none (mostly)


def test_sessions_vary_and_same_tiers_differ(world):
    """Issue #28 item 1: no feature is a fixed count of the tier — one profile's sessions differ, and two profiles
    with the same tiers draw different latent tendencies (seeded from profile id + master seed)."""
    from filegram_ray.engine.simulator.tendency import acting_tier, profile_tendency, session_positions

    _, rows = mean_features(world, "p1", "T-01", "v")
    for feat in ("total_reads", "total_output_chars", "total_deletes"):
        assert len({r[feat] for r in rows}) > 1, feat
    a, b = profile_tendency("twin_a", 7), profile_tendency("twin_b", 7)
    assert a != b and a == profile_tendency("twin_a", 7) and a != profile_tendency("twin_a", 8)
    tiers = dict.fromkeys("ABCDEF", "M")
    acts = [acting_tier(session_positions(tiers, a, 7, "twin_a", f"T-{i:02d}")[d])
            for i in range(1, 33) for d in "ABCDEF"]
    own = acts.count("M") / len(acts)
    assert 0.55 <= own < 0.95  # mostly in type, sometimes against it


def test_content_is_written_from_what_was_read_in_the_persona_language(world):
    """Issue #53 item 2: outputs are sentences composed from the facts read (numbers, names, dates), not the input
    sentences pasted under attribution frames; no prompt pasted, no chat sign-off, no tool marker; the persona's
    language writes them (p1 Chinese, p3 English)."""
    from filegram_ray.validity.motivation import SourceText, markers_in_outputs, sentences
    from filegram_ray.workspace.extract import extract_text, is_media, kind_of

    inputs = [p for p in (world["bundles"]["T-01"] / "files").rglob("*") if p.is_file() and not is_media(kind_of(p))]
    src = SourceText([extract_text(p) for p in inputs])
    for pid, zh in (("p1", True), ("p3", False)):
        dest = run(world, pid, "T-01", tag=f"lang{pid}")
        outs = [p for p in (dest / "outputs").rglob("*.md")]
        assert outs and markers_in_outputs(dest) == []
        text = "\n".join(p.read_text(encoding="utf-8") for p in outs)
        assert (cjk_ratio(text) > 0.3) if zh else cjk_ratio(text) == 0.0
        for bad in ("记载：", "显示：", "Key Findings", "Hope this helps", "Let me know", "…", "Sources read for"):
            assert bad not in text, bad
        assert not re.search(r"据\S+\.(?:md|txt|pdf|eml)", text)  # no "according to <file>" frame
        assert world["tasks"]["T-01"].prompt_en[:60] not in text
        sents = [x for p in outs for x in sentences(p.read_text(encoding="utf-8"))]
        verbatim = sum(src.verbatim(x) for x in sents)
        facts = sum(bool(src.fact(x)) for x in sents)
        assert sents and verbatim <= 0.2 * len(sents), (verbatim, len(sents))
        assert facts >= 0.6 * len(sents), (facts, len(sents))


def test_condensing_reaches_the_word_limit_whatever_the_edit_style(world):
    """T-09 (cut the report below 800 words, in the file itself): every session gets there; D-L (p1) makes many
    small edits after a backup, D-R (p3) rewrites more often; no edit lengthens a paragraph."""
    from filegram_ray.validity.outcomes import session_outcome

    fl, rows_l = mean_features(world, "p1", "T-09", "dl")
    fr, rows_r = mean_features(world, "p3", "T-09", "dr")
    assert fl["total_edits"] > fr["total_edits"] and fl["backup_copies"] > fr["backup_copies"]
    assert fr["total_overwrites"] > fl["total_overwrites"]
    for tag, pid in (("dl", "p1"), ("dr", "p3")):
        for s in SEEDS:
            d = world["root"] / f"traj-{tag}{s}" / pid / "T-09"
            assert session_outcome(d, world["bundles"]["T-09"], "T-09")["ok"], (pid, s)
    ev = json.loads((world["root"] / "traj-dl1" / "p1" / "T-09" / "events.json").read_text(encoding="utf-8"))
    edits = [e for e in ev if e["event_type"] == "file_edit"]
    assert sum(e["lines_added"] > e["lines_deleted"] for e in edits) <= 1  # the bottom line, added once


def test_perturbation_is_real_and_stays_hidden(world):
    """A perturbed session differs from its counterfactual (same seed, no shift), acts nearer the target tier,
    and writes nothing about the shift into events."""
    from filegram_ray.engine.simulator.tendency import profile_tendency, session_positions

    pert = {"dimension": "C", "from": "R", "to": "M"}
    persona = Persona.from_profile(world["profiles"]["p3"], pert)
    assert persona.tiers["C"] == "M" and persona.base_tiers["C"] == "R"
    tend = profile_tendency(persona.profile_id, 7)
    base_pos = session_positions(persona.base_tiers, tend, 7, persona.profile_id, "T-01")
    pert_pos = session_positions(persona.tiers, tend, 7, persona.profile_id, "T-01", "C")
    assert pert_pos["C"] < base_pos["C"] and {d: base_pos[d] for d in "ABDEF"} == {d: pert_pos[d] for d in "ABDEF"}
    base = run(world, "p3", "T-01", tag="pb")
    dest = run(world, "p3", "T-01", pert=pert, tag="pp")
    assert (base / "events.json").read_bytes() != (dest / "events.json").read_bytes()
    raw = (dest / "events_raw.json").read_text(encoding="utf-8").lower()
    assert "perturb" not in raw and '"tiers"' not in raw
    # across sessions the shift shows: C-M folders where the profile (C-R) makes none
    shifted = [trajectory_features(run(world, "p3", "T-01", seed=s, pert=pert, tag=f"ps{s}"))["dirs_created"]
               for s in SEEDS]
    own = [trajectory_features(run(world, "p3", "T-01", seed=s, tag=f"po{s}"))["dirs_created"] for s in SEEDS]
    assert sum(shifted) > sum(own)


def test_actions_are_motivated(world):
    """Issue #28 item 2: searches find files and what they find is opened; every delete, move or rename follows
    an inspection of that file (read, written by the agent, or ``ls -l`` of it)."""
    import shlex

    searches = found = opened = changes = inspected = 0
    for pid in ("p1", "p3", "p5", "p4"):
        for tid in ("T-01", "T-09"):
            dest = run(world, pid, tid, tag="mot")
            raw = json.loads((dest / "events_raw.json").read_text(encoding="utf-8"))
            root = next(e["target_directory"] for e in raw if e["event_type"] == "session_start").rstrip("/") + "/"
            seen: set[str] = set()
            for i, e in enumerate(raw):
                t = e["event_type"]
                if t in ("file_read", "file_write", "file_edit"):
                    seen.add(e["file_path"].removeprefix(root))
                elif t == "tool_call" and e.get("tool_name") == "bash":
                    cmd = e["tool_parameters"]["command"]
                    for part in cmd.split("&&"):
                        toks = shlex.split(part)
                        if toks[:2] == ["ls", "-l"]:
                            seen.update(toks[2:])
                elif t == "file_search":
                    searches += 1
                    found += e["files_matched"] >= 1
                    nxt = next((x["event_type"] for x in raw[i + 1:] if x["event_type"] in ("file_read",
                                                                                       "file_search")), None)
                    opened += nxt == "file_read"  # a read follows before the next search
                elif t in ("file_delete", "file_move", "file_rename"):
                    changes += 1
                    inspected += (e.get("file_path") or e.get("old_path", "")).removeprefix(root) in seen
    assert searches and found >= 0.9 * searches and opened >= 0.6 * searches
    assert changes and inspected == changes


def test_a_short_deliverable_still_gets_its_small_edits(world, tmp_path):
    """Issue #28 (D read at 0.83 across profiles on fresh set 2804): a small edit of the agent's own deliverable
    that finds no line to repair adds one fact read in the session — one added line, a sentence composed from a
    statement whose values the file does not hold yet — so the number of small edits follows D, not the document's
    length (B). Only for the own deliverable (``add``) and never when the task asks to shorten."""
    from filegram_ray.engine import EngineSession
    from filegram_ray.engine.simulator.agent import PersonaAgent

    persona = Persona.from_profile(world["profiles"]["p8"])  # D-L, B-R: short outputs, many small edits
    files = world["bundles"]["T-01"] / "files"
    sess = EngineSession(files, tmp_path, persona.profile_id, "T-01", seed=1, start_ms=1.7e12)
    agent = PersonaAgent(sess, world["tasks"]["T-01"], persona, 7)
    sess.start()
    try:
        agent.read("channel_checks_summary.md")
        values = {v for st in agent.kn.statements for k, v in st.slots.items() if not k.startswith("_") and v}
        draft = "# Summary\n\n- A short note for the team.\n"
        agent.write("summary.md", draft)
        assert agent.small_edit("summary.md") is False  # nothing to repair, no addition asked: no edit
        assert agent.small_edit("summary.md", add=True) and agent.small_edit("summary.md", add=True)
        added = [ln for ln in agent.own["summary.md"].split("\n") if ln not in draft.split("\n")]
        assert len(added) == 2 and len(set(added)) == 2
        for ln in added:
            assert ln.startswith("- ") and any(v in ln for v in values), ln
        assert [(len(new.split("\n")) - len(old.split("\n"))) for _, old, new in agent.changes] == [1, 1]
        agent.condense = True
        assert agent.small_edit("summary.md", add=True) is False
    finally:
        sess.close()


def test_a_block_edit_finds_its_block_in_a_plain_text_file(world, tmp_path):
    """Issue #28 (D-M read as D-L: 102 of 138 block edits of eight D-M profiles fell back to a one-line edit): a text
    without a qualifying ``## `` section (a plain-text workspace file) has a run of its paragraphs rewritten as
    bullets, one per sentence, nothing dropped or added; a heading-like line (CAPITALS, a ``====`` underline) is
    never turned into a bullet."""
    from filegram_ray.engine import EngineSession
    from filegram_ray.engine.simulator.agent import PersonaAgent

    persona = Persona.from_profile(world["profiles"]["p8"])
    sess = EngineSession(world["bundles"]["T-01"] / "files", tmp_path, persona.profile_id, "T-01", seed=1,
                         start_ms=1.7e12)
    agent = PersonaAgent(sess, world["tasks"]["T-01"], persona, 7)
    text = ("Court attendance checklist\n==========================\n\nNOTES\n\n"
            "Under section 20 the court must weigh the best interests of the child. The client asked for a "
            "plain-language explanation of each stage. Mediation is scheduled for 2024-11-28. Belinda Dixon will "
            "attend with the client.\n\nFIGURES\n\n* Action item: Dr. Cassie Thomas to circulate the bundle.\n"
            "1. Review the contract.\n\nTHE FOLLOWING ITEMS REMAIN OPEN FOR THE HEARING\n")
    sess.start()
    try:
        agent.write("checklist.txt", text)
        assert agent.block_edit("checklist.txt")
        _, old, new = agent.changes[-1]
        after = agent.own["checklist.txt"]
        for kept in ("\nNOTES\n", "\nFIGURES\n", "====\n", "\n* Action item: Dr. Cassie Thomas to circulate the "
                     "bundle.\n1. Review the contract.\n", "\nTHE FOLLOWING ITEMS REMAIN OPEN FOR THE HEARING\n"):
            assert kept in after, kept  # headings and other lists are left as they were
        bullets = [ln for ln in new.split("\n") if ln.startswith("- ")]
        assert len(bullets) >= 4  # the paragraph's four sentences, one bullet each
        assert sorted(re.sub(r"\W+", "", b[2:]) for b in bullets) == sorted(
            re.sub(r"\W+", "", x) for x in re.split(r"(?<=[.!?])\s+", " ".join(old.split("\n"))) if x.strip())
    finally:
        sess.close()


def _knowledge(n_sources: int):
    from filegram_ray.engine.simulator.knowledge import Knowledge, parse_statements

    kn = Knowledge()
    for i in range(n_sources):
        body = "\n".join(f"Project Region{i} reached milestone {k} on 2024-0{1 + k % 9}-1{k % 10}, two days later "
                         "than planned." for k in range(12))
        kn.add(parse_statements(body, f"notes_{i}.md", f"Notes {i}"))
    return kn


def test_document_size_follows_the_char_budget_not_the_reading():
    """Issue #28 / TIER_TARGETS §3 ("output volume comes from the B tier alone"): with a character budget the
    document stops taking facts once it would pass it, so a session that read three times as much writes a
    document of about the same size; without one the size follows what was read. Every bullet is composed from
    a statement's values (milestone, date), not a pasted sentence."""
    import random

    from filegram_ray.engine.simulator.genres import DocSpec, document

    def doc(n, max_chars):
        spec = DocSpec(title="Shipments", lines=400, max_depth=3, max_chars=max_chars, structure="flat_list")
        return document(_knowledge(n), spec, random.Random(3))

    small, big = doc(4, 2000), doc(12, 2000)
    assert len(small) <= 2000 + 200 and len(big) <= 2000 + 200
    assert abs(len(big) - len(small)) < 400
    assert len(doc(12, None)) > 2 * len(big)  # the budget is what binds, not the facts
    for ln in big.split("\n"):
        if ln.lstrip().startswith("- "):
            assert re.search(r"\d{4}-\d\d-\d\d", ln) and "later than planned" not in ln, ln


def test_b_tiers_keep_their_char_bands_whatever_was_read(world):
    """TIER_TARGETS §2.2 avg_output_length bands: the main deliverable's character budget follows the session's
    B position (B-L 8,000, B-M 2,000 in English / 2,300 in Chinese, B-R 600 at the tier's centre, log-normal
    wobble; version 10), whatever A read."""
    budgets = {}
    for pid in ("p1", "p5", "p3"):  # B-L, B-M, B-R
        persona = Persona.from_profile(world["profiles"][pid])
        with t01_agent(world, persona, world["root"] / f"budget-{pid}") as agent:
            agent.pos["B"] = {"L": 0.0, "M": 1.0, "R": 2.0}[persona.tiers["B"]]
            budgets[persona.tiers["B"]] = [agent.doc_spec("main", "x").max_chars for _ in range(40)]
    med = {t: sorted(v)[len(v) // 2] for t, v in budgets.items()}
    assert 5000 < med["L"] < 11000 and 1500 < med["M"] < 3000 and 400 < med["R"] < 1200
    assert max(budgets["R"]) < min(budgets["L"])


def test_a_table_is_read_with_its_own_header():
    """A CSV read from line 1 names its cells by its header, with the column of names (not the date) as the
    row's subject; a table read only from its middle gives no rows (its columns are unknown)."""
    from filegram_ray.engine.simulator.knowledge import parse_statements

    rows = parse_statements("date,owner,task,status\n2024-06-13,Amy Ross,report,blocked\n"
                            "2024-06-16,Brett Smith,review,done\n", "data.csv")
    assert [(r.subject, r.slots["task"], r.date) for r in rows] == [("Amy Ross", "report", "2024-06-13"),
                                                                     ("Brett Smith", "review", "2024-06-16")]
    assert parse_statements("2024-06-13,Amy Ross,report,blocked\n2024-06-16,Brett Smith,review,done\n",
                            "data.csv") == []


def test_bulleted_sentences_and_document_tables_are_facts(tmp_path):
    """A PDF's bullet items (reportlab's WinAnsi bullet, which pypdf returns as DEL) reach the reader as "• …" and
    are understood like any sentence; a DOCX table (tab-separated rows) gives one statement per row, named by its
    header, its first text column the subject."""
    from filegram_ray.engine.simulator.knowledge import parse_statements
    from filegram_ray.workspace.extract import extract_text
    from filegram_ray.workspace.writers import Doc, write_docx, write_pdf

    doc = Doc(title="Case register", sections=[("Open questions", [
        "- Daniel Gibson flagged inventory build-up at SeaLtd as the main near-term risk.",
        "Free cash flow was $561.2M, covering the dividend roughly 2.0x."])],
              tables=[("Matters", [["Client", "Responsible", "Status"],
                                   ["Gardner, Reyes and Best", "Dr. Cassie Thomas", "open"],
                                   ["Acme Ltd", "Jo Bloggs", "closed"]])])
    write_pdf(doc, tmp_path / "risk.pdf", author="test")
    write_docx(doc, tmp_path / "risk.docx", author="test")
    pdf = extract_text(tmp_path / "risk.pdf")
    assert "\x7f" not in pdf and "• Daniel Gibson flagged" in pdf
    for name in ("risk.pdf", "risk.docx"):
        sts = parse_statements(extract_text(tmp_path / name), name)
        risk = next(st for st in sts if st.key == "risk_flag")
        assert (risk.subject, risk.slots["who"]) == ("SeaLtd", "Daniel Gibson")
        assert next(st for st in sts if st.key == "fcf").slots == {"amt": "$561.2M", "x": "2.0"}
    rows = [st for st in parse_statements(extract_text(tmp_path / "risk.docx"), "risk.docx") if st.key == "row"]
    assert [(r.subject, r.slots.get("Status")) for r in rows] == [("Gardner, Reyes and Best", "open"),
                                                                  ("Acme Ltd", "closed")]


def test_bad_tiers_raise_clear_error():
    with pytest.raises(ValueError, match="tiers.C"):
        Persona.from_profile({"profile_id": "px", "tiers": {"A": "L", "B": "L", "C": "X", "D": "L", "E": "L",
                                                              "F": "L"}})


def test_events_json_is_list(world):
    dest = run(world, "p5", "T-09", tag="ev")
    ev = json.loads((dest / "events.json").read_text(encoding="utf-8"))
    assert ev and all("event_type" in e for e in ev)


def test_perturbation_moves_the_distribution_not_the_spread():
    """Issue #28: a one-tier shift moves the session's position by exactly one tier with the same draw and the
    same spread (a distribution shift), so a perturbed session is a session of the target tier, no sharper; B
    and E draw narrower profile offsets and spreads, A, C and D narrower offsets (tendency.PER_DIMENSION) than
    the others; A and C have the common spread again since version 10 (F keeps the common values)."""
    from filegram_ray.engine.simulator.tendency import (
        OFFSET_MAX,
        PER_DIMENSION,
        SIGMA_RANGE,
        TIER_POS,
        profile_tendency,
        session_positions,
    )

    tiers = {"A": "L", "B": "M", "C": "R", "D": "M", "E": "L", "F": "R"}
    moves = {"A": "M", "B": "R", "C": "M", "D": "L", "E": "M", "F": "M"}
    for i in range(40):
        pid = f"g{i:04d}"
        tend = profile_tendency(pid, 11)
        base = session_positions(tiers, tend, 11, pid, "T-12")
        for d, to in moves.items():
            pos = session_positions({**tiers, d: to}, tend, 11, pid, "T-12", d)
            assert pos[d] - base[d] == pytest.approx(TIER_POS[to] - TIER_POS[tiers[d]])
        for d in "ABCDEF":
            sd, clip, spread = PER_DIMENSION.get(d, (None, OFFSET_MAX, SIGMA_RANGE))
            assert abs(tend.offset[d]) <= clip and spread[0] <= tend.sigma[d] <= spread[1]
    assert all(PER_DIMENSION[d][1] < OFFSET_MAX for d in "ABCDE") and "F" not in PER_DIMENSION
    assert PER_DIMENSION["A"][2] == PER_DIMENSION["C"][2] == SIGMA_RANGE


def test_a_session_writing_effort_is_one_draw_shared_by_its_files_and_its_counterfactual(world):
    """Issue #28 item 1 (version 6): a session's writing effort is one log-normal factor (σ = EFFORT_SD) on every
    file's character budget, seeded from (seed, profile, task), so a perturbed session and its counterfactual
    draw the same effort."""
    import math
    import statistics

    from filegram_ray.engine.simulator.tendency import EFFORT_SD, session_effort

    logs = [math.log(session_effort(5, "g0001", f"T-{i:03d}")) for i in range(2000)]
    assert abs(statistics.fmean(logs)) < 0.02 and abs(statistics.stdev(logs) - EFFORT_SD) < 0.02
    assert session_effort(5, "g0001", "T-01") == session_effort(5, "g0001", "T-01")
    efforts = []
    for pert in (None, {"dimension": "B", "from": "L", "to": "M"}):
        persona = Persona.from_profile(world["profiles"]["p1"], pert)
        with t01_agent(world, persona, world["root"] / f"effort-{bool(pert)}") as agent:
            efforts.append(agent.effort)
    assert efforts[0] == efforts[1] == session_effort(7, world["profiles"]["p1"].profile_id, "T-01")


def test_b_l_writes_its_auxiliaries_in_revision_tasks_too(world):
    """TIER_TARGETS §2.2 B-L: ≥ 3 output files per task in every task type, the main file with a data appendix and
    a source list; B-R exactly the task's own file (plus the working outline). Iterate task T-11, four sessions
    each: p1 (B-L) writes the appendix and the source list beside its correction log in most sessions, p3 (B-R)
    never."""
    from filegram_ray.workspace.bundle import build_bundle

    build_bundle(world["tasks"]["T-11"], 7, world["root"] / "ws" / "T-11")
    world["bundles"]["T-11"] = world["root"] / "ws" / "T-11"

    def created(pid, seed):
        d = run(world, pid, "T-11", seed=seed, tag=f"aux{pid}{seed}")
        ev = json.loads((d / "events.json").read_text())
        return [e["file_path"] for e in ev if e["event_type"] == "file_write" and e.get("operation") == "create"]

    appendix, sources = re.compile(r"appendix|数据附录", re.I), re.compile(r"references|sources|参考资料", re.I)
    b_l = [created("p1", s) for s in (1, 2, 3, 4)]
    assert sum(any(appendix.search(f) for f in c) and any(sources.search(f) for f in c) for c in b_l) >= 3, b_l
    assert sum(len(c) >= 3 for c in b_l) >= 3, b_l
    b_r = [created("p3", s) for s in (1, 2, 3, 4)]
    assert all(len(c) <= 2 and not any(appendix.search(f) or sources.search(f) for f in c) for c in b_r), b_r


def test_version_10_edit_habit_follows_the_acting_d_tier_and_b_r_writes_no_csv(world, tmp_path):
    """Issue #53 (perturbation visibility, version 10): a session's usual way of changing a file is the one of the
    tier it acts on D (small / block / rewrite at D-L / D-M / D-R), one file in four another way; a session acting
    B-R under F-L draws its chart and keeps the CSV its F position drew with probability B_R_KEEPS_CSV (0.4; TT
    §2.2 B-R: no structured databases; §3: F-L visuals leak into B's counts), a B-M session every time."""
    from collections import Counter

    with t01_agent(world, Persona.from_profile(world["profiles"]["p20"]), tmp_path) as agent:
        for tier, usual in (("L", "small"), ("M", "block"), ("R", "rewrite")):
            agent.T["D"], agent.habit = tier, None
            modes = Counter(agent.edit_mode() for _ in range(400))
            assert agent.habit == usual and 0.7 < modes[usual] / 400 < 0.9, (tier, modes)
            assert set(modes) == {"small", "block", "rewrite"}
        agent.pos["F"], agent.T["F"] = 0.0, "L"
        plans = {}
        for b in ("R", "M"):
            agent.T["B"] = b
            plans[b] = [agent.visual_plan() for _ in range(200)]
        n_csv = {b: sum(csv for csv, _ in plans[b]) for b in plans}
        assert 0.85 * 0.4 * 200 * 0.6 < n_csv["R"] < 0.85 * 0.4 * 200 * 1.4 and n_csv["M"] > 150
        assert sum(chart for _, chart in plans["R"]) > 150


def test_working_outline_follows_b_and_notes_facts_read(world, tmp_path):
    """Issue #53 (version 10): the working outline every session drafts follows B — a B-L writer notes about three
    times the key facts a B-M writer does (OUTLINE_NOTES), a B-R writer only its section titles — so a B-L outline is
    several times a B-R one's size; each note is composed from a statement read (a date or figure of the source),
    never a pasted input line."""
    import random
    from statistics import median

    from filegram_ray.engine.simulator.genres import outline

    kn = _knowledge(3)
    sizes, notes = {}, {}
    with t01_agent(world, Persona.from_profile(world["profiles"]["p5"]), tmp_path) as agent:
        agent.lang = "en"
        for tier, pos in (("L", 0.0), ("M", 1.0), ("R", 2.0)):
            agent.T["B"], agent.pos["B"] = tier, pos
            specs = [agent.doc_spec("outline", "Outline: shipments") for _ in range(30)]
            texts = [outline(kn, s, random.Random(i), None) for i, s in enumerate(specs)]
            sizes[tier] = median(len(t) for t in texts)
            notes[tier] = [ln for t in texts for ln in t.split("\n") if ln.startswith("   - ")]
    assert sizes["L"] > 1.6 * sizes["M"] > 1.6 * 1.2 * sizes["R"], sizes
    assert not notes["R"] and len(notes["L"]) > 2.5 * len(notes["M"]) > 0
    source = "\n".join(s.text for s in kn.statements)
    for ln in notes["L"] + notes["M"]:
        assert re.search(r"\d{4}-\d\d-\d\d|\d", ln) and ln.strip("- ").strip() not in source, ln


def test_a_log_keeps_every_entry_and_its_b_budget():
    """Issue #53 (version 10): a record the task asks for lists every change in every B tier, and its size follows
    the log's character budget — over it, entries lose their asides (descriptions, reasons) from the last one up,
    then the lead — so a minimal writer's cleanup log is shorter than a balanced one's while naming the same files
    and the same decisions (the T-21 outcome check reads "kept" on a kept duplicate's line)."""
    import random

    from filegram_ray.engine.simulator.genres import DocSpec, action_log, terse_entry

    entries = [(f"`inbox/report_{i:02d}_copy.md`", f"same content as `reports/report_{i:02d}.md` (the weekly figures "
                f"of team {i}, 12 rows); {'kept' if i % 3 == 0 else 'deleted'} — the original stays in reports/")
               for i in range(12)]
    lead = "12 duplicates handled; every original kept in place."

    def log(max_chars):
        spec = DocSpec(title="Cleanup log", lines=80, max_chars=max_chars)
        return action_log(spec.title, entries, spec, random.Random(1), lead=lead)

    full, mid, terse = log(None), log(1500), log(300)
    assert len(terse) < len(mid) <= 1500 < len(full)
    assert lead in mid and lead not in terse
    for text in (full, mid, terse):
        lines = [ln for ln in text.splitlines() if ln.startswith("- ")]
        assert len(lines) == 12
        for i, ln in enumerate(lines):
            assert f"report_{i:02d}_copy.md" in ln and f"reports/report_{i:02d}.md" in ln
            assert ("kept" if i % 3 == 0 else "deleted") in ln
    assert "(the weekly figures" not in terse and "the original stays" not in terse
    assert terse_entry("写作4.2，而`a.md`均为4.5；按多数更正为4.5（多数）") == "写作4.2，而`a.md`均为4.5；按多数更正为4.5"
