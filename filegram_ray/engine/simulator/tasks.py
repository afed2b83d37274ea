"""Task plans: what each task must achieve, from the bundle's own truth, and the steps that achieve it.

The bundle generator knows what it planted (``bundle.json`` ``facts``: the wrong facts of T-11, the versions of T-14,
the batches of T-18, the duplicates and junk of T-21, the broken references of T-32, …) and the prompt names the
deliverables. A plan (:data:`PLANS`, one per task id, registered with :func:`plan`) reads what it needs, makes the
changes the task asks for and writes the records it asks for. The persona's tiers choose *how* — what is read and in
what order (A), how long the records are (B), where files go and how deep (C), edit size, backups and rewrites (D),
what is deleted, archived or kept (E), tables and data files (F) — never *whether* the task gets done
(``filegram validity`` checks each session's outcome: :mod:`filegram_ray.validity.outcomes`).

A task without a plan of its own (the understand / synthesize / create tasks whose outcome is one written deliverable)
runs the type's flow of :class:`~.agent.PersonaAgent`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from filegram_ray.engine.simulator.filetypes import clutter_category
from filegram_ray.engine.simulator.genres import (
    SCHEMES,
    Budget,
    DocSpec,
    Section,
    action_log,
    document,
)
from filegram_ray.engine.simulator.knowledge import parse_statements
from filegram_ray.engine.simulator.phrasing import about, cap, clause

PLANS: dict[str, Callable[[Any], None]] = {}


def plan(*task_ids: str) -> Callable:
    """Register a method of :class:`TaskPlansMixin` as the plan of ``task_ids``."""
    def deco(fn: Callable) -> Callable:
        for t in task_ids:
            PLANS[t] = fn
        return fn
    return deco


def _fmt_like(value: Any, sample: str) -> str:
    """``value`` written the way ``sample`` (the wrong value as it stands in a file) is: ``$4,200,000``."""
    s = str(value)
    if isinstance(value, int) and "," in sample:
        s = f"{value:,}"
    return ("$" if sample.startswith("$") else "") + s


def _forms(value: Any) -> list[str]:
    """How a planted value may be written in a file (plain, with thousands separators)."""
    out = [str(value)]
    if isinstance(value, int):
        out.append(f"{value:,}")
    return sorted(set(out), key=len, reverse=True)


class TaskPlansMixin:
    """Plans of the tasks that change the workspace or ask for specific records; uses the agent's primitives."""

    # ------------------------------------------------------------------ shared steps
    def required_reads(self, paths: list[str]) -> list[Callable[[], None]]:
        """Reads that make sure the plan sees what it acts on, the way the A tier reads: whole (A-L), a
        window of 60 lines and the next one if the file is longer (A-M), the first 20 lines and then the rest
        (A-R, who skims, but the task needs the content)."""
        acts: list[Callable[[], None]] = []
        for p in dict.fromkeys(paths):
            def act(p: str = p) -> None:
                if p in self.full_read:
                    return
                A = self.T["A"]
                step = None if A == "L" else 60 if A == "M" else 20
                if step is None:
                    self.read(p)
                    return
                self.read(p, limit=step)
                off = step + 1
                while self.n_lines.get(p, 0) >= off:
                    self.read(p, offset=off, limit=max(step, 40))
                    off += max(step, 40)
            acts.append(act)
        return acts

    def text_of(self, rel: str) -> str:
        """The current text of a workspace or own file (a whole read when the session has not seen all of it)."""
        if rel in self.own:
            return self.own[rel]
        seen, n = self.seen_lines.get(rel, {}), self.n_lines.get(rel, 0)
        if n and all(k in seen for k in range(1, n + 1)):  # read already, whole or window by window
            text = "\n".join(seen[k] for k in range(1, n + 1))
            self.own[rel] = text
            return text
        text = self.load(rel) or ""
        self.own[rel] = text
        return text

    def deliver(self, name: str, render: Callable[[], str], folder: str | None = None) -> str:
        """Write one deliverable where the C tier puts it (``folder``, default the layout's main folder): drafted
        in the root and moved into place when done under C-L / C-M now and then (TT §2.3)."""
        lay = self.lay
        final = self.join(lay["main"] if folder is None else folder, name)
        tmp = name if final != name and self.chance("C", 0.7, 0.5, 0.0) else final
        if lay.get("main") and folder is None and lay["main"] not in self.created_dirs:
            self.setup_dirs(lay, aux=False, notes=False)
        self.write(tmp, render())
        if tmp != final:
            self.mv([(tmp, final)])
        return next((b for a, b in reversed(self.moved) if a == tmp), final) if tmp != final else final

    def edit_mode(self) -> str:
        """How this session changes one existing file (TT §2.4): its usual way follows the tier it acts on D —
        ``small`` edits of a few lines at D-L, ``block`` edits of a section at D-M, one ``rewrite`` of the whole
        file at D-R — and one file in four is done another way (ours; one in five left task × tier η² of
        ``total_edits`` at 0.79–0.81 on fresh sets). Until version 10 the usual way was a draw of
        its own whose odds followed the D position, so four in ten D-M sessions worked like a D-L or D-R session and
        a one-tier shift of D hid among a profile's own sessions (D's perturbation visibility 0.48–0.57:
        docs/measurements/2026-12-06-perturbation-visibility.md)."""
        if self.habit is None:
            self.habit = {"L": "small", "M": "block", "R": "rewrite"}[self.T["D"]]
        if self.rng.random() < 0.25:
            return self.rng.choice([m for m in ("small", "block", "rewrite") if m != self.habit])
        return self.habit

    def keep_version(self, rel: str) -> None:
        """Before the first change of ``rel``: a ``.bak`` copy (keep_history) or an ``archive/`` copy (archive_old,
        when C allows folders), drawn with the D position (TT §2.4, §4)."""
        if rel in self.backed_up:
            return
        self.backed_up.add(rel)
        if self.p.version == "archive_old" and self.T["C"] != "R" and self.chance("D", 0.3, 0.8, 0.1):
            self.mkdir("archive")
            p = PurePosixPath(rel)
            self.cp(rel, f"archive/{p.stem}_v1{p.suffix}")
        elif self.p.version != "overwrite" and self.chance("D", 0.9, 0.3, 0.05):
            self.cp(rel, rel + ".bak")

    def apply_changes(self, rel: str, new_text: str, mode: str | None = None) -> str:
        """Turn ``rel`` into ``new_text`` the way this session edits (:meth:`edit_mode`): ``small`` = edits of at
        most two lines each, ``block`` = one edit per run of nearby changes (within 6 lines), ``rewrite`` = one
        overwrite; whatever an edit cannot reach (text that is not unique) is written whole at the end. Returns
        the mode used ("none" when nothing differs)."""
        import difflib

        old = self.text_of(rel)
        new_text = new_text.rstrip("\n") + "\n"
        if old.rstrip("\n") == new_text.rstrip("\n"):
            return "none"
        mode = mode or self.edit_mode()
        self.keep_version(rel)
        if mode == "rewrite":
            self.write(rel, new_text)
            self.changes.append((rel, old, new_text))
            return mode
        a, b = old.rstrip("\n").split("\n"), new_text.rstrip("\n").split("\n")
        ops = [list(op[1:]) for op in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
               if op[0] != "equal"]
        if mode == "block":
            merged: list[list[int]] = []
            for op in ops:
                if merged and op[0] - merged[-1][1] <= 6:
                    merged[-1][1], merged[-1][3] = op[1], op[3]
                else:
                    merged.append(op)
            ops = merged
        else:
            split: list[list[int]] = []
            for i1, i2, j1, j2 in ops:
                if i2 - i1 == j2 - j1 and i2 - i1 > 2:
                    split += [[i1 + k, min(i2, i1 + k + 2), j1 + k, min(j2, j1 + k + 2)] for k in range(0, i2 - i1, 2)]
                else:
                    split.append([i1, i2, j1, j2])
            ops = []
            for op in split:  # two nearby small changes (a blank line apart) make one small edit of ≤ 3 lines
                if ops and op[0] - ops[-1][1] <= 2 and op[1] - ops[-1][0] <= 3 and op[3] - ops[-1][2] <= 3:
                    ops[-1][1], ops[-1][3] = op[1], op[3]
                else:
                    ops.append(op)
        for i1, i2, j1, j2 in reversed(ops):
            lo = i1 - 1 if (i1 == i2 or j1 == j2) and i1 > 0 else i1
            while True:
                old_blk, new_blk = "\n".join(a[lo:i2]), "\n".join(a[lo:i1] + b[j1:j2])
                if not old_blk or self.own[rel].count(old_blk) <= 1 or lo == 0:
                    break
                lo -= 1
            if old_blk and self.own[rel].count(old_blk) == 1:
                self.edit(rel, old_blk, new_blk)
        if self.own[rel].rstrip("\n") != new_text.rstrip("\n"):  # what edits could not reach: one overwrite
            self.write(rel, new_text)
            self.changes.append((rel, old, new_text))
        return mode

    def finish_up(self, plan_files: list[tuple[str, str]], curate: bool = True) -> None:
        """The end of a plan: the B-L auxiliaries beside the task's records (a data appendix and a source list,
        TT §2.2: ≥ 3 output files in every task type), then curation of clutter and scratch (E)."""
        folder = self.lay.get("aux") or self.lay.get("main") or ""
        aux = self.auxiliaries(folder)
        if aux and folder and folder not in self.created_dirs and folder not in self.dirs:
            self.mkdir(folder)
        for kind, rel in aux:
            self.write(rel, self.render(kind))
        if curate:
            self.curate(plan_files)

    def record_spec(self, title: str) -> DocSpec:
        return self.doc_spec("log", title)

    def log_table(self) -> bool:
        """Whether a record is a table (F-M / F-L: tables; F-R: bullets, TT §2.6)."""
        return self.T["F"] != "R" and self.chance("F", 0.9, 0.8, 0.1)

    # ------------------------------------------------------------------ T-11: cross-file corrections
    @plan("T-11")
    def plan_corrections(self) -> None:
        """Read the documents, settle each disagreement (the version most files give), correct the file where it
        is wrong, record every problem and fix in correction_log.md."""
        errs = [f for f in self.facts if f.get("type") in ("name_spelling", "figure", "date") and f.get("files")]
        docs = [f for f in self.docs if PurePosixPath(f).suffix == ".md" and not clutter_category(f)]
        self.lay = self.layout()
        reads = self.reading_actions() + self.required_reads(docs)
        writes: list[Any] = []
        plan_files = self.scratch_steps(writes)
        done: list[dict[str, Any]] = []

        def correct() -> None:
            by_file: dict[str, list[dict]] = {}
            for e in errs:
                for f in e["files"]:
                    if f in self.files:
                        by_file.setdefault(f, []).append(e)
            for rel, es in by_file.items():
                text = self.text_of(rel)
                new = text
                for e in es:
                    for w in _forms(e["wrong"]):
                        sample = next((m.group(0) for m in re.finditer(rf"\$?{re.escape(w)}", new)), None)
                        if sample and not re.search(rf"{re.escape(w)}\d", new):
                            new = new.replace(sample, _fmt_like(e["correct"], sample))
                            agree = [d for d in docs if d != rel and any(
                                c in self.own.get(d, "") for c in _forms(e["correct"]))]
                            done.append({"fact": e, "file": rel, "wrong": sample,
                                         "right": _fmt_like(e["correct"], sample), "agree": agree})
                            break
                self.apply_changes(rel, new)

        def log() -> None:
            zh = self.lang == "zh"
            entries = []
            for d in done:
                field = d["fact"].get("field", "")
                support = ", ".join(f"`{x}`" for x in d["agree"][:3]) or ("other files" if not zh else "其他文件")
                if zh:
                    entries.append((f"`{d['file']}`：{field}",
                                    f"写作{d['wrong']}，而{support}均为{d['right']}；按多数更正为{d['right']}"))
                else:
                    entries.append((f"`{d['file']}`, {field}", f"gave {d['wrong']} where {support} give "
                                    f"{d['right']}; corrected to {d['right']} (the majority reading)"))
            spec = self.record_spec("更正记录" if zh else "Correction log")
            lead = (f"核对了{len(docs)}份文件，发现{len(done)}处矛盾，均已在原文件中更正。" if zh else
                    f"{len(docs)} documents cross-checked; {len(done)} disagreements found and fixed in place.")
            text = action_log(spec.title, entries, spec, self.rng, lead=lead, table=self.log_table(),
                              headers=("问题", "处理") if zh else ("Problem", "Decision and fix"))
            if self.T["B"] != "R":
                text = text.rstrip("\n") + "\n\n" + self.method_note(zh)
            self.deliver("correction_log.md", lambda: text)

        final = [correct, log, lambda: self.finish_up(plan_files)]
        self.interleave(reads, writes, final)

    def method_note(self, zh: bool) -> str:
        """A short account of how the values were checked (B-L / B-M records explain their method)."""
        n = len(self.full_read | set(self.view))
        if zh:
            return f"## 方法\n\n逐一阅读了{n}份文件，对同一事实的不同写法按出现次数取多数，并核对了日期前后顺序。\n"
        return (f"## Method\n\nEach of the {n} files read was compared field by field; where files disagreed, the "
                "value most of them give was taken, and dates were checked against the order of events.\n")

    def scratch_steps(self, writes: list[Any]) -> list[tuple[str, str]]:
        """The session's working outline (written while working; E decides its fate at the end)."""
        plan_files: list[tuple[str, str]] = []
        for kind, ext in self.scratch_plan():
            rel = self.name(kind, ext)
            plan_files.append((kind, rel))
            writes.append(lambda k=kind, r=rel: self.write(r, self.render(k)))
        return plan_files

    # ------------------------------------------------------------------ T-09: condense in place
    @plan("T-09")
    def plan_condense(self) -> None:
        """Cut the report below 800 words in the file itself: every paragraph to its leading sentence(s), the
        findings and conclusions kept longer, a one-line bottom line on top; an optional note of the changes."""
        target = next((f for f in self.files if PurePosixPath(f).suffix == ".md" and not clutter_category(f)),
                      None)
        reads = self.reading_actions(budget_scale=0.8)
        if target:
            reads += self.required_reads([target])
        self.lay = {"main": "", "aux": "", "fig": "", "scratch": "", "base": "", "mid": ""}

        def condense() -> None:
            if not target:
                return
            text = self.text_of(target)
            self.apply_changes(target, brief_text(text, self.lang, 760))

        final: list[Any] = [condense]
        if self.T["B"] != "R" and self.chance("B", 0.9, 0.6, 0.15):
            final.append(lambda: self.write(self.name("log", ".md"), self.render_log()))
        final.append(lambda: self.curate([]))
        self.interleave(reads, [], final)


