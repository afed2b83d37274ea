"""Organizing files and folders for :class:`~filegram_ray.engine.simulator.agent.PersonaAgent`: the mkdir / mv /
rm / cp primitives, curation of clutter and scratch files (TT §2.5, E tier), reorganisation, and the organize
flow with its index files (TT §2.3 organize row). Split out of ``agent.py`` as a mixin; every
method draws from the agent's ``rng`` exactly as before."""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath
from typing import Any

from filegram_ray.engine.simulator.filetypes import (
    FAMILY,
    FAMILY_ZH,
    clutter_category,
)


class OrganizingMixin:
    """How a :class:`PersonaAgent` moves, renames and deletes; uses the agent's state (``files``, ``own``,
    ``rng``, ``T``)."""

    # ------------------------------------------------------------------ file and folder primitives
    # One shell operation per command, sometimes two, each its own iteration with its own thinking time: a person
    # moves or deletes files one after another, not ten in one instant.
    def mkdir(self, *paths: str) -> None:
        new = [p for p in dict.fromkeys(paths) if p not in self.created_dirs]
        i = 0
        while i < len(new):
            k = 2 if self.rng.random() < 0.3 else 1
            self.bash(*(f"mkdir -p {shlex.quote(p)}" for p in new[i:i + k]))
            i += k
        self.created_dirs += new

    def taken(self) -> set[str]:
        """Paths that exist now as far as the session knows (workspace files, its own outputs, copies made)."""
        return set(self.files) | set(self.own) | self.copies

    def free(self, dst: str, taken: set[str] | None = None) -> str:
        """``dst``, or ``<stem>_2<ext>``, ``_3`` … when a file already has that path: a move never lands on an
        existing file."""
        taken = self.taken() if taken is None else taken
        if dst not in taken:
            return dst
        p = PurePosixPath(dst)
        k = 2
        while True:
            cand = str(p.with_name(f"{p.stem}_{k}{p.suffix}"))
            if cand not in taken:
                return cand
            k += 1

    def mv(self, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """``mv`` with full destination paths (TT §1: only ``mv f dir/f`` gives file_move), one file per command
        (two now and then), never onto an existing file (:meth:`free`); returns the pairs as done."""
        done: list[tuple[str, str]] = []
        i = 0
        while i < len(pairs):
            k = 2 if self.rng.random() < 0.25 and i + 1 < len(pairs) else 1
            chunk = []
            for a, b in pairs[i:i + k]:
                b = self.free(b, self.taken() - {a} | {d for _, d in chunk})
                chunk.append((a, b))
            i += k
            self.bash(*(f"mv {shlex.quote(a)} {shlex.quote(b)}" for a, b in chunk))
            for a, b in chunk:
                self._moved_path(a, b)
                done.append((a, b))
        return done

    def _moved_path(self, a: str, b: str) -> None:
        if a not in self.own:
            self.moved.append((a, b))
        if a in self.own:
            self.own[b] = self.own.pop(a)
            self.own_order[self.own_order.index(a)] = b
        if a in self.files:
            self.files[self.files.index(a)] = b
        if a in self.copies:
            self.copies.discard(a)
            self.copies.add(b)
        if a in self.view:
            self.view[b] = self.view[a]
        # a moved folder takes its files along
        for i, f in enumerate(self.files):
            if f.startswith(a + "/"):
                self.files[i] = b + f[len(a):]
        for f in [f for f in self.own_order if f.startswith(a + "/")]:
            g = b + f[len(a):]
            self.own[g] = self.own.pop(f)
            self.own_order[self.own_order.index(f)] = g

    def rm(self, paths: list[str]) -> None:
        """Delete, one file per command."""
        for p in paths:
            self.bash(f"rm {shlex.quote(p)}")
            if p not in self.own and p not in self.copies:
                self.removed.append(p)
            self.own.pop(p, None)
            self.copies.discard(p)
            if p in self.own_order:
                self.own_order.remove(p)
            if p in self.files:
                self.files.remove(p)

    def cp(self, src: str, dst: str) -> str:
        dst = self.free(dst)
        self.bash(f"cp {shlex.quote(src)} {shlex.quote(dst)}")
        self.copies.add(dst)
        return dst

    # ------------------------------------------------------------------ E: curation of own files (TT §2.5)
    def curate(self, plan: list[tuple[str, str]]) -> None:
        """Curation of the workspace's own clutter and of the agent's scratch files (TT §2.5).

        Candidates, in the order a person would let them go: temporary files, duplicates, superseded versions
        (:func:`clutter_category`), then the session's own scratch notes. How many go is a Poisson draw whose
        mean follows the session's E position (:meth:`count`: about 2.6 at E-L, 0.35 at E-M, 0.03 at E-R; TT §2.5
        E-L 1–4, E-M 0–1, E-R 0), so sessions of one tier differ and neighbouring tiers overlap; E-M-like sessions
        reach past temporary files only when the draw asks for more. Every file is inspected first
        (:meth:`inspect`): a person checks what a file is before deleting it."""
        clutter = [(f, c) for f in self.files if (c := clutter_category(f))]
        order = {"temp": 0, "duplicate": 1, "superseded": 2}
        cands = [f for f, c in sorted(clutter, key=lambda fc: order[fc[1]])]
        cands += [rel for _, rel in plan if rel in self.own]
        n = self.count("E", 2.6, 0.35, 0.03, hi=len(cands))
        for f in cands[:n]:  # each one looked at, then let go, one after another
            self.inspect([f])
            self.rm([f])

    def inspect(self, paths: list[str]) -> None:
        """Look at each file before deleting it (a person checks what a file is first): a file read in this
        session or written by the agent is known already; any other is opened at its first lines (a media file
        shows its annotation; the read is not taken into the notes: clutter is not material)."""
        for p in paths:
            if p in self.view or p in self.own or p in self.copies:
                continue
            self.read(p, limit=self.rng.choice((5, 8, 10)), note=False)

    def inspect_folders(self, paths: list[str], fresh: bool = True) -> None:
        """Before sorting files by their kind and name: list each folder they sit in (what the decision rests on is
        what a listing shows: names, types, sizes), once per sorting pass (``fresh``) or unless listed already."""
        if fresh:
            self.listed = set()
        for d in dict.fromkeys(str(PurePosixPath(p).parent) for p in paths if p not in self.own):
            d = "." if d in ("", ".") else d
            if d not in self.listed:
                self.bash("ls -l" if d == "." else f"ls -l {shlex.quote(d)}")
                self.listed.add(d)

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
        self.inspect_folders([f"{d}/x" for d in subs])  # look into each folder before moving it
        self.mv(pairs)

    # ------------------------------------------------------------------ organize tasks (TT §2.3 organize row)
    def flow_organize(self) -> None:
        """Organize (a task without a plan of its own): read (A, reduced budget), curate clutter and scratch first
        (E: what is pruned is not sorted), sort the rest by kind (:meth:`sort_files`, C), write a note of the new
        layout (B) and revise it (D)."""
        reads = self.reading_actions(budget_scale=0.6)
        writes: list[Any] = []
        plan: list[tuple[str, str]] = []
        for kind, ext in self.scratch_plan():
            rel = self.name(kind, ext)
            plan.append((kind, rel))
            writes.append(lambda k=kind, r=rel: self.write(r, self.render(k)))
        names = self.prescribed_names()
        note = names[0] if names else self.name("log", ".md")
        final: list[Any] = [lambda: self.curate(plan), lambda: self.sort_files(self.groups_by_kind()),
                            lambda: self.write(note, self.layout_note()), lambda: self.self_revise(note, record=True)]
        self.interleave(reads, writes, final)

    def groups_by_kind(self, files: list[str] | None = None) -> dict[str, list[str]]:
        """Files grouped by family (documents, mail, data, images, audio, video); one family → by the first word
        of the name."""
        groups: dict[str, list[str]] = {}
        for f in files if files is not None else list(self.files):
            ext = PurePosixPath(f).suffix.lower()
            fam = next((k for k, v in FAMILY.items() if ext in v), "misc")
            groups.setdefault(fam, []).append(f)
        if len(groups) == 1:
            only = next(iter(groups.values()))
            groups = {}
            for f in only:
                tok = re.split(r"[_\-. ]", PurePosixPath(f).stem)[0].lower() or "misc"
                groups.setdefault(tok if not tok.isdigit() else "misc", []).append(f)
        return groups

    def sort_files(self, groups: dict[str, list[str]], flat_ok: bool = False, root: str | None = None
                   ) -> list[tuple[str, str]]:
        """Sort every file of ``groups`` (name → files) into a structure as deep as this session builds
        (:meth:`draw_depth`, TT §2.3 organize row on average): 3 = ``<root>/<group>/<type>``, 2 = ``<root>/<group>``,
        1 = one folder per group (at most four, the rest in ``misc``), 0 = no folder: every group renamed in place
        with its name as a prefix. Under a folder structure a group is still renamed in place instead of moved now
        and then (probability 0.2 / 0.3 / 0.5 at C-L / M / R): sorted either way, so the task is done, while the
        number of moves varies between sessions as people's does. Folders are listed before sorting (the names and
        kinds the decision rests on). Returns the (old, new) pairs done."""
        zh = self.lang == "zh"
        items = [(g, [f for f in fs if f in self.files]) for g, fs in groups.items()]
        items = [(g, fs) for g, fs in items if fs]
        if not items:
            return []
        depth = self.draw_depth()
        if depth == 0 and not flat_ok and self.rng.random() < 0.5:
            depth = 1  # a task that wants a structure usually gets at least one level
        cap = 6 if depth >= 2 else self.rng.randint(3, 4)
        if len(items) > cap:
            items.sort(key=lambda kv: -len(kv[1]))
            items = items[: cap - 1] + [("misc", [f for _, fs in items[cap - 1:] for f in fs])]
        if root is None:
            root = ("01_organized_archive" if not zh else "01_归档整理") if self.p.naming != "short_abbrev" else "arch"
        label = {g: FAMILY_ZH.get(g, g) if zh else g for g, _ in items}
        rename_p = 1.0 if depth == 0 else self.lerp("C", 0.2, 0.3, 0.5)
        pairs: list[tuple[str, str]] = []
        dirs: list[str] = []
        for g, fs in items:
            pre = re.sub(r"[^\w]+", "_", g.lower())
            named = all(re.sub(r"[^\w]+", "_", PurePosixPath(f).stem.lower()).startswith(pre) for f in fs)
            # sorted by name: the group prefixes the file name, in place (a group already named so gets a folder)
            if self.rng.random() < rename_p and not named:
                for f in fs:
                    p = PurePosixPath(f)
                    stem = re.sub(r"[^\w]+", "_", p.stem.lower()).strip("_")
                    pre = re.sub(r"[^\w]+", "_", g.lower())
                    new = f"{pre}_{stem}{p.suffix.lower()}" if not stem.startswith(pre) else f"{stem}{p.suffix.lower()}"
                    dst = str(p.with_name(new))
                    if dst != f:
                        pairs.append((f, dst))
                continue
            for f in fs:
                ext = PurePosixPath(f).suffix.lower().lstrip(".") or "other"
                d = {3: f"{root}/{label[g]}/{ext}", 2: f"{root}/{label[g]}", 1: label[g]}[max(1, depth)]
                dirs.append(d)
                pairs.append((f, f"{d}/{PurePosixPath(f).name}"))
        pairs = [(a, b) for a, b in pairs if a != b]
        if not pairs:
            return []
        self.mkdir(*dict.fromkeys(dirs))
        self.inspect_folders([a for a, _ in pairs])
        return self.mv(pairs)

    def layout_note(self) -> str:
        """The note of a reorganised folder: each folder made and what it now holds (kinds and counts), the names
        changed, and what was removed, composed from this session's moves (T-05 "explain the logic")."""
        zh = self.lang == "zh"
        spec = self.doc_spec("log", "新布局说明" if zh else "How this folder is organised")
        by_dir: dict[str, list[str]] = {}
        renamed = 0
        for a, b in self.moved:
            parent = str(PurePosixPath(b).parent)
            if parent == str(PurePosixPath(a).parent):
                renamed += 1
            else:
                by_dir.setdefault(parent, []).append(b)
        lines = [f"# {spec.title}", ""]
        if by_dir:
            lines.append("文件按类型归入以下文件夹：" if zh else "Files are grouped by what they are:")
            lines.append("")
            origin = {b: a for a, b in self.moved}
            for d, fs in sorted(by_dir.items()):
                kinds = sorted({PurePosixPath(f).suffix.lstrip(".") for f in fs})
                eg = next((x for f in fs if (x := self.describe(origin.get(f, f), plain=False))), "")
                eg = (f"，例如{eg}" if zh else f", e.g. {eg}") if eg else ""
                lines.append(f"- `{d}/`：{len(fs)}个文件（{'、'.join(kinds)}）{eg}" if zh else
                             f"- `{d}/`: {len(fs)} files ({', '.join(kinds)}){eg}")
        if renamed:
            lines += ["", f"另有{renamed}个文件原地改名，名称前加上了类别。" if zh else
                      f"{renamed} files were renamed in place with their category as a prefix, so they sort together."]
        if self.removed:
            lines += ["", f"删除了{len(self.removed)}个临时或重复文件。" if zh else
                      f"{len(self.removed)} temporary or duplicate files were removed."]
        if not by_dir and not renamed:
            lines.append("文件保持原样。" if zh else "The files were left as they were.")
        body = self.body_after(spec, lines) if self.T["B"] == "L" else []
        return "\n".join(lines + [""] + body).rstrip("\n") + "\n"
