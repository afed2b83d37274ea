"""The persona simulator: a seeded stochastic policy that does one task the way one profile would, acting only
through the engine's tool layer (``EngineSession.call``). No LLM, no network.

Every number below comes from TIER_TARGETS.md (cited per constant as ``TT §x``); the task-type flows follow TT §5
and FILEGRAM_REFERENCE §6.3. One tool call per iteration (the upstream agent's shape, ref §3.3), so the share of
stripped metadata events resembles the paper's 74 % (ref §0).

Randomness: one ``random.Random`` seeded from SHA-256(master seed, profile id, task id) drives every choice.
Scratch files are fixed per workspace kind (:meth:`PersonaAgent.scratch_plan`), so they are identical across E
tiers and unaffected by an E perturbation (TT §2.5).

Issue #16 (behaviour must carry the profile): each tier acts in every task type where the task allows it, with
counts that stay steady from task to task — E curates the workspace's planted clutter (:meth:`curate`), C decides
where outputs go and moves them into place (:meth:`layout`), D revises organize notes too, A reviews its own
outputs in an empty workspace — so one session shows the tier and a perturbed session stands out.

Clock: the session's simulated clock advances by thinking time per iteration (rhythm-dependent), reading time
proportional to the read output (0.5 ms/char) and writing time proportional to the written content
(2.5 ms/char ≈ 100 tokens/s); phased work adds a planning pause before the first write and a review pause at the
end (TT §2.5 rhythm texture).
"""

from __future__ import annotations

import math
import random
import re
import shlex
from collections import OrderedDict
from pathlib import PurePosixPath
from typing import Any

from filegram_ray.engine.simulator.naming import make_name, topic_tokens
from filegram_ray.engine.simulator.notebook import Notebook, strip_line_numbers
from filegram_ray.engine.simulator.persona import Persona, derive_seed
from filegram_ray.engine.simulator.tendency import (
    acting_tier,
    lerp,
    poisson,
    profile_tendency,
    session_positions,
)
from filegram_ray.engine.simulator.writer import (
    DocSpec,
    chart_figures,
    compose,
    csv_text,
    png_chart,
    svg_chart,
)

AGENT_VERSION = "persona-simulator/3"  # 3: tendencies, motivated actions, extractive outputs (issue #28)

#: Extensions the read tool turns into text (extractors) — ref §1.1; media need an annotation (no event otherwise).
DOC_EXT = {".md", ".txt", ".csv", ".json", ".eml", ".ics", ".docx", ".pdf", ".xlsx", ".pptx", ".yaml", ".yml",
           ".log", ".html", ".xml", ".tsv", ".rst"}
MEDIA_EXT = {".png", ".jpg", ".jpeg", ".gif", ".svg", ".mp3", ".wav", ".m4a", ".mp4", ".mov", ".webm", ".avi"}
EDITABLE_EXT = {".md", ".txt"}
FAMILY = {
    "documents": {".pdf", ".docx", ".doc", ".pptx", ".md", ".txt", ".rst"},
    "communications": {".eml", ".ics", ".msg"},
    "data": {".csv", ".xlsx", ".json", ".tsv", ".yaml", ".yml", ".xml"},
    "images": {".png", ".jpg", ".jpeg", ".gif", ".svg"},
    "audio": {".mp3", ".wav", ".m4a"},
    "video": {".mp4", ".mov", ".webm", ".avi"},
}
FAMILY_ZH = {"documents": "文档资料", "communications": "邮件日程", "data": "数据表格", "images": "图片素材",
             "audio": "音频录音", "video": "视频文件", "misc": "其他杂项"}
TEMP_EXT = {".tmp", ".temp", ".bak", ".swp", ".swo", ".pyc", ".o", ".log"}  # ref §3.4 was_temporary
#: Workspace clutter by category, recognised by name the way a person would (issue #16; TIER_TARGETS §2.5 "what
#: gets deleted"): temporary/autosave files, duplicates, superseded or worthless leftovers. Matches the clutter the
#: seed stage plants (``workspace.scenarios._plant_clutter`` / ``_plant_junk``). Checked in this order.
CLUTTER: tuple[tuple[str, re.Pattern], ...] = (
    ("temp", re.compile(r"(\.tmp$|\.temp$|\.swp$|\.swo$|\.bak$|~$|^~|^\.~lock)", re.IGNORECASE)),
    ("duplicate", re.compile(r"( \(\d+\)\.[^.]+$|[ _]copy(\s?\(\d+\))?\d*\.[^.]+$|副本|final_final)", re.IGNORECASE)),
    ("superseded", re.compile(r"(_old\.[^.]+$|\.old$|\.orig$|_superseded|_obsolete|^untitled)", re.IGNORECASE)),
)


def clutter_category(path: str) -> str | None:
    """``"temp"``, ``"duplicate"``, ``"superseded"`` or None for a workspace path (by its file name)."""
    name = PurePosixPath(path).name
    for cat, rx in CLUTTER:
        if rx.search(name):
            return cat
    return None

#: Task-specific constraints that win over persona rules (TT conventions; ref §6.3).
TASK_RULES: dict[str, dict[str, Any]] = {
    "T-16": {"max_lines": 30},                       # ≤ 30-line urgent_briefing.md
    "T-09": {"no_new_files": True},                   # edit in place; optional revision notes only
    "T-05": {"flat_allowed": True},                   # C-R may keep everything in the root
    "T-18": {"reorg": ("reference", "operations")},  # final reorganisation
    "T-29": {"index_file": True},                     # index/database file allowed under F-M
}

_STOP = {"this", "that", "with", "from", "into", "your", "their", "them", "have", "will", "please", "files",
         "file", "folder", "contains", "write", "which", "what", "about", "each", "more", "than", "some", "also",
         "should", "would", "could", "other", "these", "those", "only", "most", "make", "sure", "there", "where",
         "when", "then", "they", "need", "must", "like", "read", "list", "keep", "create", "document", "documents"}


