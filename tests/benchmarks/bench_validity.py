"""Issue #28 item 4 on two fresh profile sets: every behaviour-validity figure with its bound and PASS / FAIL.

Builds two profile sets the project never saw (``filegram profiles new --n N --seed S``, two seeds), runs the seed
and generate stages for each on the task set (default: all 32 tasks, so profile-level recovery reads all of a
profile's sessions as issue #28 asks; ``--tasks`` takes a slice, e.g. :data:`SLICE`, the 16 tasks used until
2026-12-02 morning), optionally encode, then
``filegram validity`` on each set with the other as the cross-set (fitted there, scored here), and writes
(or extends) a dated measurement page with one section per ``--label``.

    python tests/benchmarks/bench_validity.py --label after
    python tests/benchmarks/bench_validity.py --label before --source /tmp/old-tree   # generate with another tree

Sizes (defaults): 2 sets × 60 profiles × 32 tasks = 3,840 trajectories (≈ 297 perturbed per set); ≈ 2.5 min of
generate per set and ≈ 10 min for the whole pair on a quiet 2-core machine, serial. 60 profiles, not the 30 of
issue #28's first measurement (``--n 30`` gives those): every bounded figure is a share over profiles or their
items, and at 30 profiles its sampling spread is as large as its distance from the bound (one profile is 0.033 of
a recovery figure; the count rule's 95 % interval is ± 0.06), so about one 30-profile set in five failed one figure
by chance (docs/measurements/2026-12-04-validity-round12.md). Run directories are kept under ``--out`` and reused (the stages resume);
a reused profile set or run made with another ``--n`` / ``--tasks`` is refused, naming the folder and both settings.
A failed ``filegram`` command ends the script with the end of its log and a one-line error (exit: the command's).
``--source DIR``: generate with the source tree at DIR (``PYTHONPATH=DIR``; e.g. ``git archive <commit>``
unpacked) — how the "before" figures of today's simulator were made; the measuring code is always this checkout's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from filegram_ray.validity.realism import check_lines  # noqa: E402
from filegram_ray.validity.report import run_validity  # noqa: E402
from filegram_ray.validity.separability import DIMENSIONS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: 8 perturbation candidates (reference §5.7) + T-01 T-02 (understand), T-03 (create), T-05 T-14 (organize),
#: T-07 (synthesize), T-10 (maintain), T-11 (iterate).
SLICE = ["T-12", "T-16", "T-18", "T-22", "T-24", "T-26", "T-29", "T-31", "T-01", "T-02", "T-03", "T-05", "T-07",
         "T-10", "T-11", "T-14"]
#: Default: every task of the bundled set (all of a profile's sessions, issue #28 item 4).
TASKS = [f"T-{i:02d}" for i in range(1, 33)]
#: Default page: a dated page of the day the benchmark runs (docs/measurements/README.md lists them).
PAGE = ROOT / "docs" / "measurements" / f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d}-validity.md"


#: Lines of a failed subprocess's log printed before the one-line error.
LOG_TAIL = 12


class BenchError(Exception):
    """Why the benchmark stops, in one line (printed without a traceback; exit ``code``)."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def _cli(args: list[str], source: str | None, log: Path) -> float:
    """Run ``filegram ARGS`` with its output appended to ``log``; returns the seconds it took.

    Raises:
        BenchError: the command failed; the last :data:`LOG_TAIL` lines it wrote (its own one-line error among them)
            are printed to stderr first, and the exit code is the command's.
    """
    env = dict(os.environ)
    if source:
        env["PYTHONPATH"] = source
    t0 = time.perf_counter()
    start = log.stat().st_size if log.exists() else 0
    with log.open("a", encoding="utf-8") as fh:
        rc = subprocess.run([sys.executable, "-m", "filegram_ray.cli", *args], stdout=fh, stderr=fh, env=env,
                            cwd=source or ROOT).returncode
    if rc:
        with log.open("rb") as fh:
            fh.seek(start)
            tail = fh.read().decode("utf-8", errors="replace").splitlines()[-LOG_TAIL:]
        for line in tail:
            print(line, file=sys.stderr)
        raise BenchError(f"`filegram {args[0]}` failed (exit {rc}); the lines above are the end of its log {log}",
                         rc if rc > 0 else 1)
    return time.perf_counter() - t0


