"""What a session understood from what it read: statements with their parts (who, what, how much, when), so that
outputs are *written* from facts rather than pasted from the inputs.

A person reading "Catherine Jones instructed us on 2024-06-02 regarding matter CIV-2024-7342; the next hearing is
listed for 2024-07-28." remembers a matter, its client and two dates, and later writes "CIV-2024-7342 (Catherine
Jones): instructed 2024-06-02, next hearing 2024-07-28". :func:`parse_statements` turns read text into
:class:`Statement` objects — a ``key`` (what kind of statement), its ``slots`` (the values read, verbatim), a
``subject`` (the entity it is about) and a ``date`` — and :class:`Knowledge` keeps them, indexed by subject, key and
date, for the writers (:mod:`.genres`).

Sources of statements, most specific first:

* sentence shapes of the workspace's own vocabulary (:data:`PATTERNS`: earnings, hearings, milestones, diary
  entries, vet visits, …; keyed on their wording, each value captured as read);
* structure: table rows (a CSV, a document table, a JSON list of records, a spreadsheet sheet) named by their
  header; e-mail headers; calendar events; media annotations (a chart's series, a photo's scene and caption, a
  video's scenes, a recording's transcript, which is parsed like any text);
* anything else with a figure or a date: its labelled figures and dated mentions (``figure`` / ``dated``), so an
  imported workspace still yields facts.

Pure functions of the text read; no randomness (the writers draw their phrasing from the agent's generator).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from filegram_ray.limits import load_json

DATE = r"\d{4}-\d\d-\d\d"
CASE = r"[A-Z]{2,4}-\d{4}-\d{3,6}"
AMT = r"\$[\d,]+(?:\.\d+)?[MBK]?"

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(\[])|(?<=[。！？；])")
_TRAIL = " .,;:。，；：!！"


@dataclass
class Statement:
    """One fact read: ``key`` (its shape, :data:`PATTERNS` or a structural kind), ``slots`` (values as read),
    ``subject`` (the entity it is about, or ""), ``date`` (ISO date or ""), ``source`` (workspace path) and
    ``kind``: ``figure`` (a number), ``date``, ``person`` (names only), ``theme`` (neither) or ``row``."""

    key: str
    slots: dict[str, str]
    subject: str = ""
    date: str = ""
    source: str = ""
    kind: str = "theme"
    text: str = ""
    order: int = 0

    def sig(self) -> tuple:
        """What makes two statements the same fact (read twice, or in two files); what a file *is* (a photo, a
        clip, a recording, a table row, a mail) stays with its file."""
        where = self.source if self.key in PER_FILE else ""
        return (self.key, self.subject, tuple(sorted(self.slots.items())), where)


#: Statement keys that describe their own file (kept per file even when two files say the same).
PER_FILE = frozenset({"photo", "clip", "video", "music", "recording", "row", "email", "event", "series"})


@dataclass(frozen=True)
class Pattern:
    key: str
    regex: re.Pattern
    subject: str | None = None   # slot naming the subject (None: the source's subject)
    date: str | None = None      # slot holding the statement's date
    subject_fmt: str = "{}"       # how the subject slot becomes a subject ("Project {}")


def _p(key: str, rx: str, subject: str | None = None, date: str | None = None, fmt: str = "{}") -> Pattern:
    return Pattern(key, re.compile(rx), subject, date, fmt)


#: Statement shapes, tried in order on each sentence (the first that matches wins). Capture groups hold the
#: values as written; ``subject`` / ``date`` name the slots that give the statement its entity and date.
PATTERNS: list[Pattern] = [
    # finance
    _p("revenue", rf"(?P<s>[\w .&'-]+?) reported revenue of (?P<amt>{AMT}) for (?P<q>Q\d), (?P<pct>\d+)% above "
                  "consensus", "s"),
    _p("margin", r"Gross margin came in at (?P<pct>\d+)%"),
    _p("risk_flag", r"(?P<who>[\w .'-]+?) flagged inventory build-up at (?P<s>[\w.&'-]+) as the main near-term risk",
       "s"),
    _p("target", r"target price for (?P<s>[\w.&'-]+) remains (?P<price>\$[\d,.]+)", "s"),
    _p("capex", rf"Capex guidance of (?P<amt>{AMT}) implies continued capacity expansion through (?P<year>\d{{4}})"),
    _p("call", rf"The call with (?P<who>[\w .'-]+?) on (?P<d>{DATE}) focused on (?P<topic>[^.]+)", "who", "d"),
    _p("fcf", rf"Free cash flow was (?P<amt>{AMT}), covering the dividend roughly (?P<x>[\d.]+)x"),
    _p("revisit", rf"revisit the (?P<s>[\w.&'-]+) thesis before the (?P<d>{DATE}) earnings release", "s", "d"),
    _p("leverage", r"Debt to equity stands at (?P<r>[\d.]+)"),
    _p("watch", r"Key watch items: (?P<items>[^.]+)"),
    # legal
    _p("instructed", rf"(?P<client>[\w .'-]+?) instructed us on (?P<d1>{DATE}) regarding matter (?P<case>{CASE}); "
                     rf"the next hearing is listed for (?P<d2>{DATE})", "case", "d2"),
    _p("affidavit", rf"affidavit must be filed and served by (?P<d>{DATE})", None, "d"),
    _p("attend", r"(?P<who>[\w .'-]+?) will attend the directions hearing at the (?P<court>[\w .'-]+? Court)", "who"),
    _p("section", r"Under section (?P<n>\d+) the court must consider the best interests of the child"),
    _p("disclosure", rf"prosecution disclosed further evidence on (?P<d>{DATE})", None, "d"),
    _p("legal_aid", rf"Legal aid was approved for (?P<client>[\w .'-]+?) with a contribution of (?P<amt>{AMT})",
       "client"),
    _p("anxious", r"Client is anxious about the timeline"),
    _p("bail", r"Bail conditions require (?P<client>[\w .'-]+?) to report to the police station (?P<freq>[\w ]+)",
       "client"),
    _p("mediation", rf"Mediation is scheduled for (?P<d>{DATE}); (?P<who>[\w .'-]+?) will prepare the settlement",
       None, "d"),
    _p("stage", rf"The matter (?P<case>{CASE}) is at the interlocutory stage", "case"),
    # business
    _p("milestone", rf"Project (?P<p>\w+) reached milestone (?P<n>\d+) on (?P<d>{DATE}), (?P<late>[\w ]+?) later "
                    "than planned", "p", "d", "Project {}"),
    _p("owners", r"(?P<a>[\w .'-]+?) owns the integration work; (?P<b>[\w .'-]+?) is reviewing the API contract", "a"),
    _p("budget", rf"The budget for (?P<p>\w+) is (?P<amt>{AMT}), of which (?P<pct>\d+)% has been spent", "p", None,
       "Project {}"),
    _p("proposal", rf"Client (?P<co>.+?) asked for a revised proposal by (?P<d>{DATE})", "co", "d"),
    _p("action", r"Action item: (?P<who>[\w .'-]+?) to circulate the updated timeline before (?P<when>\w+)", "who"),
    _p("csat", r"Customer satisfaction rose to (?P<pct>\d+)% after the onboarding changes"),
    _p("risks", r"Risks: (?P<items>[^.]+)"),
    _p("course", r"I finished the (?P<topic>[\w ,'-]+?) course module"),
    _p("target_met", rf"The quarterly target of (?P<n>\d+) signed accounts was met on (?P<d>{DATE})", None, "d"),
    _p("focus", r"Next quarter we will focus on reliability and the (?P<p>\w+) rollout", "p", None, "Project {}"),
    # personal
    _p("run", rf"Woke up early on (?P<d>{DATE}) and went for a run along the river with (?P<who>[\w .'-]+)", "who",
       "d"),
    _p("watercolor", r"practising watercolou?r washes"),
    _p("moving", r"Talked to (?P<who>[\w .'-]+?) about moving to (?P<city>[\w .'-]+?); still undecided", "who"),
    _p("book", r"Finished reading (?P<book>[^;]+?); the middle chapters dragged"),
    _p("rent", rf"Monthly budget: rent (?P<amt>{AMT})"),
    _p("stretched", r"Feeling stretched between work deadlines and the (?P<topic>[\w ,'-]+?) course"),
    _p("trip", rf"Booked a weekend trip for (?P<d>{DATE})", None, "d"),
    _p("dinner", r"Dinner with (?P<a>[\w .'-]+?) and (?P<b>[\w .'-]+?); we laughed about the (?P<what>[\w -]+)", "a"),
    _p("heart", r"Resting heart rate this week averaged (?P<n>\d+) bpm"),
    _p("passport", rf"call Mom on Sunday and renew the passport before (?P<d>{DATE})", None, "d"),
    # film
    _p("film_pace", r"(?P<film>[\w .'&-]+?) is a quiet, patient film", "film"),
    _p("film_animation", r"The animation in (?P<film>[\w .'&-]+?) mixes hand-drawn backgrounds with simple 3D "
                         "lighting", "film"),
    _p("director", r"Director (?P<who>[\w .'-]+?) described the project as a love letter to (?P<what>[\w -]+)"),
    _p("runtime", r"Runtime (?P<n>\d+) minutes; I would rate it (?P<stars>\d) out of 5"),
    _p("watched", rf"Watched it with (?P<who>[\w .'-]+?) on (?P<d>{DATE})", None, "d"),
    _p("double_bill", r"Best suited for a rainy-evening double bill"),
    # pet
    _p("weight", rf"(?P<pet>Shadow) weighed (?P<kg>[\d.]+) kg at the check-up on (?P<d>{DATE})", "pet", "d"),
    _p("booster", rf"Vaccination booster due on (?P<d>{DATE})", None, "d"),
    _p("scratching", r"still scratches the sofa"),
    _p("food", r"Switched to a grain-free kitten food from (?P<co>.+?); portion (?P<g>\d+) g per day"),
    _p("tartar", r"Dr\. (?P<who>[\w .'-]+?) noted mild tartar"),
    _p("adopted", rf"Adopted from the (?P<shelter>[\w .'-]+? Shelter) on (?P<d>{DATE}); microchip registered to "
                  r"(?P<owner>[\w .'-]+)", None, "d"),
    # student
    _p("degree", r"(?P<who>[\w .'-]+?) completed a (?P<degree>Bachelor of [\w ]+?) at (?P<uni>[\w .'-]+?) with a GPA "
                 r"of (?P<gpa>[\d.]+)", "who"),
    _p("thesis", r"The thesis on (?P<topic>[\w ,'-]+?) was supervised by Professor (?P<who>[\w .'-]+)"),
    _p("internship", rf"Internship at (?P<co>.+?) from (?P<d1>{DATE}) to (?P<d2>{DATE})", "co", "d1"),
    _p("deans_list", r"Awarded the Dean's List in (?P<year>\d{4})"),
    _p("skills", r"Skills: (?P<items>[^.]+)"),
    _p("graduation", rf"Graduation ceremony is on (?P<d>{DATE})", None, "d"),
    # planted documents (T-11, T-15, T-14, T-18)
    _p("ceo", r"CEO:? (?P<who>[A-Z][\w'-]+(?: [A-Z][\w'-]+)+)"),
    _p("headcount", r"(?:Team size|Total employees|Headcount):? (?P<n>\d+)"),
    _p("launch", rf"(?:Planned launch|Launch confirmed for|Launch|launch on track for):? (?P<d>{DATE})", None, "d"),
    _p("annual_revenue", r"(?:Annual revenue|Revenue reported as|annual revenue of):? (?P<amt>\$[\d,]+)"),
    _p("project_budget", r"(?:Approved project budget|Horizon budget|budget):? (?P<amt>\$[\d,]+)"),
    _p("cagr_claim", r"Revenue (?:grew at a|CAGR of) (?P<pct>[\d.]+)% ?(?P<rest>CAGR|is)"),
    _p("share_claim", r"Market share is stable at about (?P<pct>[\d.]+)%"),
    _p("debt_claim", r"Debt more than doubled to (?P<amt>\$[\d.,]+M) while market share fell to (?P<pct>[\d.]+)%"),
    _p("revision", rf"Updated on (?P<d>{DATE}) by (?P<who>(?:(?:Mr|Mrs|Ms|Dr)\. )?[\w '-]+?(?: (?:Jr|Sr)\.)?)\.(?:\s|$)",
       None, "d"),
    _p("batch_add", rf"Add a summary of (?P<case>{CASE}) to (?P<folder>[\w/]+) \((?P<d>{DATE})\)", "case", "d"),
    _p("batch_update", rf"Update (?P<folder>[\w/]+) with the new listing time for (?P<d>{DATE})", None, "d"),
    _p("batch_supersede", r"Supersedes batch (?P<b>\d) item (?P<i>\d): that case summary belongs in (?P<folder>[\w/]+)"),
    # registrations (T-29)
    _p("industry", r"Industry: (?P<ind>[\w ,&-]+?) \(SSIC (?P<code>\d+)\)"),
    _p("entity", r"Entity name: (?P<name>.+)"),
    # Chinese
    _p("zh_progress", rf"(?P<d>{DATE}) ?和(?P<who>\S+?)讨论了项目进度", "who", "d"),
    _p("zh_notes", r"整理了笔记，重点是(?P<topic>[^。]+)"),
    _p("zh_todo", r"联系(?P<who>\S+?)确认会议时间"),
    _p("zh_walk", r"周末去公园散步"),
    _p("zh_quarter", r"这个季度的目标基本完成"),
]

_NAME = re.compile(r"\b(?:(?:Mr|Mrs|Ms|Dr|Prof)\.\s)?[A-Z][a-z]+(?:[ -][A-Z][a-z'’]+){1,2}\b")
_FIG = re.compile(r"(?P<label>[A-Za-z][A-Za-z /&()'-]{2,40}?)\s*(?:[:=]|\bis\b|\bwas\b|\bof\b|\bat\b)\s*"
                  r"(?P<v>\$?-?\d[\d,]*(?:\.\d+)?\s?(?:%|[MBK]\b|bn\b|million\b|billion\b)?)")
_DATE_RX = re.compile(DATE)
_STOP_SUBJECT = {"The", "This", "That", "Our", "We", "It", "Key", "Next", "Notes", "Summary", "Details", "Figures"}


def _clean(v: str) -> str:
    return v.strip().strip(_TRAIL).strip()


def _kind(slots: dict[str, str]) -> str:
    vals = " ".join(slots.values())
    if _DATE_RX.search(vals):
        return "date"
    if re.search(r"\d", vals):
        return "figure"
    if any(_NAME.search(v) for v in slots.values()):
        return "person"
    return "theme"


def title_subject(title: str) -> str:
    """The entity a document is about, from its title: a case number, a project, the name after a colon
    ("Review: Glass Harbor"), or a leading company token ("TSMC Q3 earnings review"); "" when none."""
    t = title.strip().lstrip("#").strip()
    m = re.search(CASE, t)
    if m:
        return m.group(0)
    m = re.search(r"\bProject (\w+)", t)
    if m:
        return f"Project {m.group(1)}"
    if "Shadow" in t:
        return "Shadow"
    m = re.match(r"[^:]{2,40}:\s+([A-Z][\w'&.-]*(?:\s+[A-Z][\w'&.-]*){0,3})\s*$", t)
    if m and m.group(1).split()[0] not in _STOP_SUBJECT:
        return m.group(1)
    m = re.match(r"([A-Z][A-Za-z]{1,11})\s+(?:Q\d|vs\b|valuation|10-Q|annual|earnings)", t)
    if m and m.group(1) not in _STOP_SUBJECT:
        return m.group(1)
    return ""


def sentences_of(text: str) -> list[str]:
    """Sentences of extracted text: lines (a wrapped PDF/DOCX line joined to the next when it does not end a
    sentence), then split at sentence ends; bullets, heading marks and table pipes removed."""
    lines: list[str] = []
    for raw in text.splitlines():
        s = re.sub(r"^\s*(?:#{1,6}\s+|[-*+•▪◦●‣]\s*|\d{1,3}[.)]\s+|>\s*)", "", raw).strip()
        if not s:
            lines.append("")
            continue
        if lines and lines[-1] and not re.search(r"[.!?。！？:;]$", lines[-1]) and len(lines[-1]) >= 45 \
                and re.match(r"[a-z0-9$(]", s):
            lines[-1] += " " + s
        else:
            lines.append(s)
    out: list[str] = []
    for ln in lines:
        if ln:
            out += [p.strip() for p in _SENT.split(ln) if p.strip()]
    return out


def _match_sentence(sent: str) -> tuple[Pattern, dict[str, str]] | None:
    for pat in PATTERNS:
        m = pat.regex.search(sent)
        if m:
            return pat, {k: _clean(v) for k, v in m.groupdict().items() if v is not None}
    return None


def _fallback(sent: str, source: str, subject: str) -> list[Statement]:
    """Labelled figures and dated mentions of a sentence no pattern knows (module docstring)."""
    out: list[Statement] = []
    for m in _FIG.finditer(sent):
        label = " ".join(m.group("label").split()[-5:]).strip(" -(")
        if len(label) >= 3 and not label[0].isdigit():
            out.append(Statement("figure", {"label": label, "v": _clean(m.group("v"))}, subject, "", source, "figure",
                                 sent))
    for m in _DATE_RX.finditer(sent):
        before = re.findall(r"[A-Za-z][\w'-]*", sent[:m.start()])[-5:]
        if len(before) >= 2:
            out.append(Statement("dated", {"what": " ".join(before), "d": m.group(0)}, subject, m.group(0), source,
                                 "date", sent))
    if not out:
        names = [n for n in _NAME.findall(sent) if n.split()[0] not in _STOP_SUBJECT]
        if names and len(sent.split()) >= 5:
            out.append(Statement("mention", {"who": names[0], "gist": _gist(sent, names[0])}, names[0], "", source,
                                 "person", sent))
    return out


def _gist(sent: str, name: str) -> str:
    """A few content words of ``sent`` around ``name`` (a mention's topic, not the sentence)."""
    words = [w for w in re.findall(r"[A-Za-z][a-z'-]{3,}", sent.replace(name, " ")) if w.lower() not in
             {"will", "with", "that", "this", "from", "have", "been", "about", "their", "there"}]
    return " ".join(words[:4]).lower()


def parse_statements(text: str, source: str, title: str = "") -> list[Statement]:
    """Statements of one read text (module docstring). ``title``: the document's title when known (else its first
    line), for the subject of sentences that do not name theirs."""
    stripped = text.strip()
    if not stripped:
        return []
    first = next((ln for ln in stripped.splitlines() if ln.strip()), "")
    subject = title_subject(title or first)
    ext = PurePosixPath(source).suffix.lower()
    if ext == ".csv" or ext == ".tsv":
        return _table_rows([ln.split("," if ext == ".csv" else "\t") for ln in stripped.splitlines()], source)
    if ext == ".json":
        return _json_rows(stripped, source)
    if stripped.startswith(("A photo of", "An animated GIF", "Video scenes:", "Music:", "A bar chart", "A line chart",
                            "Transcript:")):
        return _annotation(stripped, source, subject)
    out: list[Statement] = []
    if ext == ".eml" or re.match(r"From: .+\n(?:.+\n)*?Subject: ", stripped):
        out += _email(stripped, source)
    if ext == ".ics" or stripped.startswith("dtstart:"):
        return _calendar(stripped, source)
    rows: list[list[str]] = []
    prose: list[str] = []
    for ln in stripped.splitlines():
        cells = [c.strip() for c in (ln.strip().strip("|").split("|") if ln.strip().startswith("|") else ln.split("\t"))]
        if len(cells) >= 3 and not re.fullmatch(r"[-: |]+", ln.strip()):
            rows.append(cells)
            continue
        if re.fullmatch(r"\s*\|?[-: |]+\|?\s*", ln):
            continue
        if rows:
            out += _table_rows(rows, source)
            rows = []
        prose.append(ln)
    if rows:
        out += _table_rows(rows, source)
    head = (title or first).lstrip("# ").strip()
    for sent in sentences_of("\n".join(prose)):
        if sent == head or len(sent) < 12:
            continue
        hit = _match_sentence(sent)
        if hit:
            pat, slots = hit
            subj = pat.subject_fmt.format(slots[pat.subject]) if pat.subject and slots.get(pat.subject) else subject
            out.append(Statement(pat.key, slots, subj, slots.get(pat.date, "") if pat.date else "", source,
                                 _kind(slots), sent))
        else:
            out += _fallback(sent, source, subject)
    return out


def _human(h: str) -> str:
    h = h.strip().replace("_", " ")
    for suf, rep in ((" musd", " (USD m)"), (" pct", " (%)"), (" usd", " (USD)"), (" hours", " (hours)")):
        if h.endswith(suf):
            h = h[: -len(suf)] + rep
    return h


def _table_rows(rows: list[list[str]], source: str) -> list[Statement]:
    """Rows named by the first row (a header: no digit in any cell); a table whose header was not read gives
    nothing (its columns cannot be named)."""
    rows = [[c.strip() for c in r] for r in rows if any(c.strip() for c in r)]
    if len(rows) < 2 or any(re.search(r"\d", c) for c in rows[0]):
        return []
    head = rows[0]
    body = [r for r in rows[1:] if len(r) == len(head)]
    # the subject column: the first whose values name things (not dates, periods or numbers) and repeat or vary
    # little, e.g. the company of a quarterly table; else the first column
    def entity_col(j: int) -> bool:
        vals = [r[j] for r in body if r[j]]
        return bool(vals) and not any(re.fullmatch(r"[\d$.,%:/ -]+|\d{4}Q\d|Q\d", v) for v in vals) and \
            len(set(vals)) <= max(2, len(vals) * 0.75)
    preferred = ("company", "client", "owner", "name", "case_no", "case", "ticker", "film", "title", "person")
    cands = [j for j in range(len(head)) if entity_col(j)]
    cands.sort(key=lambda j: (head[j].strip().lower() not in preferred,
                              not all(r[j][:1].isupper() for r in body if r[j]), j))
    sj = cands[0] if cands else 0
    order = [sj] + [j for j in range(len(head)) if j != sj]
    out = []
    for r in body:
        if not r[sj]:
            continue
        slots = {_human(head[j]): r[j] for j in order[1:] if r[j]}
        out.append(Statement("row", slots, r[sj], next((c for c in r if _DATE_RX.fullmatch(c)), ""), source, "row",
                             " ".join(r)))
        out[-1].slots["_first"] = _human(head[sj])
    return out


def _json_rows(text: str, source: str) -> list[Statement]:
    try:
        obj = load_json(text, source)
    except ValueError:
        return []
    items = obj.get("items") if isinstance(obj, dict) else obj if isinstance(obj, list) else None
    if not isinstance(items, list) or not items or not isinstance(items[0], dict):
        return []
    keys = list(items[0])
    lead = next((k for k in ("owner", "name", "company", "task", "case_no") if k in keys), keys[0])
    rows = [[lead] + [k for k in keys if k != lead]]
    rows += [[str(it.get(lead, ""))] + [str(it.get(k, "")) for k in keys if k != lead] for it in items
             if isinstance(it, dict)]
    return _table_rows(rows, source)


def _email(text: str, source: str) -> list[Statement]:
    head = dict(re.findall(r"^(From|To|Date|Subject): (.+)$", text, re.MULTILINE))
    if "From" not in head:
        return []
    who = re.sub(r"\s*<[^>]*>", "", head.get("From", "")).strip()
    to = re.sub(r"\s*<[^>]*>", "", head.get("To", "")).strip()
    m = re.search(r"(\d{1,2}) (\w{3}) (\d{4})", head.get("Date", ""))
    months = {m_: i for i, m_ in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                                            "Nov", "Dec"), 1)}
    d = f"{m.group(3)}-{months.get(m.group(2), 1):02d}-{int(m.group(1)):02d}" if m else ""
    return [Statement("email", {"from": who, "to": to, "topic": head.get("Subject", "").strip(), "d": d}, who, d,
                      source, "date" if d else "person", head.get("Subject", ""))]