class PersonaAgent:
    """Runs one trajectory.

    Args:
        sess: an ``EngineSession`` (started and finished by :meth:`run`).
        task: a task object with ``task_id``, ``type``, ``name``/``name_en``, ``prompt_en``/``prompt_zh``.
        persona: the resolved :class:`Persona` (perturbation already applied).
        seed: master seed.
        chart_format: ``"svg"`` (text, 600–1,500 chars, TT §2.6) or ``"png"`` (matplotlib Agg; needs an engine
            whose ``write`` accepts bytes).
    """

    def __init__(self, sess: Any, task: Any, persona: Persona, seed: int, *, chart_format: str = "svg"):
        self.sess, self.task, self.p = sess, task, persona
        self.tid = str(task.task_id)
        self.ttype = str(task.type)
        self.rng = random.Random(derive_seed(seed, persona.profile_id, self.tid))
        self.chart_format = chart_format
        self.rules = TASK_RULES.get(self.tid, {})
        self.nb = Notebook()
        # Issue #28: the session acts where its drawn position falls (tendency.py), not the profile's tier itself.
        shifted = persona.perturbation["dimension"] if persona.perturbation else None
        self.pos = session_positions(persona.tiers, profile_tendency(persona.profile_id, seed), seed,
                                     persona.profile_id, self.tid, shifted)
        self.T = {d: acting_tier(v) for d, v in self.pos.items()}
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

    # ------------------------------------------------------------------ perception
    def perceive(self) -> None:
        """Find the workspace files the way the A tier would: A-L lists the tree with the ``list`` tool (one
        browse, A-L allows 0–2), A-M and A-R glob ``**/*`` (a file-type search; A-M needs ≥ 1, A-R 1–2 globs)."""
        if self.T["A"] == "L":
            res = self.call("list", path=".")
            files, dirs = parse_listing(str(getattr(res, "output", "") or ""))
        elif self.T["A"] == "R":
            files, dirs = self.survey()
        else:
            res = self.call("glob", pattern="**/*", path=".")
            out = str(getattr(res, "output", "") or "")
            files = [ln.strip() for ln in out.splitlines()
                     if ln.strip() and not ln.startswith(("No files", "[")) and not ln.strip().endswith("/")]
            dirs = sorted({"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)})
        self.files = [f for f in files if not f.startswith(".annotation")]
        self.dirs = [d for d in dirs if not d.startswith(".annotation")]

    def survey(self) -> tuple[list[str], list[str]]:
        """A-R: ``ls`` the root and each subfolder (≤ 5, breadth first); entries without an extension are taken
        as folders. A glob completes the picture only when folders were left unlisted (TT §2.1 A-R survey)."""
        files: list[str] = []
        dirs: list[str] = []
        queue = ["."]
        listed = 0
        while queue and listed < 6:
            d = queue.pop(0)
            res = self.bash("ls" if d == "." else f"ls {shlex.quote(d)}")
            listed += 1
            for name in str(getattr(res, "output", "") or "").splitlines():
                name = name.strip().rstrip("/")
                if not name:
                    continue
                rel = name if d == "." else f"{d}/{name}"
                if PurePosixPath(name).suffix:
                    files.append(rel)
                else:
                    dirs.append(rel)
                    queue.append(rel)
        if queue:
            res = self.call("glob", pattern="**/*", path=".")
            for ln in str(getattr(res, "output", "") or "").splitlines():
                ln = ln.strip()
                if ln and not ln.startswith(("No files", "[")) and ln not in files:
                    files.append(ln)
                    parts = ln.split("/")
                    for i in range(1, len(parts)):
                        if "/".join(parts[:i]) not in dirs:
                            dirs.append("/".join(parts[:i]))
        return files, dirs

    @property
    def docs(self) -> list[str]:
        return [f for f in self.files if PurePosixPath(f).suffix.lower() in DOC_EXT]

    @property
    def media(self) -> list[str]:
        return [f for f in self.files if PurePosixPath(f).suffix.lower() in MEDIA_EXT]

    # ------------------------------------------------------------------ reading primitives
    def read(self, rel: str, offset: int = 1, limit: int | None = None) -> str:
        kw: dict[str, Any] = {"file_path": rel}
        if offset != 1:
            kw["offset"] = offset
        if limit is not None:
            kw["limit"] = limit
        res = self.call("read", **kw)
        out = str(getattr(res, "output", "") or "")
        if getattr(res, "ok", False):
            self.view[rel] = self.view.get(rel, 0) + 1
            self.nb.absorb(rel, out)
            if limit is None and offset == 1:
                self.full_read.add(rel)
        return out

    def ls(self, rel: str = ".") -> None:
        self.bash("ls" if rel in (".", "") else f"ls {shlex.quote(rel)}")

    def grep(self, pattern: str) -> list[tuple[str, int]]:
        res = self.call("grep", pattern=pattern, path=".")
        hits = self.nb.absorb_grep(str(getattr(res, "output", "") or ""))
        return [(self._rel(p), n) for p, n in hits]

    def glob(self, pattern: str) -> list[str]:
        res = self.call("glob", pattern=pattern, path=".")
        return [self._rel(ln) for ln in str(getattr(res, "output", "") or "").splitlines() if ln.strip()]

    # ------------------------------------------------------------------ reading strategies (TT §2.1)
    def task_words(self) -> set[str]:
        """Lower-case content words (≥ 4 letters, no stop words) of the task's name and prompt."""
        text = f"{self.topic_en} {self.prompt_en}"
        return {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9]{3,}", text) if w.lower() not in _STOP}

    def relevance(self, files: list[str], hits: dict[str, int] | None = None) -> list[str]:
        """``files`` by relevance to the task (issue #28 item 2): file-name tokens shared with the task words
        (2 each), search hits in the file (1 each, at most 3), a seen clutter file last (−3), plus a small
        seeded jitter (N(0, 0.4)) so equal files are not taken in listing order."""
        words = self.task_words()
        hits = hits or {}
        scored = []
        for f in files:
            toks = {t.lower() for t in re.split(r"[_\-. /]", PurePosixPath(f).stem) if len(t) >= 3}
            sc = 2.0 * sum(any(t.startswith(w[:5]) or w.startswith(t[:5]) for w in words) for t in toks)
            sc += min(3, hits.get(f, 0)) - (3.0 if clutter_category(f) else 0.0) + self.rng.gauss(0.0, 0.4)
            scored.append((-sc, f))
        return [f for _, f in sorted(scored)]

    def name_terms(self) -> list[str]:
        """File-name tokens (≥ 4 letters) that share a stem with the task words, most task-like first; these
        are words the agent has seen in the listing, so a glob for them finds a file."""
        words = self.task_words()
        out: list[str] = []
        for f in self.relevance(self.docs):
            for t in re.split(r"[_\-. /]", PurePosixPath(f).stem):
                if len(t) >= 4 and t.isalpha() and t.lower() not in _STOP and t not in out and \
                        any(t.lower().startswith(w[:5]) or w.startswith(t.lower()[:5]) for w in words):
                    out.append(t)
        return out

    def seen_terms(self, used: set[str]) -> list[str]:
        """Search terms taken from what was read (issue #28 item 2): people's and organisations' names, figure
        labels and content words shared with the task, in that order; every one occurs in a file read, so a
        grep for it matches at least that file."""
        words = self.task_words()
        cands: list[str] = []
        for nm in self.nb.names():
            cands.append(nm.split()[-1])
        for f in self.nb.figures():
            cands += re.findall(r"[A-Za-z]{5,}", f.label)
        for p in self.nb.order:
            for ln in self.nb.sources[p].lines[:20]:
                cands += [w for w in re.findall(r"[A-Za-z]{5,}", ln) if w.lower() in words]
        out: list[str] = []
        for c in cands:
            if c.lower() not in used and c.lower() not in _STOP and c not in out:
                out.append(c)
        return out

    def reading_actions(self, budget_scale: float = 1.0) -> list[Any]:
        """The reading plan as a list of thunks (executed in rhythm order by :meth:`interleave`).

        The acting A tier picks the strategy (TT §2.1); the counts are draws around means that follow the
        session's A position (issue #28 item 1), and the order and the search terms are motivated (item 2):
        files are taken by :meth:`relevance`, globs use file-name words seen in the listing, greps use names,
        figure labels and task words met in files already read, and every search is followed by opening what
        it found."""
        docs, media = self.docs, self.media
        readable = docs + [m for m in media if self.T["F"] == "L" or self.p.thoroughness == "exhaustive"]
        if not readable:
            return []
        tier, rng = self.T["A"], self.rng
        thorough = {"exhaustive": 1.15, "balanced": 1.0, "minimal": 0.8}.get(self.p.thoroughness, 1.0)
        acts: list[Any] = []
        state: dict[str, Any] = {"hits": {}, "queue": [], "read": set(), "used": set()}

        def queued() -> set[str]:
            return {q for q, _ in state["queue"]}

        def search_seen() -> None:
            terms = self.seen_terms(state["used"])
            if not terms:
                return
            term = terms[0]
            state["used"].add(term.lower())
            for f, line in self.grep(term):
                state["hits"][f] = state["hits"].get(f, 0) + 1
                if f not in state["read"] and f in readable and f not in queued():
                    state["queue"].insert(0, (f, line))

        def search_name() -> None:
            terms = [t for t in self.name_terms() if t.lower() not in state["used"]]
            pattern = f"**/*{terms[0]}*" if terms else f"**/*{self.dominant_ext()}"
            if terms:
                state["used"].add(terms[0].lower())
            for f in reversed(self.relevance([f for f in self.glob(pattern) if f in readable])):
                if f not in state["read"] and f not in queued():
                    state["queue"].insert(0, (f, 1))

        def next_file() -> tuple[str, int] | None:
            while state["queue"]:
                f, line = state["queue"].pop(0)
                if f not in state["read"]:
                    return f, line
            rest = [f for f in self.relevance(readable, state["hits"]) if f not in state["read"]]
            return (rest[0], 1) if rest else None

        if tier == "L":
            # Whole-file reads in order of relevance, then revisits of the key files (TT §2.1 A-L). The number
            # read is a draw around 9.5 so the set keeps ≈ 7 reads per trajectory (ref §0); revisits ~
            # Poisson(2.4 at A-L) keep revisit_ratio near 0.2 (band 0.12–0.30).
            n = max(1, min(len(readable), round(rng.gauss(self.lerp("A", 9.5, 7.0, 8.0) * budget_scale
                                                          * thorough, 1.6))))

            def read_next() -> None:
                nxt = next_file()
                if nxt:
                    state["read"].add(nxt[0])
                    self.read(nxt[0])

            grep_at = rng.randrange(2, max(3, n)) if self.chance("A", 0.25, 0.9, 0.2) else -1
            for i in range(n):
                if i == grep_at:  # a person who reads through still looks a name up now and then
                    acts.append(search_seen)
                acts.append(read_next)
            k = self.count("A", 2.4, 0.6, 0.15, hi=4)
            acts.append(lambda k=k: [self.read(f) for f in self.nb.richest(k)])
        elif tier == "M":
            # Search first, then read the windows around the hits; a search before further reads; searches ÷
            # reads ≥ 0.3 on average (TT §2.1 A-M).
            n_search = max(2, self.count("A", 1.5, 4.5, 1.2, hi=8))
            n_reads = max(2, min(len(readable), round(rng.gauss(self.lerp("A", 8.0, 5.0, 6.0) * budget_scale
                                                                 * thorough, 1.3))))
            if self.chance("A", 0.5, 0.35, 0.8):
                acts.append(lambda: self.ls("."))  # a look at the top level (TT §2.1 A-M browses 0–1)

            def read_hit() -> None:
                nxt = next_file()
                if not nxt:
                    return
                f, line = nxt
                state["read"].add(f)
                self.read(f, offset=max(1, line - 12), limit=40)

            acts.append(search_name)
            left = n_search - 1
            for i in range(n_reads):
                acts.append(read_hit)
                if left and (i % 2 == 0 or n_reads - i <= left):
                    acts.append(search_seen)
                    left -= 1
        else:
            # Survey with `ls` (root and subfolders, sometimes with details or by time), a glob, then the first
            # 10–20 lines of many files, most relevant first; no revisit (TT §2.1 A-R).
            subs = [d for d in self.dirs if "/" not in d][:5]
            if len(subs) < 2 or self.chance("A", 0.3, 0.3, 0.5):
                acts.append(lambda: self.bash("ls -la"))
            if len(subs) < 3 and self.chance("A", 0.3, 0.4, 0.7):
                acts.append(lambda: self.bash("ls -lt"))
            if self.chance("A", 0.6, 0.8, 0.75):
                acts.append(search_name)
            n = max(1, min(len(readable), round(rng.gauss(self.lerp("A", 9.0, 7.0, 8.5) * budget_scale
                                                          * thorough, 1.6))))
            head = rng.choice((10, 15, 20))

            def skim() -> None:
                nxt = next_file()
                if nxt:
                    state["read"].add(nxt[0])
                    self.read(nxt[0], limit=head)

            grep_at = rng.randrange(1, max(2, n)) if self.chance("A", 0.3, 0.9, 0.12) else -1
            for i in range(n):
                if i == grep_at:
                    acts.append(search_seen)
                acts.append(skim)
        return acts

    def dominant_ext(self) -> str:
        counts: dict[str, int] = {}
        for f in self.docs or self.files:
            e = PurePosixPath(f).suffix.lower()
            counts[e] = counts.get(e, 0) + 1
        return max(sorted(counts), key=lambda e: counts[e]) if counts else ".md"

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

    def mkdir(self, *paths: str) -> None:
        new = [p for p in paths if p not in self.created_dirs]
        if not new:
            return
        self.bash(*(f"mkdir -p {shlex.quote(p)}" for p in new))
        self.created_dirs += new

    def mv(self, pairs: list[tuple[str, str]]) -> None:
        """``mv`` with full destination paths (TT §1: only ``mv f dir/f`` gives file_move)."""
        for i in range(0, len(pairs), 3):
            chunk = pairs[i:i + 3]
            self.bash(*(f"mv {shlex.quote(a)} {shlex.quote(b)}" for a, b in chunk))
            for a, b in chunk:
                if a not in self.own:
                    self.moved.append((a, b))
                if a in self.own:
                    self.own[b] = self.own.pop(a)
                    self.own_order[self.own_order.index(a)] = b
                if a in self.files:
                    self.files[self.files.index(a)] = b
                # a moved folder takes its files along
                for i, f in enumerate(self.files):
                    if f.startswith(a + "/"):
                        self.files[i] = b + f[len(a):]
                for f in [f for f in self.own_order if f.startswith(a + "/")]:
                    g = b + f[len(a):]
                    self.own[g] = self.own.pop(f)
                    self.own_order[self.own_order.index(f)] = g

    def rm(self, paths: list[str]) -> None:
        if not paths:
            return
        self.bash(*(f"rm {shlex.quote(p)}" for p in paths))
        for p in paths:
            self.own.pop(p, None)
            if p in self.own_order:
                self.own_order.remove(p)
            if p in self.files:
                self.files.remove(p)

    def cp(self, src: str, dst: str) -> None:
        self.bash(f"cp {shlex.quote(src)} {shlex.quote(dst)}")

    # ------------------------------------------------------------------ shapes per tier (TT §2.2, §2.6)
    def doc_spec(self, kind: str, title: str) -> DocSpec:
        B, rng, lang = self.T["B"], self.rng, self.lang
        zh = lang == "zh"
        structure = self.p.structure
        # Issue #28: lengths are log-normal draws (σ = 0.25) around means that follow the session's B position
        # (TT §2.2: B-L main 200–350, B-M 80–150 / English 80–100, B-R 20–60 lines). Chinese lines hold fewer
        # characters (TT §2.2: 18–28 against 30–40), so a Chinese persona writes more lines in every tier, inside
        # the line ranges, for its character counts to reach the same bands as English (issue #28: with extra
        # Chinese lines at B-M only, Chinese B-M and B-R profiles wrote the same totals; measured 2026-12-02).
        wobble = math.exp(rng.gauss(0.0, 0.25))
        if kind == "main":
            lines = max(12, round((self.lerp("B", 265, 90, 30) if not zh else self.lerp("B", 330, 125, 42))
                                  * wobble))
            depth = {"L": 4, "M": 3, "R": 2}[B]
            maxc = {"L": 70, "M": 48, "R": 50}[B] if not zh else {"L": 46, "M": 36, "R": 34}[B]
        elif kind in ("readme", "index"):
            lines = max(4, round((self.lerp("B", 107, 24, 5) if not zh else self.lerp("B", 135, 32, 6)) * wobble))
            depth = {"L": 3, "M": 2, "R": 1}[B]
            maxc = {"L": 50, "M": 45, "R": 30}[B] if not zh else {"L": 34, "M": 30, "R": 18}[B]
        elif kind in ("scratch", "outline"):
            lines, depth, maxc = rng.randint(6, 12), 1, 40 if not zh else 26
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
            # issue #28: table size is a draw whose mean follows F (8 rows at F-L/F-M, 0.3 at F-R; TT §2.6)
            rows = self.count("F", 8.0, 7.0, 0.3, hi=14)
            rows = 0 if rows < 2 else max(rows, 5)
        if kind == "main" and "max_lines" in self.rules:
            rows = min(rows, 5)
        return DocSpec(title=title, lines=lines, max_depth=depth, structure=structure, table_rows=rows,
                       lang=lang, tone=self.p.tone, max_line_chars=maxc,
                       numbered=structure == "hierarchical" and B != "R", topic=self.topic(),
                       closing=kind not in ("scratch", "outline", "readme"))

    def visual_plan(self) -> tuple[bool, bool]:
        """Whether this session writes a CSV data file and a chart (TT §2.6 F-L: 1–3 each; issue #28: drawn,
        with probabilities 0.85 / 0.1 / 0 for the CSV and 0.9 / 0.08 / 0 for the chart at F-L / F-M / F-R)."""
        return self.chance("F", 0.85, 0.1, 0.0), self.chance("F", 0.9, 0.08, 0.0)

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

    def fallback_lines(self) -> list[str]:
        sents = re.split(r"(?<=[.!?。！？])\s*|\n+", self.prompt)
        return [s.strip() for s in sents if len(s.strip()) > 10]

    def render_log(self, spec: DocSpec | None = None) -> str:
        """The task's note of what was done (T-09 "a short file recording what you changed and why"): one line
        per edit (the file and its new wording, or what was cut) and per file moved, then the facts read, to the
        length of the B band."""
        spec = spec or self.doc_spec("log", self.title("log"))
        zh = self.lang == "zh"
        lines = [f"# {spec.title}", ""]
        if self.changes or self.moved:
            lines += ["## 修改内容" if zh else "## Changes", ""]
        for rel, old, new in self.changes:
            name = PurePosixPath(rel).name
            if len(new) < len(old) and old.startswith(new.rstrip()[:20]):
                lines.append(f"- `{name}`：删减为“{new.strip()}”" if zh else f"- `{name}`: cut to “{new.strip()}”")
            else:
                lines.append(f"- `{name}`：改为“{new.strip()}”" if zh else f"- `{name}`: now reads “{new.strip()}”")
        lines += [f"- `{a}` → `{b}`" for a, b in self.moved]
        if len(lines) > 2:
            lines.append("")
        spec.lines = max(0, spec.lines - len(lines))
        body = compose(spec, self.nb, self.rng, self.fallback_lines()).split("\n")[2:] if spec.lines > 6 else []
        return "\n".join(lines + body).rstrip("\n") + "\n"

    def render(self, kind: str, title: str | None = None, spec: DocSpec | None = None) -> str:
        spec = spec or self.doc_spec(kind, title or self.title(kind))
        return compose(spec, self.nb, self.rng, self.fallback_lines())

    # ------------------------------------------------------------------ layout per C tier (TT §2.3)
    def layout(self) -> dict[str, str]:
        """Folders for each output role (``main``, ``aux``, ``fig``, ``scratch``; ``base``/``mid`` = the C-L tree
        levels) per C tier (TT §2.3). C-L: a three-level topic tree; C-M: one short folder for the outputs
        (``reports/``, ``notes/`` in revision tasks), so the tier shows in where the outputs go in every task type
        (issue #16), not only when another dimension asks for a folder. F-L visuals sit beside the report they
        illustrate (no extra folder: the folder count then follows C alone, and the set keeps the paper's ≈ 1.5
        dir_create per trajectory, ref §0); C-R: everything in the root."""
        C = self.T["C"]
        zh = self.lang == "zh"
        if C == "L":
            base = topic_tokens(self.topic_en, 2) if not zh else (self.topic_zh[:6] or "项目")
            if self.p.naming == "short_abbrev":
                base = base.split("_")[0][:10]
            a = f"{base}/analysis" if not zh else f"{base}/分析"
            main = f"{a}/reports" if not zh else f"{a}/报告"
            # Issue #28: how many branches a C-L session builds is drawn, not fixed (sources and working notes
            # get their own branch in most sessions; otherwise they sit one level up in the analysis folder).
            aux = (f"{base}/references/sources" if not zh else f"{base}/参考/来源") \
                if self.chance("C", 0.85, 0.5, 0.2) else a
            notes = (f"{base}/notes/working" if not zh else f"{base}/笔记/工作") \
                if self.chance("C", 0.75, 0.4, 0.1) else ""
            return {"main": main, "aux": aux, "fig": main, "scratch": "", "base": base, "mid": a, "notes": notes}
        if C == "M" and self.chance("C", 1.0, 0.85, 0.1):
            out_dir = "notes" if self.ttype in ("iterate", "maintain") else "reports"
            return {"main": out_dir, "aux": out_dir, "fig": out_dir, "scratch": "", "base": "", "mid": ""}
        return {"main": "", "aux": "", "fig": "", "scratch": "", "base": "", "mid": ""}

    def setup_dirs(self, lay: dict[str, str], aux: bool = True, notes: bool = True) -> None:
        """Create the output folders this session will fill (issue #28: a folder is named for, and made for,
        what goes in it): the main branch, the sources branch only when auxiliaries are written, the notes
        branch only when there are working notes to file."""
        C = self.T["C"]
        if C == "L":
            paths = dict.fromkeys(p for p in (lay["main"], lay["aux"] if aux else "", lay["notes"] if notes else "")
                                  if p)
            for p in paths:  # one mkdir -p per branch: each is one dir_create at depth 3 (TT §1)
                self.mkdir(p)
        elif C == "M":
            self.mkdir(*dict.fromkeys(lay[k] for k in ("main", "fig") if lay[k]))

    def file_scratch(self, plan: list[tuple[str, str]], lay: dict[str, str]) -> None:
        """C-L files its working notes (written in the root while working) into the notes branch of its tree at
        the end, as it files the deliverable (TT §2.3 C-L: put files in place with ``mv``; nothing loose in the
        root)."""
        if self.T["C"] != "L" or not lay.get("notes"):
            return
        pairs = [(rel, f"{lay['notes']}/{PurePosixPath(rel).name}") for _, rel in plan if rel in self.own]
        self.mv(pairs)
        moved = dict(pairs)
        plan[:] = [(k, moved.get(rel, rel)) for k, rel in plan]

    @staticmethod
    def join(folder: str, name: str) -> str:
        return f"{folder}/{name}" if folder else name

    # ------------------------------------------------------------------ the flows
    def run(self) -> None:
        """Do the task (dispatch on task type, ref §6.3 / TT §5), then finish the session."""
        self.sess.start()
        if any(p.is_file() for p in self.sess.sandbox_path.rglob("*")):
            self.perceive()
        else:  # an empty workspace (T-03/T-04/T-20) shows no consumption at all (TIER_TARGETS §5)
            self.files, self.dirs = [], []
        if self.ttype == "organize":
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
        profile's sessions steady, so a shifted session stands out (issue #16)."""
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

    def flow_content(self, revision_outputs: bool = False) -> None:
        """Understand / synthesize / create: read (A), write the deliverable set (B, C, F), self-revise (D),
        curate own scratch files (E)."""
        lay = self.layout()
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
            writes.append(lambda: self.write(csv_rel, csv_text(chart_figures(self.nb))))
        if want_chart:
            ext = ".png" if self.chart_format == "png" else ".svg"
            chart_rel = self.join(lay["fig"], ("fig_" if not lay["fig"] else "") + self.name("chart", ext))
            fig_refs.append((1, chart_rel))
            writes.append(lambda: self.write(chart_rel, self.chart(self.topic())))
        aux: list[tuple[str, str]] = []
        if B == "L" or self.pos["B"] < 0.8:
            # B-L auxiliaries (TT §2.2: ≥ 2, README/index, appendix, references), each drawn (issue #28)
            if self.chance("B", 0.85, 0.2, 0.0):
                aux.append(("appendix", self.join(lay["aux"], self.name("appendix", ".md", 2))))
            if self.chance("B", 0.9, 0.2, 0.0):
                aux.append(("references", self.join(lay["aux"], self.name("references", ".md", 3))))
            if self.T["C"] != "R" and self.chance("B", 0.7, 0.0, 0.0):
                aux.append(("index", self.join(lay["base"] or lay["aux"], self.name("index", ".md", 4))))
        elif B == "M" and (self.p.a("documentation") == "comprehensive" or "max_lines" in self.rules):
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
        # on average; whether this session drafts in the root first is drawn (issue #28).
        draft_in_root = self.T["C"] in ("L", "M") and self.chance("C", 0.85, 0.6, 0.0)
        main_tmp = main_name if draft_in_root else self.join(lay["main"], main_name)
        main_final = self.join(lay["main"], main_name)

        def write_main() -> None:
            spec = self.doc_spec("main", self.title("main"))
            spec.figure_refs = list(fig_refs)
            self.write(main_tmp, compose(spec, self.nb, self.rng, self.fallback_lines()))

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

    def review_outputs(self) -> None:
        """Empty workspace (T-03/T-04/T-20): the agent's own outputs are the only material to consume, so the A
        tier shows in how it reviews them (TT §1: re-reading one's own output is a revisit; issue #16 "wherever
        the task allows it"). A-L reads up to 4 own files whole and re-reads the first (revisit ≈ 0.2); A-M
        greps 3 keywords and reads 2 hit windows (search_ratio 0.6); A-R lists the root and its folders, globs
        the text files once and reads the first 15 lines of 2 files it has not opened (browse_ratio ≥ 0.3)."""
        own = [r for r in self.own_order if r in self.own and PurePosixPath(r).suffix in EDITABLE_EXT]
        if not own:
            return
        A = self.T["A"]
        if A == "L":
            for r in own[:4]:
                self.read(r)
            self.read(own[0])
        elif A == "M":
            words = [w for w in re.findall(r"[A-Za-z]{5,}", self.topic_en) if w.lower() not in _STOP]
            kws = (words + ["summary", "next", "total"])[:3]
            hits: list[tuple[str, int]] = []
            for kw in kws:
                hits += [h for h in self.grep(kw) if h[0] in self.own and h not in hits]
            for f, line in (hits or [(own[0], 1)])[:2]:
                self.read(f, offset=max(1, line - 12), limit=40)
        else:
            self.ls(".")
            for d in [d for d in self.created_dirs if "/" not in d][:2]:
                self.ls(d)
            self.glob("**/*.md")
            fresh = [r for r in own if r not in self.view] or own
            for r in fresh[:2]:
                self.read(r, limit=15)

    def chart(self, title: str) -> str | bytes:
        figs = chart_figures(self.nb)
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
            spec.lines = max(0, spec.lines - len(head))
            body = compose(spec, self.nb, self.rng, self.fallback_lines()).split("\n")[2:] if spec.lines > 6 else []
            self.write(rel, "\n".join(head + body).rstrip("\n") + "\n")

    def read_back(self, rel: str) -> None:
        """Defensive read-back of its own output (TT §4 error_handling=defensive)."""
        if rel in self.own:
            if self.T["A"] == "L":
                self.read(rel)
            else:
                self.read(rel, limit=40)

    # ------------------------------------------------------------------ D: self-revision (TT §2.4)
    def self_revise(self, rel: str) -> None:
        """Revise the agent's own deliverable (TT §2.4; issue #28): the numbers of small edits (≤ 4 lines), block
        edits (a run of bullets rewritten as a paragraph or back) and whole rewrites are Poisson/Bernoulli draws
        whose means follow the session's D position (small: 4.0 / 0.6 / 0.2; block: 0.3 / 1.6 / 0.2; rewrite:
        2 % / 10 % / 60 % at D-L / D-M / D-R), with a ``.bak`` first when the version strategy keeps history."""
        if rel not in self.own:
            return
        n_small = self.count("D", 4.0, 0.6, 0.2, hi=7)
        n_block = self.count("D", 0.3, 1.6, 0.2, hi=3)
        if n_small + n_block and self.p.version != "overwrite" and self.chance("D", 0.9, 0.3, 0.05):
            self.cp(rel, rel + ".bak")
        for _ in range(n_small):
            self.small_edit(rel)
        for _ in range(n_block):
            self.block_edit(rel)
        if self.chance("D", 0.02, 0.1, 0.6):  # one decisive rewrite of the whole file (overwrite, TT §2.4 D-R)
            spec = self.doc_spec("main", self.title("main"))
            self.write(rel, compose(spec, self.nb, self.rng, self.fallback_lines()))

    def _content_lines(self, text: str) -> list[int]:
        lines = text.split("\n")
        counts: dict[str, int] = {}
        for ln in lines:
            counts[ln] = counts.get(ln, 0) + 1
        return [i for i, ln in enumerate(lines) if len(ln.strip()) > 8 and counts[ln] == 1
                and not ln.lstrip().startswith("#") and not ln.startswith("|")]

    def fixes(self) -> list[tuple[str, str, str]]:
        """Inconsistencies found in what was read: ``(label, wrong, right)`` for a figure whose label occurs in
        two sources with different values; the value of a data file (csv/xlsx/json/tsv) wins, else the value
        most sources agree on, else the one read first (issue #28 item 2: a repair fixes what it found)."""
        by_label: dict[str, list[Any]] = {}
        for f in self.nb.figures_all():
            by_label.setdefault(f.label.lower(), []).append(f)
        out: list[tuple[str, str, str]] = []
        for figs in by_label.values():
            raws = list(dict.fromkeys(f.raw for f in figs))
            if len(raws) < 2 or len({f.source for f in figs}) < 2:
                continue
            data = [f for f in figs if PurePosixPath(f.source).suffix.lower() in FAMILY["data"]]
            votes = {r: sum(f.raw == r for f in figs) for r in raws}
            right = data[0].raw if data else max(raws, key=lambda r: (votes[r], -raws.index(r)))
            out += [(figs[0].label, r, right) for r in raws if r != right]
        return out

    def small_edit(self, rel: str) -> bool:
        """Replace 1–2 lines (≤ 4 changed lines, small edit < 10, TT §1 edit size) with a real repair
        (:func:`revise_line`): a figure that disagrees with another source is corrected first; otherwise a
        pseudo-heading, a ``*`` bullet or an over-long sentence is fixed. No fixable line → no edit."""
        text = self.own.get(rel)
        if text is None:
            return False
        fixes = self.fixes()
        lines = text.split("\n")
        fix = condense_line if self.condense else revise_line
        cands = [(i, new) for i in self._content_lines(text) if (new := fix(lines[i], self.lang, fixes))]
        if not cands:
            cands = self.refinements(lines)
        if not cands:
            return False
        first = [c for c in cands if any(w in lines[c[0]] and lab.lower() in lines[c[0]].lower()
                                         for lab, w, _ in fixes)]
        i, new = first[0] if first else self.rng.choice(cands)
        return self.edit(rel, lines[i], new)

    def refinements(self, lines: list[str]) -> list[tuple[int, str]]:
        """Own-output lines that can state a more precise fact: a bullet naming a source whose fact has no
        figure, replaced by an unused figure-bearing fact of the same source (same frame, whole sentences)."""
        text = "\n".join(lines)
        spare: dict[str, list[str]] = {}
        for f in self.nb.facts():
            if f.kind in ("figure", "date") and f.text not in text:
                spare.setdefault(PurePosixPath(f.source).name, []).append(f.text)
        out: list[tuple[int, str]] = []
        for i, ln in enumerate(lines):
            if not ln.lstrip().startswith("- ") or re.search(r"\d", ln):
                continue
            for name, texts in spare.items():
                if name in ln and texts:
                    old = next((f.text for f in self.nb.facts() if f.text in ln), None)
                    if old:
                        out.append((i, ln.replace(old, texts[0], 1)))
                    break
        return out

    def block_edit(self, rel: str) -> bool:
        """Rewrite one section (TT §2.4 D-M: 15–45 changed lines): its bullet list becomes paragraphs of up to
        three sentences, or, in a section without bullets, its paragraphs become bullets (one per sentence).
        Nothing is dropped or added; falls back to :meth:`small_edit` when no section qualifies."""
        text = self.own.get(rel)
        if text is None:
            return False
        lines = text.split("\n")
        heads = [i for i, ln in enumerate(lines) if ln.startswith("## ")] + [len(lines)]
        # a block is one section, or consecutive sections together until they hold ≥ 8 bullets (TT §2.4 D-M:
        # a block edit changes 15–45 lines)
        spans = []
        for k in range(len(heads) - 1):
            j = k + 1
            while j < len(heads) - 1 and sum(1 for ln in lines[heads[k]:heads[j]] if re.match(r"^\s*- ", ln)) < 8:
                j += 1
            spans.append((heads[k] + 1, heads[j]))
        self.rng.shuffle(spans)
        for a, b in spans:
            block = lines[a:b]
            bullets = [ln for ln in block if re.match(r"^\s*- ", ln)]
            paras = [ln for ln in block if ln.strip() and not ln.startswith(("#", "|", " ", "-"))]
            if self.condense and len(bullets) + len(paras) >= 3:
                # cut the section to what matters: the first sentence of each paragraph, the first 3 bullets
                keep_b = set(bullets[:3])
                new_block = [condense_line(ln, self.lang) or ln if ln in paras else ln for ln in block
                             if ln not in bullets or ln in keep_b]
            elif len(bullets) >= 4:
                new_block = self._reflow(block)
            elif len(paras) >= 2:
                split = _SENTENCE
                new_block = []
                for ln in block:
                    if ln in paras:
                        new_block += [f"- {x.strip()}" for x in split.split(ln) if x.strip()]
                    else:
                        new_block.append(ln)
            else:
                continue
            old, new = "\n".join(block), "\n".join(new_block)
            if old.strip() and text.count(old) == 1 and old != new:
                return self.edit(rel, old, new)
        return self.small_edit(rel)

    @staticmethod
    def _reflow(block: list[str]) -> list[str]:
        """``block`` with each run of bullet lines rewritten, in place, as paragraphs of up to three sentences
        (all sentences kept, in order)."""
        out: list[str] = []
        run: list[str] = []

        def flush() -> None:
            if run:
                joiner = "" if re.search(r"[\u4e00-\u9fff]", "".join(run)) else " "
                for j in range(0, len(run), 3):
                    out.extend([joiner.join(run[j:j + 3]), ""])
                run.clear()

        for ln in block:
            if re.match(r"^\s*- ", ln):
                run.append(re.sub(r"^\s*- ", "", ln).strip())
            elif not ln.strip() and run:
                continue
            else:
                flush()
                out.append(ln)
        flush()
        return out

    def edit(self, rel: str, old: str, new: str) -> bool:
        if old == new:
            return False
        res = self.call("edit", file_path=rel, old_string=old, new_string=new)
        if getattr(res, "ok", False):
            self.own[rel] = self.own[rel].replace(old, new, 1)
            self.changes.append((rel, old, new))
            return True
        return False

    # ------------------------------------------------------------------ E: curation of own files (TT §2.5)
    def curate(self, plan: list[tuple[str, str]]) -> None:
        """Curation of the workspace's own clutter and of the agent's scratch files (TT §2.5; issues #16, #28).

        Candidates, in the order a person would let them go: temporary files, duplicates, superseded versions
        (:func:`clutter_category`), then the session's own scratch notes. How many go is a Poisson draw whose
        mean follows the session's E position (:meth:`count`: about 2.6 at E-L, 0.35 at E-M, 0.03 at E-R; TT §2.5
        E-L 1–4, E-M 0–1, E-R 0), so sessions of one tier differ and neighbouring tiers overlap; E-M-like sessions
        reach past temporary files only when the draw asks for more. Every file is inspected first
        (:meth:`inspect`): a person checks what a file is before deleting it (issue #28 item 2)."""
        clutter = [(f, c) for f in self.files if (c := clutter_category(f))]
        order = {"temp": 0, "duplicate": 1, "superseded": 2}
        cands = [f for f, c in sorted(clutter, key=lambda fc: order[fc[1]])]
        cands += [rel for _, rel in plan if rel in self.own]
        n = self.count("E", 2.6, 0.35, 0.03, hi=len(cands))
        doomed = cands[:n]
        if doomed:
            self.inspect(doomed)
            self.rm(doomed)

    def inspect(self, paths: list[str]) -> None:
        """Look at each file before deleting, moving or renaming it (issue #28 item 2): a file read in this
        session or written by the agent is known already; a text file is opened at its first lines (the read is
        not taken into the notes: clutter is not material); anything else is listed with details (``ls -l``,
        one browse per file)."""
        unknown = [p for p in paths if p not in self.view and p not in self.own]
        texts = [p for p in unknown if PurePosixPath(p).suffix.lower() in DOC_EXT | TEMP_EXT]
        for p in texts:
            res = self.call("read", file_path=p, limit=self.rng.choice((5, 8, 10)))
            if getattr(res, "ok", False):
                self.view[p] = self.view.get(p, 0) + 1
        rest = [p for p in unknown if p not in texts]
        if rest:
            self.bash("ls -l " + " ".join(shlex.quote(p) for p in rest))

    # ------------------------------------------------------------------ revision tasks (iterate / maintain)
    def flow_revise(self) -> None:
        """Iterate / maintain: read (A), change existing files per D (edits / backups / overwrites), write the
        task's notes file per B where the C tier puts outputs (C-L: moved into the topic tree; C-M: ``notes/``),
        F-L visuals, curate clutter and scratch per E; T-18 ends in a reorganisation."""
        reads = self.reading_actions(budget_scale=0.8)
        targets = self.edit_targets()
        lay = self.layout()
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
            note_tmp = note if C in ("L", "M") and self.chance("C", 0.85, 0.6, 0.0) else self.join(lay["main"], note)
            note_final = self.join(lay["main"], note)
            final.append(lambda: self.write(note_tmp, self.render_log()))
            if note_tmp != note_final:
                final.append(lambda: self.mv([(note_tmp, note_final)]))
        pre = "" if lay["fig"] else "fig_"
        if want_csv:
            final.append(lambda: self.write(self.join(lay["fig"], pre + self.name("csv", ".csv")),
                                            csv_text(chart_figures(self.nb))))
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

    def edit_targets(self) -> list[str]:
        """The workspace files to change: editable text that is not clutter (a duplicate or an old version is
        not what the task means) and not feedback about it, most relevant first (:meth:`relevance`)."""
        eds = [f for f in self.files if PurePosixPath(f).suffix.lower() in EDITABLE_EXT and not clutter_category(f)]
        skip = re.compile(r"(feedback|review|update|batch|comment)", re.IGNORECASE)
        prim = [f for f in eds if not skip.search(f)] or eds
        n = 1 + self.count("D", 1.0, 0.5, 0.8, hi=2)
        return self.relevance(prim)[:n]

    def load(self, rel: str) -> str | None:
        """Full content of a workspace file through a whole-file read (needed before editing it)."""
        out = self.read(rel)
        lines = strip_line_numbers(out)
        while lines and not lines[-1].strip():
            lines.pop()
        if not lines:
            return None
        return "\n".join(lines)

    def revise_files(self, targets: list[str]) -> None:
        """Change the workspace files the task is about (TT §2.4; issue #28): each target is read whole first,
        then repaired with drawn numbers of small edits (means 3 / 0.7 / 0.15 per file at D-L / D-M / D-R) and
        block edits (0.2 / 1.5 / 0.1), or rewritten as a whole (overwrite; 3 % / 10 % / 75 %). Before the first
        change a history-keeping profile copies to ``.bak`` and an archiving one (C allows folders) to
        ``archive/<stem>_v1``."""
        archived = False
        for n, rel in enumerate(targets):
            text = self.own.get(rel) or self.load(rel)
            if text is None:
                continue
            self.own[rel] = text
            n_small = self.count("D", 3.0, 0.7, 0.15, hi=6)
            n_block = self.count("D", 0.2, 1.5, 0.1, hi=3)
            rewrite = self.chance("D", 0.03, 0.1, 0.75)
            if n_small + n_block + rewrite == 0:
                n_small = 1  # the task asks for a change: at least one
            if self.p.version == "archive_old" and self.T["C"] != "R" and self.chance("D", 0.3, 0.8, 0.1):
                if not archived:
                    self.mkdir("archive")
                    archived = True
                p = PurePosixPath(rel)
                self.cp(rel, f"archive/{p.stem}_v1{p.suffix}")
            elif self.p.version != "overwrite" and self.chance("D", 0.9, 0.3, 0.05):
                self.cp(rel, rel + ".bak")  # backup before the first edit (TT §2.4 D-L; p16/p19 at most one)
            for _ in range(n_small):
                self.small_edit(rel)
            for _ in range(n_block):
                self.block_edit(rel)
            if rewrite:
                self.write(rel, condensed_text(self.own[rel], self.lang) if self.condense
                           else repaired_text(self.own[rel], self.fixes(), self.lang))

    def reorganise(self, tops: tuple[str, ...]) -> None:
        subs = [d for d in self.dirs if "/" not in d]
        if not subs:
            return
        if self.T["C"] == "R":
            return
        self.mkdir(*tops)
        half = max(1, len(subs) // 2)
        pairs = [(d, f"{tops[0] if i < half else tops[1]}/{d}") for i, d in enumerate(subs)]
        self.bash("ls -l " + " ".join(shlex.quote(d) for d in subs))  # look into each folder before moving it
        self.mv(pairs)

    # ------------------------------------------------------------------ organize tasks (TT §2.3 organize row)
    def flow_organize(self) -> None:
        """Organize: read (A, reduced budget), curate clutter and scratch first (E: what is pruned is not
        sorted), sort the rest per C, write the task's note (B) and revise it per D, and per F an index: F-L a
        CSV index plus a chart of the categories, F-M a Markdown-table index and F-R a plain list where the task
        asks for an index (T-29)."""
        reads = self.reading_actions(budget_scale=0.6)
        writes: list[Any] = []
        plan: list[tuple[str, str]] = []
        for kind, ext in self.scratch_plan():
            rel = self.name(kind, ext)
            plan.append((kind, rel))
            writes.append(lambda k=kind, r=rel: self.write(r, self.render(k)))
        final: list[Any] = [lambda: self.curate(plan), self.organise_files]
        names = self.prescribed_names()
        note = names[0] if names else self.name("log", ".md")
        F = self.T["F"]
        index_table = F == "M" and bool(self.rules.get("index_file"))

        def write_note() -> None:
            spec = self.doc_spec("log", self.title("log"))
            if index_table:  # the index carries this session's table (F-M: one table set per deliverable)
                spec.table_rows = 0
            self.write(note, self.render_log(spec))

        final.append(write_note)
        want_csv, want_chart = self.visual_plan()
        if want_csv:
            final.append(lambda: self.write(self.name("index", ".csv"), self.index_csv()))
        if want_chart:
            ext = ".png" if self.chart_format == "png" else ".svg"
            final.append(lambda: self.write(("fig_" if self.T["C"] == "R" else "") + self.name("chart", ext),
                                            self.chart(self.topic())))
        if not want_csv and self.rules.get("index_file"):
            final.append(lambda: self.write(self.name("index", ".md"), self.index_md(table=F == "M")))
        final.append(lambda: self.self_revise(note))
        self.interleave(reads, writes, final)

    def index_csv(self) -> str:
        rows = ["path,kind"] + [f"{f},{PurePosixPath(f).suffix.lstrip('.')}" for f in self.files[:12]]
        return "\n".join(rows) + "\n"

    def index_md(self, table: bool) -> str:
        """An index of the sorted files: a Markdown table (F-M) or a plain bullet list (F-R), ≤ 12 entries."""
        files = self.files[:12]
        head = "# Index" if self.lang == "en" else "# 索引"
        if table:
            rows = ["| path | kind |", "|---|---|"] + [f"| {f} | {PurePosixPath(f).suffix.lstrip('.')} |"
                                                     for f in files]
        else:
            rows = [f"- {f}" for f in files]
        return "\n".join([head, "", *rows]) + "\n"

    def organise_files(self) -> None:
        """Sort every remaining workspace file per C tier (TT §2.3 organize row); clutter that curation kept
        (E-M, E-R) is sorted like any other file, so the C features do not depend on the E tier beyond the
        number of files left."""
        C, zh = self.T["C"], self.lang == "zh"
        keep = list(self.files)
        groups: OrderedDict[str, list[str]] = OrderedDict()
        for f in keep:
            ext = PurePosixPath(f).suffix.lower()
            fam = next((k for k, v in FAMILY.items() if ext in v), "misc")
            groups.setdefault(fam, []).append(f)
        if len(groups) == 1:  # one kind dominates: group by the first token of the stem
            only = next(iter(groups.values()))
            groups = OrderedDict()
            for f in only:
                tok = re.split(r"[_\-. ]", PurePosixPath(f).stem)[0].lower() or "misc"
                groups.setdefault(tok if not tok.isdigit() else "misc", []).append(f)
        pairs: list[tuple[str, str]] = []

        def capped(n: int) -> list[tuple[str, list[str]]]:
            """At most ``n`` groups, the rest merged into one ``misc`` group (keeps folder counts steady)."""
            items = list(groups.items())
            if len(items) <= n:
                return items
            items.sort(key=lambda kv: -len(kv[1]))
            return items[:n - 1] + [("misc", [f for _, fs in items[n - 1:] for f in fs])]

        # Issue #28: a person sorts one kind of file at a time: each group is sorted with this session's
        # probability p_sort, a Beta(0.8·m, 0.8·(1 − m)) draw whose mean m follows the C position (0.9 / 0.7 /
        # 0.4 at C-L / C-M / C-R), and inside a sorted group each file goes with probability 0.9 (a file or two
        # is left where it was). Whole groups and a wide Beta make the number of moves of one organize task vary
        # between sessions of one tier, as people do (issue #28: with per-file draws and a Beta of concentration
        # 1.5, files_moved had task × tier η² 0.79–0.83, above the 0.80 bound, measured 2026-12-02 on two fresh
        # 30-profile sets; with this rule 0.73 / 0.74 on the same seeds, docs/measurements/2026-12-02-validity.md
        # "after, round 3"). Every folder is named for what goes in it.
        mean = self.lerp("C", 0.9, 0.7, 0.4)
        p_sort = self.rng.betavariate(0.8 * mean, 0.8 * (1 - mean))  # this session's share (Beta, mean above)

        def take(fs: list[str]) -> list[str]:
            return [f for f in fs if self.rng.random() < 0.9] if self.rng.random() < p_sort else []

        if C == "L":
            # TT §2.3 organize row, C-L: depth 3, 6–15 folders: <root>/<family>/<file type> for every group.
            root = ("01_organized_archive" if not zh else "01_归档整理") if self.p.naming != "short_abbrev" else "arch"
            dirs = []
            for fam, fs in capped(5):
                moved = take(fs)
                by_ext: OrderedDict[str, list[str]] = OrderedDict()
                split = self.chance("C", 0.7, 0.3, 0.0)  # a third level by file type, or the family folder only
                for f in moved:
                    ext = PurePosixPath(f).suffix.lower().lstrip(".") or "other"
                    by_ext.setdefault(ext if split else "", []).append(f)
                for ext, group in by_ext.items():
                    d = f"{root}/{FAMILY_ZH.get(fam, fam) if zh else fam}" + (f"/{ext}" if ext else "")
                    dirs.append(d)
                    pairs += [(f, f"{d}/{PurePosixPath(f).name}") for f in group]
            self.mkdir(*dirs)
        elif C == "M":
            # C-M: one top-level folder per group, at most 3 (TT §2.3: 1–2 levels, 3–8 folders), named for it.
            dirs = []
            for fam, fs in capped(self.rng.randint(2, 4)):
                moved = take(fs)
                if not moved:
                    continue
                top = FAMILY_ZH.get(fam, fam) if zh else fam
                dirs.append(top)
                pairs += [(f, f"{top}/{PurePosixPath(f).name}") for f in moved]
            self.mkdir(*dirs)
        else:
            if self.rules.get("flat_allowed"):
                # In-place renames: same-parent mv = file_rename (ref §3.4), not a move.
                for f in take(keep)[:6]:
                    p = PurePosixPath(f)
                    new = re.sub(r"[^a-z0-9]+", "_", p.stem.lower()).strip("_")[:12] + p.suffix.lower()
                    if new != p.name and str(p.parent) in (".", ""):
                        pairs.append((f, new))
            else:  # C-R where the task needs folders: the fewest that do the job — the largest group only
                big = max(groups, key=lambda k: len(groups[k])) if groups else "files"
                moved = take(groups.get(big, keep))
                if moved:
                    d = (FAMILY_ZH.get(big, big) if zh else big)[:9]
                    self.mkdir(d)
                    pairs += [(f, f"{d}/{PurePosixPath(f).name}") for f in moved]
        pairs = [(a, b) for a, b in pairs if a != b]
        if pairs:
            self.inspect_folders([a for a, _ in pairs])
        self.mv(pairs)

    def inspect_folders(self, paths: list[str]) -> None:
        """Before sorting many files: list the ones not read or written in this session with details, ten to a
        command (``ls -l a b …``: one browse per file), so each file is looked at before it is moved or renamed
        (issue #28 item 2)."""
        unknown = [p for p in paths if p not in self.view and p not in self.own]
        for i in range(0, len(unknown), 10):
            self.bash("ls -l " + " ".join(shlex.quote(p) for p in unknown[i:i + 10]))


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])|(?<=[。！？])")


def revise_line(line: str, lang: str, fixes: list[tuple[str, str, str]] | None = None) -> str | None:
    """A real repair of one line, or None when the line needs none (issue #28: never a marker, never a cut).

    In order: a figure that another source gives differently (``fixes``: ``(label, wrong, right)``, label in the
    line) is corrected; a pseudo-heading (``**x**``) becomes a heading; a ``*`` bullet becomes ``-``; a long
    sentence (> 90 chars) joined by a comma or semicolon is split there into two sentences (all words kept);
    doubled spaces are collapsed.
    """
    s = line.rstrip()
    for label, wrong, right in fixes or []:
        if label.lower() in s.lower() and re.search(rf"(?<![\d.]){re.escape(wrong)}(?![\d])", s):
            return re.sub(rf"(?<![\d.]){re.escape(wrong)}(?![\d])", right, s, count=1)
    m = re.match(r"^\s*\*\*(.+?)\*\*\s*$", s)
    if m:
        return f"## {m.group(1)}"
    if re.match(r"^\s*\*\s+", s):
        return re.sub(r"^(\s*)\*\s+", r"\1- ", s)
    if len(s) > 90:
        if not re.search(r"[\u4e00-\u9fff]", s):
            m = re.search(r"^(.{30,}?[a-z0-9)]), (?:and |but |which )?([a-z][^,]{20,})$", s)
            if m:
                return f"{m.group(1)}. {m.group(2)[0].upper()}{m.group(2)[1:]}"
            if "; " in s[20:-20]:
                i = s.index("; ", 20)
                return f"{s[:i]}. {s[i + 2].upper()}{s[i + 3:]}"
        elif "，" in s[15:-10]:
            i = s.index("，", 15)
            return s[:i] + "。" + s[i + 1:]
    if "  " in s.strip():
        return re.sub(r"(?<=\S) {2,}", " ", s)
    return None


def condense_line(line: str, lang: str, fixes: list[tuple[str, str, str]] | None = None) -> str | None:
    """A line cut to its first sentence (whole sentences only, issue #28), or None when it has just one."""
    s = line.rstrip()
    lead = re.match(r"^(\s*(?:[-*+]\s+|\d+[.)]\s+)?)", s).group(1)
    body = s[len(lead):]
    parts = _SENTENCE.split(body)  # by the line's own script, whatever the persona's language
    parts = [p for p in parts if p.strip()]
    if len(parts) < 2:
        return None
    return lead + parts[0].strip()


def repaired_text(text: str, fixes: list[tuple[str, str, str]], lang: str) -> str:
    """``text`` with every repairable line repaired (:func:`revise_line`): the D-R whole-file rewrite."""
    out = []
    for ln in text.split("\n"):
        new = revise_line(ln, lang, fixes) if ln.strip() and not ln.startswith("|") else None
        out.append(new if new is not None else ln)
    return "\n".join(out).rstrip("\n") + "\n"


def condensed_text(text: str, lang: str) -> str:
    """``text`` cut for a shorter brief (the D-R whole-file rewrite of a shortening task): every paragraph to
    its first sentence, at most three bullets per section; headings and tables kept."""
    out: list[str] = []
    bullets = 0
    for ln in text.split("\n"):
        if ln.startswith("#"):
            bullets = 0
            out.append(ln)
        elif re.match(r"^\s*[-*+]\s", ln):
            bullets += 1
            if bullets <= 3:
                out.append(ln)
        elif ln.strip() and not ln.startswith("|"):
            out.append(condense_line(ln, lang) or ln)
        else:
            out.append(ln)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).rstrip("\n") + "\n"