def _complete(run: Path, n_units: int) -> bool:
    """The run already holds ``n_units`` finished trajectories (reused as they are)."""
    import polars as pl

    idx = run / "trajectories" / "index.parquet"
    return idx.exists() and pl.read_parquet(idx).filter(pl.col("status") == "ok").height >= n_units


def run_content(run: Path) -> tuple[int, list[str]] | None:
    """What a run holds: (number of profiles, sorted task ids) of its trajectory index, every status; None when it
    has no index yet."""
    import polars as pl

    idx = run / "trajectories" / "index.parquet"
    if not idx.exists():
        return None
    t = pl.read_parquet(idx, columns=["profile_id", "task_id"])
    return t["profile_id"].n_unique(), sorted(set(t["task_id"].to_list()))


def _tasks_text(tasks: list[str]) -> str:
    return f"{len(tasks)} tasks ({' '.join(tasks[:4])}{' …' if len(tasks) > 4 else ''})"


def build_set(out: Path, seed: int, n: int, tasks: list[str], source: str | None, encode: bool) -> dict:
    """Profiles, seed + generate (+ encode) for one fresh set; returns sizes (``n``, ``tasks``: what the run holds),
    seconds and whether the run directory was reused.

    Raises:
        BenchError: a reused profile set or run directory under ``out`` was made with another ``n`` or other
            ``tasks`` (names the folder and both settings); a ``filegram`` command failed (:func:`_cli`).
    """
    prof, run = out / f"profiles-{seed}", out / f"run-{seed}"
    log = out / f"run-{seed}.log"
    want = sorted(set(tasks))
    secs = {}
    if (prof / "pairs.json").exists():
        from filegram_ray.profiles import load_profiles

        have = len(load_profiles(prof))
        if have != n:
            raise BenchError(f"{prof}: the reused profile set holds {have} profiles, but --n {n} was asked; pass "
                             f"--n {have}, or another --out or --label for fresh sets")
    else:
        secs["profiles"] = _cli(["profiles", "new", "--n", str(n), "--seed", str(seed), "--out", str(prof)], source,
                                log)

    def refuse_other(content: tuple[int, list[str]]) -> None:
        raise BenchError(f"{run}: the run holds {content[0]} profiles × {_tasks_text(content[1])}, but {n} profiles "
                         f"× {_tasks_text(want)} were asked (--n, --tasks); pass the settings it was made with, or "
                         "another --out or --label for fresh runs")

    before = run_content(run)
    if before is not None and (before[0] > n or not set(before[1]) <= set(want)):
        refuse_other(before)  # a smaller run of the same settings is resumed below
    stages = ["seed", "generate"] + (["encode"] if encode else [])
    reused = _complete(run, n * len(want)) and not encode
    if reused:
        secs = {"pipeline": 0.0}
    else:
        secs["pipeline"] = _cli(["pipeline", "--run-dir", str(run), "--seed", str(seed), "--serial", "--only",
                                 *stages, "--set", f"profiles_dir={prof}", "--set", f"tasks=[{','.join(tasks)}]",
                                 "--set", "workspace.tts=tone"], source, log)
    content = run_content(run)
    if content is None or content != (n, want):
        refuse_other(content or (0, []))
    return {"seed": seed, "profiles_dir": str(prof), "run": str(run), "seconds": secs, "stages": stages,
            "n": content[0], "tasks": content[1], **({"reused": True} if reused else {})}


def session_actions(events: list[dict], hits: bool = True, relative: bool = False) -> list[str]:
    """A session's actions in order from its ``events.json``, one short string each (type + path or query; a
    search's hit count with ``hits``; paths below the sandbox root with ``relative``)."""
    acts = []
    for e in events:
        t = e["event_type"]
        if t in ("context_switch", "cross_file_reference"):
            continue
        what = str(e.get("query") or e.get("file_path") or e.get("dir_path") or e.get("directory_path")
                   or f"{e.get('old_path') or e.get('source_path')} → {e.get('new_path') or e.get('dest_path')}")
        if relative and what.startswith("/"):
            what = what.split("/", 3)[-1]
        extra = f" ({e.get('files_matched')} hits)" if hits and t == "file_search" else ""
        acts.append(f"{t.replace('file_', '')} {what}{extra}")
    return acts