def _calendar(text: str, source: str) -> list[Statement]:
    out = []
    for block in re.split(r"\n\s*\n", text):
        f = dict(re.findall(r"^(\w+): (.*)$", block, re.MULTILINE))
        m = re.match(r"(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)", f.get("dtstart", ""))
        if not m or not f.get("summary"):
            continue
        d = f"{m.group(1)}-{m.group(2)}-{m.group(3)}"
        case = re.search(CASE, f["summary"])
        out.append(Statement("event", {"what": f["summary"].strip(), "d": d, "time": f"{m.group(4)}:{m.group(5)}",
                                       "where": f.get("location", "").strip()}, case.group(0) if case else "", d,
                             source, "date", f["summary"]))
        if f.get("description"):
            out += parse_statements(f["description"], source + "#description", "")
    for s in out:
        s.source = source
    return out


def _annotation(text: str, source: str, subject: str) -> list[Statement]:
    """Statements of a media annotation (module docstring)."""
    if text.startswith("Transcript:"):
        body = text.split(":", 1)[1].strip()
        lead = body.split(".", 1)[0]
        out = parse_statements(body, source, lead)
        return out or [Statement("recording", {"gist": lead}, "", "", source, "theme", body)]
    if text.startswith("Music:"):
        return [Statement("music", {"what": _clean(text.split(":", 1)[1].split("(")[0])}, "", "", source, "theme",
                          text)]
    if text.startswith(("A bar chart", "A line chart")):
        m = re.match(r"A (\w+) chart titled '([^']+)'\.\s*(.*)", text, re.DOTALL)
        out = []
        if m:
            for part in m.group(3).split(";"):
                if ":" not in part:
                    continue
                name, vals = part.split(":", 1)
                pts = re.findall(r"(\w+) (-?\d+(?:\.\d+)?)", vals)
                if len(pts) >= 2:
                    out.append(Statement("series", {"chart": m.group(2), "first": pts[0][1], "first_at": pts[0][0],
                                                    "last": pts[-1][1], "last_at": pts[-1][0],
                                                    "peak": max(pts, key=lambda p: float(p[1]))[1],
                                                    "peak_at": max(pts, key=lambda p: float(p[1]))[0]},
                                         _clean(name), "", source, "figure", part))
        return out
    caption = re.search(r"(?:caption at the bottom reads|Title overlay:|on-screen text) '([^']+)'", text)
    if text.startswith("Video scenes:"):
        scenes = [_clean(s) for s in re.findall(r"\] ([^;\n]+)", text)]
        if not scenes:
            return []
        return [Statement("video", {"scene": scenes[0] if scenes else "", "n": str(len(scenes)),
                                    "title": caption.group(1) if caption else ""},
                          caption.group(1) if caption else "", "", source, "theme", text)]
    m = re.match(r"An? (?:photo|animated GIF loop(?: \(\d+ frames\))?) of (?:an? |the )?([^.]+)\.", text)
    scene = _clean(m.group(1)) if m else ""
    cap = caption.group(1) if caption else ""
    d = _DATE_RX.search(cap)
    key = "clip" if text.startswith("An animated") else "photo"
    return [Statement(key, {"scene": scene, "caption": cap}, cap if key == "clip" else "", d.group(0) if d else "",
                      source, "date" if d else "theme", text)]