_KEEP_LONG = ("finding", "recommend", "conclusion", "discussion", "summary", "结论", "发现", "建议")


def brief_text(text: str, lang: str, max_words: int) -> str:
    """``text`` cut to an executive brief of at most ``max_words`` words: headings kept, each paragraph to its
    first sentence (two in findings, recommendations and conclusions), a bottom line under the title (the first
    finding); whole sentences only."""
    from filegram_ray.engine.simulator.textops import SENTENCE_BREAK

    lines = text.rstrip("\n").split("\n")
    out: list[str] = []
    section = ""
    keep_two = False
    for ln in lines:
        if ln.startswith("#"):
            section = ln.lower()
            keep_two = any(k in section for k in _KEEP_LONG)
            out.append(ln)
            continue
        if not ln.strip() or ln.startswith("|"):
            out.append(ln)
            continue
        parts = [p.strip() for p in SENTENCE_BREAK.split(ln.strip()) if p.strip()]
        out.append(" ".join(parts[: 2 if keep_two else 1]))
    words = sum(len(x.split()) for x in out)
    k = len(out) - 1
    while words > max_words and k > 0:  # still long: drop the second sentences from the end up
        if out[k] and not out[k].startswith("#"):
            parts = [p for p in SENTENCE_BREAK.split(out[k]) if p.strip()]
            if len(parts) > 1:
                words -= len(" ".join(parts[1:]).split())
                out[k] = parts[0].strip()
        k -= 1
    body = [x for x in out]
    # the bottom line: the first finding (else conclusion, else the first sentence of the text)
    start = next((i for i, x in enumerate(body) if x.startswith("#") and any(k in x.lower() for k in _KEEP_LONG[:3])),
                 0)
    first = next((x for x in body[start + 1:] if x.strip() and not x.startswith("#")), "") or \
        next((x for x in body[1:] if x.strip() and not x.startswith("#")), "")
    first = SENTENCE_BREAK.split(first)[0].strip() if first else ""
    if body and body[0].startswith("# ") and first:
        lead = ("**要点：** " if lang == "zh" else "**Bottom line:** ") + first
        body = [body[0], "", lead] + body[1:]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(body)).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------------------------- more plans