def session_digest(run: Path, pid: str, tid: str, max_lines: int = 6) -> list[str]:
    """A few lines of one session: the actions in order (type + path/query) and the first output sentences."""
    from filegram_ray.validity.motivation import sentences

    base = run / "trajectories" / pid / tid
    acts = session_actions(json.loads((base / "events.json").read_text(encoding="utf-8")))
    lines = [f"`{pid}` {tid}: " + "; ".join(acts[:14]) + (f"; … ({len(acts)} actions)" if len(acts) > 14 else "")]
    outs = sorted(p for p in (base / "outputs").rglob("*.md")) if (base / "outputs").exists() else []
    for p in outs[:1]:
        sents = sentences(p.read_text(encoding="utf-8", errors="replace"))[:max_lines - 1]
        lines.append(f"  {p.relative_to(base / 'outputs')}: " + " / ".join(s[:110] for s in sents[:3]))
    return lines


def section(label: str, sets: list[dict], results: list[dict], digests: list[str], commit: str) -> str:
    L = [f"## {label} — {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, simulator of commit {commit}", "",
         f"Two fresh profile sets (`filegram profiles new --n {sets[0]['n']}`, seeds "
         f"{' and '.join(str(s['seed']) for s in sets)}), {len(sets[0]['tasks'])} tasks each "
         f"({', '.join(sets[0]['tasks'])}), stages {' + '.join(sets[0]['stages'])}; "
         + "; ".join(f"set {s['seed']}: {r['n_sessions']} sessions, {r['perturbations']['n']} perturbed, "
                     + ("run directory reused" if s.get("reused") else
                        f"seed + generate in {s['seconds'].get('pipeline', 0):.0f} s") for s, r in zip(sets, results))
         + ". Each set is scored with the other as the cross-set (fitted there, scored here).", ""]
    for s, r in zip(sets, results):
        L += [f"### set {s['seed']} (cross-set: the other seed)", "", "```",
              *[ln.rstrip() for ln in check_lines(r["realism"])], "```", ""]
        sep = r["realism"].get("separability_cross") or r["realism"]["separability"]
        L.append("Best single feature per dimension (cross-set): " + "; ".join(
            f"{d} {sep[d].get('feature')} {sep[d].get('accuracy', float('nan')):.2f}" for d in DIMENSIONS
            if "na" not in sep[d]))
        L.append("")
    from filegram_ray.validity.separability import FINGERPRINT_NAMES

    L += ["### Task × tier η² per fingerprint feature (set " + " / set ".join(str(s["seed"]) for s in sets) + ")",
          "", "| feature | η² | tier of |", "|---|---|---|"]
    for n in FINGERPRINT_NAMES:
        vals = [r["realism"]["eta2"][n] for r in results]
        L.append(f"| {n} | " + " / ".join("–" if v["eta2"] is None else f"{v['eta2']:.3f}" for v in vals)
                 + " | " + " / ".join(v["dimension"] or "–" for v in vals) + " |")
    L.append("")
    for s, r in zip(sets, results):
        m = r["realism"]["motivation"]
        if "counts" in m:
            L.append(f"Motivation, set {s['seed']}: {m['counts']}; searches after which a hit was opened "
                     f"{m['search_opened']:.2f}; fact kinds {m['fact_kinds']}.")
            for k, xs in m["examples"].items():
                L += [f"- {k}: " + " · ".join(f"`{x}`" for x in xs)] if xs else []
    L.append("")
    if digests:
        L += ["### Three sessions of one task by three profiles", "", *[f"- {x}" for x in digests], ""]
    return "\n".join(L) + "\n"


