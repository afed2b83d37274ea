"""Perception and reading for :class:`~filegram_ray.engine.simulator.agent.PersonaAgent` (TT §2.1): listing the
workspace, the read/grep/glob primitives, the A-tier reading plans, and the review of the agent's own outputs.
Split out of ``agent.py`` as a mixin; every method draws from the agent's ``rng`` exactly as before."""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath
from typing import Any

from filegram_ray.engine.simulator.filetypes import (
    DOC_EXT,
    EDITABLE_EXT,
    MEDIA_EXT,
    clutter_category,
)
from filegram_ray.engine.simulator.knowledge import parse_statements
from filegram_ray.engine.simulator.textops import parse_listing

STOP_WORDS = {"this", "that", "with", "from", "into", "your", "their", "them", "have", "will", "please",
              "files", "file", "folder", "contains", "write", "which", "what", "about", "each", "more",
              "than", "some", "also", "should", "would", "could", "other", "these", "those", "only",
              "most", "make", "sure", "there", "where", "when", "then", "they", "need", "must", "like",
              "read", "list", "keep", "create", "document", "documents"}


class ReadingMixin:
    """How a :class:`PersonaAgent` finds and reads material; uses the agent's state (``files``, ``nb``,
    ``rng``, ``T``)."""

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
    def read(self, rel: str, offset: int = 1, limit: int | None = None, note: bool = True) -> str:
        """Read ``rel`` (a window when ``offset`` / ``limit`` are given) and return the text shown — the tool's raw
        ``content``, never its line numbers or its own notes ("[end of file, N lines]"), which are the viewer's,
        not the file's. With ``note`` (material for the task) the text goes into the notebook and the knowledge
        (:mod:`.knowledge`); clutter opened to check it does not."""
        kw: dict[str, Any] = {"file_path": rel}
        if offset != 1:
            kw["offset"] = offset
        if limit is not None:
            kw["limit"] = limit
        res = self.call("read", **kw)
        if not getattr(res, "ok", False):
            return ""
        text = str(getattr(res, "content", None) or "")
        out = str(getattr(res, "output", "") or "")
        m = re.search(r"\[(?:lines \d+-\d+ of (\d+)|end of file, (\d+) lines)", out)
        if m:
            self.n_lines[rel] = int(m.group(1) or m.group(2))
        self.view[rel] = self.view.get(rel, 0) + 1
        seen = self.seen_lines.setdefault(rel, {})
        for k, ln in enumerate(text.split("\n")):  # what was shown of the file, by line number
            seen[offset + k] = ln
        if note:
            self.nb.absorb(rel, text, offset)
            title = self.nb.sources[rel].title if rel in self.nb.sources else ""
            self.kn.add(parse_statements(text, rel, title if offset != 1 else ""))
        if limit is None and offset == 1:
            self.full_read.add(rel)
        return text

    def ls(self, rel: str = ".") -> None:
        self.bash("ls" if rel in (".", "") else f"ls {shlex.quote(rel)}")

    def grep(self, pattern: str) -> list[tuple[str, int]]:
        res = self.call("grep", pattern=pattern, path=".")
        out = str(getattr(res, "output", "") or "")
        hits = self.nb.absorb_grep(out)
        for ln in out.splitlines():  # a hit line is text read: its facts are known from here on
            m = re.match(r"^(.+?):(\d+):(.*)$", ln.strip())
            if m:
                self.kn.add(parse_statements(m.group(3), self._rel(m.group(1))))
        return [(self._rel(p), n) for p, n in hits]

    def glob(self, pattern: str) -> list[str]:
        res = self.call("glob", pattern=pattern, path=".")
        return [self._rel(ln) for ln in str(getattr(res, "output", "") or "").splitlines() if ln.strip()]

    # ------------------------------------------------------------------ reading strategies (TT §2.1)
    def task_words(self) -> set[str]:
        """Lower-case content words (≥ 4 letters, no stop words) of the task's name and prompt."""
        text = f"{self.topic_en} {self.prompt_en}"
        return {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9]{3,}", text) if w.lower() not in STOP_WORDS}

    def relevance(self, files: list[str], hits: dict[str, int] | None = None) -> list[str]:
        """``files`` by relevance to the task (not the listing's order): file-name tokens shared with the task words
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
                if len(t) >= 4 and t.isalpha() and t.lower() not in STOP_WORDS and t not in out and \
                        any(t.lower().startswith(w[:5]) or w.startswith(t.lower()[:5]) for w in words):
                    out.append(t)
        return out

    def seen_terms(self, used: set[str]) -> list[str]:
        """Search terms taken from what was read: people's and organisations' names, figure
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
            if c.lower() not in used and c.lower() not in STOP_WORDS and c not in out:
                out.append(c)
        return out

    def reading_actions(self, budget_scale: float = 1.0, exclude: Any = None) -> list[Any]:
        """The reading plan as a list of thunks (executed in rhythm order by :meth:`interleave`).

        The acting A tier picks the strategy (TT §2.1); the counts are draws around means that follow the
        session's A position (tendency.py), and the order and the search terms are motivated:
        files are taken by :meth:`relevance`, globs use file-name words seen in the listing, greps use names,
        figure labels and task words met in files already read, and every search is followed by opening what
        it found."""
        docs, media = self.docs, self.media
        readable = docs + [m for m in media if self.T["F"] == "L" or self.p.thoroughness == "exhaustive"]
        if exclude is not None:  # what the task's plan reads itself, in its own order (T-18's batches)
            readable = [f for f in readable if not exclude(f)]
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

            grep_at = rng.randrange(2, max(3, n)) if self.chance("A", 0.45, 0.9, 0.3) else -1
            if self.chance("A", 0.2, 0.5, 0.3):  # a file name looked up before reading through
                acts.append(search_name)
            for i in range(n):
                if i == grep_at:  # a person who reads through still looks a name up now and then
                    acts.append(search_seen)
                acts.append(read_next)
            k = self.count("A", 2.4, 0.6, 0.15, hi=4)
            acts.append(lambda k=k: [self.read(f) for f in self.nb.richest(k)])
        elif tier == "M":
            # Search first, then read the windows around the hits; a search before further reads; searches ÷
            # reads ≥ 0.3 on average (TT §2.1 A-M).
            # how much a targeted reader searches varies from session to session (when every A-M session searched
            # at least twice, one count read the tier a session acted in at 0.82–0.84; persona-simulator/8)
            n_search = max(1, self.count("A", 1.5, 3.4, 1.2, hi=8))
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

            grep_at = rng.randrange(1, max(2, n)) if self.chance("A", 0.3, 0.9, 0.3) else -1
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

    # ------------------------------------------------------------------ reading own outputs
    def review_outputs(self) -> None:
        """Empty workspace (T-03/T-04/T-20): the agent's own outputs are the only material to consume, so the A
        tier shows in how it reviews them (TT §1: re-reading one's own output is a revisit), so A shows wherever
        the task allows it. A-L reads up to 4 own files whole and re-reads the first (revisit ≈ 0.2); A-M
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
            words = [w for w in re.findall(r"[A-Za-z]{5,}", self.topic_en) if w.lower() not in STOP_WORDS]
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

    def read_back(self, rel: str) -> None:
        """Defensive read-back of its own output (TT §4 error_handling=defensive)."""
        if rel in self.own:
            if self.T["A"] == "L":
                self.read(rel)
            else:
                self.read(rel, limit=40)
