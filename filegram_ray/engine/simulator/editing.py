"""Edits and repairs for :class:`~filegram_ray.engine.simulator.agent.PersonaAgent` (TT §2.4, D tier): revising
its own deliverable, and changing the workspace files of an iterate/maintain task (small edits, block edits,
whole rewrites, backups). Split out of ``agent.py`` as a mixin; every method draws from the
agent's ``rng`` exactly as before."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from filegram_ray.engine.simulator.filetypes import (
    EDITABLE_EXT,
    FAMILY,
    clutter_category,
)
from filegram_ray.engine.simulator.phrasing import about
from filegram_ray.engine.simulator.textops import (
    SENTENCE_BREAK,
    condense_line,
    condensed_text,
    repaired_text,
    revise_line,
)

_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]\s|\d{1,3}[.)]\s)")
#: A Markdown bullet line as the simulator writes it (``- x``, ``  - x``): what block edits rewrite
_BULLET = re.compile(r"^\s*- ")


def _is_prose(line: str) -> bool:
    """A paragraph line: not blank, not a heading, table row, list item (``-``, ``*``, ``+``, ``•``, ``1.``) or
    indented line, and not heading-like either (a plain-text file's CAPITALISED heading or ``====`` underline: it
    needs a closing full stop, or ≥ 40 characters and lower-case letters)."""
    s = line.strip()
    if not s or line.startswith(("#", "|", " ", "-")) or _LIST_ITEM.match(line) or not re.search(r"\w", s):
        return False
    return bool(re.search(r"[.!?。！？]$", s)) or (len(s) >= 40 and s.upper() != s)


class EditingMixin:
    """How a :class:`PersonaAgent` changes text; uses the agent's state (``own``, ``nb``, ``changes``,
    ``rng``, ``T``)."""

    # ------------------------------------------------------------------ D: self-revision (TT §2.4)
    def self_revise(self, rel: str, record: bool = False) -> None:
        """Revise the agent's own deliverable (TT §2.4): the numbers of small edits (≤ 4 lines), block
        edits (a run of bullets rewritten as a paragraph or back) and whole rewrites are Poisson/Bernoulli draws
        whose means follow the session's D position (small: 4.0 / 0.6 / 0.2; block: 0.3 / 1.6 / 0.2; rewrite:
        2 % / 10 % / 60 % at D-L / D-M / D-R), with a ``.bak`` first when the version strategy keeps history."""
        if rel not in self.own:
            return
        n_small = self.count("D", 4.0, 0.6, 0.2, hi=7)
        n_block = self.count("D", 0.3, 1.6, 0.2, hi=3)
        if record:  # a record (a log, a note, a list) is revised line by line: reflowing it into prose would break it
            n_small, n_block = n_small + n_block, 0
        if n_small + n_block and self.p.version != "overwrite" and self.chance("D", 0.9, 0.3, 0.05):
            self.cp(rel, rel + ".bak")
        for _ in range(n_small):
            self.small_edit(rel, add=True)
        for _ in range(n_block):
            self.block_edit(rel)
        if not record and self.chance("D", 0.02, 0.1, 0.6) and rel in self.own:
            # one decisive rewrite (an overwrite, TT §2.4 D-R): the whole file saved again with every repairable
            # line repaired — the same deliverable, never a different one
            self.write(rel, repaired_text(self.own[rel], self.fixes(), self.lang))

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
        most sources agree on, else the one read first (a repair fixes the inconsistency it found)."""
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

    def small_edit(self, rel: str, add: bool = False) -> bool:
        """Replace 1–2 lines (≤ 4 changed lines, small edit < 10, TT §1 edit size) with a real repair
        (:func:`revise_line`): a figure that disagrees with another source is corrected first; otherwise a
        pseudo-heading, a ``*`` bullet or an over-long sentence is fixed; else a bullet is made more precise
        (:meth:`refinements`); else, with ``add`` (the agent's own deliverable, :meth:`self_revise`), a fact read
        in the session that the document does not state yet is added (:meth:`add_fact`). Nothing left → no edit.

        Until 2026-12-03 there was no third step, so a short deliverable ran out of fixable lines and a D-L
        session with short outputs made fewer small edits than one with long outputs (profile-level recovery D 0.83
        on fresh set 2804, docs/measurements/2026-12-03-validity-round6.md): the edit count followed B as well as D.
        A workspace file (:meth:`revise_files`) gets no added fact: what it should say is the task's, not the
        persona's."""
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
            return add and self.add_fact(rel)
        first = [c for c in cands if any(w in lines[c[0]] and lab.lower() in lines[c[0]].lower()
                                         for lab, w, _ in fixes)]
        i, new = first[0] if first else self.rng.choice(cands)
        return self.edit(rel, lines[i], new)

    def add_fact(self, rel: str) -> bool:
        """Add one statement the file lacks (a small edit of one added line, TT §1 edit size < 10): the first
        statement understood in the session (:class:`.knowledge.Knowledge` order) none of whose values the file
        holds yet, written as a sentence about its subject (:func:`.phrasing.about`), after a drawn content line —
        as a bullet of the same indent when that line is a bullet, else as its own paragraph. Not when the task
        asks to shorten (``condense``). Returns whether the file changed."""
        text = self.own.get(rel)
        if text is None or self.condense or len(text.split("\n")) >= self.rules.get("max_lines", 10**6) - 1:
            return False
        st = next((s for s in self.kn.statements if s.slots and not any(
            v and v in text for k, v in s.slots.items() if not k.startswith("_"))), None)
        anchors = self._content_lines(text)
        spare = next((x for x in self.spare if x.strip("- ") not in text), None) if st is None else None
        if (st is None and spare is None) or not anchors:
            return False
        line = text.split("\n")[self.rng.choice(anchors)]
        bullet = re.match(r"^(\s*- )", line)
        said = about(st, self.lang, self.rng) if st is not None else spare.lstrip("- ")
        added = f"{bullet.group(1)}{said}" if bullet else f"\n{said}"
        return self.edit(rel, line, f"{line}\n{added}")

    def refinements(self, lines: list[str]) -> list[tuple[int, str]]:
        """Own-output bullets without any figure whose subject has a figure-bearing statement not yet in the
        text: the bullet gains that figure (the same subject, a more precise statement)."""
        text = "\n".join(lines)
        spare: dict[str, list[str]] = {}
        for st in self.kn.statements:
            if st.kind in ("figure", "date") and st.subject and not any(v in text for v in st.slots.values() if v):
                spare.setdefault(st.subject, []).append(about(st, self.lang, self.rng))
        out: list[tuple[int, str]] = []
        for i, ln in enumerate(lines):
            if not ln.lstrip().startswith("- ") or re.search(r"\d", ln):
                continue
            subj = next((x for x in spare if x in ln and spare[x]), None)
            if subj:
                out.append((i, f"{ln.rstrip()} {spare[subj][0]}" if self.lang == "en" else ln.rstrip() + spare[subj][0]))
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
            while j < len(heads) - 1 and sum(1 for ln in lines[heads[k]:heads[j]] if _BULLET.match(ln)) < 8:
                j += 1
            spans.append((heads[k] + 1, heads[j]))
        self.rng.shuffle(spans)
        # then runs of paragraphs anywhere (a plain-text file or a short document has no qualifying "## " section)
        runs = self._paragraph_runs(lines)
        self.rng.shuffle(runs)
        for a, b in spans + runs:
            block = lines[a:b]
            bullets = [ln for ln in block if _BULLET.match(ln)]
            paras = [ln for ln in block if _is_prose(ln)]
            if self.condense and len(bullets) + len(paras) >= 3:
                # cut the section to what matters: the first sentence of each paragraph, the first 3 bullets
                keep_b = set(bullets[:3])
                new_block = [condense_line(ln, self.lang) or ln if ln in paras else ln for ln in block
                             if ln not in bullets or ln in keep_b]
            elif len(bullets) >= 4:
                new_block = self._reflow(block)
            elif len(paras) >= 2 or (paras and len(SENTENCE_BREAK.split(paras[0])) >= 3):
                split = SENTENCE_BREAK
                new_block = []
                for ln in block:
                    if ln in paras:
                        new_block += [f"- {x.strip()}" for x in split.split(ln) if x.strip()]
                    else:
                        new_block.append(ln)
            else:
                continue
            old, new = "\n".join(block), "\n".join(new_block)
            if len(lines) - len(block) + len(new_block) >= self.rules.get("max_lines", 10**6) - 1:
                continue  # a line cap the task sets (T-16) is never passed
            if old.strip() and text.count(old) == 1 and old != new:
                return self.edit(rel, old, new)
        return self.small_edit(rel)

    @staticmethod
    def _paragraph_runs(lines: list[str], least: int = 8) -> list[tuple[int, int]]:
        """``(start, end)`` line spans of consecutive blank-separated paragraphs and bullet lists (no heading, table
        or heading-like line inside: :func:`_is_prose`), each grown until it holds ≥ ``least`` bullets or
        sentences (TT §2.4 D-M: a block edit changes 15–45 lines); spans of fewer than ``least // 2`` are left out.
        For texts whose sections are too short to qualify (a plain-text workspace file, a short B-M or B-R
        document)."""
        groups: list[tuple[int, int]] = []
        i = 0
        while i < len(lines):
            if not (_is_prose(lines[i]) or _BULLET.match(lines[i])):
                i += 1
                continue
            j = i
            while j < len(lines) and (_is_prose(lines[j]) or _BULLET.match(lines[j])):
                j += 1
            groups.append((i, j))
            i = j

        def weight(a: int, b: int) -> int:
            return sum(len(SENTENCE_BREAK.split(ln)) for ln in lines[a:b] if ln.strip())

        runs = []
        for k, (a, b) in enumerate(groups):
            m = k
            while weight(a, b) < least and m + 1 < len(groups) and \
                    not any(ln.strip() for ln in lines[groups[m][1]:groups[m + 1][0]]):  # only blank lines between
                m += 1
                b = groups[m][1]
            if weight(a, b) >= least // 2:
                runs.append((a, b))
        return runs

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
            if _BULLET.match(ln):
                run.append(_BULLET.sub("", ln).strip())
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

    # ------------------------------------------------------------------ workspace files (iterate / maintain)
    def edit_targets(self) -> list[str]:
        """The workspace files to change: editable text that is not clutter (a duplicate or an old version is
        not what the task means) and not feedback about it, most relevant first (:meth:`relevance`)."""
        eds = [f for f in self.files if PurePosixPath(f).suffix.lower() in EDITABLE_EXT and not clutter_category(f)]
        skip = re.compile(r"(feedback|review|update|batch|comment)", re.IGNORECASE)
        prim = [f for f in eds if not skip.search(f)] or eds
        n = 1 + self.count("D", 1.0, 0.5, 0.8, hi=2)
        return self.relevance(prim)[:n]

    def load(self, rel: str) -> str | None:
        """Full content of a workspace file through a whole-file read (needed before editing it): the text the
        read tool shows, without its line numbers or notes."""
        text = self.read(rel)
        return text.rstrip("\n") if text.strip() else None

    def revise_files(self, targets: list[str]) -> None:
        """Change the workspace files the task is about (TT §2.4): each target is read whole first,
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