def parse_listing(text: str) -> tuple[list[str], list[str]]:
    """Files and folders from a ``list`` tool output.

    Accepts one relative path per line (folders end in ``/``) or an indented tree (two spaces or tree glyphs per
    level, folders ending in ``/``); the first line may be the root itself. Returns ``(files, dirs)``.
    """
    files: list[str] = []
    dirs: list[str] = []
    stack: list[tuple[int, str]] = []
    if text.rstrip().endswith("empty directory"):
        return [], []
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines and (lines[0].rstrip().endswith("/") and lines[0].startswith("/") or lines[0].strip() in ("./", ".")):
        lines = lines[1:]
    for raw in lines:
        clean = re.sub(r"[│├└─┬┼]+", lambda m: " " * len(m.group(0)), raw.rstrip())
        stripped = clean.lstrip(" -*")
        if not stripped or stripped.startswith(("(", "[", "…", "...")):
            continue
        indent = len(clean) - len(clean.lstrip(" "))
        is_dir = stripped.endswith("/")
        name = stripped.rstrip("/")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if "/" in name:  # already a relative path
            path = name.removeprefix("./")
        else:
            path = f"{stack[-1][1]}/{name}" if stack else name
        if is_dir:
            dirs.append(path)
            stack.append((indent, path))
        else:
            files.append(path)
    # Normalise stacked paths (stack holds full paths after the first level).
    fixed = []
    for f in files:
        fixed.append(re.sub(r"/+", "/", f))
    for d in list(dirs):
        parts = d.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent not in dirs:
                dirs.append(parent)
    for f in fixed:
        parts = f.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent not in dirs:
                dirs.append(parent)
    return fixed, dirs