class ReviewPlansMixin:
    """Plans of the tasks whose record is a judgement on material read: reviews (T-13), versions (T-14), two
    analyses against their data (T-15), a file store's health (T-17), an archive's consistency (T-32)."""

    # ------------------------------------------------------------------ T-13: revise from conflicting reviews
    @plan("T-13")
    def plan_reviews(self) -> None:
        """Read the report and the three reviews, decide each comment (one side of each conflict accepted, the
        other declined or partly taken), work the accepted ones into the report, write revision_notes.md with a
        verdict and a reason per comment."""
        report = next((f for f in self.files if PurePosixPath(f).name == "original_report.md"), None)
        reviews = sorted(f for f in self.files if re.match(r"feedback_reviewer\d+\.md$", PurePosixPath(f).name))
        self.lay = self.layout()
        reads = self.reading_actions() + self.required_reads(([report] if report else []) + reviews)
        writes: list[Any] = []
        plan_files = self.scratch_steps(writes)
        pairs = [f for f in self.facts if f.get("type") == "contradiction"]
        verdicts: list[tuple[str, str, str, str]] = []  # (reviewer file, comment, verdict, reason)

        def decide_and_revise() -> None:
            zh = self.lang == "zh"
            comments: list[tuple[str, str]] = []
            for r in reviews:
                for ln in self.text_of(r).split("\n"):
                    if ln.startswith("- "):
                        comments.append((r, ln[2:].strip()))
            accepted: set[str] = set()
            for f in pairs:
                a, b = f["a"], f["b"]
                lean = self.lean(a, b)
                accepted.add(a if lean else b)
            text = self.text_of(report) if report else ""
            new = text
            for r, c in comments:
                pair = next((f for f in pairs if c in (f["a"], f["b"])), None)
                if pair is None:  # a reviewer's data point: checked and added where it belongs
                    sts = parse_statements(c, r, title="-")
                    if sts and report:
                        new = add_to_section(new, about(sts[0], self.lang, self.rng), ("finding", "detail",
                                                                                         "发现"))
                        verdicts.append((r, c, "部分采纳" if zh else "partly accepted",
                                         "已把这一数据补进正文" if zh else "the figure is now stated in the findings"))
                    else:
                        verdicts.append((r, c, "不采纳" if zh else "declined",
                                         "与报告主题无关" if zh else "outside the report's scope"))
                    continue
                other = pair["b"] if c == pair["a"] else pair["a"]
                if c in accepted:
                    new = apply_comment(new, c, self.kn, self.lang, self.rng)
                    verdicts.append((r, c, "采纳" if zh else "accepted", reason_for(c, other, True, zh)))
                else:
                    verdicts.append((r, c, "不采纳" if zh else "declined", reason_for(c, other, False, zh)))
            if report:
                self.apply_changes(report, new)

        def notes() -> None:
            zh = self.lang == "zh"
            entries = [(f"{PurePosixPath(r).stem}: “{c}”", f"{v} — {why}") for r, c, v, why in verdicts]
            spec = self.record_spec("修订说明" if zh else "Revision notes")
            lead = (f"三位评审共提出{len(verdicts)}条意见，其中{len(pairs)}组相互冲突，逐条处理如下。" if zh else
                    f"{len(verdicts)} comments from three reviewers, {len(pairs)} pairs of them in conflict; each is "
                    "answered below.")
            self.deliver("revision_notes.md", lambda: action_log(spec.title, entries, spec, self.rng, lead=lead,
                                                                 table=self.log_table(),
                                                                 headers=("意见", "处理") if zh else
                                                                 ("Comment", "Decision")))

        final = [decide_and_revise, notes, lambda: self.finish_up(plan_files)]
        self.interleave(reads, writes, final)

    def lean(self, a: str, b: str) -> bool:
        """Which side of a conflict this persona takes (True = ``a``): a thorough writer keeps detail and the
        evidence first, a concise one cuts and leads with the recommendation; tone decides the register."""
        t = (a + " " + b).lower()
        if "methodology" in t:
            return self.chance("B", 0.15, 0.5, 0.85)  # a = shorten
        if "tone" in t:
            return self.p.tone == "professional" and self.rng.random() < 0.8  # a = formal
        if "recommendation" in t:
            return self.chance("B", 0.25, 0.5, 0.8)  # a = move to the front
        return self.rng.random() < 0.5

    # ------------------------------------------------------------------ T-14: version lineage
    @plan("T-14")
    def plan_versions(self) -> None:
        """Work out the order of the report's copies (their revision entries), give them a versioning scheme the
        C tier chooses (archive folders, or numbered names in place), and write version_history.md with what each
        version changed and the chain between them."""
        lineage = next((f["versions"] for f in self.facts if f.get("type") == "version_lineage"), [])
        chain = [v for v in sorted(lineage, key=lambda v: v["order"]) if v["file"] in self.files]
        self.lay = self.layout()
        reads = self.reading_actions(budget_scale=0.6) + self.required_reads([v["file"] for v in chain])
        writes: list[Any] = []
        plan_files = self.scratch_steps(writes)
        renamed: dict[str, str] = {}

        def scheme() -> None:
            C, n = self.T["C"], len(chain)
            pairs = []
            for k, v in enumerate(chain, 1):
                last = k == n
                tag = PurePosixPath(v["file"]).stem.removeprefix("report_").lower()
                if C == "L":
                    dst = (f"versions/current/report_v{k}.md" if last else
                           f"versions/archive/v{k}_{v['date']}_{tag}.md")
                elif C == "M":
                    dst = f"report_v{k}_latest.md" if last else f"archive/report_v{k}_{tag}.md"
                else:
                    dst = f"report_v{k}_{tag}.md" if not last else f"report_v{k}.md"
                pairs.append((v["file"], dst))
            folders = sorted({str(PurePosixPath(d).parent) for _, d in pairs if "/" in d})
            self.mkdir(*folders)
            self.inspect_folders([a for a, _ in pairs])
            for a, b in self.mv(pairs):
                renamed[a] = b
            if self.chance("D", 0.8, 0.35, 0.05):  # stamp each version with its place in the chain
                for k, v in enumerate(chain, 1):
                    rel = renamed.get(v["file"], v["file"])
                    head = self.text_of(rel).split("\n")[0]
                    stamp = (f"> 版本 {k}/{n}，{v['date']}" if self.lang == "zh" else
                             f"> Version {k} of {n}, {v['date']}")
                    self.edit(rel, head, f"{head}\n\n{stamp}")

        def history() -> None:
            zh = self.lang == "zh"
            entries = []
            prev = ""
            for k, v in enumerate(chain, 1):
                cur = self.own.get(renamed.get(v["file"], ""), "") or self.text_of(renamed.get(v["file"], v["file"]))
                added = [ln for ln in cur.split("\n") if ln.strip() and ln not in prev.split("\n")
                         and not ln.startswith(("#", ">"))]
                sts = [st for ln in added for st in parse_statements(ln, v["file"], title="-")]
                who = next((st.slots.get("who") for st in sts if st.key == "revision"), "")
                what = join_what([clause(st, self.lang, self.rng) for st in sts if st.key != "revision"][:2], zh)
                new_name = renamed.get(v["file"], v["file"])
                if zh:
                    entries.append((f"v{k}（原 `{v['file']}` → `{new_name}`）",
                                    f"{v['date']}{('，' + who + '修订') if who else ''}"
                                    + (f"；新增内容：{what}" if what else "")))
                else:
                    entries.append((f"v{k} (was `{v['file']}`, now `{new_name}`)",
                                    f"{v['date']}{', revised by ' + who if who else ''}"
                                    + (f"; adds {what}" if what else "")))
                prev = cur
            chain_line = " → ".join(f"v{k}" for k in range(1, len(chain) + 1))
            lead = (f"演变顺序：{chain_line}（按各版本的修订日期排定；LATEST_backup 实为最新一版）。" if zh else
                    f"Order: {chain_line}, by the revision dates inside each copy (the LATEST_backup copy is the "
                    "newest, whatever its name says).")
            spec = self.record_spec("版本历史" if zh else "Version history")
            self.deliver("version_history.md", lambda: action_log(spec.title, entries, spec, self.rng, lead=lead,
                                                                  table=self.log_table(),
                                                                  headers=("版本", "改动") if zh else
                                                                  ("Version", "What changed")), folder="")

        final = [lambda: self.finish_up(plan_files), scheme, history]
        self.interleave(reads, writes, final)

    # ------------------------------------------------------------------ T-15: bull and bear against the data
    @plan("T-15")
    def plan_reconcile(self) -> None:
        """Read both analyses and the data, recompute each side's claims from the numbers (revenue CAGR, market
        share, debt), and set out a combined view in reconciliation_memo.md."""
        analyses = [f for f in self.files if re.match(r"analysis_(bullish|bearish)\.md$", PurePosixPath(f).name)]
        data = [f for f in self.files if f.startswith("raw_data/") and f.endswith(".csv")]
        self.lay = self.layout()
        reads = self.reading_actions() + self.required_reads(analyses + data)
        writes: list[Any] = []
        plan_files = self.scratch_steps(writes)
        want_csv, want_chart = self.visual_plan()

        def memo() -> str:
            zh = self.lang == "zh"
            calc = self.recompute(data)
            spec = self.doc_spec("main", "综合判断备忘录" if zh else f"Reconciliation memo: {self.company()}")
            claims = self.kn.of("cagr_claim", "share_claim", "debt_claim")
            lines = [f"# {spec.title}", ""]
            lines += ["## 分歧所在" if zh else "## Where the two analyses part ways", ""]
            for st in claims:
                side = ("看多" if zh else "Bullish") if "bullish" in st.source else ("看空" if zh else "Bearish")
                lines.append(f"- {side}{'：' if zh else ': '}{clause(st, self.lang, self.rng)}")
            lines += ["", "## 数据怎么说" if zh else "## What the numbers say", ""]
            rows = calc_lines(calc, zh)
            if self.T["F"] != "R":
                lines += ["| 指标 | 论点 | 数据 |" if zh else "| Measure | Claimed | From the data |", "|---|---|---|"]
                lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
            else:
                lines += [f"- {a}{'：' if zh else ': '}{'论点' if zh else 'claimed'} {b}, "
                          f"{'数据' if zh else 'data'} {c}" for a, b, c in rows]
            lines += ["", "## 综合判断" if zh else "## Combined view", "", verdict_text(calc, zh)]
            budget = Budget(spec)
            budget.take("\n".join(lines), len(lines))
            if not budget.spent and self.T["B"] == "L":
                lines += ["", document(self.kn, spec, self.rng, SCHEMES.get("T-15"), sources_part=False)
                          .split("\n", 2)[-1]]
            return "\n".join(lines).rstrip() + "\n"

        final: list[Any] = [lambda: self.deliver("reconciliation_memo.md", memo)]
        if want_csv:
            final.append(lambda: self.write(self.join(self.lay["fig"], self.name("csv", ".csv")),
                                            calc_csv(self.recompute(data))))
        final.append(lambda: self.self_revise(self.join(self.lay["main"], "reconciliation_memo.md")))
        final.append(lambda: self.finish_up(plan_files))
        self.interleave(reads, writes, final)

    def company(self) -> str:
        return next((st.subject for st in self.kn.statements if st.subject and "Corp" in st.subject),
                    "NovaTech Corp")

    def recompute(self, data: list[str]) -> dict[str, Any]:
        """The numbers behind the claims, from the data files' rows as read (first and last year)."""
        out: dict[str, Any] = {}
        for f in data:
            rows = [st for st in self.kn.statements if st.key == "row" and st.source == f]
            if len(rows) < 2:
                continue
            col = next(h for h in rows[0].slots if not h.startswith("_"))
            try:
                first, last = float(rows[0].slots[col]), float(rows[-1].slots[col])
            except (KeyError, ValueError):
                continue
            name = PurePosixPath(f).stem
            out[name] = {"first": first, "last": last, "y0": rows[0].subject, "y1": rows[-1].subject,
                         "n": len(rows)}
        rev = out.get("revenue_history")
        if rev and rev["first"] > 0:
            rev["cagr"] = round(((rev["last"] / rev["first"]) ** (1 / max(1, rev["n"] - 1)) - 1) * 100, 1)
        claim = next((st for st in self.kn.of("cagr_claim") if "bullish" in st.source), None)
        if claim:
            out["claimed_cagr"] = claim.slots.get("pct")
        share = next((st for st in self.kn.of("share_claim")), None)
        if share:
            out["claimed_share"] = share.slots.get("pct")
        return out

    # ------------------------------------------------------------------ T-17: file-store health check
    @plan("T-17")
    def plan_health(self) -> None:
        """Survey the store, look into what looks wrong (duplicates compared, temporary files opened, references
        followed), and write health_check_report.md: issues by severity, a fix for each."""
        issues = self.planted_issues()
        self.lay = self.layout()
        look = [p for it in issues for p in it["look"]]
        reads = self.reading_actions(budget_scale=0.7) + self.required_reads(look)
        writes: list[Any] = []
        plan_files = self.scratch_steps(writes)

        def report() -> str:
            return self.issue_report(issues, "文件库健康检查报告" if self.lang == "zh" else "File store health check")

        final = [lambda: self.check_refs(issues), lambda: self.deliver("health_check_report.md", report),
                 lambda: self.finish_up(plan_files)]
        self.interleave(reads, writes, final)

    def planted_issues(self) -> list[dict[str, Any]]:
        """The problems the workspace holds (bundle facts), each with the files to look at and its severity."""
        out: list[dict[str, Any]] = []
        for f in self.facts:
            t = f.get("type")
            if t in ("duplicate", "duplicate_media") and f.get("file") in self.files:
                out.append({"kind": "duplicate", "file": f["file"], "of": f.get("original", ""), "sev": 1,
                            "look": [f["file"]] + ([f["original"]] if f.get("original") in self.files else [])})
            elif t == "junk" and f.get("file") in self.files:
                out.append({"kind": "temp", "file": f["file"], "of": f.get("original", ""), "sev": 2,
                            "look": [f["file"]]})
            elif t == "empty_file" and f.get("file") in self.files:
                out.append({"kind": "empty", "file": f["file"], "of": "", "sev": 2, "look": [f["file"]]})
            elif t == "broken_ref":
                out.append({"kind": "broken_ref", "file": f["file"], "of": f["target"], "sev": 0,
                            "look": [f["file"]] if f["file"] in self.files else []})
            elif t == "memo_mismatch" and f.get("media") in self.files:
                out.append({"kind": "mismatch", "file": f["media"], "of": f["file"], "date": f.get("stated_date"),
                            "sev": 0, "look": [f["media"], f["file"]]})
        for f in self.files:  # names that break the folder's pattern: spaces or capitals
            name = PurePosixPath(f).name
            if (" " in name or re.search(r"[A-Z]", name)) and not any(it["file"] == f for it in out):
                out.append({"kind": "naming", "file": f, "of": "", "sev": 3, "look": []})
        return out

    def check_refs(self, issues: list[dict[str, Any]]) -> None:
        """Follow each reference a document makes to a file that is not in the listing: look for it once."""
        for it in issues:
            if it["kind"] == "broken_ref":
                stem = PurePosixPath(it["of"]).name
                self.glob(f"**/{stem}")

    def issue_report(self, issues: list[dict[str, Any]], title: str) -> str:
        """Issues by severity (broken references and mismatches, duplicates, temporary and empty files, naming),
        each with a suggested fix; composed per issue; a table for F-M / F-L."""
        zh = self.lang == "zh"
        spec = self.doc_spec("main", title)
        sev_names = (["严重", "高", "中", "低"] if zh else ["Critical", "High", "Medium", "Low"])
        table = self.T["F"] != "R"
        lines = [f"# {title}", ""]
        n = len(issues)
        lines += [(f"共发现{n}个问题，按严重程度排列。" if zh else f"{n} issues found, most severe first."), ""]
        for sev in range(4):
            group = [it for it in issues if it["sev"] == sev]
            if not group:
                continue
            lines += [f"## {sev_names[sev]}", ""]
            if table:
                lines += ["| 文件 | 问题 | 建议 |" if zh else "| File | Problem | Suggested fix |", "|---|---|---|"]
            for it in group:
                prob, fix = issue_words(it, zh)
                what = self.describe(it.get("of") or it["file"], plain=False) if it["kind"] in (
                    "duplicate", "temp", "mismatch") else ""
                if what:
                    prob += f"（{what}）" if zh else f" ({what})"
                lines.append(f"| `{it['file']}` | {prob} | {fix} |" if table else
                             f"- `{it['file']}`{'：' if zh else ': '}{prob}{'；建议' if zh else ' — fix: '}{fix}")
            lines.append("")
        # what the files hold, after the issues, follows B (TT §2.2): in full with its sources at B-L, in what is
        # left of the main file's budget at B-M (version 10; before, B-M and B-R reports were the same size), none
        # at B-R
        room = (spec.max_chars or 0) - len("\n".join(lines))
        if len(self.kn) and (self.T["B"] == "L" or (self.T["B"] == "M" and room >= 300)):
            if self.T["B"] == "M":
                spec.max_chars = room
            body = document(self.kn, spec, self.rng, [Section("What the files hold", "文件内容概览",
                                                              frozenset({"*"}))], sources_part=self.T["B"] == "L")
            lines += body.split("\n", 2)[-1:]
        return "\n".join(lines).rstrip() + "\n"

    # ------------------------------------------------------------------ T-32: archive consistency
    @plan("T-32")
    def plan_consistency(self) -> None:
        """Compare the duplicated media (their content), follow each document's references, hear the memo the
        overview cites, write the consistency report, and fix what the tiers choose to fix: D marks the broken
        references in the overview, E removes (L), archives (M) or keeps (R) the copies."""
        issues = [it for it in self.planted_issues() if it["kind"] != "naming"]
        self.lay = self.layout()
        look = [p for it in issues for p in it["look"]]
        reads = self.reading_actions(budget_scale=0.7) + self.required_reads(look)
        writes: list[Any] = []
        plan_files = self.scratch_steps(writes)

        def fix() -> None:
            overview = next((it["file"] for it in issues if it["kind"] == "broken_ref"), None)
            if overview and overview in self.files and self.chance("D", 0.85, 0.55, 0.25):
                text = self.text_of(overview)
                new = text
                for it in issues:
                    if it["kind"] == "broken_ref":
                        new = "\n".join(ln + (" (缺失)" if self.lang == "zh" else " (missing)")
                                        if it["of"] in ln and "missing" not in ln and "缺失" not in ln else ln
                                        for ln in new.split("\n"))
                self.apply_changes(overview, new)
            dups = [it["file"] for it in issues if it["kind"] == "duplicate" and it["file"] in self.files]
            self.settle_duplicates(dups)

        final = [lambda: self.check_refs(issues), fix,
                 lambda: self.deliver("consistency_report.md", lambda: self.issue_report(
                     issues, "归档一致性检查报告" if self.lang == "zh" else "Archive consistency report")),
                 lambda: self.finish_up(plan_files)]
        self.interleave(reads, writes, final)

    def settle_duplicates(self, dups: list[str]) -> list[tuple[str, str]]:
        """What happens to copies of files kept elsewhere (E tier, TT §2.5): deleted (E-L), moved to an
        ``archive/duplicates`` folder (E-M, and E-R where C allows folders), or left where they are (E-R in a
        flat layout). Each is looked at first. Returns ``(file, action)``."""
        out = []
        keep_folder = "archive/duplicates" if self.T["C"] != "R" else "archive"
        for f in dups:
            self.inspect([f])
            if self.chance("E", 0.9, 0.25, 0.0):
                self.rm([f])
                out.append((f, "deleted"))
            elif self.chance("E", 1.0, 0.9, 0.6):
                self.mkdir(keep_folder)
                done = self.mv([(f, f"{keep_folder}/{PurePosixPath(f).name}")])
                out.append((f, f"archived as {done[0][1]}"))
            else:
                out.append((f, "kept"))
        return out


def join_what(parts: list[str], zh: bool) -> str:
    parts = [p for p in parts if p]
    return ("；" if zh else "; ").join(parts)