def write_page(text: str, label: str, page: Path) -> None:
    """Replace this label's section of the page (or append it), via a temp file and a rename."""
    head = ("# Behaviour validity on fresh profile sets (issue #28 item 4)\n\n"
            "Written by `tests/benchmarks/bench_validity.py`; every figure is printed with its bound and PASS / FAIL "
            "by `filegram validity RUN --cross RUN2` as well. Bounds: issue #28 (visibility AUC ≥ 0.70 is ours); "
            "definitions: docs/validity.md.\n\n")
    old = page.read_text(encoding="utf-8") if page.exists() else head
    marker = f"## {label} — "
    if marker in old:
        pre, rest = old.split(marker, 1)
        nxt = rest.find("\n## ")
        old = pre + (rest[nxt + 1:] if nxt >= 0 else "")
    new = old.rstrip("\n") + "\n\n" + text
    page.parent.mkdir(parents=True, exist_ok=True)
    tmp = page.with_suffix(".md.tmp")
    tmp.write_text(new, encoding="utf-8")
    tmp.replace(page)


def llm_side_by_side(out: Path, profiles: list[str], tasks: list[str], seed: int, model: str, max_iterations: int,
                     max_wall_s: float, cross_run: str | None, cross_profiles: str | None) -> str:
    """Issue #28 item 5: the realism figures of the LLM agent (``generate.agent=llm``, a packaged GGUF model on the
    CPU llama.cpp server, nothing downloaded) beside the simulator's on the same (profile, task) pairs, no
    perturbation. Returns the markdown section. Figures: motivation shares (searches that match a file,
    deletes/moves/renames after an inspection, output sentences with a fact from an input read), per-trajectory
    kept-action counts and the 17 fingerprint values; single-session separability where n allows (a tree fitted
    on ``cross_run``, a full simulator set, scoring these few sessions; within the sample, leave-profiles-out
    needs ≥ 5 profiles and is n/a)."""
    import polars as pl

    from filegram_ray.config import load_config
    from filegram_ray.engine.generate import run_generate
    from filegram_ray.llm.server import LlamaCppServer
    from filegram_ray.validity.core import load_sessions
    from filegram_ray.validity.motivation import motivation
    from filegram_ray.validity.separability import separability

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_llm_agent import (
        run_simulator,  # the LLM benchmark's simulator run (same pairs, no perturbation)
    )

    out.mkdir(parents=True, exist_ok=True)
    sim_dir, llm_dir = out / "simulator", out / f"llm-{model}"
    t0 = time.perf_counter()
    if not (sim_dir / "trajectories" / "index.parquet").exists():
        run_simulator(sim_dir, profiles, tasks, seed)
    t_sim = time.perf_counter() - t0
    t0 = time.perf_counter()
    if not (llm_dir / "trajectories" / "index.parquet").exists():
        with LlamaCppServer(model, n_ctx=8192, chat_format="chatml-function-calling", alias=model, n_threads=2,
                            startup_timeout=900) as srv:
            over = [f"run_dir={llm_dir}", f"seed={seed}", f"profiles=[{','.join(profiles)}]",
                    f"tasks=[{','.join(tasks)}]", "generate.executor=serial", "generate.perturb=false",
                    "workspace.tts=tone", "generate.agent=llm", f"generate.llm.base_url={srv.base_url}",
                    "generate.llm.temperature=0.2", f"generate.llm.max_iterations={max_iterations}",
                    "generate.llm.max_tokens=384", "generate.llm.context_tokens=8192",
                    "generate.llm.sessions_per_actor=1", f"generate.llm.max_wall_s={max_wall_s}",
                    "generate.llm.request_timeout_s=900", "generate.llm.tool_results_as=user"]
            run_generate(load_config(None, over))
    t_llm = time.perf_counter() - t0
    L = [f"## LLM agent beside the simulator (issue #28 item 5) — {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} "
         "UTC", "",
         f"`python tests/benchmarks/bench_validity.py --llm-sample --label llm`: profiles {', '.join(profiles)} × "
         f"tasks {', '.join(tasks)}, seed {seed}, no perturbation; LLM = packaged `{model}` on the CPU llama.cpp "
         f"server (chat format chatml-function-calling, temperature 0.2, ≤ {max_iterations} iterations × 384 tokens, "
         f"≤ {max_wall_s:.0f} s per trajectory, 2 threads); simulator generate {t_sim:.0f} s, LLM generate "
         f"{t_llm:.0f} s (stage wall, including the server start; load average at the end "
         + " ".join(f"{x:.1f}" for x in os.getloadavg()) + ").", "",
         "| figure | simulator | LLM agent |", "|---|---|---|"]
    figs: dict[str, dict[str, str]] = {}
    fps: dict[str, dict[str, list]] = {}
    for name, d in (("simulator", sim_dir), ("LLM agent", llm_dir)):
        idx = pl.read_parquet(d / "trajectories" / "index.parquet")
        ok = idx.filter(pl.col("status") == "ok")
        pairs = [(r["profile_id"], r["task_id"]) for r in ok.iter_rows(named=True)]
        m = motivation(d, pairs)
        c = m.get("counts", {})
        f = figs.setdefault(name, {})
        f["trajectories ok / all"] = f"{ok.height} / {idx.height}"
        f["searches that match a file (bound ≥ 0.90)"] = (
            f"{m['search_hits']:.2f} ({c.get('search_hits', 0)}/{c.get('searches', 0)})" if c.get("searches")
            else "n/a (no search)")
        f["deletes/moves/renames after an inspection (≥ 0.90)"] = (
            f"{m['inspected_before_change']:.2f} ({c.get('inspected', 0)}/{c.get('changes', 0)})"
            if c.get("changes") else "n/a (no delete, move or rename)")
        f["output sentences with a fact from an input read (≥ 0.80)"] = (
            f"{m['sourced_sentences']:.2f} ({c.get('sourced', 0)}/{c.get('sentences', 0)})" if c.get("sentences")
            else "n/a (no output sentence)")
        sess = load_sessions(str(d), profiles_dir=None) if ok.height else None
        kept = sum((s.kept for s in sess.sessions), Counter()) if sess else Counter()
        n = max(1, len(sess.sessions) if sess else 1)
        f["kept actions per trajectory"] = ", ".join(f"{k} {v / n:.1f}" for k, v in sorted(kept.items()))
        if sess and cross_run:
            train = load_sessions(cross_run, profiles_dir=cross_profiles)
            sep = separability(sess.sessions, train.sessions)
            f["single-session separability, tree fitted on the cross set (max over A–F; ≤ 0.80)"] = ", ".join(
                f"{k} {v['accuracy']:.2f}" if "accuracy" in v and v["accuracy"] == v["accuracy"] else f"{k} n/a"
                for k, v in sep.items())
        f["single-session separability within the sample"] = (
            f"n/a ({len(set(p for p, _ in pairs))} profiles, {ok.height} sessions: leave-profiles-out needs ≥ 5 "
            "profiles)")
        fps[name] = {f"{s.profile_id}/{s.task_id}": [round(float(x), 2) for x in s.fp] for s in
                     (sess.sessions if sess else [])}
    for k in figs["simulator"]:
        L.append(f"| {k} | {figs['simulator'].get(k, '–')} | {figs['LLM agent'].get(k, '–')} |")
    L += ["", "17-D fingerprints (reference §7.3 order), simulator / LLM agent:", ""]
    for t in sorted(set(fps["simulator"]) | set(fps["LLM agent"])):
        L.append(f"- {t}: {fps['simulator'].get(t, '–')} / {fps['LLM agent'].get(t, 'not generated')}")
    return "\n".join(L) + "\n"


