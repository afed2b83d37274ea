"""Writing the deliverables for :class:`~filegram_ray.engine.simulator.agent.PersonaAgent`: the write primitive,
document shapes per B tier (TT §2.2, §2.6), names and titles, the output layout per C tier (TT §2.3), charts
and READMEs. Split out of ``agent.py`` as a mixin; every method draws from the agent's ``rng``
exactly as before."""

from __future__ import annotations

import math
from pathlib import PurePosixPath

from filegram_ray.engine.simulator.genres import (
    SCHEMES,
    Budget,
    DocSpec,
    Section,
    describe_change,
    document,
    outline,
    sources_summary,
)
from filegram_ray.engine.simulator.naming import make_name, topic_tokens
from filegram_ray.engine.simulator.writer import chart_figures, png_chart, svg_chart

#: Probability that a session acting B-R keeps the CSV its F position drew (:meth:`OutputMixin.visual_plan`; ours,
#: version 10: docs/measurements/2026-12-06-perturbation-visibility.md).
B_R_KEEPS_CSV = 0.4
#: Key facts a working outline notes under its sections at B-L / B-M / B-R positions (ours; ×log-normal wobble):
#: a thorough writer's outline about four times a minimal one's (≈ 800 / 420 / 200 characters in English).
#: Version 10, measured 2026-12-06 by rescaling the outlines of six 60-profile sets after the fact: with every
#: outline at one size, B's profile-level recovery was 0.85–0.93; with outlines ×2 / ×1 / ×0.5 by the acting B
#: tier, 0.90–0.95 (docs/measurements/2026-12-06-perturbation-visibility.md, third part).
OUTLINE_NOTES = (9.0, 3.0, 0.0)


