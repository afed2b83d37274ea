"""The persona simulator: a seeded stochastic policy that does one task the way one profile would, acting only
through the engine's tool layer (``EngineSession.call``). No LLM, no network.

Every number below comes from TIER_TARGETS.md (cited per constant as ``TT §x``); the task-type flows follow TT §5
and FILEGRAM_REFERENCE §6.3. One tool call per iteration (the upstream agent's shape, ref §3.3), so the share of
stripped metadata events resembles the paper's 74 % (ref §0).

Randomness: one ``random.Random`` seeded from SHA-256(master seed, profile id, task id) drives every choice; a
second stream with the same key plus ``"scratch"`` decides the scratch files, so scratch creation is identical
across E tiers and unaffected by an E perturbation (TT §2.5).

Clock: the session's simulated clock advances by thinking time per iteration (rhythm-dependent), reading time
proportional to the read output (0.5 ms/char) and writing time proportional to the written content
(2.5 ms/char ≈ 100 tokens/s); phased work adds a planning pause before the first write and a review pause at the
end (TT §2.5 rhythm texture).
"""

from __future__ import annotations

import random
import re
import shlex
from collections import OrderedDict
from pathlib import PurePosixPath
from typing import Any

from filegram_ray.engine.simulator.naming import make_name, topic_tokens
from filegram_ray.engine.simulator.notebook import Notebook, strip_line_numbers
from filegram_ray.engine.simulator.persona import Persona, derive_seed
from filegram_ray.engine.simulator.writer import (
    DocSpec,
    chart_figures,
    compose,
    csv_text,
    png_chart,
    svg_chart,
)

