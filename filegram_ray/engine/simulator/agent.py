"""The persona simulator: a seeded stochastic policy that does one task the way one profile would, acting only
through the engine's tool layer (``EngineSession.call``). No LLM, no network.

Every number below comes from TIER_TARGETS.md (cited per constant as ``TT §x``); the task-type flows follow TT §5
and FILEGRAM_REFERENCE §6.3. One tool call per iteration (the upstream agent's shape, ref §3.3), so the share of
stripped metadata events resembles the paper's 74 % (ref §0).

Randomness: one ``random.Random`` seeded from SHA-256(master seed, profile id, task id) drives every choice.
Scratch files are fixed per workspace kind (:meth:`PersonaAgent.scratch_plan`), so they are identical across E
tiers and unaffected by an E perturbation (TT §2.5).

Behaviour carries the profile: each tier acts in every task type where the task allows it (TT §2), with
counts that stay steady from task to task — E curates the workspace's planted clutter (:meth:`curate`), C decides
where outputs go and moves them into place (:meth:`layout`), D revises organize notes too, A reviews its own
outputs in an empty workspace — so one session shows the tier and a perturbed session stands out.

Clock: the session's simulated clock advances by thinking time per iteration (rhythm-dependent), reading time
proportional to the read output (0.5 ms/char) and writing time proportional to the written content
(2.5 ms/char ≈ 100 tokens/s); phased work adds a planning pause before the first write and a review pause at the
end (TT §2.5 rhythm texture).

Layout: this module holds the agent's state, its tool layer and the content / revision flows;
the concerns live in mixins that :class:`PersonaAgent` composes — reading (:mod:`.reading`), writing outputs
(:mod:`.outputs`), edits and repairs (:mod:`.editing`), organizing files and folders (:mod:`.organizing`) —
with the file kinds in :mod:`.filetypes` and the text helpers in :mod:`.textops` (re-exported here).
"""

from __future__ import annotations

import random
import re
from pathlib import PurePosixPath
from typing import Any

from filegram_ray.engine.simulator.editing import EditingMixin
from filegram_ray.engine.simulator.filetypes import (
    CLUTTER,
    DOC_EXT,
    EDITABLE_EXT,
    FAMILY,
    FAMILY_ZH,
    MEDIA_EXT,
    TEMP_EXT,
    clutter_category,
)
from filegram_ray.engine.simulator.genres import document
from filegram_ray.engine.simulator.knowledge import Knowledge
from filegram_ray.engine.simulator.notebook import Notebook
from filegram_ray.engine.simulator.organizing import OrganizingMixin
from filegram_ray.engine.simulator.outputs import OutputMixin
from filegram_ray.engine.simulator.persona import Persona, derive_seed
from filegram_ray.engine.simulator.reading import ReadingMixin
from filegram_ray.engine.simulator.tasks import (
    PLANS,
    CreatePlansMixin,
    OrganizePlansMixin,
    ReviewPlansMixin,
    RevisionPlansMixin,
    TaskPlansMixin,
)
from filegram_ray.engine.simulator.tendency import (
    acting_tier,
    lerp,
    poisson,
    profile_tendency,
    session_effort,
    session_positions,
)
from filegram_ray.engine.simulator.textops import (
    condense_line,
    condensed_text,
    parse_listing,
    repaired_text,
    revise_line,
)
from filegram_ray.engine.simulator.writer import chart_figures, csv_text

__all__ = [
    "AGENT_VERSION", "CLUTTER", "DOC_EXT", "EDITABLE_EXT", "FAMILY", "FAMILY_ZH", "MEDIA_EXT", "TASK_RULES",
    "TEMP_EXT", "PersonaAgent", "clutter_category", "condense_line", "condensed_text", "parse_listing",
    "repaired_text", "revise_line",
]

