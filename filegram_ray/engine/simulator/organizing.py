"""Organizing files and folders for :class:`~filegram_ray.engine.simulator.agent.PersonaAgent`: the mkdir / mv /
rm / cp primitives, curation of clutter and scratch files (TT §2.5, E tier), reorganisation, and the organize
flow with its index files (TT §2.3 organize row). Split out of ``agent.py`` (issue #29) as a mixin; every
method draws from the agent's ``rng`` exactly as before."""

from __future__ import annotations

import re
import shlex
from collections import OrderedDict
from pathlib import PurePosixPath
from typing import Any

from filegram_ray.engine.simulator.filetypes import (
    DOC_EXT,
    FAMILY,
    FAMILY_ZH,
    TEMP_EXT,
    clutter_category,
)


class OrganizingMixin:
    """How a :class:`PersonaAgent` moves, renames and deletes; uses the agent's state (``files``, ``own``,
    ``rng``, ``T``)."""

    # ------------------------------------------------------------------ file and folder primitives
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

    # ------------------------------------------------------------------ reorganisation (T-18)
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
        for kind, rel in self.auxiliaries(""):  # B-L: appendix and references beside the note
            final.append(lambda k=kind, r=rel: self.write(r, self.render(k)))
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