@dataclass
class Knowledge:
    """The statements of a session, in read order, without repeats (:meth:`add`), with views for the writers."""

    statements: list[Statement] = field(default_factory=list)
    seen: set = field(default_factory=set)
    sources: list[str] = field(default_factory=list)

    def add(self, stmts: list[Statement]) -> int:
        n = 0
        for s in stmts:
            if s.sig() in self.seen:
                continue
            self.seen.add(s.sig())
            s.order = len(self.statements)
            self.statements.append(s)
            if s.source not in self.sources:
                self.sources.append(s.source)
            n += 1
        return n

    def __len__(self) -> int:
        return len(self.statements)

    def of(self, *keys: str, kinds: tuple[str, ...] = ()) -> list[Statement]:
        return [s for s in self.statements if s.key in keys or s.kind in kinds]

    def subjects(self, stmts: list[Statement] | None = None) -> list[str]:
        """Subjects by how often they come up (ties in read order)."""
        pool = self.statements if stmts is None else stmts
        c = Counter(s.subject for s in pool if s.subject)
        first = {}
        for s in pool:
            first.setdefault(s.subject, s.order)
        return sorted(c, key=lambda x: (-c[x], first[x]))

    def dated(self) -> list[Statement]:
        return sorted((s for s in self.statements if s.date), key=lambda s: (s.date, s.order))

    def people(self) -> list[str]:
        """Person names in the statements, most mentioned first."""
        c: Counter = Counter()
        for s in self.statements:
            for k, v in s.slots.items():
                if k in ("who", "client", "a", "b", "from", "to", "owner") and _NAME.fullmatch(v.strip()):
                    c[v.strip()] += 1
        return [n for n, _ in c.most_common()]