def coupling_mc(n: int = 3000, seed: int = 1) -> str:
    """Why a memory-less count rule stays above chance on ShiftAna while a shift stays visible: a Monte-Carlo of
    the latent model (tendency.py) alone, no trajectories. A session's reading of a dimension is its position plus
    a measurement noise N(0, τ) (τ stands for the count noise that makes a single count misread the tier); the
    count rule reads the nearest tier, takes the mode of 8 baseline sessions as "usual" and scores the options
    as :class:`~filegram_ray.validity.separability.CountRuleAnswerer` does; visibility = P(|perturbed − profile
    mean| > |unperturbed − profile mean|) on the shifted dimension (the AUC of ``perturbation_visibility`` for
    one feature); profile level = nearest tier of the mean of 11 unperturbed readings. Returns a markdown table
    over τ and the perturbed spread (ours, for the record in docs/validity.md)."""
    import random
    import statistics as st

    pos = {"L": 0.0, "M": 1.0, "R": 2.0}
    nb = {"L": ("M",), "R": ("M",), "M": ("L", "R")}

    def near(x: float) -> str:
        return "L" if x < 0.5 else "M" if x < 1.5 else "R"

    def mode(xs: list[str]) -> str:
        c = Counter(xs)
        return max(sorted(c), key=lambda t: c[t])

    def one(tau: float, spread: float) -> tuple[float, float, float, float]:
        r = random.Random(seed)
        single, prof, auc, hit, chance = [], [], [], [], []
        for _ in range(n):
            t = {d: r.choice("LMR") for d in "ABCDEF"}
            off = {d: max(-0.35, min(0.35, r.gauss(0, 0.18))) for d in t}
            sig = {d: r.uniform(0.30, 0.48) for d in t}

            def sess(shift=None):
                return {d: pos[shift[1] if shift and shift[0] == d else t[d]] + off[d]
                        + sig[d] * (spread if shift and shift[0] == d else 1.0) * r.gauss(0, 1) + r.gauss(0, tau)
                        for d in t}
            base = [sess() for _ in range(11)]
            single += [near(base[0][d]) == t[d] for d in t]
            prof += [near(st.mean(b[d] for b in base)) == t[d] for d in t]
            d = r.choice("ABCDEF")
            b = r.choice(nb[t[d]])
            last = sess((d, b))
            m = st.mean(x[d] for x in base[1:])
            auc.append(float(abs(last[d] - m) > abs(base[0][d] - m)))
            usual = {e: mode([near(x[e]) for x in base[:8]]) for e in t}
            lr = {e: near(v) for e, v in last.items()}
            k = r.choice((3, 4, 5, 6))
            false = [(e, t[e], x) for e in t if e != d for x in nb[t[e]]]
            r.shuffle(false)
            opts = [(d, t[d], b), (d, b, t[d])] + false[:k - 2]
            sc = [2 * (lr[e] != usual[e] and lr[e] == to) + (lr[e] != usual[e]) + 0.5 * (usual[e] == fr)
                  for e, fr, to in opts]
            best = [i for i, v in enumerate(sc) if v == max(sc)]
            hit.append(1 / len(best) if 0 in best else 0.0)
            chance.append(1 / k)
        return st.mean(single), st.mean(prof), st.mean(auc), st.mean(hit) - st.mean(chance)

    L = ["| τ (count noise) | perturbed spread | single-session read | profile level (11 sessions) | visibility AUC | "
         "count-rule ShiftAna − chance |", "|---|---|---|---|---|---|"]
    for tau in (0.35, 0.5, 0.7, 0.9, 1.1):
        for spread in (0.4, 1.0):
            a, b, c, m = one(tau, spread)
            L.append(f"| {tau} | {spread} | {a:.2f} | {b:.2f} | {c:.2f} | {m:+.2f} |")
    return "\n".join(L) + "\n"