def issue_words(it: dict[str, Any], zh: bool) -> tuple[str, str]:
    """(problem, fix) of one issue, composed in the persona's language."""
    k = it["kind"]
    of = f"`{it['of']}`" if it.get("of") else ""
    if k == "duplicate":
        return (f"与{of}内容相同的副本", "确认后删除或移入归档") if zh else (f"a copy of {of}", "delete it or move it to an "
                                                                        "archive after checking")
    if k == "temp":
        return ("编辑器遗留的临时文件", "删除") if zh else ("a leftover temporary file", "delete it")
    if k == "empty":
        return ("空文件", "删除或补充内容") if zh else ("an empty file", "delete it or fill it in")
    if k == "broken_ref":
        return (f"引用了不存在的文件{of}", "更正链接或补回文件") if zh else (f"points to {of}, which does not exist",
                                                               "fix the link or restore the file")
    if k == "mismatch":
        return (f"{of}称会议在{it.get('date')}，录音内容不符", "以录音为准更正文档") if zh else (
            f"{of} says the meeting is on {it.get('date')}, which the recording does not say",
            "correct the document from the recording")
    return ("文件名不符合命名规则（空格或大写）", "改为小写加下划线") if zh else (
        "name breaks the pattern (spaces or capitals)", "rename to lower case with underscores")


def add_to_section(text: str, sentence: str, names: tuple[str, ...]) -> str:
    """``text`` with ``sentence`` added at the end of the first section whose heading holds one of ``names``
    (else at the end)."""
    lines = text.rstrip("\n").split("\n")
    start = next((i for i, ln in enumerate(lines) if ln.startswith("#") and any(n in ln.lower() for n in names)),
                 None)
    if start is None:
        return "\n".join(lines + ["", sentence]) + "\n"
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return "\n".join(lines[:end] + ["", sentence] + lines[end:]) + "\n"


def apply_comment(text: str, comment: str, kn: Any, lang: str, rng: Any) -> str:
    """The report after an accepted review comment (T-13)."""
    c = comment.lower()
    lines = text.rstrip("\n").split("\n")
    zh = lang == "zh"

    def section(word: str) -> tuple[int, int] | None:
        s = next((i for i, ln in enumerate(lines) if ln.startswith("#") and word in ln.lower()), None)
        if s is None:
            return None
        e = next((i for i in range(s + 1, len(lines)) if lines[i].startswith("#")), len(lines))
        return s, e

    if "methodology" in c:
        sp = section("method")
        if sp is None:
            return text
        s, e = sp
        if "shorten" in c:
            body = [ln.split(". ")[0].rstrip(".") + "." if ln.strip() and not ln.startswith("#") else ln
                    for ln in lines[s + 1:e]]
            lines[s + 1:e] = body
        else:
            subs = [x for x in kn.subjects() if x][:3]
            add = (f"数据来源：{'、'.join(subs)}的相关记录；每个数字都与原始记录核对过。" if zh else
                   f"Data sources: the records on {', '.join(subs) or 'the projects'}; every figure was checked "
                   "against its original record before use.")
            lines[e:e] = ["", add] if lines[e - 1].strip() else [add]
    elif "recommendation" in c and "front" in c:
        sp = section("recommend")
        if sp:
            s, e = sp
            block = lines[s:e]
            del lines[s:e]
            first = next((i for i, ln in enumerate(lines) if i > 0 and ln.startswith("## ")), len(lines))
            lines[first:first] = block + ([""] if block[-1].strip() else [])
    elif "conversational" in c or "formal" in c:
        subs = [x for x in kn.subjects() if x][:2]
        if "conversational" in c:
            add = (f"简单说：这份报告讲的是{'和'.join(subs)}的情况。" if zh else
                   f"In short: this report looks at how {' and '.join(subs) or 'the work'} went and what to do next.")
        else:
            add = ("本报告依据书面记录，所有结论均可追溯至原始数据。" if zh else
                   "This report rests on written records; every conclusion can be traced to its source data.")
        lines[1:1] = ["", add]
    return "\n".join(lines).rstrip("\n") + "\n"


def reason_for(comment: str, other: str, accepted: bool, zh: bool) -> str:
    if accepted:
        return (f"与“{other}”冲突，权衡后采纳本条，已改入正文" if zh else
                f"conflicts with “{other}”; taken, since it serves the report's readers better; applied in the text")
    return (f"与已采纳的“{other}”相反，故不采纳" if zh else f"the opposite request, “{other}”, was taken instead")


def calc_lines(calc: dict[str, Any], zh: bool) -> list[tuple[str, str, str]]:
    rows = []
    rev = calc.get("revenue_history")
    if rev and "cagr" in rev:
        rows.append(("营收年复合增长率" if zh else "Revenue CAGR", f"{calc.get('claimed_cagr', '–')}%",
                     f"{rev['cagr']}% ({rev['y0']}–{rev['y1']}: {rev['first']:g} → {rev['last']:g})"))
    sh = calc.get("market_share")
    if sh:
        rows.append(("市场份额" if zh else "Market share", f"{calc.get('claimed_share', '–')}%",
                     f"{sh['first']:g}% → {sh['last']:g}% ({sh['y0']}–{sh['y1']})"))
    debt = calc.get("debt_profile")
    if debt:
        rows.append(("债务" if zh else "Total debt (USD m)", "–",
                     f"{debt['first']:g} → {debt['last']:g} (×{debt['last'] / max(debt['first'], 1e-9):.2f})"))
    return rows


def calc_csv(calc: dict[str, Any]) -> str:
    out = ["measure,first,last,first_year,last_year"]
    for k, v in calc.items():
        if isinstance(v, dict):
            out.append(f"{k},{v['first']:g},{v['last']:g},{v['y0']},{v['y1']}")
    return "\n".join(out) + "\n"


def verdict_text(calc: dict[str, Any], zh: bool) -> str:
    rev, sh, debt = calc.get("revenue_history"), calc.get("market_share"), calc.get("debt_profile")
    parts = []
    if rev and "cagr" in rev:
        parts.append(f"营收确实在增长（年复合{rev['cagr']}%），但低于看多方所称的{calc.get('claimed_cagr', '–')}%" if zh else
                     f"revenue does grow ({rev['cagr']}% a year), but not at the {calc.get('claimed_cagr', '–')}% "
                     "the bullish note claims")
    if sh and sh["last"] < sh["first"]:
        parts.append(f"市场份额从{sh['first']:g}%降到{sh['last']:g}%，并不稳定" if zh else
                     f"market share slipped from {sh['first']:g}% to {sh['last']:g}%, so it is not stable")
    if debt and debt["last"] > 2 * debt["first"]:
        parts.append("债务翻了一倍多，看空方这一点成立" if zh else "debt more than doubled, which bears out the bearish "
                     "point")
    if not parts:
        return "数据不足以下结论。" if zh else "The data read are not enough for a view."
    if zh:
        return "；".join(parts) + "。综合来看，建议维持中性，等待份额企稳、杠杆回落后再加仓。"
    return cap("; ".join(parts)) + ". Taken together: neutral, until share stabilises and leverage comes down."


# ---------------------------------------------------------------------------------------------- revision plans
_MONTHS = {m: i for i, m in enumerate(("January", "February", "March", "April", "May", "June", "July", "August",
                                       "September", "October", "November", "December"), 1)}


def iso_date(s: str) -> str | None:
    """A date written as dd/mm/yyyy, "Month dd, yyyy" or yyyy年mm月dd日, in ISO form (None when not a date)."""
    m = re.fullmatch(r"(\d{2})/(\d{2})/(\d{4})", s.strip())
    if m:
        return f"{m.group(3)}-{m.group(2)}-{m.group(1)}"
    m = re.fullmatch(r"([A-Z][a-z]+) (\d{1,2}), (\d{4})", s.strip())
    if m and m.group(1) in _MONTHS:
        return f"{m.group(3)}-{_MONTHS[m.group(1)]:02d}-{int(m.group(2)):02d}"
    m = re.fullmatch(r"(\d{4})年(\d{1,2})月(\d{1,2})日", s.strip())
    if m:
        return f"{m.group(1)}-{int(m.group(2)):02d}-{int(m.group(3)):02d}"
    return None


#: Status marks of the team's notes and the house style's checkbox they become.
_DONE = ("✅", "[x]", "DONE", "✔")
_OPEN = ("☐", "[ ]", "TODO", "✗")


def house_style(text: str) -> tuple[str, dict[str, int]]:
    """A note in the house style (T-12): ``#`` title, ``##`` section headings, ``Date: YYYY-MM-DD``, ``-`` bullets,
    ``- [x]`` / ``- [ ]`` tasks, no emoji separators. Returns the text and how many lines each rule changed."""
    out: list[str] = []
    n = {"headings": 0, "dates": 0, "bullets": 0, "tasks": 0, "separators": 0}
    first = True
    for ln in text.rstrip("\n").split("\n"):
        s = ln.strip()
        new = ln
        m = re.fullmatch(r"\*\*(.+?)\*\*|【(.+?)】|🗂️\s*(.+)|📌\s*(.+)", s)
        if s and set(s) <= {"🔹"}:
            n["separators"] += 1
            continue
        if m:
            h = next(g for g in m.groups() if g)
            h = h.title() if h.isupper() else h
            new = f"# {h}" if first else f"## {h}"
        elif s.startswith("# ") and first:
            new = s
        elif s.startswith("Date:"):
            d = iso_date(s[5:].strip())
            new = f"Date: {d}" if d else ln
            n["dates"] += int(new != ln)
        elif re.match(r"^[*+] ", s):
            new = "- " + s[2:]
        elif any(s.startswith(mk + " ") for mk in _DONE):
            new = "- [x] " + s.split(" ", 1)[1]
        elif any(s.startswith(mk + " ") for mk in _OPEN):
            new = "- [ ] " + s.split(" ", 2 if s.startswith("[ ]") else 1)[-1]
        if new != ln:
            key = "headings" if m else "tasks" if "[" in new[:6] and "] " in new[:7] else "bullets" \
                if new.startswith("- ") else "dates" if new.startswith("Date:") else "headings"
            if not new.startswith("Date:"):
                n[key] += 1
        if s:
            first = False
        out.append(new)
    return "\n".join(out).rstrip("\n") + "\n", n