AGENT_VERSION = "persona-simulator/10"  # 3: tendencies, motivated actions, extractive outputs; 4: B char budgets;
# 5: D offsets narrower; bulleted sentences and DOCX/Markdown table rows are facts; block edits in plain-text files;
# 6: a session's writing effort; B-L auxiliaries in revision and organize tasks; 7: A and C session spreads wider,
# C's profile offset narrower; 8: A's profile offset narrower; 9: task plans from the bundle's truth (tasks.py),
# outputs written from statements read (knowledge.py, genres.py), no tool text in files, one operation per command;
# 10: D's usual edit follows its acting tier, A and C back to the common spread, B's session spread narrower and
# its budgets further apart, a session acting B-R keeps F-L's CSV at 0.4; working outlines, logs and issue reports
# follow B

#: Task-specific constraints that win over persona rules (TT conventions; ref §6.3).
TASK_RULES: dict[str, dict[str, Any]] = {
    "T-16": {"max_lines": 30},                       # ≤ 30-line urgent_briefing.md
    "T-09": {"no_new_files": True},                   # edit in place; optional revision notes only
    "T-05": {"flat_allowed": True},                   # C-R may keep everything in the root
    "T-18": {"reorg": ("reference", "operations")},  # final reorganisation
    "T-29": {"index_file": True},                     # index/database file allowed under F-M
}