def main(argv=None) -> int:
    """The command line (module docstring); a :class:`BenchError` ends it with one line on stderr and its code."""
    try:
        return _main(argv)
    except BenchError as exc:
        print(f"bench_validity: {exc}", file=sys.stderr)
        return exc.code


def _main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", required=True, help="section name, e.g. before / after; its runs go to OUT/LABEL "
                    "(characters other than letters, digits, '.', '-' and '_' become '_')")
    ap.add_argument("--out", default="/tmp/fg-bench-validity",
                    help="where profile sets and runs go (reused; default /tmp/fg-bench-validity)")
    ap.add_argument("--seeds", nargs=2, type=int, default=[101, 202],
                    help="the two profile-set seeds, each set the other's cross-set (default 101 202)")
    ap.add_argument("--n", type=int, default=60, help="profiles per set (default 60: module docstring)")
    ap.add_argument("--tasks", nargs="+", default=TASKS, help="task ids (default all 32)")
    ap.add_argument("--source", default=None, help="generate with this source tree (PYTHONPATH)")
    ap.add_argument("--commit", default=None, help="commit the simulator came from (default: this checkout's HEAD)")
    ap.add_argument("--encode", action="store_true", help="run the encode stage as well (≈ 1 CPU-s per trajectory)")
    ap.add_argument("--page", default=str(PAGE), help="measurement page whose --label section is written or "
                    f"replaced (default {PAGE.relative_to(ROOT)} in this checkout; --out does not move it)")
    ap.add_argument("--llm-sample", action="store_true",
                    help="issue #28 item 5 only: the LLM agent beside the simulator on --llm-profiles × --llm-tasks")
    ap.add_argument("--llm-profiles", nargs="+", default=["p1", "p3"])
    ap.add_argument("--llm-tasks", nargs="+", default=["T-01", "T-12"])
    ap.add_argument("--llm-model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--llm-max-iterations", type=int, default=8)
    ap.add_argument("--llm-max-wall-s", type=float, default=300.0)
    ap.add_argument("--llm-cross-run", default=None, help="a simulator run to fit the single-session trees on")
    ap.add_argument("--llm-cross-profiles", default=None)
    ap.add_argument("--coupling", action="store_true", help="print the latent-model Monte-Carlo table and exit")
    args = ap.parse_args(argv)
    if args.coupling:
        print(coupling_mc())
        return 0
    if args.seeds[0] == args.seeds[1]:
        raise BenchError(f"--seeds {args.seeds[0]} {args.seeds[1]}: the two sets must differ (each is the other's "
                         "cross-set, and filegram validity refuses a run scored against itself)")
    if args.n < 1:
        raise BenchError(f"--n {args.n}: a profile set needs at least 1 profile")
    # the label names a section of the page; its folder under --out is one path component whatever it holds
    # ("fresh pair 2829 / 2830" used to nest two folders)
    out = Path(args.out) / (re.sub(r"[^\w.-]+", "_", args.label).strip("._") or "run")
    out.mkdir(parents=True, exist_ok=True)
    if args.llm_sample:
        text = llm_side_by_side(out, args.llm_profiles, args.llm_tasks, 7, args.llm_model,
                                args.llm_max_iterations, args.llm_max_wall_s, args.llm_cross_run,
                                args.llm_cross_profiles)
        print(text)
        write_page(text, "LLM agent beside the simulator (issue #28 item 5)", Path(args.page))
        return 0
    commit = args.commit or subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                           capture_output=True, text=True).stdout.strip()
    sets = []
    for seed in args.seeds:
        s = build_set(out, seed, args.n, args.tasks, args.source, args.encode)  # n, tasks: what the run holds
        sets.append(s)
        print(f"set {seed}: {s['run']} ({s['seconds']})", flush=True)
    results = []
    for i, s in enumerate(sets):
        other = sets[1 - i]
        t0 = time.perf_counter()
        res = run_validity(s["run"], profiles_dir=s["profiles_dir"], train_run=other["run"],
                           train_profiles_dir=other["profiles_dir"])
        print(f"\nset {s['seed']} (cross: {other['seed']}), validity in {time.perf_counter() - t0:.0f} s")
        for line in check_lines(res["realism"]):
            print(line)
        results.append(res)
    run0 = Path(sets[0]["run"])
    pids = sorted(p.name for p in (run0 / "trajectories").iterdir() if p.is_dir())[:3]
    digests = [ln for pid in pids for ln in session_digest(run0, pid, "T-01")] if (
        run0 / "trajectories" / pids[0] / "T-01").exists() else []
    write_page(section(args.label, sets, results, digests, commit), args.label, Path(args.page))
    print(f"\nwrote {args.page} (section '{args.label}')")
    return 0


if __name__ == "__main__":
    sys.exit(main())