class RevisionPlansMixin:
    """Plans of the tasks that change an existing knowledge base or set of notes: T-10, T-12, T-18, T-19."""

    # ------------------------------------------------------------------ T-10: knowledge base update
    @plan("T-10")
    def plan_kb_update(self) -> None:
        """Add a technical analysis module (a new file where the C tier puts modules), extend the fundamentals
        with the discounted cash flow model (an edit of the framework note, D tier), update the index."""
        index = next((f for f in self.files if f == "index.md"), None)
        kb = [f for f in self.files if f.startswith("fundamentals/") and f.endswith(".md") and not clutter_category(f)]
        fund = next((f for f in kb if "framework" in f), None) or next(iter(kb), None)
        self.lay = self.layout()
        reads = self.reading_actions(budget_scale=0.8) + self.required_reads([p for p in (index, fund) if p])
        writes: list[Any] = []
        plan_files = self.scratch_steps(writes)
        zh = self.lang == "zh"
        C = self.T["C"]
        folder = {"L": "technical_analysis/indicators", "M": "technical_analysis", "R": ""}[C]
        name = self.name("main", ".md") if C == "R" else (
            "01_technical_analysis_basics.md" if self.p.naming == "long_descriptive" else "basics.md")
        if C == "R":
            name = "technical_analysis.md"
        module = self.join(folder, name)
        title = "技术分析入门" if zh else "Technical analysis basics"

        def write_module() -> None:
            if folder:
                self.mkdir(folder)
            self.write(module, self.entry(title, TECHNICAL_ENTRY(zh), "main"))

        def add_dcf() -> None:
            if fund:
                text = self.text_of(fund)
                self.apply_changes(fund, text.rstrip("\n") + "\n\n" + self.entry("", DCF_ENTRY(zh), "log"))

        def update_index() -> None:
            if not index:
                return
            text = self.text_of(index)
            link = f"- [{title}]({module})"
            dcf = (f"- [现金流折现模型]({fund})：见基本面框架新增章节" if zh else
                   f"- [Discounted cash flow (DCF) model]({fund}): new section of the fundamentals framework") \
                if fund else ""
            add = [link] + ([dcf] if dcf else [])
            self.apply_changes(index, add_to_section(text, "\n".join(add), ("contents", "目录", "section")))

        final = [write_module, add_dcf, update_index, lambda: self.finish_up(plan_files)]
        if C == "L":
            final.insert(1, lambda: self.readmes({"base": "technical_analysis", "mid": "", "main": folder}))
        self.interleave(reads, writes, final)

    def entry(self, title: str, parts: list[tuple[str, list[str]]], kind: str, level: str = "##") -> str:
        """A knowledge-base entry from built-in knowledge (:mod:`.domain`), as long as the B band allows (a B-R
        entry keeps the first line of each part); every part's heading is kept, since the headings are what the
        task asks the entry to cover (the ratios by name)."""
        spec = self.doc_spec(kind, title or "x")
        budget = Budget(spec)
        out = [f"# {title}", ""] if title else []
        for head, lines in parts:
            keep = lines if self.T["B"] != "R" else lines[:1]
            block = [f"{level} {head}", ""] + keep + [""]
            if out and not budget.take("\n".join(block), len(block)):
                out += [f"{level} {head}", ""]
                continue
            out += block
        return "\n".join(out).rstrip("\n") + "\n"

    # ------------------------------------------------------------------ T-18: three batches in order
    @plan("T-18")
    def plan_batches(self) -> None:
        """Read the knowledge base; then for batch 1, 2, 3 in turn: read it, apply its items (case summaries
        written, listing times updated, a superseded summary moved), refresh the index; finally regroup the topic
        folders into reference/ and operations/ and refresh the index once more."""
        batches = sorted((f for f in self.files if re.fullmatch(r"updates/batch_\d+\.md", f)),
                         key=lambda f: int(re.search(r"\d+", PurePosixPath(f).name).group(0)))
        index = "index.md" if "index.md" in self.files else None
        self.lay = self.layout()
        sub = {3: "summaries/cases", 2: "summaries"}.get(self.draw_depth(), "")  # where summaries go in a folder
        reads = self.reading_actions(budget_scale=0.6, exclude=lambda f: f.startswith("updates/"))
        writes: list[Any] = []
        plan_files = self.scratch_steps(writes)
        added: dict[tuple[int, int], str] = {}   # (batch, item) -> summary written
        log: list[str] = []
        zh = self.lang == "zh"

        def apply(k: int, rel: str) -> None:
            for act in self.required_reads([rel]):
                act()
            items = [st for st in self.kn.statements if st.source == rel and st.key.startswith("batch_")]
            for i, st in enumerate(items, 1):
                if st.key == "batch_add":
                    folder = st.slots["folder"].strip("/") + (f"/{sub}" if sub else "")
                    dst = f"{folder}/{st.slots['case'].lower().replace('-', '_')}_summary.md"
                    if sub and folder not in self.created_dirs:
                        self.mkdir(folder)
                    self.write(dst, self.case_summary(st.slots["case"], st.slots["d"]))
                    added[(k, i)] = dst
                    log.append(f"batch {k} item {i}: {dst}")
                elif st.key == "batch_update":
                    folder = st.slots["folder"].strip("/")
                    target = next((f for f in self.files if f.startswith(folder + "/") and f.endswith(".md")
                                   and not clutter_category(f)), None)
                    if target is None:
                        target = f"{folder}/listing_times.md"
                        self.write(target, ("# 排期更新\n" if zh else "# Listing times\n"))
                    line = (f"- 排期更新（第{k}批）：{st.slots['d']} 的聆讯时间已更新" if zh else
                            f"- Listing time updated (batch {k}): hearing on {st.slots['d']}")
                    self.apply_changes(target, self.text_of(target).rstrip("\n") + "\n" + line + "\n")
                    log.append(f"batch {k} item {i}: {target}")
                elif st.key == "batch_supersede":
                    old = added.get((int(st.slots["b"]), int(st.slots["i"])))
                    if old:
                        dst = f"{st.slots['folder'].strip('/')}/{PurePosixPath(old).name}"
                        if sub:
                            dst = f"{st.slots['folder'].strip('/')}/{sub}/{PurePosixPath(old).name}"
                            self.mkdir(str(PurePosixPath(dst).parent))
                        done = self.mv([(old, dst)])
                        added[(int(st.slots["b"]), int(st.slots["i"]))] = done[0][1]
                        log.append(f"batch {k} item {i}: {old} -> {done[0][1]}")
            refresh(f"batch {k}")

        def refresh(after: str) -> None:
            if not index:
                return
            text = self.text_of(index)
            entries = [f"- [{PurePosixPath(p).stem}]({p})" for p in dict.fromkeys(added.values())]
            head = "## 更新记录" if zh else "## Updates applied"
            base = text.split(head)[0].rstrip("\n")
            new = base + "\n\n" + head + "\n\n" + "\n".join(entries) + "\n"
            if new.rstrip() == text.rstrip():
                new = text.rstrip("\n") + "\n"
            self.apply_changes(index, new)

        def regroup() -> None:
            tops = ("reference", "operations")
            ref = [d for d in ("case_law", "criminal_law", "court_procedures") if d in self.dirs]
            ops = [d for d in ("client_matters", "updates") if d in self.dirs]
            self.mkdir(*tops)
            self.inspect_folders([f"{d}/x" for d in ref + ops])
            done = self.mv([(d, f"reference/{d}") for d in ref] + [(d, f"operations/{d}") for d in ops])
            for a, b in done:
                for key, p in list(added.items()):
                    if p.startswith(a + "/"):
                        added[key] = b + p[len(a):]
            if index:
                text = self.text_of(index)
                new = "\n".join(re.sub(r"^(- )(case_law|criminal_law|court_procedures)/",
                                       r"\1reference/\2/", ln) for ln in text.split("\n"))
                new = "\n".join(re.sub(r"^(- )(client_matters)/", r"\1operations/\2/", ln) for ln in new.split("\n"))
                new = re.sub(r"\]\((case_law|criminal_law|court_procedures)/", r"](reference/\1/", new)
                new = re.sub(r"\]\((client_matters|updates)/", r"](operations/\1/", new)
                self.apply_changes(index, new)

        final: list[Any] = [lambda k=k, b=b: apply(k, b) for k, b in enumerate(batches, 1)]
        final.append(regroup)
        if self.chance("E", 0.7, 0.1, 0.0):  # a selective curator clears the batches once applied
            final.append(lambda: self.rm([f for f in self.files if re.fullmatch(r"operations/updates/batch_\d+\.md",
                                                                                 f)]))
        final.append(lambda: self.finish_up(plan_files))
        self.interleave(reads, writes, final)

    def case_summary(self, case: str, date: str) -> str:
        """A case summary for the knowledge base: what the session knows of the case, sized by B."""
        zh = self.lang == "zh"
        sts = [st for st in self.kn.statements if st.subject == case or case in st.slots.values()]
        title = f"{case} 案件摘要" if zh else f"{case}: case summary"
        lines = [f"# {title}", "", (f"依据更新批次于{date}加入。" if zh else f"Added from the update batch dated {date}.")]
        spec = self.doc_spec("references", title)
        budget = Budget(spec)
        for st in sts[: 3 if self.T["B"] == "R" else 12]:
            s = about(st, self.lang, self.rng)
            if not budget.take(s):
                break
            lines.append(f"- {s}")
        if len(lines) == 3:
            lines.append("尚无其他记录；待补充庭审资料。" if zh else "No other record of this matter in the knowledge base "
                         "yet; hearing papers to follow.")
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------------ T-12: house style
    @plan("T-12")
    def plan_house_style(self) -> None:
        """Survey the notes, settle on one house style, bring every note into it (file by file, the D tier's way),
        describe the style in style_guide.md, and decide where the PDFs, images and mails go (C tier)."""
        notes = [f for f in self.files if PurePosixPath(f).suffix == ".md" and not clutter_category(f)]
        other = [f for f in self.files if PurePosixPath(f).suffix.lower() in (".pdf", ".png", ".jpg", ".eml")]
        self.lay = self.layout()
        reads = self.reading_actions(budget_scale=0.6) + self.required_reads(notes)
        writes: list[Any] = []
        plan_files = self.scratch_steps(writes)
        counts: dict[str, int] = {}
        moved: list[tuple[str, str]] = []

        def restyle() -> None:
            for rel in notes:
                new, n = house_style(self.text_of(rel))
                for k, v in n.items():
                    counts[k] = counts.get(k, 0) + v
                self.apply_changes(rel, new)

        def non_text() -> None:
            C = self.T["C"]
            if C == "R" or not other or not self.chance("C", 0.95, 0.7, 0.1):
                return
            sub = {".pdf": "pdf", ".png": "images", ".jpg": "images", ".eml": "email"}
            pairs = [(f, (f"reference/assets/{sub[PurePosixPath(f).suffix.lower()]}/" if C == "L" else
                          "reference/assets/") + PurePosixPath(f).name) for f in other]
            self.mkdir(*sorted({str(PurePosixPath(b).parent) for _, b in pairs}))
            self.inspect_folders([a for a, _ in pairs])
            moved.extend(self.mv(pairs))

        def guide() -> str:
            zh = self.lang == "zh"
            rules = [("标题" if zh else "Headings", "# 文档标题，## 小节；不用加粗或符号充当标题" if zh else
                      "`#` for the title, `##` for sections; no bold or emoji headings", counts.get("headings", 0)),
                     ("日期" if zh else "Dates", "Date: YYYY-MM-DD" if not zh else "Date: YYYY-MM-DD（ISO 格式）",
                      counts.get("dates", 0)),
                     ("列表" if zh else "Bullets", "一律用 `- `" if zh else "always `- `", counts.get("bullets", 0)),
                     ("待办" if zh else "Tasks", "`- [x]` 已完成，`- [ ]` 未完成" if zh else "`- [x]` done, `- [ ]` open",
                      counts.get("tasks", 0)),
                     ("分隔符" if zh else "Separators", "不用表情符号分隔线" if zh else "no emoji separator lines",
                      counts.get("separators", 0))]
            lines = ["# 文档规范" if zh else "# House style", "",
                     (f"适用于{len(notes)}份笔记，已全部按此修改。" if zh else
                      f"Applies to all {len(notes)} notes; every one has been brought into line."), ""]
            if self.T["F"] != "R":
                lines += ["| 规则 | 写法 | 本次修改行数 |" if zh else "| Rule | Form | Lines changed |", "|---|---|---|"]
                lines += [f"| {a} | {b} | {c} |" for a, b, c in rules]
            else:
                lines += [f"- {a}{'：' if zh else ': '}{b} ({c})" for a, b, c in rules]
            lines += ["", "## 非文本文件" if zh else "## Non-text files", ""]
            if moved:
                lines.append(f"PDF、图片和邮件移到 `reference/assets/`（{len(moved)}个文件）。" if zh else
                             f"PDFs, images and mails moved to `reference/assets/` ({len(moved)} files).")
            else:
                lines.append("PDF、图片和邮件保留原位，作为参考资料，不改格式。" if zh else
                             "PDFs, images and mails stay where they are as reference material; no style applies.")
            return "\n".join(lines) + "\n"

        final = [restyle, non_text, lambda: self.deliver("style_guide.md", guide, folder=""),
                 lambda: self.finish_up(plan_files)]
        self.interleave(reads, writes, final)

    # ------------------------------------------------------------------ T-19: plain-language versions
    @plan("T-19")
    def plan_lay(self) -> None:
        """Read context/ to learn who the client is, read the key documents, and write versions she can follow:
        one per key document (B-L), one guide (B-M) or one short note (B-R), in plain words (:data:`.domain.LAY`)."""
        context = [f for f in self.files if f.startswith("context/")]
        self.lay = self.layout()
        reads = self.required_reads(context) + self.reading_actions()
        writes: list[Any] = []
        plan_files = self.scratch_steps(writes)
        who = "Chen Lihua"

        def lay_docs() -> None:
            srcs = [s for s in dict.fromkeys(st.source for st in self.kn.statements)
                    if s.startswith(("case_reports/", "legal_reference/", "client_communications/"))]
            groups = [[s] for s in srcs[:3]] if self.T["B"] == "L" else [srcs]
            for k, grp in enumerate(groups or [[]], 1):
                sts = [st for st in self.kn.statements if st.source in grp] or list(self.kn.statements)
                stem = PurePosixPath(grp[0]).stem if len(grp) == 1 else "guide"
                name = f"plain_{stem}.md" if len(groups) > 1 else self.name("main", ".md")
                self.deliver(name, lambda sts=sts: self.lay_text(sts, who))

        final = [lay_docs, lambda: self.finish_up(plan_files)]
        self.interleave(reads, writes, final)

    def lay_text(self, sts: list[Any], who: str) -> str:
        """A plain-language note for a client without legal training: short sentences, terms explained, her
        dates first."""
        from filegram_ray.engine.simulator.domain import LAY

        zh = self.lang == "zh"
        spec = self.doc_spec("main", f"给{who}女士的说明" if zh else f"For Mrs. {who}: what your papers say")
        budget = Budget(spec)
        lines = [f"# {spec.title}", "",
                 (f"{who}女士，您好。下面用简单的话说明文件里与您有关的内容。" if zh else
                  f"Dear Mrs. {who}, this note explains in everyday words what the documents say and what "
                  "happens next."), ""]
        dated = sorted((st for st in sts if st.date), key=lambda st: st.date)
        other = [st for st in sts if not st.date]
        for head, group in ((("重要日期" if zh else "Dates for your diary"), dated),
                            (("其他要点" if zh else "Other things to know"), other)):
            body = []
            for st in group:
                tpl = LAY.get(st.key)
                if tpl is None:
                    continue
                try:
                    txt = (tpl[1] if zh else tpl[0]).format_map(dict(st.slots))
                except (KeyError, ValueError):
                    continue
                txt = cap(txt) + ("。" if zh else ".")
                if txt in body or not budget.take(txt):
                    continue
                body.append(txt)
            if body:
                lines += [f"## {head}", ""] + [f"- {b}" for b in body] + [""]
        return "\n".join(lines).rstrip() + "\n"