class PersonaAgent(ReadingMixin, OutputMixin, EditingMixin, OrganizingMixin, TaskPlansMixin, ReviewPlansMixin,
                   RevisionPlansMixin, OrganizePlansMixin, CreatePlansMixin):
    """Runs one trajectory.

    Args:
        sess: an ``EngineSession`` (started and finished by :meth:`run`).
        task: a task object with ``task_id``, ``type``, ``name``/``name_en``, ``prompt_en``/``prompt_zh``.
        persona: the resolved :class:`Persona` (perturbation already applied).
        seed: master seed.
        chart_format: ``"svg"`` (text, 600–1,500 chars, TT §2.6) or ``"png"`` (matplotlib Agg; needs an engine
            whose ``write`` accepts bytes).
    """

    def __init__(self, sess: Any, task: Any, persona: Persona, seed: int, *, chart_format: str = "svg",
                 facts: list[dict[str, Any]] | None = None):
        self.sess, self.task, self.p = sess, task, persona
        self.tid = str(task.task_id)
        self.ttype = str(task.type)
        self.rng = random.Random(derive_seed(seed, persona.profile_id, self.tid))
        self.chart_format = chart_format
        self.rules = TASK_RULES.get(self.tid, {})
        self.nb = Notebook()
        self.kn = Knowledge()               # what the session understood of what it read (knowledge.py)
        self.facts: list[dict[str, Any]] = list(facts or [])  # what the bundle generator planted (bundle.json)
        self.n_lines: dict[str, int] = {}   # line counts of files read, as the read tool reported them
        self.seen_lines: dict[str, dict[int, str]] = {}  # the lines of each file shown so far, by number
        # The session acts where its drawn position falls (tendency.py), not the profile's tier itself.
        shifted = persona.perturbation["dimension"] if persona.perturbation else None
        self.pos = session_positions(persona.tiers, profile_tendency(persona.profile_id, seed), seed,
                                     persona.profile_id, self.tid, shifted)
        self.T = {d: acting_tier(v) for d, v in self.pos.items()}
        self.effort = session_effort(seed, persona.profile_id, self.tid)
        self.lang = persona.lang
        self.files: list[str] = []          # workspace files (relative), listing order
        self.dirs: list[str] = []           # workspace folders (relative)
        self.own: dict[str, str] = {}       # own text outputs: relpath -> current content
        self.own_order: list[str] = []
        self.full_read: set[str] = set()
        self.view: dict[str, int] = {}
        self.created_dirs: list[str] = []
        self.changes: list[tuple[str, str, str]] = []  # (path, old text, new text) of each edit made
        self.moved: list[tuple[str, str]] = []  # workspace files moved or renamed (not the agent's own)
        self.removed: list[str] = []  # workspace files deleted (not the agent's own)
        self.copies: set[str] = set()  # files the session made with cp (backups, archived copies)
        self.listed: set[str] = set()  # folders whose listing the session has in front of it (organizing.py)
        self.habit: str | None = None  # this session's usual way of changing a file (tasks.edit_mode)
        self.backed_up: set[str] = set()  # files copied before their first change (tasks.py keep_version)
        self.lay: dict[str, str] = {}  # where this session's outputs go (outputs.layout), set by the flow
        self.spare: list[str] = []  # lines the persona knows and may add in a revision (empty workspaces)
        self.ctx_chars = 0
        self.wrote_any = False
        self.start_ms = float(getattr(sess, "clock_ms", 0.0))
        self.topic_en = str(getattr(task, "name_en", "") or self.tid)
        self.topic_zh_full = re.sub(r"[^\w\u4e00-\u9fff]", "", str(getattr(task, "name", "") or ""))
        self.topic_zh = self.topic_zh_full[:10]  # file and folder names only; titles use the whole name
        prompt = task.prompt(self.lang) if callable(getattr(task, "prompt", None)) else (
            getattr(task, f"prompt_{self.lang}", "") or getattr(task, "prompt_en", ""))
        self.prompt = str(prompt)
        self.prompt_en = str(getattr(task, "prompt_en", "") or self.prompt)
        # a task that asks to shorten (T-09 "cut it down to fewer than 800 words") is served by cuts, not repairs
        self.condense = bool(re.search(r"\b(cut|shorten|compress|condense|trim|fewer than|too long)\b",
                                       self.prompt_en, re.IGNORECASE))
        think = {"phased": (3500, 7000), "steady": (2500, 5000), "bursty": (900, 2600)}
        self.think_range = think.get(persona.rhythm, think["steady"])

    # ------------------------------------------------------------------ tool layer
    def call(self, name: str, **kwargs: Any) -> Any:
        """One iteration with one tool call; advances the simulated clock (module docstring)."""
        self.sess.advance(self.rng.randint(*self.think_range))
        arg_chars = sum(len(str(v)) for v in kwargs.values())
        with self.sess.iteration(input_tokens=2000 + self.ctx_chars // 4, output_tokens=40 + arg_chars // 4):
            res = self.sess.call(name, **kwargs)
            out = str(getattr(res, "output", "") or "")
            self.ctx_chars += len(out) + arg_chars
            if name == "read":
                self.sess.advance(200 + len(out) // 2)
            elif name in ("write", "edit", "multiedit"):
                self.sess.advance(300 + int(arg_chars * 2.5))
            else:
                self.sess.advance(150 + len(out) // 20)
        return res

    def lerp(self, dim: str, at_l: float, at_m: float, at_r: float) -> float:
        """A mean that moves continuously with this session's position on ``dim`` (tendency.lerp)."""
        return lerp(self.pos[dim], at_l, at_m, at_r)

    def count(self, dim: str, at_l: float, at_m: float, at_r: float, lo: int = 0, hi: int = 99) -> int:
        """A Poisson count whose mean follows the session's position on ``dim``, clipped to [lo, hi]."""
        return max(lo, min(hi, poisson(self.rng, self.lerp(dim, at_l, at_m, at_r))))

    def chance(self, dim: str, at_l: float, at_m: float, at_r: float) -> bool:
        """True with a probability that follows the session's position on ``dim``."""
        return self.rng.random() < self.lerp(dim, at_l, at_m, at_r)

    def bash(self, *commands: str) -> Any:
        return self.call("bash", command=" && ".join(commands))

    def _rel(self, path: str) -> str:
        root = str(self.sess.sandbox_path).rstrip("/") + "/"
        path = path.strip()
        path = path.removeprefix(root)
        m = re.match(r"^/sandbox/[^/]+/(.*)$", path)
        if m:
            path = m.group(1)
        return path.lstrip("./") if path.startswith("./") else path

    # ------------------------------------------------------------------ rhythm
    def interleave(self, reads: list[Any], writes: list[Any], final: list[Any]) -> None:
        """Order reading and writing thunks by rhythm (TT §2.5): phased = all reads, a planning pause, writes,
        a review pause; steady = 2–3 reads then one write; bursty = first write after ≤ 3 reads, then bursts.
        A-L overrides: no write before the reading pass is done (TT §2.1 A-L order of actions)."""
        rhythm = self.p.rhythm if self.T["A"] != "L" else "phased"
        reads, writes = list(reads), list(writes)
        if rhythm == "phased" or not writes:
            for r in reads:
                r()
            self.sess.advance(self.rng.randint(15000, 40000))
            for w in writes:
                w()
        elif rhythm == "steady":
            while reads or writes:
                for _ in range(min(len(reads), self.rng.randint(2, 3))):
                    reads.pop(0)()
                if writes:
                    writes.pop(0)()
        else:
            first = True
            while reads or writes:
                k = self.rng.randint(1, 3) if first else self.rng.randint(3, 6)
                for _ in range(min(len(reads), k)):
                    reads.pop(0)()
                for _ in range(min(len(writes), 1 if first else self.rng.randint(1, 2))):
                    writes.pop(0)()
                first = False
        for f in final:
            f()
        if self.T["A"] == "R" and self.files:  # A-R checks the result with one more listing (TT §2.1 browses 3–6)
            self.ls(".")
        if self.p.rhythm == "phased":
            self.sess.advance(self.rng.randint(8000, 20000))

    # ------------------------------------------------------------------ the flows
    def run(self) -> None:
        """Do the task (dispatch on task type, ref §6.3 / TT §5), then finish the session."""
        self.sess.start()
        if any(p.is_file() for p in self.sess.sandbox_path.rglob("*")):
            self.perceive()
        else:  # an empty workspace (T-03/T-04/T-20) shows no consumption at all (TIER_TARGETS §5)
            self.files, self.dirs = [], []
        if self.tid in PLANS and (self.files or self.ttype == "create"):
            PLANS[self.tid](self)  # the task's own plan (tasks.py)
        elif self.ttype == "organize":
            self.flow_organize()
        elif self.ttype in ("iterate", "maintain"):
            self.flow_revise()
        else:
            self.flow_content()
        self.sess.finish(completed=True)

    def scratch_plan(self) -> list[tuple[str, str]]:
        """Scratch files (kind, ext), the same in every E tier and every session (TT §2.5: E decides only their
        fate). Every session drafts an outline first; a non-empty workspace brings its own clutter for curation
        (``workspace.scenarios._plant_clutter``), while in an empty workspace the session also keeps a temporary
        working buffer, so E-M has a temporary file to remove there too. Fixed counts keep the E features of a
        profile's sessions steady, so a shifted session stands out."""
        if self.rules.get("no_new_files"):  # T-09: no new file but the optional notes (the task wins, TT)
            return []
        if self.files:
            return [("outline", ".md")]
        return [("scratch", ".tmp"), ("outline", ".md")]

    def prescribed_names(self) -> list[str]:
        names = re.findall(r"\b([A-Za-z0-9_\-]+\.(?:md|csv|txt|json))\b", self.prompt_en)
        existing = {PurePosixPath(f).name for f in self.files}
        out: list[str] = []
        for n in names:
            if n not in existing and n not in out:
                out.append(n)
        return out

    def auxiliaries(self, folder: str, index_folder: str | None = None) -> list[tuple[str, str]]:
        """The B-L auxiliaries of this session's deliverable (TT §2.2 B-L: ≥ 3 output files per task, in every task
        type: a data appendix and a reference list beside the main file, plus a README/index where ``index_folder``
        is given and C is not R), each drawn with a chance that follows the B position (0.95 / 0.2 / 0 at L / M / R;
        the index 0.7 / 0 / 0; ours). (kind, relpath) pairs; none for a session acting B-M or B-R above
        position 0.8, and none where the task forbids new files (T-09)."""
        if self.rules.get("no_new_files") or not (self.T["B"] == "L" or self.pos["B"] < 0.8):
            return []
        aux: list[tuple[str, str]] = []
        if self.chance("B", 0.95, 0.2, 0.0):
            aux.append(("appendix", self.join(folder, self.name("appendix", ".md", 2))))
        if self.chance("B", 0.95, 0.2, 0.0):
            aux.append(("references", self.join(folder, self.name("references", ".md", 3))))
        if index_folder is not None and self.T["C"] != "R" and self.chance("B", 0.7, 0.0, 0.0):
            aux.append(("index", self.join(index_folder, self.name("index", ".md", 4))))
        return aux

    def flow_content(self, revision_outputs: bool = False) -> None:
        """Understand / synthesize / create: read (A), write the deliverable set (B, C, F), self-revise (D),
        curate own scratch files (E)."""
        lay = self.lay = self.layout()
        B = self.T["B"]
        reads = self.reading_actions()
        prescribed = self.prescribed_names()
        main_name = prescribed[0] if prescribed else self.name("main", ".md")
        plan: list[tuple[str, str]] = []  # (kind, relpath)
        writes: list[Any] = []
        writes.append(lambda: self.setup_dirs(lay, aux=bool(aux), notes=bool(plan)))
        if self.p.error_handling == "defensive" and self.T["A"] != "L":
            writes.append(lambda: self.ls("."))
        for kind, ext in self.scratch_plan():
            rel = self.join(lay["scratch"], self.name(kind, ext))
            plan.append((kind, rel))
            writes.append(lambda k=kind, r=rel: self.write(r, self.render(k)))
        fig_refs: list[tuple[int, str]] = []
        want_csv, want_chart = self.visual_plan()
        if want_csv:
            csv_rel = self.join(lay["fig"], ("fig_" if not lay["fig"] else "") + self.name("csv", ".csv"))
            writes.append(lambda: self.write(csv_rel, csv_text(chart_figures(self.kn))))
        if want_chart:
            ext = ".png" if self.chart_format == "png" else ".svg"
            chart_rel = self.join(lay["fig"], ("fig_" if not lay["fig"] else "") + self.name("chart", ext))
            fig_refs.append((1, chart_rel))
            writes.append(lambda: self.write(chart_rel, self.chart(self.topic())))
        aux = self.auxiliaries(lay["aux"], lay["base"] or lay["aux"])
        if B == "M" and self.pos["B"] >= 0.8 and (self.p.a("documentation") == "comprehensive"
                                                  or "max_lines" in self.rules):
            # p9's comprehensive documentation, or a task that caps the main file (T-16: ≤ 30 lines): a balanced
            # writer moves the detail into one supporting file instead of dropping it (TT §2.2 B-M: 1–2 files)
            aux.append(("references", self.join(lay["aux"], self.name("references", ".md", 2))))
        for extra in prescribed[1:2]:
            if B != "R":
                aux.append(("log", self.join(lay["aux"], extra)))
        for kind, rel in aux:
            writes.append(lambda k=kind, r=rel: self.write(r, self.render(k)))
        # The main deliverable: drafted in the root and moved into place when done under C-L and C-M (TT §2.3:
        # C-L puts files in place with mv; C-M files 0–3 things), so files_moved keeps the tier order L > M > R
        # on average; whether this session drafts in the root first is drawn (0.85 / 0.6 / 0.2, ours).
        draft_in_root = bool(lay["main"]) and self.chance("C", 0.85, 0.6, 0.2)
        main_tmp = main_name if draft_in_root else self.join(lay["main"], main_name)
        main_final = self.join(lay["main"], main_name)

        def write_main() -> None:
            spec = self.doc_spec("main", self.title("main"))
            spec.figure_refs = list(fig_refs)
            text = document(self.kn, spec, self.rng, self.scheme())
            if "max_lines" in self.rules:  # a hard cap the task sets (T-16: ≤ 30 lines): whole lines, none after
                lines = text.rstrip("\n").split("\n")[: self.rules["max_lines"] - 2]
                while lines and (not lines[-1].strip() or lines[-1].startswith(("#", "|"))):
                    lines.pop()
                text = "\n".join(lines) + "\n"
            self.write(main_tmp, text)

        writes.append(write_main)
        final: list[Any] = []
        final.append(lambda: self.self_revise(main_tmp))
        if main_tmp != main_final:
            final.append(lambda: self.mv([(main_tmp, main_final)]))
        final.append(lambda: self.file_scratch(plan, lay))
        if self.T["C"] == "L":
            final.append(lambda: self.readmes(lay))
        if self.p.error_handling == "defensive":
            final.append(lambda: self.read_back(main_final))
        if not self.files:
            final.append(self.review_outputs)
        final.append(lambda: self.curate(plan))
        self.interleave(reads, writes, final)

    # ------------------------------------------------------------------ revision tasks (iterate / maintain)
    def flow_revise(self) -> None:
        """Iterate / maintain: read (A), change existing files per D (edits / backups / overwrites), write the
        task's notes file per B where the C tier puts outputs (C-L: moved into the topic tree; C-M: ``notes/``),
        F-L visuals, curate clutter and scratch per E; T-18 ends in a reorganisation."""
        reads = self.reading_actions(budget_scale=0.8)
        targets = self.edit_targets()
        lay = self.lay = self.layout()
        C = self.T["C"]
        notes_ok = not (self.rules.get("no_new_files") and self.T["B"] == "R")
        want_csv, want_chart = self.visual_plan() if not self.rules.get("no_new_files") else (False, False)
        visuals = want_csv or want_chart
        writes: list[Any] = []
        plan: list[tuple[str, str]] = []
        if notes_ok or visuals:
            writes.append(lambda: self.setup_dirs(lay, aux=False, notes=bool(plan)))
        for kind, ext in self.scratch_plan():
            rel = self.join(lay["scratch"] if notes_ok or visuals else "", self.name(kind, ext))
            plan.append((kind, rel))
            writes.append(lambda k=kind, r=rel: self.write(r, self.render(k)))
        writes.append(lambda: self.revise_files(targets))
        final: list[Any] = []
        if notes_ok:
            names = self.prescribed_names()
            note = names[0] if names else self.name("log", ".md")
            note_tmp = note if lay["main"] and self.chance("C", 0.85, 0.6, 0.2) else self.join(lay["main"], note)
            note_final = self.join(lay["main"], note)
            final.append(lambda: self.write(note_tmp, self.render_log()))
            if note_tmp != note_final:
                final.append(lambda: self.mv([(note_tmp, note_final)]))
            # B-L: the appendix and references beside the note, in the note's folder (no folder of their own, so
            # C's folder counts do not follow B)
            for kind, rel in self.auxiliaries(lay["main"]):
                final.append(lambda k=kind, r=rel: self.write(r, self.render(k)))
        pre = "" if lay["fig"] else "fig_"
        if want_csv:
            final.append(lambda: self.write(self.join(lay["fig"], pre + self.name("csv", ".csv")),
                                            csv_text(chart_figures(self.kn))))
        if want_chart:
            ext = ".png" if self.chart_format == "png" else ".svg"
            final.append(lambda: self.write(self.join(lay["fig"], pre + self.name("chart", ext)),
                                            self.chart(self.topic())))
        if notes_ok or visuals:
            final.append(lambda: self.file_scratch(plan, lay))
        if C == "L" and (notes_ok or visuals):
            final.append(lambda: self.readmes(lay))
        if self.rules.get("reorg"):
            final.append(lambda: self.reorganise(self.rules["reorg"]))
        final.append(lambda: self.curate(plan))
        self.interleave(reads, writes, final)
