"""Documents written from what a session understood (:class:`~.knowledge.Knowledge`), in the genre the task asks
for: a sectioned report or summary (:func:`document`), a log of what the session did (:func:`action_log`), an
index of files (:func:`file_index`), a small table (:func:`statement_table`). Sentences are composed from the
statements' values (:mod:`.phrasing`), grouped by what they are about, in the persona's language and tone; no
sentence is copied from an input, no source is quoted as a frame, nothing addresses a chat partner.

The shape comes from a :class:`DocSpec` whose numbers the agent sets from TIER_TARGETS (line counts, heading depth,
table rows, figure references, the character budget of the B band): a document ends when its budget is spent or
its facts run out; it never pads.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from filegram_ray.engine.simulator.knowledge import Knowledge, Statement
from filegram_ray.engine.simulator.phrasing import (
    ZH_VALUES,
    cap,
    clause,
    header,
    join_clauses,
    merged_clause,
    sentence,
)

_CJK = re.compile(r"[\u4e00-\u9fff]")


@dataclass
class DocSpec:
    """Shape of one text document.

    Attributes:
        title: heading text.  lines: target line count (blank lines included).  max_depth: deepest heading level.
        structure: hierarchical | flat_list | narrative.  table_rows: data rows of one Markdown table (0 = none).
        figure_refs: ``(number, relpath)`` visuals to reference ("Figure 1" / "图1").  lang / tone: TT §4.
        numbered: numbered section titles.  topic: what the document is about.
        max_chars: character budget (None = none): the document stops taking facts once it would pass it, so its
        size follows the B band rather than how much was read (TT §2.2, §3).
        notes: key facts a working outline notes under its sections (:func:`outline`; 0 for other documents).
    """

    title: str
    lines: int
    max_depth: int = 3
    structure: str = "hierarchical"
    table_rows: int = 0
    figure_refs: list[tuple[int, str]] = field(default_factory=list)
    lang: str = "en"
    tone: str = "professional"
    max_line_chars: int = 90
    numbered: bool = False
    topic: str = ""
    closing: bool = False
    sections: list[str] | None = None
    max_chars: int | None = None
    notes: int = 0


@dataclass(frozen=True)
class Section:
    """A part of a document: its title (English, Chinese) and the statement keys it gathers ("*" = any left)."""

    en: str
    zh: str
    keys: frozenset[str]
    by: str = "subject"  # subject | date


def S(en: str, zh: str, keys: str, by: str = "subject") -> Section:  # noqa: N802 - a table-building shorthand
    return Section(en, zh, frozenset(keys.split()), by)


_FIN = "revenue margin fcf capex leverage target series row"
_MEET = "call email event zh_progress"
_LEGAL = "instructed stage legal_aid bail event row"
_LDATE = "affidavit mediation disclosure event batch_update"
_BDONE = "milestone target_met course csat zh_quarter"
_BOBST = "risks budget proposal anxious"
_BPLAN = "focus action owners zh_todo"
_HABIT = "run watercolor book heart rent zh_walk zh_notes row"
_PPL = "dinner moving run mention email"
_TROUBLE = "stretched moving passport trip"
_FILM = "film_pace film_animation director runtime watched double_bill clip video"
_PET = "weight booster scratching food tartar adopted photo"
_STUD = "degree thesis internship deans_list skills graduation"

#: Section schemes per task (ours, from what each task asks for); a task not listed uses :data:`DEFAULT_SCHEME`.
SCHEMES: dict[str, list[Section]] = {
    "T-01": [S("Watch list", "关注的公司", _FIN), S("Recurring questions", "反复出现的问题", "risk_flag watch revisit"),
             S("Calls and correspondence", "通话与往来邮件", _MEET), S("Other work", "其他工作", "*")],
    "T-02": [S("Clients and matters", "客户与案件", _LEGAL), S("Upcoming dates", "即将到来的日期", _LDATE, "date"),
             S("Who is doing what", "人员分工", "attend mention section"), S("Other notes", "其他", "*")],
    "T-06": [S("Business basics", "公司业务概况", "revenue series row call"),
             S("Financial highlights", "财务亮点", "margin fcf capex leverage target"),
             S("Risks", "风险", "risk_flag watch revisit risks"), S("Competitors", "竞争对手", "*")],
    "T-07": [S("Study and work", "学业与工作", "course stretched degree internship thesis milestone"),
             S("Habits and interests", "日常习惯与兴趣", _HABIT), S("People around them", "身边的人", _PPL),
             S("What weighs on them", "当前困扰", _TROUBLE), S("Other traces", "其他线索", "*")],
    "T-08": [S("Delivered", "完成的工作", _BDONE), S("What went well", "进展顺利的方面", "csat owners row"),
             S("What got in the way", "遇到的阻碍", _BOBST), S("Next quarter", "下季度计划", _BPLAN),
             S("Other records", "其他记录", "*")],
    "T-15": [S("Claims", "双方论点", "cagr_claim share_claim debt_claim"), S("The numbers", "原始数据", "row"),
             S("Other points", "其他", "*")],
    "T-16": [S("Dates this week and next", "近期日期", "revisit event call proposal affidavit", "date"),
             S("Risks to raise", "需提示的风险", "risk_flag watch risks"), S("Numbers", "关键数字", _FIN),
             S("Other", "其他", "*")],
    "T-19": [S("Your matter", "您的案件", _LEGAL), S("Dates to remember", "需要记住的日期", _LDATE, "date"),
             S("What the law says", "法律怎么规定", "section"), S("Other points", "其他", "*")],
    "T-22": [S("The films", "作品", _FILM), S("Other material", "其他资料", "*")],
    "T-24": [S("Results by company", "各公司业绩", "revenue series row margin"),
             S("Key metrics", "关键指标", "fcf capex leverage target"),
             S("Outlook", "展望", "risk_flag watch revisit call"), S("Other points", "其他", "*")],
    "T-25": [S("Key findings", "主要发现", _LEGAL), S("How the evidence connects", "证据之间的关系",
                                                        "event email photo video recording"),
             S("Needs attention", "待处理事项", _LDATE, "date"), S("Other", "其他", "*")],
    "T-27": [S("Academic background", "学业背景", "degree thesis deans_list graduation"),
             S("Skills", "技能", "skills course"), S("Experience", "经历", "internship milestone"),
             S("Other material", "其他材料", "*")],
    "T-28": [S("Shadow's story", "Shadow 的故事", "adopted photo"), S("Health", "健康", "weight booster tartar"),
             S("Daily care", "日常照顾", "food scratching"), S("Other notes", "其他", "*")],
}
DEFAULT_SCHEME = [S("Main points", "要点", _FIN + " " + _LEGAL + " " + _BDONE),
                  S("Dates", "日期", "*", "date"), S("People", "人物", _PPL + " attend owners"),
                  S("Other points", "其他", "*")]
#: Extra section titles for long documents that list what each source contributed (B-L "every claim cites
#: evidence", TT §2.2).
SOURCES_TITLE = {"en": "Where the facts come from", "zh": "资料来源"}


def cjk_ratio(text: str) -> float:
    """Share of CJK characters among letters (TIER_TARGETS §4 language signature)."""
    letters = [c for c in text if c.isalpha()]
    return sum(bool(_CJK.match(c)) for c in letters) / max(len(letters), 1)


def source_name(path: str) -> str:
    return PurePosixPath(path.split("#")[0]).name


class Budget:
    """Characters and lines left to a document (its B band, TT §2.2)."""

    def __init__(self, spec: DocSpec):
        self.chars = spec.max_chars if spec.max_chars else 10**9
        self.lines = spec.lines
        self.used_c = 0
        self.used_l = 0

    def take(self, text: str, lines: int = 1) -> bool:
        if self.used_c + len(text) + 1 > self.chars or self.used_l + lines > self.lines:
            return False
        self.used_c += len(text) + 1
        self.used_l += lines
        return True

    @property
    def spent(self) -> bool:
        return self.used_c >= self.chars or self.used_l >= self.lines


def _tone(text: str, spec: DocSpec, rng: random.Random) -> str:
    """A sentence in the persona's tone (TT §4): friendly addresses the reader now and then, casual drops the
    frame into a short fragment; professional stays as written."""
    if spec.tone == "friendly" and rng.random() < 0.22:
        if spec.lang == "zh":
            return rng.choice(("值得你留意：", "你会注意到，")) + text
        return rng.choice(("Worth knowing: ", "You'll notice that ", "Good news first: ")) + text[:1].lower() + text[1:]
    if spec.tone == "friendly" and spec.lang == "en" and text.endswith(".") and rng.random() < 0.08:
        return text[:-1] + "!"
    if spec.tone == "casual" and spec.lang == "en" and rng.random() < 0.4:
        return text.rstrip(".").replace("; ", " · ")
    return text


def _heading(level: int, num: str, title: str) -> str:
    return f"{'#' * level} {num}{title}"


def intro_line(kn: Knowledge, spec: DocSpec, rng: random.Random) -> str:
    """The opening sentence: how much was read and what it is mainly about (composed, no file list)."""
    subs = [s for s in kn.subjects() if s][:3]
    n = len({source_name(s.source) for s in kn.statements})
    if spec.lang == "zh":
        who = "、".join(subs)
        return rng.choice(((f"本文依据{n}份材料整理，主要涉及{who}。" if subs else f"本文依据{n}份材料整理。"),
                           (f"梳理了{n}份文件，重点是{who}。" if subs else f"梳理了{n}份文件。"),
                           (f"{who}是这{n}份文件里出现最多的。" if subs else f"看了{n}份文件。"),
                           (f"下面的内容来自{n}份文件，{who}着墨最多。" if subs else f"内容来自{n}份文件。")))
    who = ", ".join(subs[:-1]) + " and " + subs[-1] if len(subs) > 1 else (subs[0] if subs else "")
    return rng.choice(((f"Drawn from {n} files, mostly about {who}." if who else f"Drawn from {n} files."),
                       (f"{who} come up most often in the {n} files read." if who else f"{n} files read."),
                       (f"Based on {n} of the workspace files; {who} take most of the space." if who else
                        f"Based on {n} of the workspace files."),
                       (f"{n} files went into this, above all on {who}." if who else f"{n} files went into this.")))


def _groups(stmts: list[Statement], by: str) -> list[tuple[str, list[Statement]]]:
    if by == "date":
        stmts = sorted(stmts, key=lambda s: (s.date or "9999", s.order))
        out: dict[str, list[Statement]] = {}
        for s in stmts:
            out.setdefault(s.date or "", []).append(s)
        return list(out.items())
    order: dict[str, list[Statement]] = {}
    for s in stmts:
        order.setdefault(s.subject, []).append(s)
    return sorted(order.items(), key=lambda kv: (-len(kv[1]), kv[1][0].order))


def _sentence_for(subject: str, group: list[Statement], spec: DocSpec, rng: random.Random, by: str) -> str:
    cl = []
    by_key: dict[str, list[Statement]] = {}
    for s in group:
        by_key.setdefault(s.key, []).append(s)
    merged = {k: merged_clause(v, spec.lang) for k, v in by_key.items() if len(v) >= 2}
    done: set[str] = set()
    for s in group:
        if merged.get(s.key):
            if s.key not in done:
                cl.append(merged[s.key])
                done.add(s.key)
            continue
        c = clause(s, spec.lang, rng)
        if by == "date" and s.date and s.date in c and s.subject and s.subject not in c:
            c = f"{s.subject}: {c}" if spec.lang == "en" else f"{s.subject}：{c}"
        if subject and subject in c and by != "date":  # the wording already names the subject
            return _tone(cap(c) + ("。" if spec.lang == "zh" else "."), spec, rng)
        cl.append(c)
    head = "" if by == "date" and not subject else subject
    if by == "date" and subject:
        head = subject
    return _tone(sentence(head, cl, spec.lang, rng), spec, rng)


def document(kn: Knowledge, spec: DocSpec, rng: random.Random, scheme: list[Section] | None = None,
             lead: list[str] | None = None, sources_part: bool = True) -> str:
    """A sectioned document from the statements of ``kn`` (module docstring). ``scheme``: its sections (default
    :data:`DEFAULT_SCHEME`); ``lead``: lines written under the title before the sections (already composed)."""
    lang = spec.lang
    zh = lang == "zh"
    budget = Budget(spec)
    out = [f"# {spec.title}", ""]
    budget.take(spec.title, 2)
    if lead:
        for ln in lead:
            if budget.take(ln):
                out.append(ln)
        out.append("")
    elif len(kn):
        ln = intro_line(kn, spec, rng)
        if budget.take(ln, 2):
            out += [ln, ""]
    used: set[int] = set()
    depth = max(1, spec.max_depth)
    table_left = spec.table_rows
    figs = list(spec.figure_refs)
    secno = 0
    per_group = {"hierarchical": 3, "flat_list": 2, "narrative": 3}.get(spec.structure, 2)
    for sec in scheme or DEFAULT_SCHEME:
        if budget.spent:
            break
        pool = [s for s in kn.statements if s.order not in used and ("*" in sec.keys or s.key in sec.keys)]
        if not pool:
            continue
        secno += 1
        num = f"{secno}. " if spec.numbered else ""
        block: list[str] = []
        if sec.by == "date":  # a dated list: one bullet per fact, in date order
            for st in sorted(pool, key=lambda x: (x.date or "9999", x.order)):
                c = clause(st, lang, rng)
                if st.date and st.date not in c:
                    c = f"{st.date}{'：' if zh else ': '}{c}"
                if st.subject and st.subject not in c:
                    c = f"{st.subject}{'：' if zh else ' — '}{c}"
                txt = _tone(cap(c) + ("。" if zh else "."), spec, rng)
                if not budget.take(txt):
                    break
                used.add(st.order)
                block.append("- " + txt)
            pool = []
        groups = _groups(pool, sec.by)
        subno = 0
        for gi, (subject, group) in enumerate(groups):
            if budget.spent:
                break
            take = group[: per_group + (1 if depth >= 4 else 0)]
            if depth >= 3 and spec.structure == "hierarchical" and sec.by == "subject" and subject and \
                    len(take) >= 2 and gi < 6:
                sub = _heading(3, f"{secno}.{subno + 1} " if spec.numbered else "", subject)
                lines = []
                for s in take:
                    c = clause(s, lang, rng)
                    if not c:
                        continue
                    txt = _tone(cap(c) + ("。" if zh else "."), spec, rng)
                    if not budget.take(txt):
                        break
                    lines.append(("  - " if len(lines) % 3 == 2 else "- ") + txt)
                    used.add(s.order)
                if lines and budget.take(sub, 2):
                    block += ([""] if block and block[-1] != "" else []) + [sub, ""] + lines + [""]
                    subno += 1
                figs_here = [s for s in group[len(take):] if s.kind in ("figure", "row")][:3]
                if depth >= 4 and figs_here:
                    hd = _heading(4, "", ("数据：" if zh else "Figures: ") + subject)
                    rows = []
                    for s in figs_here:
                        txt = cap(clause(s, lang, rng)) + ("。" if zh else ".")
                        if not budget.take(txt):
                            break
                        rows.append("- " + txt)
                        used.add(s.order)
                    if rows and budget.take(hd, 2):
                        block += [hd, ""] + rows + [""]
                continue
            txt = _sentence_for(subject, take, spec, rng, sec.by)
            if not txt or not budget.take(txt):
                break
            used.update(s.order for s in take)
            if spec.structure == "narrative":
                if block and block[-1] and not block[-1].startswith(("#", "|", "-")) and len(block[-1]) < 320:
                    block[-1] += ("" if zh else " ") + txt
                else:
                    block += [txt, ""] if not block or block[-1] == "" else ["", txt, ""]
            else:
                block.append("- " + txt)
        if not block:
            secno -= 1
            continue
        title = sec.zh if zh else sec.en
        if depth >= 2 and budget.take(title, 2):
            out += [_heading(2, num, title), ""]
        if table_left > 0 and secno >= 2:
            tab = statement_table(kn, table_left, lang, rng, used)
            if tab and budget.take("\n".join(tab), len(tab) + 1):
                out += tab + [""]
                table_left = 0
        if figs and secno >= 2:
            n, rel = figs.pop(0)
            cap_ = (f"Figure {n} (`{rel}`) charts the main figures above." if not zh else
                    f"图{n}（`{rel}`）展示了上述主要数据。")
            out += [cap_, ""]
        out += block + ([""] if block and block[-1] != "" else [])
    if table_left > 0:
        tab = statement_table(kn, table_left, lang, rng, set())
        if tab:
            out += tab + [""]
    for n, rel in figs:
        out += [f"Figure {n}: `{rel}`." if not zh else f"图{n}：`{rel}`。", ""]
    if sources_part and depth >= 2 and spec.lines >= 70 and not budget.spent:
        part = sources_summary(kn, lang, rng, budget)
        if part:
            out += [_heading(2, f"{secno + 1}. " if spec.numbered else "", SOURCES_TITLE[lang]), ""] + part + [""]
    while out and (out[-1] == "" or out[-1].startswith("#")):
        out.pop()
    return "\n".join(out) + "\n"


def sources_summary(kn: Knowledge, lang: str, rng: random.Random, budget: Budget | None = None) -> list[str]:
    """One line per source: what it contributed (the subjects and kinds of facts taken from it), composed."""
    names = {"revenue": ("results", "业绩"), "target": ("target prices", "目标价"), "risk_flag": ("risks", "风险"),
             "instructed": ("matters", "案件"), "event": ("calendar dates", "日程"), "email": ("correspondence",
                                                                                          "邮件"),
             "row": ("table rows", "表格数据"), "milestone": ("milestones", "里程碑"), "budget": ("budgets", "预算"),
             "series": ("chart values", "图表数据"), "photo": ("a photo", "照片"), "weight": ("vet visits", "就诊"),
             "affidavit": ("deadlines", "截止日期"), "legal_aid": ("legal aid", "法律援助")}
    by: dict[str, list[Statement]] = {}
    for s in kn.statements:
        by.setdefault(source_name(s.source), []).append(s)
    out = []
    for src, ss in by.items():
        subs = list(dict.fromkeys(s.subject for s in ss if s.subject))[:3]
        kinds = list(dict.fromkeys(names[s.key][1 if lang == "zh" else 0] for s in ss if s.key in names))[:3]
        if lang == "zh":
            what = "、".join(kinds) or f"{len(ss)}条信息"
            line = f"- `{src}`：{what}" + (f"（{'、'.join(subs)}）" if subs else "")
        else:
            what = join_clauses(kinds, "en") or f"{len(ss)} facts"
            line = f"- `{src}`: {what}" + (f" on {', '.join(subs)}" if subs else "")
        if budget is not None and not budget.take(line):
            break
        out.append(line)
    return out


def statement_table(kn: Knowledge, rows: int, lang: str, rng: random.Random, used: set[int] | None = None
                    ) -> list[str]:
    """A Markdown table of up to ``rows`` facts that carry a number or a date (subject, what, value, date), or
    the rows of a table read, re-cut to at most four columns with the subject first (TT §2.6 F-M tables)."""
    if rows <= 0:
        return []
    table = [s for s in kn.statements if s.key == "row"]
    if len(table) >= 3:
        heads = [h for h in table[0].slots if not h.startswith("_")][:3]
        same = [s for s in table if [h for h in s.slots if not h.startswith("_")][:3] == heads]
        by: dict[str, list[Statement]] = {}
        for s in same:
            by.setdefault(s.subject, []).append(s)
        # the latest row of each subject first (a summary table), then earlier ones while rows are left
        picked: list[Statement] = []
        depth = 1
        while len(picked) < rows and any(len(v) >= depth for v in by.values()):
            picked += [v[-depth] for v in by.values() if len(v) >= depth][: rows - len(picked)]
            depth += 1
        first = table[0].slots.get("_first", "item")
        out = ["| " + " | ".join(header(h, lang) for h in [first] + heads) + " |", "|" + "---|" * (len(heads) + 1)]
        out += ["| " + " | ".join([s.subject] + [(ZH_VALUES.get(v, v) if lang == "zh" else v).replace("|", "/")
                                                 for v in (s.slots.get(h, "") for h in heads)]) + " |"
                for s in picked]
        return out
    facts = [s for s in kn.statements if s.kind in ("figure", "date") and s.subject and
             (used is None or s.order not in used)][:rows]
    if len(facts) < 2:
        return []
    head = "| 对象 | 内容 | 日期 |" if lang == "zh" else "| Subject | What | Date |"
    out = [head, "|---|---|---|"]
    for s in facts:
        out.append(f"| {s.subject} | {clause(s, lang, rng).replace('|', '/')} | {s.date or '–'} |")
    return out


def action_log(title: str, entries: list[tuple[str, str]], spec: DocSpec, rng: random.Random,
               lead: str = "", table: bool = False, headers: tuple[str, str] = ("Item", "What was done")) -> str:
    """A log of what the session did: ``entries`` = ``(item, composed description)``; a table when ``table``
    (F-M/F-L), else one bullet each; within the character budget (the log's B band, ``spec.max_chars``) but never
    without its entries: a record the task asks for lists every change. Over the budget, entries from the last one
    up lose their asides (:func:`terse_entry`: descriptions and reasons; the values, verdicts and places stay), then
    the lead goes; a log whose terse entries alone pass the budget is written terse (TT §2.2: a minimal writer's
    record is one line per change). Until version 10 the budget was not applied, so a log was the same size in
    every B tier (T-21's cleanup log 4,100–4,700 characters, median, set 6051)."""

    def render(es: list[tuple[str, str]], lead: str) -> str:
        out = [f"# {title}", ""]
        if lead:
            out += [lead, ""]
        if table:
            out += [f"| {headers[0]} | {headers[1]} |", "|---|---|"]
            out += [f"| {a.replace('|', '/')} | {b.replace('|', '/')} |" for a, b in es]
        else:
            sep = "：" if spec.lang == "zh" else ": "
            out += [f"- {a}{sep}{b}" if a else f"- {b}" for a, b in es]
        return "\n".join(out).rstrip() + "\n"

    text = render(entries, lead)
    if not spec.max_chars or len(text) <= spec.max_chars:
        return text
    es = list(entries)
    for i in reversed(range(len(es))):
        es[i] = (es[i][0], terse_entry(es[i][1]))
        text = render(es, lead)
        if len(text) <= spec.max_chars:
            return text
    return render(es, "")


#: What a terse log entry drops (:func:`terse_entry`): a parenthesised description, a reason after a dash.
_ASIDE = re.compile(r"\s?\([^()]*\)|（[^（）]*）")
_REASON = re.compile(r"\s—\s|——")


def terse_entry(text: str) -> str:
    """A log description without its asides: parenthesised descriptions removed and the reason after a dash cut
    ("same content as `a.md` (the Q3 notes); kept" → "same content as `a.md`; kept", "accepted — the data file
    agrees" → "accepted"); the values, the verdict and what was done stay."""
    text = _ASIDE.sub("", text)
    m = _REASON.search(text)
    return (text[:m.start()] if m and m.start() > 0 else text).rstrip(" ,，;；")


def file_index(title: str, files: list[tuple[str, str]], lang: str, table: bool, lead: str = "") -> str:
    """An index of files: ``(path, one-line description)``; a table (F-M) or a plain list (F-R)."""
    out = [f"# {title}", ""]
    if lead:
        out += [lead, ""]
    if table:
        out += ["| 文件 | 内容 |" if lang == "zh" else "| File | Contents |", "|---|---|"]
        out += [f"| `{p}` | {d.replace('|', '/')} |" for p, d in files]
    else:
        sep = "：" if lang == "zh" else " — "
        out += [f"- `{p}`{sep}{d}" if d else f"- `{p}`" for p, d in files]
    return "\n".join(out).rstrip() + "\n"


def describe_source(kn: Knowledge, path: str, lang: str, rng: random.Random) -> str:
    """What one file holds, in a few words, from the statements read in it (empty when nothing was read)."""
    ss = [s for s in kn.statements if s.source.split("#")[0] == path]
    if not ss:
        return ""
    subs = list(dict.fromkeys(s.subject for s in ss if s.subject))[:2]
    c = clause(ss[0], lang, rng)
    if lang == "zh":
        return (f"{'、'.join(subs)}：" if subs else "") + c
    return (f"{' and '.join(subs)}: " if subs else "") + c


def outline(kn: Knowledge, spec: DocSpec, rng: random.Random, scheme: list[Section] | None) -> str:
    """A working outline: the planned sections with the subjects each will cover (a draft, not a deliverable), and
    up to ``spec.notes`` key facts noted under the sections they belong to (one fact per section in turn, in read
    order), so that how full a working outline is follows how much its writer writes (``OutputMixin.doc_spec``)."""
    zh = spec.lang == "zh"
    out = [f"# {spec.title}", ""]
    budget = Budget(spec)
    secs = list(enumerate(scheme or DEFAULT_SCHEME, 1))
    pools = {i: [s for s in kn.statements if "*" in sec.keys or s.key in sec.keys] for i, sec in secs}
    notes: dict[int, list[str]] = {i: [] for i, _ in secs}
    used: set[int] = set()
    left = spec.notes
    while left > 0:
        added = 0
        for i, _ in secs:
            st = next((s for s in pools[i] if s.order not in used), None)
            if st is None or left <= 0:
                continue
            used.add(st.order)
            c = clause(st, spec.lang, rng)
            head = f"{st.subject}{'：' if zh else ': '}" if st.subject and st.subject not in c else ""
            notes[i].append(f"   - {head}{c}" if c else "")
            left -= 1
            added += 1
        if not added:
            break
    for i, sec in secs:
        subs = [x for x in kn.subjects(pools[i]) if x][:4]
        line = f"{i}. {sec.zh if zh else sec.en}" + ((("：" if zh else ": ") + ("、" if zh else ", ").join(subs))
                                                     if subs else "")
        if not budget.take(line):
            break
        out.append(line)
        for n in notes[i]:
            if n and budget.take(n):
                out.append(n)
    dates = kn.dated()[:3]
    if dates:
        line = rng.choice(("待核对日期：", "需确认的日期：", "关键日期：") if zh else
                          ("Dates to check: ", "Dates to confirm: ", "Key dates: ", "Check the dates ")) + \
            ("、" if zh else ", ").join(s.date for s in dates)
        if budget.take(line):
            out += ["", line]
    return "\n".join(out).rstrip() + "\n"


_TOKEN = re.compile(r"\$?\d[\d,.]*\d%?|\d{4}-\d\d-\d\d|\b[A-Z][a-z]+(?: [A-Z][a-z'’-]+)+\b")


def describe_change(old: str, new: str, lang: str) -> str:
    """What an edit did, composed from the old and new text: a value corrected, a text shortened, lines added
    (a new section named by its heading), bullets turned into paragraphs or back, headings or dates restyled,
    else lines reworded."""
    zh = lang == "zh"
    o_tok, n_tok = _TOKEN.findall(old), _TOKEN.findall(new)
    gone = [t for t in o_tok if t not in n_tok]
    came = [t for t in n_tok if t not in o_tok]
    if gone and came and len(gone) <= 2:
        pairs = list(zip(gone, came))
        if zh:
            return "；".join(f"将{a}更正为{b}" for a, b in pairs)
        return "; ".join(f"corrected {a} to {b}" for a, b in pairs)
    ow, nw = len(old.split()), len(new.split())
    if nw < 0.8 * ow:
        return f"由{ow}词压缩为{nw}词" if zh else f"shortened from {ow} to {nw} words"
    o_lines = [ln for ln in old.split("\n") if ln.strip()]
    n_lines = [ln for ln in new.split("\n") if ln.strip()]
    heads = [ln.lstrip("# ").strip() for ln in n_lines if ln.startswith("#") and ln not in o_lines]
    if heads:
        return f"新增“{heads[0]}”一节" if zh else f"added a section “{heads[0]}”"
    if len(n_lines) > len(o_lines):
        k = len(n_lines) - len(o_lines)
        return f"补充了{k}行内容" if zh else f"added {k} line{'s' if k > 1 else ''}"
    ob = sum(ln.lstrip().startswith("- ") for ln in o_lines)
    nb = sum(ln.lstrip().startswith("- ") for ln in n_lines)
    if ob > nb:
        return f"把{ob}条要点改写成段落" if zh else f"rewrote {ob} bullets as prose"
    if nb > ob:
        return f"把段落拆成{nb}条要点" if zh else f"split the text into {nb} bullets"
    if any(ln.startswith("#") for ln in n_lines) and not any(ln.startswith("#") for ln in o_lines):
        return "统一了标题格式" if zh else "restyled the heading"
    k = max(1, sum(1 for a, b in zip(o_lines, n_lines) if a != b))
    return f"改写了{k}行" if zh else f"reworded {k} line{'s' if k > 1 else ''}"