def TECHNICAL_ENTRY(zh: bool) -> list[tuple[str, list[str]]]:  # noqa: N802 - a constant's accessor
    from filegram_ray.engine.simulator.domain import TECHNICAL
    return TECHNICAL[1 if zh else 0]


def DCF_ENTRY(zh: bool) -> list[tuple[str, list[str]]]:  # noqa: N802
    from filegram_ray.engine.simulator.domain import DCF
    return DCF[1 if zh else 0]


# ---------------------------------------------------------------------------------------------- organize plans
_SCENE = re.compile(r"^(?:IMG|photo|shadow|orchard|evidence_photo)_([a-z]+)_\d+", re.IGNORECASE)


class OrganizePlansMixin:
    """Plans of the organize tasks and of the archive-building iterate / create tasks: T-05, T-21, T-23, T-26,
    T-29, T-30, T-31."""

    def organize_run(self, groups_fn: Callable[[], dict[str, list[str]]], records: list[Any],
                     extra_reads: list[str] | None = None, flat_ok: bool = False, before: list[Any] | None = None,
                     exclude: Callable[[str], bool] | None = None) -> None:
        """The organize flow: read (A), curate (E), the task's own steps (``before``), sort (C), the records."""
        self.lay = {"main": "", "aux": "", "fig": "", "scratch": "", "base": "", "mid": ""}
        reads = self.reading_actions(budget_scale=0.6, exclude=exclude) + self.required_reads(extra_reads or [])
        writes: list[Any] = []
        plan_files = self.scratch_steps(writes)
        final: list[Any] = [lambda: self.curate(plan_files)] + list(before or [])
        final.append(lambda: self.sort_files(groups_fn(), flat_ok=flat_ok))
        final += records
        final.append(lambda: self.finish_up(plan_files, curate=False))
        self.interleave(reads, writes, final)

    @plan("T-05")
    def plan_messy_folder(self) -> None:
        """Sort the dumped files by kind (C decides folders, depth, or names only), and leave a note at the top
        level explaining the new layout."""
        note = self.name("readme", ".md") if self.p.naming != "date_prefix" else self.name("log", ".md")
        self.organize_run(self.groups_by_kind, [lambda: self.write(note, self.layout_note()),
                                                lambda: self.self_revise(note, record=True)], flat_ok=True)

    @plan("T-23", "T-26")
    def plan_album(self) -> None:
        """Sort every picture and file into an album / archive structure (photos by what they show, other files by
        kind), and add an index or captions where B and F want one (T-23 and T-26 make them optional)."""
        def groups() -> dict[str, list[str]]:
            media = [f for f in self.files if PurePosixPath(f).suffix.lower() in (".jpg", ".jpeg", ".png", ".gif")]
            out: dict[str, list[str]] = {}
            for f in media:
                m = _SCENE.match(PurePosixPath(f).name)
                out.setdefault(m.group(1).lower() if m else "photos", []).append(f)
            rest = self.groups_by_kind([f for f in self.files if f not in media])
            for g, fs in rest.items():
                out.setdefault(g, []).extend(fs)
            return out

        records: list[Any] = []
        if self.chance("B", 0.95, 0.6, 0.2) or self.T["F"] != "R":
            records.append(self.album_index)
        self.organize_run(groups, records)

    def album_index(self) -> None:
        """An index of the sorted collection: one line per file (where it is now and what it shows, from the
        annotations read), as a CSV (F-L), a Markdown table (F-M) or a list (F-R)."""
        zh = self.lang == "zh"
        rows = [(f, d) for f in sorted(self.files)[:60] if (d := self.describe(f, plain=False))]
        if not rows:  # nothing looked at closely: no captions to give
            return
        if self.T["F"] == "L":
            body = "path,description\n" + "".join(f'"{p}","{d.replace(chr(34), chr(39))}"\n' for p, d in rows)
            self.write(self.name("index", ".csv"), body)
        title = "相册索引" if zh else "Album index"
        if self.T["F"] != "L" or self.T["B"] == "L":
            self.write(self.name("index", ".md"), self.index_doc(title, rows, table=self.T["F"] == "M"))

    def describe(self, f: str, plain: bool = True) -> str:
        """What a file holds, in a few words: from what was read of it (its annotation or text), else its kind
        (``plain``) or "" ."""
        from filegram_ray.engine.simulator.genres import describe_source

        zh = self.lang == "zh"
        orig = next((a for a, b in self.moved if b == f), f)
        d = describe_source(self.kn, orig, self.lang, self.rng) or describe_source(self.kn, f, self.lang, self.rng)
        if d or not plain:
            return d
        ext = PurePosixPath(f).suffix.lstrip(".")
        return f"{ext} 文件" if zh else f"{ext} file"

    def index_doc(self, title: str, rows: list[tuple[str, str]], table: bool) -> str:
        from filegram_ray.engine.simulator.genres import file_index

        zh = self.lang == "zh"
        lead = f"共{len(rows)}个文件。" if zh else f"{len(rows)} files."
        return file_index(title, rows, self.lang, table, lead)

    # ------------------------------------------------------------------ T-21: cleanup and deduplication
    @plan("T-21")
    def plan_cleanup(self) -> None:
        """Compare each duplicate with its original and settle it (E: deleted, archived or kept), get rid of the
        temporary and empty files (E-L / E-M delete, E-R moves them out of the way), make names consistent, move
        the valuable files into a sensible structure, and record every action in cleanup_log.md."""
        dups = [f for f in self.facts if f.get("type") == "duplicate" and f.get("file") in self.files]
        junk = [f["file"] for f in self.facts if f.get("type") in ("junk", "empty_file") and f.get("file") in self.files]
        junk += [f for f in self.files if clutter_category(f) == "temp" and f not in junk]
        look = [p for d in dups for p in (d["file"], d["original"]) if p in self.files] + junk
        actions: list[tuple[str, str]] = []
        zh = self.lang == "zh"

        def resolve() -> None:
            for f, what in self.settle_duplicates([d["file"] for d in dups]):
                orig = next(d["original"] for d in dups if d["file"] == f)
                desc = self.describe(orig, plain=False)
                desc = (f"（{desc}）" if zh else f" ({desc})") if desc else ""
                actions.append((f, (f"与 `{orig}`{desc} 内容相同，" if zh else f"same content as `{orig}`{desc}; ")
                                + say(what, zh)))
            for f in junk:
                if f not in self.files:
                    continue
                self.inspect([f])
                if self.chance("E", 1.0, 0.9, 0.0):
                    self.rm([f])
                    actions.append((f, "临时或空文件，已删除" if zh else "temporary or empty file; deleted"))
                else:
                    self.mkdir("archive/to_review" if self.T["C"] != "R" else "archive")
                    dst = ("archive/to_review/" if self.T["C"] != "R" else "archive/") + PurePosixPath(f).name
                    done = self.mv([(f, dst)])
                    actions.append((f, (f"临时或空文件，移到 `{done[0][1]}` 待查" if zh else
                                        f"temporary or empty file; moved to `{done[0][1]}` for review")))

        def groups() -> dict[str, list[str]]:
            keep = [f for f in self.files if not f.startswith("archive/")]
            return self.groups_by_kind(keep)

        def log() -> None:
            moved = [(a, b) for a, b in self.moved if not b.startswith("archive/")]
            done = {a for a, _ in actions}
            pruned = [(f, ("已删除（" if zh else "deleted (") + {"temp": "临时文件" if zh else "a temporary file",
                                                                 "duplicate": "重复副本" if zh else "a duplicate",
                                                                 "superseded": "旧版本" if zh else "an older version"}
                       .get(clutter_category(f) or "", "无用文件" if zh else "not needed") + ("）" if zh else ")"))
                      for f in self.removed if f not in done]
            def placed(a: str, b: str) -> str:
                d = self.describe(a, plain=False)
                return ("改名/移动为 " if zh else "now ") + f"`{b}`" + ((f"（{d}）" if zh else f" ({d})") if d else "")

            entries = actions + pruned + [(a, placed(a, b)) for a, b in moved]
            spec = self.record_spec("清理记录" if zh else "Cleanup log")
            lead = (f"处理了{len(dups)}组重复文件、{len(junk)}个临时或空文件，并整理了{len(moved)}个文件的位置和名称。" if zh else
                    f"{len(dups)} duplicates and {len(junk)} temporary or empty files handled; {len(moved)} files "
                    "renamed or moved into place.")
            self.write("cleanup_log.md", action_log(spec.title, [(f"`{a}`", b) for a, b in entries], spec,
                                                    self.rng, lead=lead, table=self.log_table(),
                                                    headers=("文件", "处理") if zh else ("File", "Action")))

        self.organize_run(groups, [log, lambda: self.self_revise("cleanup_log.md", record=True)], extra_reads=look,
                          before=[resolve])

    # ------------------------------------------------------------------ T-29: registration records
    @plan("T-29")
    def plan_registry(self) -> None:
        """Find each registration's industry (a search for it, or opening the documents), file the documents by
        industry, build an index to look companies up (CSV, table or list by F), and document the system."""
        pdfs = [f for f in self.files if f.endswith(".pdf")]
        zh = self.lang == "zh"

        def find() -> None:
            if self.T["A"] == "M":
                self.grep("Industry")
            for act in self.required_reads([f for f in pdfs if not self.industry_of(f)]):
                act()

        def groups() -> dict[str, list[str]]:
            out: dict[str, list[str]] = {}
            for f in self.files:
                if f.endswith(".pdf"):
                    out.setdefault(self.industry_of(f) or "unclassified", []).append(f)
                elif f.endswith(".xlsx"):
                    out.setdefault("reference", []).append(f)
            return {re.sub(r"[^\w]+", "_", g.lower()).strip("_"): fs for g, fs in out.items()}

        def records() -> None:
            rows = []
            for a, b in [(a, b) for a, b in self.moved] + [(f, f) for f in self.files if f.endswith(".pdf")
                                                           and not any(b == f for _, b in self.moved)]:
                if not b.endswith(".pdf") or b not in self.files:
                    continue
                name = next((st.slots["name"] for st in self.kn.statements if st.key == "entity"
                             and st.source == a), PurePosixPath(b).stem)
                rows.append((name, self.industry_of(a) or "", b))
            F = self.T["F"]
            if F == "L":
                self.write(self.name("index", ".csv"), "company,industry,path\n" + "".join(
                    f'"{n}","{i}","{p}"\n' for n, i, p in rows))
            else:
                title = "公司索引" if zh else "Company index"
                lines = [f"# {title}", ""]
                if F == "M":
                    lines += ["| 公司 | 行业 | 文件 |" if zh else "| Company | Industry | File |", "|---|---|---|"]
                    lines += [f"| {n} | {i} | `{p}` |" for n, i, p in rows]
                else:
                    lines += [f"- {n}（{i}）：`{p}`" if zh else f"- {n} ({i}): `{p}`" for n, i, p in rows]
                self.write(self.name("index", ".md"), "\n".join(lines) + "\n")
            inds = sorted({i for _, i, _ in rows if i})
            guide = ["# 使用说明" if zh else "# How this registry works", "",
                     (f"{len(rows)}份登记文件按行业分为{len(inds)}类：{'、'.join(inds)}。" if zh else
                      f"{len(rows)} registrations filed by industry into {len(inds)} groups: {', '.join(inds)}."),
                     "", "## 查找" if zh else "## Looking a company up", "",
                     ("在索引中按公司名查找，索引给出行业和文件位置；新文件按其 SSIC 行业放入对应文件夹，并在索引中加一行。" if zh else
                      "Find the company in the index: it gives the industry and where the file is. A new registration "
                      "goes into the folder of its SSIC industry, and gets a line in the index.")]
            readme = "README.md" if self.T["C"] != "R" or self.p.naming != "short_abbrev" else "readme.md"
            self.write(readme, "\n".join(guide) + "\n")
            self.self_revise(readme, record=True)

        self.organize_run(groups, [records], before=[find],
                          exclude=lambda f: f.endswith(".pdf") and self.T["A"] == "M")

    def industry_of(self, path: str) -> str:
        return next((st.slots["ind"] for st in self.kn.statements if st.key == "industry" and st.source == path), "")

    # ------------------------------------------------------------------ T-30: audio archive
    @plan("T-30")
    def plan_audio(self) -> None:
        """Listen to every recording (read its annotation), put each into a category (work, legal, personal,
        music), file them (C), and write a summary with tags for each (an index: CSV for F-L, table or list)."""
        audio = [f for f in self.files if PurePosixPath(f).suffix.lower() in (".mp3", ".wav", ".m4a")]
        zh = self.lang == "zh"

        def groups() -> dict[str, list[str]]:
            out: dict[str, list[str]] = {}
            for f in self.files:
                if f in audio or PurePosixPath(f).suffix.lower() in (".mp3", ".wav"):
                    out.setdefault(self.audio_category(f), []).append(f)
                else:
                    out.setdefault("notes", []).append(f)
            return out

        def summaries() -> None:
            rows = []
            for f in sorted(f for f in self.files if PurePosixPath(f).suffix.lower() in (".mp3", ".wav")):
                orig = next((a for a, b in self.moved if b == f), f)
                cat = self.audio_category(orig)
                rows.append((f, f"[{cat}] " + self.describe(f)))
            table = self.T["F"] == "M"
            if self.T["F"] == "L":
                self.write(self.name("index", ".csv"), "file,category,summary\n" + "".join(
                    f'"{p}","{d.split("]")[0][1:]}","{d.split("] ", 1)[-1]}"\n' for p, d in rows))
            self.write(self.name("index", ".md"), self.index_doc("录音索引" if zh else "Audio index", rows, table))

        self.organize_run(groups, [summaries], extra_reads=audio)

    def audio_category(self, f: str) -> str:
        sts = [st for st in self.kn.statements if st.source == f]
        keys = {st.key for st in sts}
        if "music" in keys:
            return "music"
        if keys & {"instructed", "affidavit", "attend", "section", "disclosure", "legal_aid", "bail", "mediation",
                   "stage"}:
            return "legal"
        if keys & {"milestone", "owners", "budget", "proposal", "action", "csat", "risks", "target_met", "focus"}:
            return "work"
        return "personal"

    # ------------------------------------------------------------------ T-31: compilation plan
    @plan("T-31")
    def plan_compilation(self) -> None:
        """Look through the clips and photos (their annotations), choose and order a selection by what they show,
        write the plan (selection, running order, captions), and put the chosen material into a final folder
        (moved, or copied by a keeper)."""
        clips = [f for f in self.files if PurePosixPath(f).suffix.lower() in (".mp4", ".mov")]
        photos = [f for f in self.files if PurePosixPath(f).suffix.lower() in (".jpg", ".png")]
        zh = self.lang == "zh"
        chosen: list[str] = []

        def choose() -> None:
            seen_scene: dict[str, int] = {}
            k = max(4, round(len(clips) * self.lerp("B", 0.8, 0.6, 0.4)))
            for f in clips:
                st = next((s for s in self.kn.statements if s.source == f and s.key == "video"), None)
                scene = st.slots.get("scene", "") if st else ""
                if seen_scene.get(scene, 0) < 3 and len(chosen) < k:
                    chosen.append(f)
                    seen_scene[scene] = seen_scene.get(scene, 0) + 1
            if self.T["F"] != "R":
                chosen.extend(photos[:2])
            final_dir = {3: "final/selected/clips", 2: "final/selected"}.get(self.draw_depth(), "final")
            self.mkdir(final_dir)
            self.inspect_folders(chosen)
            if self.chance("E", 0.2, 0.5, 0.9):  # a keeper copies, the others move
                for f in list(chosen):
                    self.cp(f, f"{final_dir}/{PurePosixPath(f).name}")
            else:
                moved = self.mv([(f, f"{final_dir}/{PurePosixPath(f).name}") for f in chosen])
                chosen[:] = [b for _, b in moved]
            rest = [f for f in clips if f in self.files and f not in chosen]
            if rest and self.chance("C", 0.7, 0.3, 0.0):  # the clips left out go to an outtakes folder
                self.mkdir("outtakes")
                self.mv([(f, f"outtakes/{PurePosixPath(f).name}") for f in rest])

        def plan_doc() -> str:
            spec = self.doc_spec("main", "合集剪辑方案" if zh else "Nature compilation plan")
            lines = [f"# {spec.title}", "", (f"从{len(clips)}段素材中选出{len(chosen)}段，按场景编排。" if zh else
                                             f"{len(chosen)} pieces chosen from {len(clips)} clips, ordered by "
                                             "scene."), "", "## 顺序与旁白" if zh else "## Running order and captions",
                     ""]
            for i, f in enumerate(chosen, 1):
                d = self.describe(f)
                lines.append(f"{i}. `{PurePosixPath(f).name}`：{d}" if zh else f"{i}. `{PurePosixPath(f).name}` — {d}")
            return "\n".join(lines) + "\n"

        self.organize_run(lambda: {}, [choose, lambda: self.write(self.name("main", ".md"), plan_doc())],
                          extra_reads=clips + (photos if self.T["A"] == "L" else []))