AGENT_VERSION = "persona-simulator/2"

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
        self.scratch_rng = random.Random(derive_seed(seed, persona.profile_id, self.tid, "scratch"))
        self.chart_format = chart_format
        self.rules = TASK_RULES.get(self.tid, {})
        self.nb = Notebook()
        self.T = persona.tiers
        self.lang = persona.lang
        self.files: list[str] = []          # workspace files (relative), listing order
        self.dirs: list[str] = []           # workspace folders (relative)
        self.own: dict[str, str] = {}       # own text outputs: relpath -> current content
        self.own_order: list[str] = []
        self.full_read: set[str] = set()
        self.view: dict[str, int] = {}
        self.created_dirs: list[str] = []
        self.ctx_chars = 0
        self.wrote_any = False
        self.start_ms = float(getattr(sess, "clock_ms", 0.0))
        self.topic_en = str(getattr(task, "name_en", "") or self.tid)
        self.topic_zh = re.sub(r"[^\w\u4e00-\u9fff]", "", str(getattr(task, "name", "") or ""))[:10]
        prompt = task.prompt(self.lang) if callable(getattr(task, "prompt", None)) else (
            getattr(task, f"prompt_{self.lang}", "") or getattr(task, "prompt_en", ""))
        self.prompt = str(prompt)
        self.prompt_en = str(getattr(task, "prompt_en", "") or self.prompt)
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
    def reading_actions(self, budget_scale: float = 1.0) -> list[Any]:
        """The A-tier reading plan as a list of thunks (executed in rhythm order by :meth:`interleave`)."""
        docs, media = self.docs, self.media
        readable = docs + [m for m in media if self.T["F"] == "L" or self.p.thoroughness == "exhaustive"]
        if not readable:
            return []
        tier, rng = self.T["A"], self.rng
        acts: list[Any] = []
        if tier == "L":
            # Sequential, whole files, no search, then revisits of the key files (TT §2.1 A-L). The number of
            # files read is capped at 9–10 so that the whole set keeps the paper's ≈ 7 reads per trajectory
            # (ref §0; TT §5 consequence 2); 2–3 revisits keep revisit_ratio at ≈ 0.2 (TT §2.1 band 0.12–0.30).
            cap = 10 if self.p.thoroughness == "exhaustive" else 9
            n = max(1, min(len(readable), round(cap * budget_scale)))
            order = sorted(readable)[:n] if self.p.working_style == "methodical" else readable[:n]
            acts += [lambda f=f: self.read(f) for f in order]
            k = 3 if len(order) >= 10 else 2 if len(order) >= 5 else 1
            acts.append(lambda k=k: [self.read(f) for f in self.nb.richest(k)])
        elif tier == "M":
            # ≥ 3 keyword greps + 1 type glob before any read; reads of the hit windows; a search before each
            # further read; searches ÷ reads ≥ 0.3 (TT §2.1 A-M).
            kws = self.keywords(7)
            ext = self.dominant_ext()
            n_search = 5 if self.p.thoroughness == "exhaustive" else 4
            n_reads = rng.randint(5, 8) if self.p.thoroughness == "exhaustive" else rng.randint(3, 6)
            state: dict[str, Any] = {"hits": [], "read": set()}

            def search(kw: str) -> None:
                for h in self.grep(kw):
                    if h[0] not in state["read"] and h not in state["hits"]:
                        state["hits"].append(h)

            for kw in kws[:3]:
                acts.append(lambda kw=kw: search(kw))
            if self.p.thoroughness == "exhaustive":
                acts.append(lambda: state["hits"].extend((f, 1) for f in self.glob(f"**/*{ext}")
                                                         if (f, 1) not in state["hits"]))

            def read_hit() -> None:
                hits = [h for h in state["hits"] if h[0] not in state["read"] and h[0] in self.files]
                if not hits:
                    rest = [f for f in readable if f not in state["read"]]
                    if not rest:
                        return
                    hits = [(rest[0], 1)]
                f, line = hits[0]
                state["read"].add(f)
                self.read(f, offset=max(1, line - 12), limit=40)

            extra = kws[3:3 + max(0, n_search - 3)]
            for i in range(n_reads):
                if i and i % 2 == 0 and extra:
                    kw_next = extra.pop(0)
                    acts.append(lambda kw=kw_next: search(kw))
                acts.append(read_hit)
        else:
            # Survey with `ls` (root and each subfolder), one type glob, then the first 10–20 lines of many files
            # in listing order; no grep, no revisit (TT §2.1 A-R).
            subs = [d for d in self.dirs if "/" not in d][:5]
            if len(subs) < 2:
                acts.append(lambda: self.bash("ls -la"))
            if len(subs) < 3:
                acts.append(lambda: self.bash("ls -lt"))
            ext = self.dominant_ext()
            if self.p.thoroughness != "minimal":
                acts.append(lambda: self.glob(f"**/*{ext}"))
            # Many shallow reads, but ≤ 10 per session so the set keeps ≈ 7 reads per trajectory (ref §0).
            cap = {"exhaustive": 10, "balanced": 9, "minimal": 7}.get(self.p.thoroughness, 9)
            n = max(1, min(len(readable), round(cap * budget_scale)))
            head = rng.choice((10, 15, 20))
            acts += [lambda f=f: self.read(f, limit=head) for f in readable[:n]]
        return acts

    def keywords(self, k: int) -> list[str]:
        words = re.findall(r"[A-Za-z][A-Za-z0-9_-]{3,}", self.prompt_en)
        caps = [w for w in words if w[0].isupper() and w.lower() not in _STOP]
        rest = [w.lower() for w in words if w.lower() not in _STOP and len(w) >= 5]
        stems = [t for f in self.files for t in re.split(r"[_\-. /]", PurePosixPath(f).stem) if len(t) >= 4]
        out: list[str] = []
        for w in caps + rest + stems:
            if w.lower() not in {o.lower() for o in out}:
                out.append(w)
        return (out + ["summary", "total", "date", "report", "note", "plan", "name"])[:k]

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
        B, F, rng, lang = self.T["B"], self.T["F"], self.rng, self.lang
        zh = lang == "zh"
        structure = self.p.structure
        if kind == "main":
            lines = {"L": rng.randint(210, 320), "M": rng.randint(82, 98) if not zh else rng.randint(90, 140),
                     "R": rng.randint(22, 38)}[B]
            depth = {"L": 4, "M": 3, "R": 2}[B]
            maxc = {"L": 70, "M": 48, "R": 50}[B] if not zh else {"L": 46, "M": 36, "R": 34}[B]
        elif kind in ("readme", "index"):
            lines = {"L": rng.randint(100, 115), "M": rng.randint(18, 30), "R": rng.randint(4, 6)}[B]
            depth = {"L": 3, "M": 2, "R": 1}[B]
            maxc = {"L": 50, "M": 45, "R": 30}[B] if not zh else {"L": 34, "M": 30, "R": 18}[B]
        elif kind in ("scratch", "outline"):
            lines, depth, maxc = rng.randint(6, 12), 1, 40 if not zh else 26
        else:  # appendix, references, log, notes
            lines = {"L": rng.randint(100, 140), "M": rng.randint(60, 85), "R": rng.randint(15, 30)}[B]
            depth = {"L": 3, "M": 3, "R": 2}[B]
            maxc = {"L": 55, "M": 45, "R": 45}[B] if not zh else {"L": 36, "M": 30, "R": 30}[B]
        if "max_lines" in self.rules and kind == "main":
            lines = min(lines, self.rules["max_lines"] - 2)
        if structure == "flat_list":
            depth = min(depth, 2)
        elif structure == "narrative":
            depth = min(depth, 3)
        rows = 0
        if kind in ("main", "appendix", "log") and F in ("L", "M"):
            rows = rng.randint(5, 10) if B != "R" else 5
        if kind == "main" and "max_lines" in self.rules:
            rows = min(rows, 5)
        return DocSpec(title=title, lines=lines, max_depth=depth, structure=structure, table_rows=rows,
                       lang=lang, tone=self.p.tone, max_line_chars=maxc,
                       numbered=structure == "hierarchical" and B != "R", topic=self.topic(),
                       closing=kind not in ("scratch", "outline", "readme"))

    def topic(self) -> str:
        return (self.topic_zh or self.topic_en) if self.lang == "zh" else self.topic_en

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

    def render(self, kind: str, title: str | None = None, spec: DocSpec | None = None) -> str:
        spec = spec or self.doc_spec(kind, title or self.title(kind))
        return compose(spec, self.nb, self.rng, self.fallback_lines())

    # ------------------------------------------------------------------ layout per C tier (TT §2.3)
    def layout(self) -> dict[str, str]:
        """Folders for each output role (``main``, ``aux``, ``fig``, ``scratch``; ``base``/``mid`` = the C-L tree
        levels) per C tier (TT §2.3). C-L: a three-level topic tree; C-M: one short folder for the outputs
        (``reports/``, ``notes/`` in revision tasks) plus ``figures/`` for F-L visuals, so the tier shows in where
        the outputs go in every task type (issue #16), not only when another dimension asks for a folder; C-R:
        everything in the root."""
        C = self.T["C"]
        zh = self.lang == "zh"
        if C == "L":
            base = topic_tokens(self.topic_en, 2) if not zh else (self.topic_zh[:6] or "项目")
            if self.p.naming == "short_abbrev":
                base = base.split("_")[0][:10]
            a = f"{base}/analysis" if not zh else f"{base}/分析"
            out = {"main": f"{a}/reports" if not zh else f"{a}/报告", "aux": f"{base}/references/sources"
                   if not zh else f"{base}/参考/来源", "fig": f"{a}/figures" if not zh else f"{a}/图表",
                   "scratch": base, "base": base, "mid": a}
            return out
        if C == "M":
            out_dir = "notes" if self.ttype in ("iterate", "maintain") else "reports"
            fig = "figures" if self.T["F"] == "L" else out_dir
            return {"main": out_dir, "aux": out_dir, "fig": fig, "scratch": "", "base": "", "mid": ""}
        return {"main": "", "aux": "", "fig": "", "scratch": "", "base": "", "mid": ""}

    def setup_dirs(self, lay: dict[str, str]) -> None:
        C = self.T["C"]
        if C == "L":
            paths = [lay["main"], lay["aux"]]
            if self.T["F"] == "L":
                paths.append(lay["fig"])
            paths.append(f"{lay['base']}/notes/working" if self.lang == "en" else f"{lay['base']}/笔记/工作")
            if self.rng.random() < 0.5:
                paths.append(f"{lay['mid']}/data" if self.lang == "en" else f"{lay['mid']}/数据")
            for p in paths:  # one mkdir -p per branch: each is one dir_create at depth 3 (TT §1)
                self.mkdir(p)
        elif C == "M":
            self.mkdir(*dict.fromkeys(lay[k] for k in ("main", "fig") if lay[k]))

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
        """Scratch files (kind, ext): drawn from the E-independent stream (TT §2.5: same count in every E tier)."""
        u = self.scratch_rng.random()
        n = 0 if u < 0.3 else (1 if u < 0.8 else 2)
        return [("scratch", ".md"), ("outline", ".md")][:n]

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
        B, F = self.T["B"], self.T["F"]
        reads = self.reading_actions()
        prescribed = self.prescribed_names()
        main_name = prescribed[0] if prescribed else self.name("main", ".md")
        plan: list[tuple[str, str]] = []  # (kind, relpath)
        writes: list[Any] = []
        writes.append(lambda: self.setup_dirs(lay))
        if self.p.error_handling == "defensive" and self.T["A"] != "L":
            writes.append(lambda: self.ls("."))
        for kind, ext in self.scratch_plan():
            rel = self.join(lay["scratch"], self.name(kind, ext))
            plan.append((kind, rel))
            writes.append(lambda k=kind, r=rel: self.write(r, self.render(k)))
        fig_refs: list[tuple[int, str]] = []
        if F == "L":
            csv_rel = self.join(lay["fig"], ("fig_" if self.T["C"] == "R" else "") + self.name("csv", ".csv"))
            ext = ".png" if self.chart_format == "png" else ".svg"
            chart_rel = self.join(lay["fig"], ("fig_" if self.T["C"] == "R" else "") + self.name("chart", ext))
            if csv_rel == chart_rel.rsplit(".", 1)[0] + ".csv":
                pass
            fig_refs.append((1, chart_rel))
            writes.append(lambda: self.write(csv_rel, csv_text(chart_figures(self.nb))))
            writes.append(lambda: self.write(chart_rel, self.chart(self.topic())))
        aux: list[tuple[str, str]] = []
        if B == "L":
            aux.append(("appendix", self.join(lay["aux"], self.name("appendix", ".md", 2))))
            aux.append(("references", self.join(lay["aux"], self.name("references", ".md", 3))))
            if self.T["C"] != "R":
                aux.append(("index", self.join(lay["base"] or lay["aux"], self.name("index", ".md", 4))))
        elif B == "M" and self.p.a("documentation") == "comprehensive":
            aux.append(("references", self.join(lay["aux"], self.name("references", ".md", 2))))
        for extra in prescribed[1:2]:
            if B != "R":
                aux.append(("log", self.join(lay["aux"], extra)))
        for kind, rel in aux:
            writes.append(lambda k=kind, r=rel: self.write(r, self.render(k)))
        # The main deliverable: written to the root first and moved into place under C-L (TT §2.3 C-L "mv").
        main_tmp = main_name if self.T["C"] == "L" else self.join(lay["main"], main_name)
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
        """One README per created level (≤ 4), sized to the B band (TT §3; p14 tiny ≤ 300 chars, §6)."""
        levels = [lay["base"], lay["mid"]] + ([lay["main"]] if self.T["B"] == "L" else [])
        for lvl in levels:
            if not lvl:
                continue
            rel = f"{lvl}/README.md"
            if rel in self.own:
                continue
            spec = self.doc_spec("readme", self.title("readme"))
            listing = [p for p in self.own_order if p.startswith(lvl + "/")]
            spec.sections = ["Contents" if self.lang == "en" else "目录"] + [PurePosixPath(p).name for p in listing][:6]
            self.write(rel, compose(spec, self.nb, self.rng, self.fallback_lines()))

    def read_back(self, rel: str) -> None:
        """Defensive read-back of its own output (TT §4 error_handling=defensive)."""
        if rel in self.own:
            if self.T["A"] == "L":
                self.read(rel)
            else:
                self.read(rel, limit=40)

    # ------------------------------------------------------------------ D: self-revision (TT §2.4)
    def self_revise(self, rel: str) -> None:
        D, rng = self.T["D"], self.rng
        if rel not in self.own:
            return
        if D == "L":
            if self.p.version != "overwrite":
                self.cp(rel, rel + ".bak")
            for _ in range(rng.randint(3, 5)):
                self.small_edit(rel)
        elif D == "M":
            for _ in range(rng.randint(1, 2)):
                self.block_edit(rel)
        else:
            if rng.random() < 0.6:  # one decisive rewrite of the whole file (overwrite, TT §2.4 D-R)
                spec = self.doc_spec("main", self.title("main"))
                self.write(rel, compose(spec, self.nb, self.rng, self.fallback_lines()))

    def _content_lines(self, text: str) -> list[int]:
        lines = text.split("\n")
        counts: dict[str, int] = {}
        for ln in lines:
            counts[ln] = counts.get(ln, 0) + 1
        return [i for i, ln in enumerate(lines) if len(ln.strip()) > 8 and counts[ln] == 1
                and not ln.lstrip().startswith("#") and not ln.startswith("|")]

    def small_edit(self, rel: str) -> bool:
        """Replace 1–2 lines (≤ 4 changed lines, small edit < 10, TT §1 edit size)."""
        text = self.own.get(rel)
        if text is None:
            return False
        idx = self._content_lines(text)
        if not idx:
            return False
        i = self.rng.choice(idx)
        lines = text.split("\n")
        k = 2 if i + 1 in idx and self.rng.random() < 0.4 else 1
        old = "\n".join(lines[i:i + k])
        new = "\n".join(revise_line(ln, self.lang, self.rng) for ln in lines[i:i + k])
        return self.edit(rel, old, new)

    def block_edit(self, rel: str, k: int | None = None) -> bool:
        """Replace a block of 10–20 lines (15–45 changed lines, TT §2.4 D-M)."""
        text = self.own.get(rel)
        if text is None:
            return False
        lines = text.split("\n")
        k = k or self.rng.randint(10, 20)
        if len(lines) <= k + 2:
            k = max(1, len(lines) // 2)
        start = self.rng.randint(2, max(2, len(lines) - k))
        block = lines[start:start + k]
        old = "\n".join(block)
        if not old.strip() or text.count(old) != 1:
            return self.small_edit(rel)
        new = "\n".join(revise_line(ln, self.lang, self.rng) if ln.strip() else ln for ln in block)
        return self.edit(rel, old, new)

    def edit(self, rel: str, old: str, new: str) -> bool:
        if old == new:
            return False
        res = self.call("edit", file_path=rel, old_string=old, new_string=new)
        if getattr(res, "ok", False):
            self.own[rel] = self.own[rel].replace(old, new, 1)
            return True
        return False

    # ------------------------------------------------------------------ E: curation of own files (TT §2.5)
    def curate(self, plan: list[tuple[str, str]]) -> None:
        """Curation of the workspace's own clutter and of the agent's scratch files (TT §2.5; issue #16).

        E-L (selective) deletes every clutter file of the workspace (:func:`clutter_category`: temporary files,
        duplicates, superseded versions) and its own scratch notes; E-M (pragmatic) deletes the obvious
        temporary files only and keeps drafts, duplicates and its own notes; E-R (preservative) deletes nothing.
        Every non-empty bundle carries clutter (``workspace.scenarios._plant_clutter``), so the tier shows in
        one session: L ≈ 3–5 deletes, M ≈ 1, R 0."""
        E = self.T["E"]
        clutter = [(f, c) for f in self.files if (c := clutter_category(f))]
        if E == "L":
            scratch = [rel for _, rel in plan if rel in self.own]
            self.rm([f for f, _ in clutter] + scratch)
        elif E == "M":
            self.rm([f for f, c in clutter if c == "temp"])

    # ------------------------------------------------------------------ revision tasks (iterate / maintain)
    def flow_revise(self) -> None:
        """Iterate / maintain: read (A), change existing files per D (edits / backups / overwrites), write the
        task's notes file per B where the C tier puts outputs (C-L: moved into the topic tree; C-M: ``notes/``),
        F-L visuals, curate clutter and scratch per E; T-18 ends in a reorganisation."""
        reads = self.reading_actions(budget_scale=0.8)
        targets = self.edit_targets()
        lay = self.layout()
        C, F = self.T["C"], self.T["F"]
        notes_ok = not (self.rules.get("no_new_files") and self.T["B"] == "R")
        visuals = F == "L" and not self.rules.get("no_new_files")
        writes: list[Any] = []
        plan: list[tuple[str, str]] = []
        if notes_ok or visuals:
            writes.append(lambda: self.setup_dirs(lay))
        for kind, ext in self.scratch_plan():
            rel = self.join(lay["scratch"] if notes_ok or visuals else "", self.name(kind, ext))
            plan.append((kind, rel))
            writes.append(lambda k=kind, r=rel: self.write(r, self.render(k)))
        writes.append(lambda: self.revise_files(targets))
        final: list[Any] = []
        if notes_ok:
            names = self.prescribed_names()
            note = names[0] if names else self.name("log", ".md")
            note_tmp = note if C == "L" else self.join(lay["main"], note)
            note_final = self.join(lay["main"], note)
            final.append(lambda: self.write(note_tmp, self.render("log")))
            if note_tmp != note_final:
                final.append(lambda: self.mv([(note_tmp, note_final)]))
        if visuals:
            pre = "" if lay["fig"] else "fig_"
            final.append(lambda: self.write(self.join(lay["fig"], pre + self.name("csv", ".csv")),
                                            csv_text(chart_figures(self.nb))))
            ext = ".png" if self.chart_format == "png" else ".svg"
            final.append(lambda: self.write(self.join(lay["fig"], pre + self.name("chart", ext)),
                                            self.chart(self.topic())))
        if C == "L" and (notes_ok or visuals):
            final.append(lambda: self.readmes(lay))
        if self.rules.get("reorg"):
            final.append(lambda: self.reorganise(self.rules["reorg"]))
        final.append(lambda: self.curate(plan))
        self.interleave(reads, writes, final)

    def edit_targets(self) -> list[str]:
        eds = [f for f in self.files if PurePosixPath(f).suffix.lower() in EDITABLE_EXT]
        skip = re.compile(r"(feedback|review|update|batch|comment)", re.IGNORECASE)
        prim = [f for f in eds if not skip.search(f)] or eds
        n = {"L": self.rng.randint(1, 3), "M": self.rng.randint(1, 2), "R": self.rng.randint(1, 3)}[self.T["D"]]
        return prim[:n]

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
        D = self.T["D"]
        archived = False
        for n, rel in enumerate(targets):
            text = self.own.get(rel) or self.load(rel)
            if text is None:
                continue
            self.own[rel] = text
            if D == "L":
                if self.p.version != "overwrite":
                    self.cp(rel, rel + ".bak")  # backup before the first edit (TT §2.4 D-L)
                for _ in range(max(self.rng.randint(3, 5), -(-self.rng.randint(6, 10) // len(targets)))):
                    self.small_edit(rel)
            elif D == "M":
                if self.p.version == "archive_old" and self.T["C"] != "R":
                    if not archived:
                        self.mkdir("archive")
                        archived = True
                    p = PurePosixPath(rel)
                    self.cp(rel, f"archive/{p.stem}_v1{p.suffix}")
                elif n == 0 and self.rng.random() < 0.3:
                    self.cp(rel, rel + ".bak")  # p16/p19: at most one .bak of an important file (TT §6)
                for _ in range(self.rng.randint(2, 3) if n == 0 else 1):
                    self.block_edit(rel)
            else:
                new = "\n".join(revise_line(ln, self.lang, self.rng) if ln.strip() else ln
                                for ln in text.split("\n")) + "\n"
                self.write(rel, new)  # one decisive overwrite per changed file (TT §2.4 D-R)

    def reorganise(self, tops: tuple[str, ...]) -> None:
        subs = [d for d in self.dirs if "/" not in d]
        if not subs:
            return
        if self.T["C"] == "R":
            return
        self.mkdir(*tops)
        half = max(1, len(subs) // 2)
        pairs = [(d, f"{tops[0] if i < half else tops[1]}/{d}") for i, d in enumerate(subs)]
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
        final.append(lambda: self.write(note, self.render("log")))
        F = self.T["F"]
        if F == "L":
            final.append(lambda: self.write(self.name("index", ".csv"), self.index_csv()))
            ext = ".png" if self.chart_format == "png" else ".svg"
            final.append(lambda: self.write(("fig_" if self.T["C"] == "R" else "") + self.name("chart", ext),
                                            self.chart(self.topic())))
        elif self.rules.get("index_file"):
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
            if len(groups) > 6:
                merged: OrderedDict[str, list[str]] = OrderedDict()
                for i, (_, fs) in enumerate(groups.items()):
                    merged.setdefault(f"set_{i % 4 + 1}", []).extend(fs)
                groups = merged
        pairs: list[tuple[str, str]] = []
        if C == "L":
            root = ("01_organized_archive" if not zh else "01_归档整理") if self.p.naming != "short_abbrev" else "arch"
            dirs = []
            for fam, fs in groups.items():
                top = FAMILY_ZH.get(fam, fam) if zh else fam
                by_ext: OrderedDict[str, list[str]] = OrderedDict()
                for f in fs:
                    by_ext.setdefault(PurePosixPath(f).suffix.lstrip(".").lower() or "other", []).append(f)
                for ext, efs in by_ext.items():
                    d = f"{root}/{top}/{ext}_files"
                    dirs.append(d)
                    pairs += [(f, f"{d}/{PurePosixPath(f).name}") for f in efs]
            if len(dirs) < 6:  # TT §2.3 organize row: C-L 6–15 dirs
                dirs += [f"{root}/{'indexes' if not zh else '索引'}/by_date", f"{root}/notes/working"][: 6 - len(dirs)]
            self.mkdir(*dirs[:15])
        elif C == "M":
            dirs = []
            for fam, fs in groups.items():
                top = FAMILY_ZH.get(fam, fam) if zh else fam
                if len(fs) > 5 and len(dirs) < 6:
                    half = len(fs) // 2
                    for sub, part in (("a", fs[:half]), ("b", fs[half:])):
                        d = f"{top}/{PurePosixPath(part[0]).suffix.lstrip('.') or 'misc'}_{sub}"
                        dirs.append(d)
                        pairs += [(f, f"{d}/{PurePosixPath(f).name}") for f in part]
                else:
                    dirs.append(top)
                    pairs += [(f, f"{top}/{PurePosixPath(f).name}") for f in fs]
            self.mkdir(*dirs[:8])
        else:
            if self.rules.get("flat_allowed"):
                # In-place renames: same-parent mv = file_rename (ref §3.4), not a move.
                for f in keep[:6]:
                    p = PurePosixPath(f)
                    new = re.sub(r"[^a-z0-9]+", "_", p.stem.lower()).strip("_")[:12] + p.suffix.lower()
                    if new != p.name and str(p.parent) in (".", ""):
                        pairs.append((f, new))
            else:
                dirs = [fam[:6] for fam in list(groups)[:4]]
                self.mkdir(*dirs)
                for fam, d in zip(list(groups)[:4], dirs, strict=False):
                    pairs += [(f, f"{d}/{PurePosixPath(f).name}") for f in groups[fam]]
        pairs = [(a, b) for a, b in pairs if a != b]
        self.mv(pairs)


def revise_line(line: str, lang: str, rng: random.Random) -> str:
    """A real rewrite of one line: pseudo-headings become headings, ``*`` bullets become ``-``, long sentences
    are condensed at a clause boundary, short ones get a clarifying tag; never returns the input unchanged."""
    s = line.rstrip()
    m = re.match(r"^\s*\*\*(.+?)\*\*\s*$", s)
    if m:
        return f"## {m.group(1)}"
    if re.match(r"^\s*\*\s+", s):
        return re.sub(r"^(\s*)\*\s+", r"\1- ", s)
    body = s
    if len(body) > 70:
        cut = max(body.rfind(",", 0, 70), body.rfind(";", 0, 70), body.rfind("，", 0, 70))
        if cut > 25:
            new = body[:cut].rstrip() + ("." if lang == "en" else "。")
            if new != s:
                return new
    tag = rng.choice((" (verified)", " (updated)", " (see sources)")) if lang == "en" else rng.choice(
        ("（已核实）", "（已更新）", "（见来源）"))
    return s + tag


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