class OutputMixin:
    """What a :class:`PersonaAgent` writes and where; uses the agent's state (``own``, ``nb``, ``rng``,
    ``T``, ``p``)."""

    # ------------------------------------------------------------------ writing primitives
    def write(self, rel: str, content: str | bytes) -> None:
        res = self.call("write", file_path=rel, content=content)
        if getattr(res, "ok", False) and isinstance(content, str):
            if rel not in self.own:
                self.own_order.append(rel)
            self.own[rel] = content
        elif getattr(res, "ok", False) and rel not in self.own_order:
            self.own_order.append(rel)
        self.wrote_any = True

    # ------------------------------------------------------------------ shapes per tier (TT §2.2, §2.6)
    def doc_spec(self, kind: str, title: str) -> DocSpec:
        B, rng, lang = self.T["B"], self.rng, self.lang
        zh = lang == "zh"
        structure = self.p.structure
        # Lengths are log-normal draws (σ = 0.25, ours) around means that follow the session's B position
        # (TT §2.2: B-L main 200–350, B-M 80–150 / English 80–100, B-R 20–60 lines). Chinese lines hold fewer
        # characters (TT §2.2: 18–28 against 30–40), so a Chinese persona writes more lines in every tier, inside
        # the line ranges, for its character counts to reach the same bands as English (with extra Chinese lines
        # at B-M only, Chinese B-M and B-R profiles wrote the same totals; docs/measurements/2026-12-02-validity.md).
        # The session's writing effort (tendency.session_effort) scales every file's lines and characters alike.
        effort = self.effort
        wobble = math.exp(rng.gauss(0.0, 0.25)) * effort
        # The character budget follows the B band at the session's position (TT §2.2 avg_output_length: B-L
        # 3,500–9,000, B-M 1,500–3,000, B-R 400–1,200 chars; §3: B-L README ≥ 1,500, B-R index ≤ 300), with the same
        # wobble: the lines above are whole sentences (≈ 60 characters in English), so without it a B-M report
        # ran to 4,300 characters (median; 58 % over the hard 3,500) and a B-R one to 2,200, and their length
        # followed how much the session had read, an A leak (§3; measured 2026-12-03 on set 2805). A README or
        # index of a B-M or B-R writer is its contents list and a few key facts (§2.2: B-M has no auxiliaries,
        # B-R none at all; the C-L README per level is C's, §3): at the main file's size, a B-M profile with C-L
        # wrote 1.6 READMEs of 1,900 characters per session and read as B-L. The budget's own wobble (σ = 0.35,
        # ours) is session noise, which averages out over a profile's sessions (tendency.py).
        # English B-M sits at the short end of its band (§2.2), Chinese B-M nearer the middle. The outline every
        # session drafts follows B too (a thorough writer's working outline is fuller, a minimal one's a few
        # lines; E decides only its fate, §3); at one size in every tier it pulled each tier's average toward it.
        # Its character budget alone did not make it follow B: an outline of section titles runs out of text at
        # about 200 characters, so until version 10 it was 190–230 characters in every B tier (median, set 6031),
        # one or two files per session that carried no B at all; the key facts it notes now follow B.
        if kind == "main":
            chars = self.lerp("B", 8000, 2300 if zh else 2000, 600)
        elif kind in ("readme", "index"):
            chars = self.lerp("B", 4000, 700, 250)
        elif kind in ("scratch", "outline"):
            chars = self.lerp("B", 1800, 800, 400)
        else:
            chars = self.lerp("B", 6000, 1800, 700)
        size_wobble = math.exp(rng.gauss(0.0, 0.35)) * effort
        notes = 0
        if kind == "main":
            lines = max(12, round((self.lerp("B", 265, 90, 24) if not zh else self.lerp("B", 330, 125, 34))
                                  * wobble))
            depth = {"L": 4, "M": 3, "R": 2}[B]
            maxc = {"L": 70, "M": 48, "R": 50}[B] if not zh else {"L": 46, "M": 36, "R": 34}[B]
        elif kind in ("readme", "index"):
            lines = max(4, round((self.lerp("B", 107, 24, 5) if not zh else self.lerp("B", 135, 32, 6)) * wobble))
            depth = {"L": 3, "M": 2, "R": 1}[B]
            maxc = {"L": 50, "M": 45, "R": 30}[B] if not zh else {"L": 34, "M": 30, "R": 18}[B]
        elif kind in ("scratch", "outline"):
            # the sections and dates take 6–12 lines; the key facts noted under them follow B (OUTLINE_NOTES)
            notes = round(self.lerp("B", *OUTLINE_NOTES) * wobble)
            lines = round(rng.randint(6, 12) * self.lerp("B", 1.3, 1.0, 0.8) * effort) + notes
            depth, maxc = 1, 40 if not zh else 26
        else:  # appendix, references, log, notes
            lines = max(8, round((self.lerp("B", 120, 72, 22) if not zh else self.lerp("B", 150, 90, 28)) * wobble))
            depth = {"L": 3, "M": 3, "R": 2}[B]
            maxc = {"L": 55, "M": 45, "R": 45}[B] if not zh else {"L": 36, "M": 30, "R": 30}[B]
        if "max_lines" in self.rules and kind == "main":
            lines = min(lines, self.rules["max_lines"] - 2)
        if structure == "flat_list":
            depth = min(depth, 2)
        elif structure == "narrative":
            depth = min(depth, 3)
        rows = 0
        if kind in ("main", "appendix", "log"):
            # table size is a draw whose mean follows F (8 rows at F-L/F-M, 0.3 at F-R; TT §2.6)
            rows = self.count("F", 8.0, 7.0, 0.3, hi=14)
            rows = 0 if rows < 2 else max(rows, 5)
        if kind == "main" and "max_lines" in self.rules:
            rows = min(rows, 5)
        return DocSpec(title=title, lines=lines, max_depth=depth, structure=structure, table_rows=rows,
                       lang=lang, tone=self.p.tone, max_line_chars=maxc,
                       numbered=structure == "hierarchical" and B != "R", topic=self.topic(),
                       closing=kind not in ("scratch", "outline", "readme"),
                       max_chars=round(chars * size_wobble), notes=notes)

    def visual_plan(self) -> tuple[bool, bool]:
        """Whether this session writes a CSV data file and a chart (TT §2.6 F-L: 1–3 each; drawn, with
        probabilities 0.85 / 0.1 / 0 for the CSV and 0.9 / 0.08 / 0 for the chart at F-L / F-M / F-R, ours).

        A session acting B-R keeps its CSV with probability :data:`B_R_KEEPS_CSV` (0.4): the minimal writer's "no
        structured databases, just the answer" (TT §2.2, p3) meets F-L's data files (§2.6), and the reference leaves
        that conflict to the simulator (§6 resolves B-R × F-L only for visuals, p20). Version 10 (ours, measured on
        the 60-profile tuning set 6001): with every CSV kept, a B-R profile of F-L wrote about as many files per task
        as a B-M profile (profile-level recovery of B 0.88–0.92, at its 0.90 bound, on fresh sets 6011 / 6012); with
        none kept, F-L profiles of B-R lost the structured files that tell F-L from F-M (F 0.95 → 0.90)."""
        csv, chart = self.chance("F", 0.85, 0.1, 0.0), self.chance("F", 0.9, 0.08, 0.0)
        if csv and self.T["B"] == "R":
            csv = self.rng.random() < B_R_KEEPS_CSV
        return csv, chart

    def topic(self) -> str:
        return (self.topic_zh_full or self.topic_en) if self.lang == "zh" else self.topic_en

    def title(self, kind: str) -> str:
        t = self.topic()
        en = {"main": t, "readme": f"README: {t}", "index": f"Index: {t}", "appendix": f"Data Appendix: {t}",
              "references": f"Sources: {t}", "scratch": "Working notes", "outline": f"Outline: {t}",
              "log": f"Log: {t}"}
        zh = {"main": t, "readme": f"说明：{t}", "index": f"索引：{t}", "appendix": f"数据附录：{t}",
              "references": f"参考来源：{t}", "scratch": "工作笔记", "outline": f"提纲：{t}", "log": f"记录：{t}"}
        return (zh if self.lang == "zh" else en).get(kind, t)

    def name(self, kind: str, ext: str, seq: int = 1) -> str:
        naming = self.p.naming
        if self.T["C"] == "R" and naming == "long_descriptive":
            naming = "short_abbrev"
        return make_name(kind, ext, naming, self.lang, self.topic_en, self.topic_zh, self.rng, self.start_ms, seq)

    def scheme(self) -> list[Section] | None:
        """The sections of this task's main deliverable (:data:`.genres.SCHEMES`)."""
        return SCHEMES.get(self.tid)

    def change_entries(self) -> list[tuple[str, str]]:
        """What this session changed, one ``(file, composed description)`` per edit, move and removal, in the
        persona's language (the record a revision task asks for)."""
        zh = self.lang == "zh"
        out: list[tuple[str, str]] = []
        for rel, old, new in self.changes:
            out.append((f"`{PurePosixPath(rel).name}`", describe_change(old, new, self.lang)))
        for a, b in self.moved:
            out.append((f"`{a}`", f"移至 `{b}`" if zh else f"moved to `{b}`"))
        for a in self.removed:
            out.append((f"`{a}`", "已删除" if zh else "deleted"))
        return out

    def render_log(self, spec: DocSpec | None = None) -> str:
        """The task's note of what was done (T-09 "a short file recording what you changed and why"): one line
        per change (:meth:`change_entries`), then, as far as the B band allows, what the changed files say."""
        spec = spec or self.doc_spec("log", self.title("log"))
        zh = self.lang == "zh"
        entries = self.change_entries()
        lines = [f"# {spec.title}", ""]
        if entries:
            lines += ["## 修改内容" if zh else "## Changes", ""]
            lines += [f"- {a}{'：' if zh else ': '}{b}" for a, b in entries] + [""]
        body = self.body_after(spec, lines)
        return "\n".join(lines + body).rstrip("\n") + "\n"

    def body_after(self, spec: DocSpec, head: list[str]) -> list[str]:
        """The composed lines (its own title dropped) that follow ``head`` in a file: the head's lines and
        characters come out of the spec's budgets (a B-R index stays tiny, TT §6); none when fewer than 7 lines
        or no characters are left."""
        spec.lines = max(0, spec.lines - len(head))
        if spec.max_chars:
            spec.max_chars = max(0, spec.max_chars - sum(len(x) + 1 for x in head))
        if spec.lines <= 6 or spec.max_chars == 0 or not len(self.kn):
            return []
        return document(self.kn, spec, self.rng, self.scheme(), sources_part=False).split("\n")[2:]

    def render(self, kind: str, title: str | None = None, spec: DocSpec | None = None) -> str:
        """A text file of ``kind``, written from what the session understood (:mod:`.genres`): the main
        deliverable and its auxiliaries (appendix: the figures and table rows read; references: what each source
        contributed), a working outline, a log of changes."""
        spec = spec or self.doc_spec(kind, title or self.title(kind))
        if kind in ("outline", "scratch"):
            return outline(self.kn, spec, self.rng, self.scheme())
        if kind == "log":
            return self.render_log(spec)
        if kind == "references":
            lines = sources_summary(self.kn, self.lang, self.rng, Budget(spec))
            return "\n".join([f"# {spec.title}", ""] + lines).rstrip() + "\n"
        if kind == "appendix":
            spec.table_rows = max(spec.table_rows, 6) if self.T["F"] != "R" else 0
            figs = [Section("Figures read", "所读数据", frozenset({"row", "series", "revenue", "budget", "margin",
                                                                 "fcf", "capex", "target", "csat", "target_met",
                                                                 "weight", "legal_aid", "runtime", "heart",
                                                                 "figure"})),
                    Section("Dates", "日期", frozenset({"*"}), "date")]
            return document(self.kn, spec, self.rng, figs, sources_part=False)
        return document(self.kn, spec, self.rng, self.scheme())

    # ------------------------------------------------------------------ layout per C tier (TT §2.3)
    #: P(depth 0, 1, 2, 3) of the folders a session files its outputs into, at positions L, M, R of C (ours): a
    #: person's habit shows as a tendency, not a fixed depth per tier (with one fixed depth per tier, every session
    #: of 0.56 of the (task, acting tier) groups had the same depth: docs/measurements/2026-12-05-behaviour.md);
    #: interpolated linearly in between.
    DEPTHS = {"L": (0.0, 0.05, 0.25, 0.70), "M": (0.20, 0.60, 0.18, 0.02), "R": (0.83, 0.16, 0.01, 0.0)}

    def draw_depth(self) -> int:
        """How deep this session files its outputs (0–3): a draw from :data:`DEPTHS` at the session's C position."""
        probs = [self.lerp("C", *(self.DEPTHS[t][k] for t in "LMR")) for k in range(4)]
        u, acc = self.rng.random() * sum(probs), 0.0
        for k, p in enumerate(probs):
            acc += p
            if u < acc:
                return k
        return 3

    def layout(self) -> dict[str, str]:
        """Folders for each output role (``main``, ``aux``, ``fig``, ``scratch``; ``base``/``mid`` = tree levels,
        ``notes`` = where working notes are filed), by the depth this session files at (:meth:`draw_depth`; TT
        §2.3 tiers on average): 3 = a topic tree ``base/analysis/reports`` with branches for sources and notes,
        2 = ``base/reports``, 1 = one short folder (``reports/``, ``notes/`` in revision tasks), 0 = the root. F-L
        visuals sit beside the report they illustrate (no extra folder)."""
        zh = self.lang == "zh"
        depth = self.draw_depth()
        base = topic_tokens(self.topic_en, 2) if not zh else (self.topic_zh[:6] or "项目")
        if self.p.naming == "short_abbrev":
            base = base.split("_")[0][:10]
        if depth == 3:
            a = f"{base}/analysis" if not zh else f"{base}/分析"
            main = f"{a}/reports" if not zh else f"{a}/报告"
            # how many branches a session builds is drawn, not fixed (sources and working notes get their own
            # branch in most sessions; otherwise they sit one level up in the analysis folder)
            aux = (f"{base}/references/sources" if not zh else f"{base}/参考/来源") \
                if self.chance("C", 0.85, 0.5, 0.2) else a
            notes = (f"{base}/notes/working" if not zh else f"{base}/笔记/工作") \
                if self.chance("C", 0.75, 0.4, 0.1) else ""
            return {"main": main, "aux": aux, "fig": main, "scratch": "", "base": base, "mid": a, "notes": notes}
        if depth == 2:
            main = f"{base}/reports" if not zh else f"{base}/报告"
            aux = (f"{base}/sources" if not zh else f"{base}/来源") if self.chance("C", 0.7, 0.4, 0.1) else main
            notes = (f"{base}/notes" if not zh else f"{base}/笔记") if self.chance("C", 0.6, 0.3, 0.1) else ""
            return {"main": main, "aux": aux, "fig": main, "scratch": "", "base": base, "mid": "", "notes": notes}
        if depth == 1:
            out_dir = "notes" if self.ttype in ("iterate", "maintain") else "reports"
            return {"main": out_dir, "aux": out_dir, "fig": out_dir, "scratch": "", "base": "", "mid": "",
                    "notes": ""}
        return {"main": "", "aux": "", "fig": "", "scratch": "", "base": "", "mid": "", "notes": ""}

    def setup_dirs(self, lay: dict[str, str], aux: bool = True, notes: bool = True) -> None:
        """Create the output folders this session will fill (a folder is named for, and made for, what goes in
        it): the main branch, the sources branch only when auxiliaries are written, the notes branch only when
        there are working notes to file; one ``mkdir -p`` per branch (TT §1: one dir_create at its depth)."""
        for p in dict.fromkeys(p for p in (lay.get("main", ""), lay.get("aux", "") if aux else "",
                                           lay.get("notes", "") if notes else "") if p):
            self.mkdir(p)

    def file_scratch(self, plan: list[tuple[str, str]], lay: dict[str, str]) -> None:
        """C-L files its working notes (written in the root while working) into the notes branch of its tree at
        the end, as it files the deliverable (TT §2.3 C-L: put files in place with ``mv``; nothing loose in the
        root)."""
        if not lay.get("notes"):
            return
        pairs = [(rel, f"{lay['notes']}/{PurePosixPath(rel).name}") for _, rel in plan if rel in self.own]
        self.mv(pairs)
        moved = dict(pairs)
        plan[:] = [(k, moved.get(rel, rel)) for k, rel in plan]

    @staticmethod
    def join(folder: str, name: str) -> str:
        return f"{folder}/{name}" if folder else name

    # ------------------------------------------------------------------ charts and READMEs
    def chart(self, title: str) -> str | bytes:
        figs = chart_figures(self.kn)
        return png_chart(figs, title) if self.chart_format == "png" else svg_chart(figs, title)

    def readmes(self, lay: dict[str, str]) -> None:
        """One README per created level (≤ 4), sized to the B band (TT §3; p14 tiny ≤ 300 chars, §6): what the
        level holds (its files and folders, each with its title), then, as far as the B band allows, the key
        facts behind them."""
        levels = [lay["base"], lay["mid"]] + ([lay["main"]] if self.T["B"] == "L" else [])
        zh = self.lang == "zh"
        for lvl in levels:
            if not lvl:
                continue
            rel = f"{lvl}/README.md"
            if rel in self.own:
                continue
            spec = self.doc_spec("readme", self.title("readme"))
            inside = [p for p in self.own_order if p.startswith(lvl + "/") and p in self.own]
            subs = sorted({p[len(lvl) + 1:].split("/")[0] for p in inside if "/" in p[len(lvl) + 1:]})
            here = [p for p in inside if "/" not in p[len(lvl) + 1:]]
            head = [f"# {spec.title}", "", "## 目录" if zh else "## Contents", ""]
            for p in here:
                first = next((ln.lstrip("# ") for ln in self.own[p].split("\n") if ln.startswith("# ")), "")
                head.append(f"- `{PurePosixPath(p).name}`: {first}" if first else f"- `{PurePosixPath(p).name}`")
            head += [f"- `{d}/`" for d in subs] + [""]
            body = self.body_after(spec, head)
            self.write(rel, "\n".join(head + body).rstrip("\n") + "\n")