def say(what: str, zh: bool) -> str:
    if what == "deleted":
        return "已删除" if zh else "deleted"
    if what == "kept":
        return "保留，已在记录中注明" if zh else "kept where it is, noted here"
    return (what.replace("archived as", "已归档为") if zh else what)


# ---------------------------------------------------------------------------------------------- empty workspaces
class CreatePlansMixin:
    """Plans of the tasks that start from an empty folder: T-03 (a knowledge base), T-04 (the paperwork after a
    client dinner), T-20 (a weekly reporting system). The material is the prompt's and what the persona knows
    (:mod:`.domain`); B sets how many files and how long, C where they go, F whether trackers are tables or CSV."""

    def create_files(self, parts: list[tuple[str, str, Callable[[], str]]], index: tuple[str, Callable[[], str]] | None
                     ) -> None:
        """Write ``parts`` (role, file name, render) where C puts them, the entry file last, review them (A),
        revise them (D), curate scratch (E)."""
        self.lay = self.layout()
        writes: list[Any] = []
        plan_files = self.scratch_steps(writes)
        writes.insert(0, lambda: self.setup_dirs(self.lay, aux=False, notes=bool(plan_files)))
        written: list[str] = []

        def put(name: str, render: Callable[[], str], folder: str | None) -> None:
            written.append(self.deliver(name, render, folder))

        for role, name, render in parts:
            folder = None if role == "main" else (self.lay["aux"] if role == "aux" else self.lay["main"])
            writes.append(lambda n=name, r=render, f=folder: put(n, r, f))
        final: list[Any] = []
        if index:
            final.append(lambda: put(index[0], index[1], self.lay["base"] or self.lay["main"] or ""))
        final.append(lambda: [self.self_revise(w) for w in written[:2]])
        final.append(lambda: self.file_scratch(plan_files, self.lay))
        final.append(self.review_outputs)
        final.append(lambda: self.finish_up(plan_files))
        self.interleave([], writes, final)

    def n_files(self) -> int:
        """How many separate files a create task's material is split into (B: one for B-R, two for B-M, all
        for B-L; TT §2.2)."""
        return {"L": 9, "M": 2, "R": 1}[self.T["B"]]

    @plan("T-03")
    def plan_kb_build(self) -> None:
        """A personal knowledge base on investment analysis: a fundamental analysis framework, a ratio quick
        reference (P/E, P/B, ROE …), an industry study template, and an entry point that explains the layout."""
        from filegram_ray.engine.simulator.domain import KB

        zh = self.lang == "zh"
        titles = {"framework": "基本面分析框架" if zh else "Fundamental analysis framework",
                  "ratios": "财务比率速查" if zh else "Financial ratios quick reference",
                  "industry": "行业研究模板" if zh else "Industry study template"}
        names = {"framework": "fundamental_framework.md", "ratios": "ratios_quick_reference.md",
                 "industry": "industry_template.md"}
        from filegram_ray.engine.simulator.domain import CHECKS, ratio_examples

        self.spare = [ln for v in CHECKS.values() for ln in v[1 if zh else 0]]

        def kb(k: str) -> list[tuple[str, list[str]]]:
            """A topic's parts, elaborated as far as the B position goes: worked ratio examples, or the checks
            and fill-in prompts a thorough writer adds (lerp 6 / 2 / 0 lines at B-L / M / R, times effort)."""
            parts = [(h, list(ls)) for h, ls in KB[k][1 if zh else 0]]
            extra = max(0, round(self.lerp("B", 6.0, 2.0, 0.0) * self.effort))
            if k == "ratios":
                add = ratio_examples(self.rng, zh, extra)
            else:
                pool = list(CHECKS[k][1 if zh else 0])
                self.rng.shuffle(pool)
                add = pool[:extra]
            for i, ln in enumerate(add):
                parts[i % len(parts)][1].append(ln)
            return parts
        n = self.n_files()
        parts: list[tuple[str, str, Callable[[], str]]] = []
        entry_title = "知识库使用说明" if zh else "How to use this knowledge base"
        if n == 1:
            def one() -> str:
                text = self.entry(entry_title, [("入口" if zh else "Start here", [
                    "本知识库包含三部分：基本面分析框架、财务比率速查、行业研究模板，按顺序阅读。" if zh else
                    "Three parts, read in order: the fundamental analysis framework, the ratio quick reference, "
                    "the industry template."])], "main")
                for k in ("framework", "ratios", "industry"):
                    text += "\n## " + titles[k] + "\n\n" + self.entry("", kb(k), "log", "###")
                return text
            parts.append(("main", self.name("main", ".md"), one))
        else:
            keys = ["framework", "ratios", "industry"]
            groups = [keys] if n == 2 else [[k] for k in keys]
            if n == 2:
                groups = [["framework", "ratios"], ["industry"]]
            for grp in groups:
                name = names[grp[0]]
                parts.append(("main", name, lambda grp=grp: "\n".join(
                    self.entry(titles[k], kb(k), "main") for k in grp)))
        index = None
        if n > 1:
            def entry_point() -> str:
                rows = [(p, titles.get(next((k for k, v in names.items() if PurePosixPath(p).name == v), ""), ""))
                        for p in self.own_order if p.endswith(".md") and p in self.own and "outline" not in p
                        and "draft" not in p]
                lead = ("从框架读起，需要时查比率速查，研究新行业时复制模板。" if zh else
                        "Start with the framework, look ratios up in the quick reference, copy the template for "
                        "each new industry.")
                return self.index_doc(entry_title, rows, table=self.T["F"] == "M") .replace(
                    "\n\n", f"\n\n{lead}\n\n", 1)
            index = ("README.md", entry_point)
        self.create_files(parts, index)

    @plan("T-04")
    def plan_dinner(self) -> None:
        """Minutes of the client dinner, a tracker of who owes what, and follow-up e-mail drafts, from what the
        prompt tells of the dinner (people, what was discussed); B decides one file or several, F the tracker's
        form (list, table, CSV)."""
        zh = self.lang == "zh"
        d = dinner_facts(self.prompt_en)
        day = self.start_ms
        due = [date_after(day, k) for k in (2, 5, 7, 14)]
        actions = [(d["colleague"], ("把东南亚宏观观点的材料发给 " if zh else "send the South-East Asia macro deck to ")
                    + d["client_a"], due[0]),
                   (d["colleague"], ("准备区域科技基础设施基金的资料包" if zh else
                                     "prepare the regional tech infrastructure fund pack"), due[1]),
                   ("我" if zh else "me", (f"回复 {d['client_b']} 关于 ESG 如何纳入投资流程的问题" if zh else
                                           f"answer {d['client_b']}'s question on how ESG is built into the process"),
                    due[1]),
                   (d["colleague"] + (" / 我" if zh else " / me"), ("起草联合白皮书的提纲" if zh else
                                                                  "draft an outline for the joint whitepaper"), due[3])]

        def minutes() -> str:
            people = [d["colleague"], d["client_a"], d["client_b"]]
            lines = ["# 客户晚餐会议纪要" if zh else "# Client dinner: minutes", "",
                     (f"出席：{'、'.join(people)}和我。" if zh else f"Present: {', '.join(people)} and me."), "",
                     "## 讨论内容" if zh else "## Discussed", ""]
            lines += [f"- {x}" for x in dinner_points(d, zh)]
            return "\n".join(lines) + "\n"

        def tracker() -> str:
            if self.T["F"] == "R":
                rows = [f"- {w}: {a} ({'截止' if zh else 'due'} {t})" for w, a, t in actions]
                return "\n".join(["# 待办跟踪" if zh else "# Follow-up tracker", ""] + rows) + "\n"
            rows = ["| 负责人 | 事项 | 截止 | 状态 |" if zh else "| Owner | Action | Due | Status |", "|---|---|---|---|"]
            rows += [f"| {w} | {a} | {t} | {'未开始' if zh else 'open'} |" for w, a, t in actions]
            return "\n".join(["# 待办跟踪" if zh else "# Follow-up tracker", ""] + rows) + "\n"

        def emails() -> str:
            return "\n".join(follow_up_email(d, who, zh, self.p.tone) for who in ("client_a", "client_b"))

        n = self.n_files()
        parts: list[tuple[str, str, Callable[[], str]]] = []
        if n == 1:
            parts.append(("main", self.name("main", ".md"), lambda: minutes() + "\n" + tracker().replace("# ", "## ", 1)
                          + "\n" + emails().replace("# ", "## ")))
        elif n == 2:
            parts.append(("main", "minutes.md" if self.p.naming != "long_descriptive" else "01_client_dinner_minutes.md",
                          lambda: minutes() + "\n" + tracker().replace("# ", "## ", 1)))
            parts.append(("main", "follow_up_emails.md", emails))
        else:
            parts.append(("main", "minutes.md", minutes))
            parts.append(("main", "tracker.md", tracker))
            parts.append(("main", f"email_{d['client_a'].split()[-1].lower()}.md",
                          lambda: follow_up_email(d, "client_a", zh, self.p.tone)))
            parts.append(("main", f"email_{d['client_b'].split()[-1].lower()}.md",
                          lambda: follow_up_email(d, "client_b", zh, self.p.tone)))
        if self.T["F"] == "L":
            parts.append(("aux", "tracker.csv", lambda: "owner,action,due,status\n" + "".join(
                f'"{w}","{a}",{t},open\n' for w, a, t in actions)))
        self.create_files(parts, None)

    @plan("T-20")
    def plan_weekly(self) -> None:
        """A weekly reporting system for a team of five: a template, two filled-in example weeks, an archive
        scheme that makes past weeks easy to find (folders by year and week, or dated names: C), and a guide."""
        from filegram_ray.engine.simulator.domain import RISKS, TEAM, WEEKLY_PARTS, WORK

        zh = self.lang == "zh"
        lang = "zh" if zh else "en"
        team = self.rng.sample(TEAM, 5)
        weeks = [iso_week(self.start_ms, -7), iso_week(self.start_ms, 0)]
        C = self.T["C"]

        def week_path(w: str) -> str:
            y, n = w.split("-W")
            return {"L": f"reports/{y}/W{n}/weekly_report.md", "M": f"reports/{w}_weekly.md",
                    "R": f"{w}_weekly.md"}[C]

        def template() -> str:
            lines = ["# 周报模板" if zh else "# Weekly report template", "",
                     "周次：YYYY-Www　填写人：" if zh else "Week: YYYY-Www · Author:", ""]
            for part in WEEKLY_PARTS[lang]:
                lines += [f"## {part}", "", "- "]
                lines.append("")
            return "\n".join(lines).rstrip() + "\n"

        def example(k: int) -> str:
            rng = self.rng
            lines = [f"# {'周报' if zh else 'Weekly report'} {weeks[k]}", ""]
            for part in WEEKLY_PARTS[lang][:3]:
                lines += [f"## {part}", ""]
                per = max(1, round(self.lerp("B", 2.6, 1.4, 1.0) * self.effort))  # items a person reports (B)
                for who in team[: 3 if self.T["B"] == "R" else 5]:
                    pool = RISKS[lang] if part == WEEKLY_PARTS[lang][2] else WORK[lang]
                    items = rng.sample(pool, min(per, len(pool)))
                    lines.append(f"- {who}{'：' if zh else ': '}{('；' if zh else '; ').join(items)}")
                lines.append("")
            return "\n".join(lines).rstrip() + "\n"

        def guide() -> str:
            lines = ["# 周报使用说明" if zh else "# How to use the weekly reports", "",
                     (f"团队成员：{'、'.join(team)}。" if zh else f"Team: {', '.join(team)}."), "",
                     "## 每周" if zh else "## Every week", "",
                     ("- 周五复制模板，按各部分填写。" if zh else "- On Friday copy the template and fill in each part."),
                     (f"- 保存为 `{week_path('YYYY-Www')}`。" if zh else f"- Save it as `{week_path('YYYY-Www')}`."),
                     "", "## 查找往期" if zh else "## Finding past weeks", "",
                     ({"L": "按年份和周次的文件夹浏览。", "M": "在 reports/ 中按文件名中的周次排序即可。",
                       "R": "文件名以周次开头，按名称排序即按时间排序。"}[C] if zh else
                      {"L": "Browse the folders by year and week.", "M": "Sort reports/ by name: the week number leads.",
                       "R": "Names start with the week, so sorting by name sorts by time."}[C])]
            return "\n".join(lines) + "\n"

        n = self.n_files()
        parts: list[tuple[str, str, Callable[[], str]]] = []
        if n == 1:
            parts.append(("main", self.name("main", ".md"), lambda: guide() + "\n" + template().replace("# ", "## ", 1)
                          + "\n" + example(0).replace("# ", "## ", 1) + "\n" + example(1).replace("# ", "## ", 1)))
            self.create_files(parts, None)
            return
        parts.append(("main", "template.md", template))
        for k in (0, 1):
            path = week_path(weeks[k])
            folder, name = str(PurePosixPath(path).parent), PurePosixPath(path).name
            parts.append(("main", name, lambda k=k: example(k)))
            parts[-1] = ("main", name, parts[-1][2])
            self.week_folders = getattr(self, "week_folders", []) + [folder if folder != "." else ""]
        self.create_weekly(parts, ("README.md" if n > 2 else "guide.md", guide), week_path, weeks)

    def create_weekly(self, parts: list[tuple[str, str, Callable[[], str]]], guide: tuple[str, Callable[[], str]],
                      week_path: Callable[[str], str], weeks: list[str]) -> None:
        """T-20: the template and guide where C puts outputs, the example weeks in the archive scheme."""
        self.lay = self.layout()
        writes: list[Any] = []
        plan_files = self.scratch_steps(writes)
        written: list[str] = []
        writes.insert(0, lambda: self.setup_dirs(self.lay, aux=False, notes=bool(plan_files)))
        for k, (_role, name, render) in enumerate(parts):
            if k == 0:
                writes.append(lambda n=name, r=render: written.append(self.deliver(n, r)))
            else:
                path = week_path(weeks[k - 1])
                folder = str(PurePosixPath(path).parent)

                def put(path: str = path, folder: str = folder, r: Callable[[], str] = render) -> None:
                    if folder not in ("", "."):
                        self.mkdir(folder)
                    self.write(path, r())
                    written.append(path)
                writes.append(put)
        final: list[Any] = [lambda: written.append(self.deliver(guide[0], guide[1], self.lay["base"] or ""))]
        final.append(lambda: [self.self_revise(w) for w in written[:2]])
        final.append(lambda: self.file_scratch(plan_files, self.lay))
        final.append(self.review_outputs)
        final.append(lambda: self.finish_up(plan_files))
        self.interleave([], writes, final)


def dinner_facts(prompt: str) -> dict[str, str]:
    """The people of the T-04 dinner, from the prompt (``… colleague X …``, ``… Y (heads …) and Z (…)``)."""
    names = re.findall(r"\b([A-Z][a-z]+ [A-Z][a-z]+)\b", prompt)
    names = [n for n in dict.fromkeys(names) if n.split()[0] not in ("South", "Asia", "Produce", "The", "Over",
                                                                     "Sarah") or n == "Sarah Lee"]
    colleague = next((n for n in names if re.search(rf"colleague {n}", prompt)), names[0] if names else "Daniel Chen")
    clients = [n for n in names if n != colleague]
    a = clients[0] if clients else "John Doe"
    b = clients[1] if len(clients) > 1 else "Sarah Lee"
    role_a = re.search(rf"{a} \(([^)]+)\)", prompt)
    role_b = re.search(rf"{b} \(([^)]+)\)", prompt)
    return {"colleague": colleague, "client_a": a, "client_b": b, "role_a": role_a.group(1) if role_a else "",
            "role_b": role_b.group(1) if role_b else ""}


def dinner_points(d: dict[str, str], zh: bool) -> list[str]:
    if zh:
        return [f"{d['client_a']}认可我们对东南亚宏观趋势的判断。", "客户对即将推出的区域科技基础设施基金感兴趣，希望看到资料。",
                f"{d['client_b']}问到 ESG 如何纳入投资流程。", "双方提出可以合写一份白皮书。"]
    return [f"{d['client_a']} ({d['role_a'] or 'client'}) praised our view on South-East Asian macro trends.",
            "Both showed interest in the upcoming regional tech infrastructure fund and asked for material.",
            f"{d['client_b']} ({d['role_b'] or 'client'}) asked how ESG considerations enter the investment process.",
            "A joint whitepaper was floated; we agreed to propose an outline."]


def follow_up_email(d: dict[str, str], who: str, zh: bool, tone: str) -> str:
    name = d[who]
    first = name.split()[0]
    if zh:
        body = ("感谢昨晚的交流。随信附上我们对东南亚宏观趋势的材料，区域科技基础设施基金的资料包也会在本周内发给您。" if who == "client_a" else
                "感谢您关于 ESG 的提问。我们会整理一份说明，介绍 ESG 如何在研究、筛选和投后管理中落实，并附上白皮书提纲的初步想法。")
        return f"# 邮件草稿：致 {name}\n\n主题：晚餐后续\n\n{first}您好，\n\n{body}\n\n此致\n"
    if who == "client_a":
        body = ("Thank you for last night. As promised, I am attaching our note on South-East Asian macro trends; "
                f"{d['colleague']} will send the regional tech infrastructure fund pack this week.")
        subject = "Follow-up: macro view and the tech infrastructure fund"
    else:
        body = ("Thank you for the question on ESG. We will send a short note on how ESG considerations enter "
                "research, screening and monitoring, together with a first outline for the joint whitepaper.")
        subject = "Follow-up: ESG in our process and the whitepaper"
    greet = f"Hi {first}," if tone in ("friendly", "casual") else f"Dear {name},"
    close = "Best wishes," if tone != "casual" else "Cheers,"
    return f"# Draft e-mail to {name}\n\nSubject: {subject}\n\n{greet}\n\n{body}\n\n{close}\n"


def date_after(start_ms: float, days: int) -> str:
    import time

    return time.strftime("%Y-%m-%d", time.gmtime(start_ms / 1000.0 + days * 86400))


def iso_week(start_ms: float, days: int) -> str:
    import datetime as dt

    d = dt.datetime.fromtimestamp(start_ms / 1000.0 + days * 86400, dt.timezone.utc).date()
    y, w, _ = d.isocalendar()
    return f"{y}-W{w:02d}"
