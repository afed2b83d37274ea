"""Scenario content: what each task's workspace contains (ref §6.3), as a list of :class:`FileSpec`.

A plan is built in two passes:
1. *plants* — fixed, task-specific files the task needs (T-09 long report, T-10 pre-built KB, T-11 planted
   inconsistencies, T-13 contradictory reviewers, T-14 report versions, T-15 bull/bear + raw_data, T-18 update
   batches, T-12 inconsistent Markdown styles, T-17/T-21 junk and duplicates, T-32 duplicate media and broken refs);
2. *fill* — files of the scenario's domain, kind by kind, until the spec's ``inputs`` counts are met.

All text is built from templates filled with the bundle's :class:`~filegram_ray.workspace.world.World`, so the
same people, companies, dates and figures recur across files.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from filegram_ray.workspace.world import World, sub_seed
from filegram_ray.workspace.writers import Doc


@dataclass
class FileSpec:
    """One planned file. ``payload`` depends on kind:
    md/txt/pdf/docx/pptx/eml: Doc; csv: rows; xlsx: [(sheet, rows)]; json: object; ics: [event dict];
    png/jpg: {"photo": scene, "label"} or {"chart": (title, labels, series, style)}; gif: {"scene", "label"};
    mp3/wav: {"speech": text} or {"music": description}; mp4: {"scenes": [(scene, label)]};
    raw kinds (tmp/bak/py and exact duplicates): {"text": str} or {"copy_of": relpath}.
    """

    relpath: str
    kind: str
    payload: Any
    note: str = ""


def _claim(rel: str, used: set[str]) -> str:
    """``rel``, or — when a planned file already has that path (compared case-insensitively: a bundle must unpack on
    a case-insensitive disk too) — the first free ``<stem>_2.<ext>``, ``<stem>_3.<ext>`` …; the path is added to
    ``used`` (casefolded). Two planned files never share a path (case REL2-seed-11-T21-same-file: the junk plant's
    ``old/<name>`` copy of a file that already sat in ``old/`` overwrote its own original)."""
    cand, k = rel, 2
    while cand.casefold() in used:
        d, slash, name = rel.rpartition("/")
        stem, dot, ext = name.rpartition(".")
        cand = f"{d}{slash}{stem}_{k}.{ext}" if dot and stem else f"{rel}_{k}"
        k += 1
    used.add(cand.casefold())
    return cand


def check_unique_paths(task_id: str, seed: int, specs: list[FileSpec]) -> None:
    """Raise ``RuntimeError`` (a planning bug, not a user mistake) when two planned files share a path
    (case-insensitively) or a file's path is another file's folder."""
    seen: dict[str, str] = {}
    for s in specs:
        if s.relpath.casefold() in seen:
            raise RuntimeError(f"{task_id} seed {seed}: two planned files share the path {s.relpath!r}")
        seen[s.relpath.casefold()] = s.relpath
    for s in specs:
        parts = s.relpath.casefold().split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in seen:
                raise RuntimeError(f"{task_id} seed {seed}: planned file {s.relpath!r} lies inside planned file "
                                   f"{seen['/'.join(parts[:i])]!r}")


# ---------------------------------------------------------------------------------------------- domains
SCENARIO_DOMAIN = {
    "investment_analyst": "finance", "tech_company_research": "finance", "earnings_calls": "finance",
    "methodology_kb": "finance", "bull_bear": "finance", "quarterly_work": "business",
    "legal_practice": "legal", "legal_kb": "legal", "legal_evidence": "legal",
    "personal_mixed": "personal", "personal_records": "personal", "personal_assets": "personal",
    "audio_archive": "personal", "business_docs": "business", "team_workspace": "business",
    "reviewed_report": "business", "report_versions": "business", "long_report": "business",
    "messy_project": "business", "film_collection": "film", "travel_photos": "travel", "farm_videos": "farm",
    "company_registry": "registry", "pet_cat": "pet", "graduate_student": "student",
    "multimodal_archive": "personal", "empty": "business",
    # scenario names used by conf/tasks/*.yaml
    "investment_analyst_folder": "finance", "legal_caseworker_folder": "legal", "empty_workspace": "business",
    "messy_personal_folder": "personal", "personal_life_records": "personal", "quarterly_work_records": "business",
    "long_report_revision": "business", "investment_methodology_kb": "finance",
    "business_docs_inconsistent": "business", "team_shared_workspace": "business", "report_with_reviews": "business",
    "report_versions_mess": "business", "bull_bear_reports": "finance", "analyst_company_dirs": "finance",
    "legal_professional_files": "legal", "legal_reference_kb": "legal", "lawyer_case_materials": "legal",
    "long_lived_project_dir": "business", "travel_photo_dump": "travel", "legal_evidence_bundle": "legal",
    "personal_digital_assets": "personal", "graduate_student_materials": "student", "pet_cat_records": "pet",
    "company_registrations": "registry", "audio_memo_collection": "personal", "nature_footage": "farm",
    "multimodal_archive_issues": "personal",
}

#: plant aliases used by conf/tasks/*.yaml -> our plant names
PLANT_ALIASES = {"knowledge_base": "prebuilt_kb", "inconsistent_styles": "md_styles",
                 "contradictory_feedback": "reviewer_feedback", "versions": "report_versions",
                 "bull_bear_claims": "bull_bear", "duplicates": "junk_files", "junk": "junk_files",
                 "reference_errors": "broken_refs"}

TITLES = {
    "finance": ["{tk} Q{q} earnings review", "Semiconductor supply chain notes", "{tk} valuation model notes",
                "Sector watchlist {d1}", "Macro outlook: rates and tech multiples", "{tk} vs {tk2} margin comparison",
                "Meeting notes with {p1} on {tk}", "{tk} 10-Q filing highlights", "Risk register: {tk}",
                "Portfolio rebalancing memo", "{tk} annual report (Form 10-K) excerpt", "Channel checks summary"],
    "legal": ["Case report: {client} ({case})", "Hearing list {d1}", "Client intake notes: {client}",
              "Statute extract: Family Law Act s.{n}", "Judgment summary {case}", "Drug offences: sentencing notes",
              "Court attendance checklist", "Legal aid application: {client}", "Diary of deadlines",
              "Chat log with {p1} re {case}", "Affidavit draft for {client}", "Evidence schedule {case}"],
    "business": ["Project {proj} status update", "Weekly log week {n}", "Q{q} OKR review", "Meeting notes {d1}",
                 "Client proposal for {co}", "Team directory", "Budget tracker notes", "Retrospective {d1}",
                 "Learning notes: {topic}", "Task list {d1}", "Design review: {proj}", "Onboarding guide"],
    "personal": ["Diary {d1}", "Chat with {p1}", "Reading notes: {book}", "Weekend plans", "Learning log: {topic}",
                 "Budget {month}", "Fitness log {month}", "Letter to {p1}", "Travel ideas", "Recipe notes",
                 "Watercolor practice notes", "Shopping list {d1}"],
    "film": ["Review: {film}", "Screening notes: {film}", "Festival programme {year}", "Director profile: {p1}",
             "Animation shorts list", "Watchlist {year}"],
    "travel": ["Trip itinerary {city}", "Photo notes"], "farm": ["Orchard log {d1}"],
    "registry": ["Business profile: {co}"],
    "pet": ["Vet report {d1}: Shadow", "Adoption certificate: Shadow", "Feeding schedule", "Care notes {month}"],
    "student": ["Resume: {owner}", "Thesis abstract: {topic}", "Course paper: {topic}", "Scholarship application form",
                "Graduation guide {year}", "Reading list: {book}", "Internship report at {co}"],
}

SENTENCES = {
    "finance": [
        "{tk} reported revenue of {amt} for Q{q}, {pct}% above consensus, driven by advanced-node demand.",
        "Gross margin came in at {pct2}%, and management guided the next quarter within a narrow range.",
        "{p1} flagged inventory build-up at {tk2} as the main near-term risk.",
        "Our target price for {tk} remains {price} on a 12-month view; rating unchanged.",
        "Capex guidance of {amt} implies continued capacity expansion through {year}.",
        "The call with {p2} on {d1} focused on pricing power and customer concentration.",
        "Free cash flow was {amt}, covering the dividend roughly {x}x.",
        "We should revisit the {tk2} thesis before the {d2} earnings release.",
        "Debt to equity stands at {ratio}, comfortably below covenant levels.",
        "Key watch items: AI accelerator demand, export controls, and foundry pricing.",
    ],
    "legal": [
        "{client} instructed us on {d1} regarding matter {case}; the next hearing is listed for {d2}.",
        "The respondent's affidavit must be filed and served by {d2}.",
        "{p1} will attend the directions hearing at the {city} Local Court.",
        "Under section {n} the court must consider the best interests of the child as paramount.",
        "The prosecution disclosed further evidence on {d1}; we need to review it before the mention.",
        "Legal aid was approved for {client} with a contribution of {amt}.",
        "Client is anxious about the timeline and asked for a plain-language explanation of each stage.",
        "Bail conditions require {client} to report to the police station twice weekly.",
        "Mediation is scheduled for {d2}; {p2} will prepare the settlement options.",
        "The matter {case} is at the interlocutory stage pending expert reports.",
    ],
    "business": [
        "Project {proj} reached milestone {n} on {d1}, two days later than planned.",
        "{p1} owns the integration work; {p2} is reviewing the API contract.",
        "The budget for {proj} is {amt}, of which {pct}% has been spent.",
        "Client {co} asked for a revised proposal by {d2}.",
        "Action item: {p1} to circulate the updated timeline before Friday.",
        "Customer satisfaction rose to {pct2}% after the onboarding changes.",
        "Risks: vendor delays and one open position on the platform team.",
        "I finished the {topic} course module and summarised the key ideas in my notes.",
        "The quarterly target of {n2} signed accounts was met on {d2}.",
        "Next quarter we will focus on reliability and the {proj} rollout.",
    ],
    "personal": [
        "Woke up early on {d1} and went for a run along the river with {p1}.",
        "Spent the evening practising watercolor washes; the sky gradients are getting better.",
        "Talked to {p2} about moving to {city}; still undecided.",
        "Finished reading {book}; the middle chapters dragged but the ending was worth it.",
        "Monthly budget: rent {amt}, groceries and transport came in under plan.",
        "Feeling stretched between work deadlines and the {topic} course.",
        "Booked a weekend trip for {d2}; need to sort out the cat sitter.",
        "Dinner with {p1} and {p2}; we laughed about the disastrous camping trip.",
        "Resting heart rate this week averaged {n2} bpm; slept better after cutting late coffee.",
        "Reminder to myself: call Mom on Sunday and renew the passport before {d2}.",
    ],
    "film": [
        "{film} is a quiet, patient film; its long takes reward attention.",
        "The animation in {film} mixes hand-drawn backgrounds with simple 3D lighting.",
        "Director {p1} described the project as a love letter to small-town cinemas.",
        "Runtime {n2} minutes; I would rate it {stars} out of 5.",
        "Watched it with {p2} on {d1}; the soundtrack stayed with us for days.",
        "Best suited for a rainy-evening double bill with another slow drama.",
    ],
    "pet": [
        "Shadow weighed {kg} kg at the check-up on {d1}; the vet was happy with the growth curve.",
        "Vaccination booster due on {d2}; deworming done.",
        "Shadow still scratches the sofa; ordered a taller sisal scratching post.",
        "Switched to a grain-free kitten food from {co}; portion 60 g per day in three meals.",
        "Dr. {p1} noted mild tartar and recommended dental treats.",
        "Adopted from the {city} Animal Shelter on {d1}; microchip registered to {owner}.",
    ],
    "student": [
        "{owner} completed a Bachelor of Science at {uni} with a GPA of {gpa}.",
        "The thesis on {topic} was supervised by Professor {p1}.",
        "Internship at {co} from {d1} to {d2}: built data pipelines and dashboards.",
        "Awarded the Dean's List in {year} and a travel grant for a conference talk.",
        "Skills: Python, statistics, technical writing, public speaking.",
        "Graduation ceremony is on {d2}; gowns must be collected two days before.",
    ],
}
SENTENCES["travel"] = SENTENCES["personal"]
SENTENCES["farm"] = SENTENCES["personal"]
SENTENCES["registry"] = SENTENCES["business"]

ZH_SENTENCES = [
    "{d1} 和{zp}讨论了项目进度，下周需要补充数据。", "今天整理了笔记，重点是时间管理和复盘。",
    "【待办】联系{zp}确认会议时间；更新预算表。", "周末去公园散步，天气很好，心情放松。",
    "这个季度的目标基本完成，剩下的是文档整理。",
]

TOPICS = ["time-series forecasting", "negotiation", "SQL performance", "public speaking", "machine learning",
          "contract law basics", "watercolor painting", "Mandarin", "data visualisation"]
BOOKS = ["The Remains of the Day", "Thinking, Fast and Slow", "The Overstory", "Sapiens", "Educated",
         "The Little Prince"]
FILMS = ["Paper Lanterns", "The Last Orchard", "Northbound", "Glass Harbor", "Moth and Moon", "The Quiet Field",
         "Tin Star Robots", "Harbour Lights", "Small Hours", "Salt Road"]
PROJECTS = ["Atlas", "Beacon", "Cobalt", "Delta", "Ember", "Falcon"]
SCENES_BY_DOMAIN = {
    "travel": ["city", "mountain", "campus", "orchard", "beach", "sunset", "night", "indoor"],
    "personal": ["indoor", "city", "beach", "sunset", "cat", "night", "mountain"],
    "farm": ["orchard", "farm", "sunset", "mountain"], "pet": ["cat", "indoor"],
    "student": ["campus", "indoor", "city", "document"], "film": ["night", "city", "sunset", "indoor", "beach"],
    "legal": ["courtroom", "document", "indoor"], "finance": ["document", "city"],
    "business": ["indoor", "document"], "registry": ["document"],
}


class Filler:
    """Fills templates with the world's entities (one ``random.Random`` per file)."""

    def __init__(self, world: World, rng: random.Random):
        self.w, self.r = world, rng

    def values(self) -> dict[str, Any]:
        w, r = self.w, self.r
        tk = r.choice(w.tickers)
        tk2 = r.choice([t for t in w.tickers if t != tk])
        return {
            "owner": w.owner, "p1": r.choice(w.people), "p2": r.choice(w.people), "co": r.choice(w.companies),
            "client": r.choice(w.clients), "case": r.choice(w.case_numbers), "tk": tk[0], "tk2": tk2[0],
            "d1": w.day(r.randint(0, 60)).isoformat(), "d2": w.day(r.randint(61, 120)).isoformat(),
            "amt": w.money(r, 2, 900), "pct": r.randint(2, 35), "pct2": r.randint(40, 95), "q": r.randint(1, 4),
            "price": f"${r.randint(40, 400)}", "year": w.start.year + r.randint(0, 1), "x": round(r.uniform(1.1, 3), 1),
            "ratio": round(r.uniform(0.1, 1.4), 2), "n": r.randint(2, 90), "n2": r.randint(45, 130),
            "proj": r.choice(PROJECTS), "topic": r.choice(TOPICS), "book": r.choice(BOOKS), "film": r.choice(FILMS),
            "city": w.city, "month": w.day(r.randint(0, 90)).strftime("%B %Y"), "stars": r.randint(2, 5),
            "kg": round(r.uniform(1.2, 4.8), 1), "uni": f"{w.city} University", "gpa": round(r.uniform(3.1, 3.9), 2),
            "zp": r.choice(w.zh_people), "firm": w.firm,
        }

    def fill(self, template: str) -> str:
        return template.format_map(self.values())

    def sentences(self, domain: str, n: int) -> list[str]:
        pool = SENTENCES.get(domain, SENTENCES["business"])
        out = [self.fill(s) for s in self.r.sample(pool, min(n, len(pool)))]
        if self.w.language in ("zh", "mixed") and self.r.random() < (0.9 if self.w.language == "zh" else 0.4):
            out.append(self.fill(self.r.choice(ZH_SENTENCES)))
        return out

    def doc(self, domain: str, title: str | None = None, n_sections: int = 3) -> Doc:
        title = title or self.fill(self.r.choice(TITLES.get(domain, TITLES["business"])))
        heads = ["Summary", "Details", "Key dates", "Open questions", "Next steps", "Notes", "Figures"]
        sections = []
        for h in self.r.sample(heads, n_sections):
            sents = self.sentences(domain, self.r.randint(2, 4))
            if h in ("Next steps", "Open questions", "Key dates"):
                sections.append((h, ["- " + s for s in sents]))
            else:
                sections.append((h, [" ".join(sents)]))
        return Doc(title=title, sections=sections)

    def table(self, domain: str, n_rows: int = 8) -> list[list[str]]:
        w, r = self.w, self.r
        if domain == "finance":
            rows = [["quarter", "company", "revenue_musd", "gross_margin_pct", "eps_usd"]]
            for i in range(n_rows):
                t = w.tickers[i % len(w.tickers)]
                rows.append([f"{w.start.year - 1 + (i // 4)}Q{i % 4 + 1}", t[0], f"{r.uniform(800, 20000):.1f}",
                             f"{r.uniform(35, 62):.1f}", f"{r.uniform(0.1, 3.5):.2f}"])
            return rows
        if domain == "legal":
            rows = [["case_no", "client", "stage", "next_date", "responsible"]]
            for i in range(n_rows):
                rows.append([w.case_numbers[i % 5], w.clients[i % 5],
                             r.choice(["intake", "pleadings", "discovery", "hearing", "judgment", "appeal"]),
                             w.day(r.randint(10, 120)).isoformat(), r.choice(w.people)])
            return rows
        if domain in ("personal", "pet", "travel", "farm"):
            rows = [["date", "steps", "sleep_hours", "resting_hr", "note"]]
            for i in range(n_rows):
                rows.append([w.day(i).isoformat(), str(r.randint(3000, 16000)), f"{r.uniform(5.5, 8.5):.1f}",
                             str(r.randint(52, 72)), r.choice(["run", "gym", "rest", "walk", "swim"])])
            return rows
        rows = [["date", "owner", "task", "status", "hours"]]
        for i in range(n_rows):
            rows.append([w.day(i * 3).isoformat(), r.choice(w.people), f"{r.choice(PROJECTS)}: "
                         + r.choice(["design", "review", "testing", "deployment", "report", "client call"]),
                         r.choice(["done", "in progress", "blocked"]), str(r.randint(1, 12))])
        return rows


# ---------------------------------------------------------------------------------------------- fill by kind
EXT = {"tmp": "tmp", "bak": "bak"}


def _name(f: Filler, title: str, ext: str, style: int) -> str:
    base = "".join(c if c.isalnum() else "_" for c in title.lower()).strip("_")
    while "__" in base:
        base = base.replace("__", "_")
    base = base[:48].strip("_") or "file"
    return f"{base}.{ext}"


#: Singapore industry sections and SSIC codes of the company-registration scenario (T-29; the prompt names
#: construction, IT, wholesale and retail, manufacturing and professional services). Codes from the public SSIC
#: 2020 scheme's top-level examples.
INDUSTRIES = [("Construction", "41001"), ("Information technology", "62011"), ("Wholesale trade", "46900"),
              ("Retail trade", "47711"), ("Manufacturing", "25991"), ("Professional services", "70201"),
              ("Food and beverage", "56111"), ("Logistics", "52291")]
_CO_WORDS = ["Apex", "Harbour", "Lion", "Merlion", "Orchid", "Summit", "Keppel", "Raffles", "Jade", "Pioneer",
             "Straits", "Banyan", "Crescent", "Everbright", "Kallang", "Tanjong", "Marina", "Serangoon", "Bukit",
             "Sentosa"]
_CO_KINDS = ["Builders", "Systems", "Trading", "Retail", "Engineering", "Consulting", "Foods", "Logistics",
             "Holdings", "Solutions"]


def registration(world: World, i: int, rng: random.Random) -> Doc:
    """A company registration profile (T-29): name, UEN, industry with its SSIC code, dates, status."""
    ind, code = INDUSTRIES[(i * 5 + rng.randint(0, 2)) % len(INDUSTRIES)]
    name = f"{_CO_WORDS[(i * 7 + 3) % len(_CO_WORDS)]} {_CO_WORDS[(i * 11 + 5) % len(_CO_WORDS)]} " \
           f"{_CO_KINDS[(i + rng.randint(0, 9)) % len(_CO_KINDS)]} Pte. Ltd."
    d = world.day(-rng.randint(200, 4000))
    f = Filler(world, rng)
    return Doc(title=f"Business profile: {name}", sections=[
        ("Registration", [f"- Entity name: {name}", f"- UEN: {d.year}{rng.randint(10000, 99999)}{rng.choice('ABCDEKMNZ')}",
                          f"- Industry: {ind} (SSIC {code})", f"- Registered: {d.isoformat()}", "- Status: Live",
                          f"- Registered address: {rng.randint(1, 300)} {rng.choice(_CO_WORDS)} Road, Singapore"]),
        ("Notes", [" ".join(f.sentences("business", 2))])])


def fill_kind(world: World, domain: str, kind: str, i: int, rng: random.Random) -> tuple[str, Any, str]:
    """(filename, payload, note) of the i-th generic file of ``kind`` in ``domain``."""
    f = Filler(world, rng)
    if domain == "registry" and kind == "pdf":
        doc = registration(world, i, rng)
        return _name(f, doc.title.replace(" Pte. Ltd.", ""), kind, i), doc, ""
    if domain == "registry" and kind == "xlsx":
        rows = [["ssic_code", "industry", "section"]] + [[c, n, "Singapore Standard Industrial Classification"]
                                                         for n, c in INDUSTRIES]
        return f"industry_codes_{i + 1:02d}.xlsx", [("Codes", rows)], ""
    if kind in ("md", "txt", "pdf", "docx", "pptx"):
        doc = f.doc(domain, n_sections=4 if kind == "pdf" else 3)
        if kind == "pptx":
            doc.tables.append(("Key figures", f.table(domain, 4)))
        if kind in ("pdf", "docx") and rng.random() < 0.6:
            doc.tables.append(("Table 1", f.table(domain, 5)))
        return _name(f, doc.title, kind, i), doc, ""
    if kind == "eml":
        sender, to = rng.choice(world.people), world.owner_en
        doc = f.doc(domain, n_sections=2)
        doc.headers = {"From": f"{sender} <{world.email(sender)}>", "To": f"{to} <{world.email(to)}>",
                       "Subject": doc.title, "Date": world.when(rng.randint(0, 90), rng.randint(8, 18))
                       .strftime("%a, %d %b %Y %H:%M:%S +0000")}
        doc.sections.insert(0, ("", [f"Hi {to.split()[0]},"]))
        doc.sections.append(("", [f"Best,\n{sender}"]))
        return _name(f, "email " + doc.title, "eml", i), doc, ""
    if kind == "ics":
        events = []
        for _ in range(rng.randint(3, 6)):
            v = f.values()
            d = world.when(rng.randint(0, 120), rng.randint(8, 17))
            summary = {"legal": f"Hearing {v['case']} ({v['client']})", "finance": f"{v['tk']} earnings call"}.get(
                domain, f"Meeting with {v['p1']}")
            events.append({"summary": summary, "start": d.strftime("%Y%m%dT%H%M%S"),
                           "end": d.replace(hour=d.hour + 1).strftime("%Y%m%dT%H%M%S"),
                           "location": v["city"], "description": f.fill(rng.choice(SENTENCES.get(domain,
                                                                                              SENTENCES["business"])))})
        return f"calendar_{i + 1:02d}.ics", events, ""
    if kind == "csv":
        return f"{domain}_data_{i + 1:02d}.csv", f.table(domain, rng.randint(8, 16)), ""
    if kind == "xlsx":
        return f"{domain}_workbook_{i + 1:02d}.xlsx", [("Data", f.table(domain, 12)),
                                                         ("Summary", f.table(domain, 4))], ""
    if kind == "json":
        return f"{domain}_records_{i + 1:02d}.json", {"owner": world.owner, "generated_for": world.task_id,
                                                      "items": [dict(zip(f.table(domain, 5)[0], r, strict=False))
                                                                for r in f.table(domain, 5)[1:]]}, ""
    if kind == "png" and domain in ("finance", "business", "registry", "legal"):
        labels = [f"Q{q}" for q in range(1, 5)]
        series = {t[0]: [round(rng.uniform(5, 40), 1) for _ in labels] for t in world.tickers[:3]} \
            if domain == "finance" else {"planned": [rng.randint(5, 20) for _ in labels],
                                         "actual": [rng.randint(3, 22) for _ in labels]}
        title = "Quarterly revenue (USD bn)" if domain == "finance" else "Planned vs actual deliverables"
        return f"chart_{i + 1:02d}.png", {"chart": (title, labels, series, rng.choice(["bar", "line"]))}, ""
    if kind in ("png", "jpg"):
        scene = rng.choice(SCENES_BY_DOMAIN.get(domain, ["indoor"]))
        label = f"{world.city} {world.day(rng.randint(0, 200)).isoformat()}" if rng.random() < 0.5 else ""
        prefix = {"pet": "shadow", "travel": "IMG", "legal": "evidence_photo"}.get(domain, "photo")
        return f"{prefix}_{scene}_{i + 1:03d}.{kind}", {"photo": scene, "label": label}, ""
    if kind == "gif":
        scene = rng.choice(SCENES_BY_DOMAIN.get(domain, ["indoor"]))
        film = FILMS[i % len(FILMS)]
        return f"{film.lower().replace(' ', '_')}_clip.gif", {"scene": scene, "label": film}, ""
    if kind in ("mp3", "wav"):
        if domain == "personal" and i % 4 == 3:
            return f"music_track_{i + 1:02d}.{kind}", {"music": "a short cheerful piano-like melody"}, ""
        sents = f.sentences(domain if domain in SENTENCES else "business", 2)
        sents = [s for s in sents if not any("\u4e00" <= c <= "\u9fff" for c in s)] or ["Quick voice memo."]
        lead = {"finance": "Earnings call excerpt.", "legal": "Case memo.", "pet": "Note about Shadow."}.get(
            domain, "Voice memo.")
        return f"voice_memo_{i + 1:02d}.{kind}", {"speech": " ".join([lead, *sents])}, ""
    if kind == "mp4":
        scenes = [(rng.choice(SCENES_BY_DOMAIN.get(domain, ["indoor"])), "") for _ in range(rng.randint(2, 3))]
        label = {"film": FILMS[i % len(FILMS)], "legal": f"Courtroom {world.case_numbers[i % 5]}"}.get(domain, "")
        scenes[0] = (scenes[0][0], label)
        prefix = {"farm": "orchard", "film": "trailer", "legal": "courtroom", "student": "course"}.get(domain, "video")
        return f"{prefix}_{i + 1:02d}.mp4", {"scenes": scenes}, ""
    if kind == "py":
        return f"script_{i + 1:02d}.py", {"text": f'"""Helper for project {rng.choice(PROJECTS)}."""\n\n'
                                                  f"def total(rows):\n    return sum(r['hours'] for r in rows)\n"}, ""
    if kind in ("tmp", "bak"):
        doc = f.doc(domain, n_sections=1)
        # no '~' or '$' in names: the engine's restricted bash refuses them, so the agent could not remove the file
        return f"{_name(f, doc.title, 'md', i)}.{kind}" if kind == "tmp" else _name(f, doc.title, "md.bak", i), \
            {"text": "\n".join(doc.plain_lines(markdown=True))}, "junk"
    raise ValueError(f"unsupported input kind {kind!r}")


# ---------------------------------------------------------------------------------------------- plants
def _plant_long_report(world: World, rng: random.Random) -> list[FileSpec]:
    f = Filler(world, rng)
    heads = ["Abstract", "Introduction", "Background and Related Work", "Methodology", "Data Collection",
             "Findings", "Discussion", "Limitations", "Recommendations", "Conclusion"]
    sections = []
    for h in heads:
        # ~16 template sentences of ~12 words per section x 10 sections = about 2,000 words (ref §6.3 T-09)
        paras = [" ".join(f.sentences("business", 6) + f.sentences("finance", 4)),
                 " ".join(f.sentences("business", 4) + f.sentences("finance", 2))]
        sections.append((h, paras))
    doc = Doc(title=f"Remote Collaboration and Productivity at {world.firm}: A Mixed-Methods Study", sections=sections)
    return [FileSpec("research_report.md", "md", doc, "~2,000-word academic report (T-09)")]


def _plant_kb(world: World, rng: random.Random, domain: str = "finance", subdirs: list[str] | None = None
              ) -> list[FileSpec]:
    f = Filler(world, rng)
    if domain != "finance":
        dirs = [d for d in (subdirs or []) if d not in ("updates", "raw_data")] or ["notes"]
        files = []
        used: set[str] = set()  # two drawn titles of one folder may be the same (T-18 seed 2901): never one path
        for d in dirs:
            for k in range(2):
                doc = f.doc(domain, n_sections=2)
                files.append((_claim(f"{d}/{_name(f, doc.title, 'md', k)}", used), doc.title))
        out = [FileSpec(p, "md", f.doc(domain, title=t, n_sections=3)) for p, t in files]
        out.append(FileSpec("index.md", "md", Doc(title="Knowledge Base - Index", sections=[
            ("Sections", [f"- {d}/" for d in dirs]), ("Contents", [f"- [{t}]({p})" for p, t in files])])))
        return out
    files = [("fundamentals/financial_statements.md", "Reading the three financial statements"),
             ("fundamentals/fundamental_framework.md", "Fundamental analysis framework"),
             ("metrics/valuation_ratios.md", "Valuation ratios: PE, PB, EV/EBITDA"),
             ("metrics/profitability.md", "Profitability metrics: ROE, ROA, margins"),
             ("industry/industry_template.md", "Industry analysis template"),
             ("industry/competitive_forces.md", "Competitive forces checklist"),
             ("glossary.md", "Glossary")]
    out = [FileSpec(p, "md", f.doc("finance", title=t, n_sections=3)) for p, t in files]
    index = Doc(title="Investment Analysis Methodology - Index",
                sections=[("How to use this knowledge base", [(f"Maintained by {world.owner}. Start with the "
                                                               "framework, then the metrics reference.")]),
                          ("Contents", [f"- [{t}]({p})" for p, t in files])])
    out.append(FileSpec("index.md", "md", index, "pre-built KB index (T-10)"))
    return out


def _plant_inconsistencies(world: World, rng: random.Random) -> tuple[list[FileSpec], list[dict]]:
    """Seven TechVista Inc documents with planted cross-file inconsistencies (T-11, ref §6.3)."""
    ceo = world.people[0]
    first, last = ceo.split(" ", 1) if " " in ceo else (ceo, "Smith")
    misspelt = f"{first} {last[:-1] + last[-1] * 2 if len(last) > 2 else last + 'e'}"
    revenue, wrong_revenue = rng.randint(40, 90) * 100_000, 0
    wrong_revenue = revenue + rng.choice([-1, 1]) * rng.randint(3, 9) * 100_000
    team, wrong_team = rng.randint(35, 60), 0
    wrong_team = team + rng.randint(4, 9)
    launch = world.day(rng.randint(90, 150))
    wrong_launch = world.day((launch - world.start).days + rng.randint(14, 45))
    budget = rng.randint(8, 20) * 50_000
    wrong_budget = budget + 100_000
    f = Filler(world, rng)
    co = "TechVista Inc"

    def d(title, secs):
        return Doc(title=f"{co} - {title}", sections=secs)
    docs = {
        "project_overview.md": d("Project Overview", [("Summary", [(f"{co} is building the Horizon analytics "
                                                                   f"platform. CEO: {ceo}. Team size: {team} "
                                                                   f"employees. Planned launch: {launch.isoformat()}.")]),
                                                      ("Budget", [f"Approved project budget: ${budget:,}."])]),
        "financial_summary.md": d("Financial Summary", [("FY revenue", [f"Annual revenue: ${revenue:,}."]),
                                                        ("Project budget", [f"Horizon budget: ${wrong_budget:,}."]),
                                                        ("Notes", f.sentences("business", 2))]),
        "team_directory.md": d("Team Directory", [("Leadership", [f"- CEO: {misspelt}", f"- CTO: {world.people[1]}",
                                                                  f"- CFO: {world.people[2]}"]),
                                                  ("Headcount", [f"Total employees: {wrong_team}."])]),
        "meeting_notes.md": d("Board Meeting Notes", [("Attendees", [f"{ceo}, {world.people[1]}, {world.people[2]}"]),
                                                      ("Decisions", [f"- Launch confirmed for {launch.isoformat()}.",
                                                                     f"- Revenue reported as ${revenue:,}."])]),
        "project_timeline.md": d("Project Timeline", [("Milestones", [f"- Beta: {world.day(60).isoformat()}",
                                                                      f"- Launch: {wrong_launch.isoformat()}"])]),
        "client_proposal.md": d("Client Proposal", [("About us", [(f"{co}, led by CEO {ceo}, has {team} employees and "
                                                                  f"annual revenue of ${wrong_revenue:,}.")]),
                                                    ("Offer", f.sentences("business", 2))]),
        "quarterly_report.md": d("Quarterly Report", [("Highlights", [(f"Headcount {team}; launch on track for "
                                                                      f"{launch.isoformat()}; budget ${budget:,}.")]),
                                                      ("Details", f.sentences("business", 3))]),
    }
    facts = [
        {"type": "name_spelling", "field": "CEO name", "correct": ceo, "wrong": misspelt,
         "files": ["team_directory.md"]},
        {"type": "figure", "field": "annual revenue", "correct": revenue, "wrong": wrong_revenue,
         "files": ["client_proposal.md"]},
        {"type": "figure", "field": "headcount", "correct": team, "wrong": wrong_team, "files": ["team_directory.md"]},
        {"type": "date", "field": "launch date", "correct": launch.isoformat(), "wrong": wrong_launch.isoformat(),
         "files": ["project_timeline.md"]},
        {"type": "figure", "field": "project budget", "correct": budget, "wrong": wrong_budget,
         "files": ["financial_summary.md"]},
    ]
    return [FileSpec(p, "md", doc) for p, doc in docs.items()], facts


def _plant_reviewers(world: World, rng: random.Random) -> tuple[list[FileSpec], list[dict]]:
    f = Filler(world, rng)
    # the sections the reviewers' comments are about (methodology, recommendations) exist in the report
    report = Doc(title=f"Customer Retention Analysis for {world.companies[0]}", sections=[
        ("Summary", [" ".join(f.sentences("business", 3))]),
        ("Methodology", [" ".join(f.sentences("business", 3))]),
        ("Findings", ["- " + s for s in f.sentences("business", 3)]),
        ("Recommendations", ["- " + s for s in f.sentences("business", 2)]),
        ("Details", [" ".join(f.sentences("business", 3))])])
    pairs = [("Shorten the methodology section substantially.", "Expand the methodology section with more detail."),
             ("Use a formal academic tone throughout.", "Make the tone more conversational for executives."),
             ("Move the recommendations to the front.", "Keep recommendations at the end after the evidence.")]
    fb = {1: [], 2: [], 3: []}
    facts = []
    for i, (a, b) in enumerate(pairs):
        r1, r2 = [(1, 2), (2, 3), (1, 3)][i]
        fb[r1].append(a)
        fb[r2].append(b)
        facts.append({"type": "contradiction", "reviewers": [r1, r2], "a": a, "b": b})
    out = [FileSpec("original_report.md", "md", report)]
    for r in (1, 2, 3):
        items = fb[r] + f.sentences("business", 1)
        out.append(FileSpec(f"feedback_reviewer{r}.md", "md",
                            Doc(title=f"Reviewer {r} feedback ({world.people[r]})",
                                sections=[("Comments", ["- " + s for s in items])])))
    return out, facts


def _plant_versions(world: World, rng: random.Random) -> tuple[list[FileSpec], list[dict]]:
    f = Filler(world, rng)
    base = f.doc("business", title="Market Expansion Report", n_sections=3)
    names = ["report_draft.md", "report_v2.md", "report_final.md", "report_final_revised.md",
             "report_LATEST_backup.md"]
    out, lineage = [], []
    secs = list(base.sections)
    for k, n in enumerate(names):
        secs = secs + [(f"Revision {k + 1}", [f"Updated on {world.day(k * 7).isoformat()} by "
                                              f"{world.people[k % 8]}. " + " ".join(f.sentences("business", 2))])]
        out.append(FileSpec(n, "md", Doc(title=f"Market Expansion Report ({n.split('_', 1)[1][:-3]})", sections=secs)))
        lineage.append({"file": n, "order": k + 1, "date": world.day(k * 7).isoformat()})
    out.append(FileSpec("comments_on_v2.md", "md", Doc("Comments on v2", [("Comments",
                                                                            ["- " + s for s in f.sentences("business",
                                                                                                           3)])])))
    out.append(FileSpec("comments_final.md", "md", Doc("Comments on final", [("Comments", ["- " + s for s in f.sentences(
        "business", 3)])])))
    return out, [{"type": "version_lineage", "versions": lineage,
                  "note": "LATEST_backup is the newest despite its name"}]


def _plant_bull_bear(world: World, rng: random.Random) -> tuple[list[FileSpec], list[dict]]:
    years = list(range(world.start.year - 4, world.start.year + 1))
    rev = [round(rng.uniform(300, 500) * (1.12 ** i), 1) for i in range(len(years))]
    share = [round(rng.uniform(11, 15) - 0.4 * i, 1) for i in range(len(years))]
    debt = [round(rng.uniform(100, 150) * (1.25 ** i), 1) for i in range(len(years))]
    cagr = round(((rev[-1] / rev[0]) ** (1 / (len(years) - 1)) - 1) * 100, 1)
    co = "NovaTech Corp"
    bull = Doc(f"{co}: Bullish Analysis", [("Thesis", [(f"Revenue grew at a {cagr + 6:.1f}% CAGR over five years, "
                                                       "well ahead of peers."),  # overstated claim
                                                       f"Market share is stable at about {share[0]}%."]),
                                           ("Rating", ["Buy."])])
    bear = Doc(f"{co}: Bearish Analysis", [("Thesis", [(f"Debt more than doubled to ${debt[-1]}M while market share "
                                                       f"fell to {share[-1]}%."), (f"Revenue CAGR of {cagr}% is "
                                                                                 "unremarkable.")]),
                                           ("Rating", ["Sell."])])
    out = [FileSpec("analysis_bullish.md", "md", bull), FileSpec("analysis_bearish.md", "md", bear),
           FileSpec("raw_data/revenue_history.csv", "csv", [["year", "revenue_musd"]] + [[str(y), str(v)] for y, v in
                                                                                        zip(years, rev, strict=True)]),
           FileSpec("raw_data/market_share.csv", "csv", [["year", "share_pct"]] + [[str(y), str(v)] for y, v in
                                                                                  zip(years, share, strict=True)]),
           FileSpec("raw_data/debt_profile.csv", "csv", [["year", "total_debt_musd"]] + [[str(y), str(v)] for y, v in
                                                                                        zip(years, debt, strict=True)])]
    facts = [{"type": "claim_check", "claim": "bullish revenue CAGR", "stated": round(cagr + 6, 1), "actual": cagr,
              "verdict": "overstated"},
             {"type": "claim_check", "claim": "bullish stable market share", "stated": share[0], "actual": share[-1],
              "verdict": "contradicted by market_share.csv"}]
    return out, facts


def _plant_batches(world: World, rng: random.Random) -> tuple[list[FileSpec], list[dict]]:
    f = Filler(world, rng)
    out = [FileSpec("index.md", "md", Doc("Legal Reference Knowledge Base - Index",
                                          [("Sections", ["- case_law/: family law cases", ("- criminal_law/: drug "
                                                         "offences"), "- court_procedures/: court attendance",
                                                         "- client_matters/: client affairs"])]))]
    facts = []
    for b in (1, 2, 3):
        items = [f"- Add a summary of {world.case_numbers[(b + k) % 5]} to case_law/ ({f.fill('{d1}')})."
                 for k in range(2)] + [f"- Update court_procedures/ with the new listing time for {f.fill('{d2}')}."]
        if b == 3:
            items.append("- Supersedes batch 1 item 1: that case summary belongs in client_matters/.")
        out.append(FileSpec(f"updates/batch_{b}.md", "md", Doc(f"Update batch {b}", [("Apply in order", items)])))
        facts.append({"type": "update_batch", "batch": b, "n_items": len(items)})
    return out, facts


def _plant_styles(world: World, rng: random.Random, subdirs: list[str]) -> tuple[list[FileSpec], list[dict]]:
    """Markdown files in 4 styles (# headings, **bold** pseudo-headings, emoji separators, 【】 sections)."""
    f = Filler(world, rng)
    styles = ["hash", "bold", "emoji", "bracket"]
    out, facts = [], []
    used: set[str] = set()
    for i in range(12):
        sub = subdirs[i % len(subdirs)] if subdirs else ""
        style = styles[i % 4]
        doc = f.doc("business", n_sections=2)
        d = world.day(i * 5)
        date_s = [d.isoformat(), d.strftime("%d/%m/%Y"), d.strftime("%B %d, %Y"), d.strftime("%Y年%m月%d日")][i % 4]
        marks = [("✅", "☐"), ("[x]", "[ ]"), ("DONE", "TODO"), ("✔", "✗")][(i + 1) % 4]
        lines = []
        for h, paras in doc.sections:
            lines += {"hash": [f"## {h}"], "bold": [f"**{h}**"], "emoji": ["🔹🔹🔹", f"📌 {h}"],
                      "bracket": [f"【{h}】"]}[style]
            lines += [("* " if style == "bold" else "+ " if style == "emoji" else "- ") + p.lstrip("- ")
                      for p in paras]
            lines.append("")
        lines += [f"{marks[0]} {f.fill('{p1}')} sent the summary", f"{marks[1]} follow up with {f.fill('{p2}')}"]
        head = {"hash": f"# {doc.title}", "bold": f"**{doc.title.upper()}**", "emoji": f"🗂️ {doc.title}",
                "bracket": f"【{doc.title}】"}[style]
        text = "\n".join([head, f"Date: {date_s}", "", *lines]) + "\n"
        rel = _claim(f"{sub}/{_name(f, doc.title, 'md', i)}".lstrip("/"), used)
        out.append(FileSpec(rel, "md", {"text": text}))
        facts.append({"type": "md_style", "file": rel, "style": style, "date_format": ["iso", "dmy", "long", "zh"][i % 4]})
    return out, facts


def build_plan(task_id: str, world: World, workspace: dict[str, Any], seed: int) -> tuple[list[FileSpec], list[dict]]:
    """The full file plan and planted facts of one bundle (deterministic in task_id, seed)."""
    if workspace.get("empty"):
        return [], []
    scenario = workspace.get("scenario", "")
    domain = SCENARIO_DOMAIN.get(scenario, "business")
    plants = list(dict.fromkeys(PLANT_ALIASES.get(p, p) for p in workspace.get("plants") or []))
    subdirs = list(workspace.get("subdirs") or [])
    rng = random.Random(sub_seed(task_id, seed, "plan"))
    specs: list[FileSpec] = []
    facts: list[dict] = []
    for plant in plants:
        prng = random.Random(sub_seed(task_id, seed, "plant", plant))
        if plant == "long_report":
            specs += _plant_long_report(world, prng)
        elif plant == "prebuilt_kb":
            specs += _plant_kb(world, prng, domain, subdirs)
        elif plant in ("inconsistencies", "reviewer_feedback", "report_versions", "bull_bear", "update_batches"):
            if plant == "update_batches":
                specs = [s for s in specs if s.relpath != "index.md"]  # batches plant writes the index
            fn = {"inconsistencies": _plant_inconsistencies, "reviewer_feedback": _plant_reviewers,
                  "report_versions": _plant_versions, "bull_bear": _plant_bull_bear,
                  "update_batches": _plant_batches}[plant]
            s, fa = fn(world, prng)
            specs += s
            facts += fa
        elif plant == "md_styles":
            s, fa = _plant_styles(world, prng, [d for d in subdirs if d])
            specs += s
            facts += fa
    # fill remaining counts per kind
    have: dict[str, int] = {}
    for s in specs:
        have[s.kind] = have.get(s.kind, 0) + 1
    fill_dirs = [d for d in subdirs if d not in ("raw_data", "updates")]
    used = {s.relpath.casefold() for s in specs}
    inputs = {k: int(v) for k, v in (workspace.get("inputs") or {}).items()}
    # The junk plant (duplicates, temp files, an empty file) runs where junk is asked for (T-17, T-21), or bare
    # duplicates without reference errors; "duplicates" next to reference errors means duplicated media (T-32).
    raw = set(workspace.get("plants") or [])
    junk_plant = bool(raw & {"junk", "junk_files"}) or ("duplicates" in raw and not raw & {"reference_errors",
                                                                                             "broken_refs"})
    # clutter everywhere the junk plant does not run
    clutter = not junk_plant and workspace.get("clutter", True)
    # planted files (and the clutter added below) count against the spec's total
    budget = sum(inputs.values()) - len(specs) - (CLUTTER_FILES if clutter else 0)
    todo = []
    for kind, n in sorted(inputs.items()):
        todo += [(kind, i) for i in range(have.get(kind, 0), n)]
    # when plants took the place of other kinds, keep every kind represented before trimming
    todo.sort(key=lambda ki: (ki[1], ki[0]))
    todo = sorted(todo[:max(0, budget)], key=lambda ki: (ki[0], ki[1]))
    for kind, i in todo:
        frng = random.Random(sub_seed(task_id, seed, "fill", kind, i))
        name, payload, note = fill_kind(world, domain, kind, i, frng)
        sub = _subdir_for(task_id, kind, name, i, fill_dirs, frng)
        rel = f"{sub}/{name}" if sub else name
        k = 2
        while rel.casefold() in used:
            stem, ext = rel.rsplit(".", 1)
            rel = f"{stem}_{k}.{ext}"
            k += 1
        used.add(rel.casefold())
        specs.append(FileSpec(rel, kind, payload, note))
    if junk_plant:  # T-32's duplicates are media copies below
        s, fa = _plant_junk(specs, rng)
        specs = s
        facts += fa
    if "duplicate_media" in plants or "broken_refs" in plants:
        s, fa = _plant_archive_issues(specs, world, rng)
        specs = s
        facts += fa
    if clutter and specs:
        s, fa = _plant_clutter(specs, random.Random(sub_seed(task_id, seed, "clutter")))
        specs = s
        facts += fa
    check_unique_paths(task_id, seed, specs)
    return specs, facts


#: Clutter files planted in every non-empty bundle where the junk plant does not run: one temporary file, one exact
#: duplicate and one superseded older version (curation acts on the workspace's own clutter, not only the agent's;
#: TIER_TARGETS §2.5 "what gets deleted": junk, duplicates, intermediate files). They replace fill files, so a
#: bundle keeps its spec's total (ref §0: about 615 input files) unless it is smaller than its plants.
CLUTTER_FILES = 3


def _text_of(spec: FileSpec) -> str | None:
    if isinstance(spec.payload, Doc):
        return "\n".join(spec.payload.plain_lines(markdown=spec.kind == "md")) + "\n"
    if isinstance(spec.payload, dict) and isinstance(spec.payload.get("text"), str) and spec.payload["text"]:
        return spec.payload["text"]
    return None


def _plant_clutter(specs: list[FileSpec], rng: random.Random) -> tuple[list[FileSpec], list[dict]]:
    """A temporary autosave (``<stem>.tmp``, the first part of a text file; no ``~``/``$``: the engine's
    restricted bash refuses them), a duplicate (``<stem> (1).<ext>``,
    byte copy) and a superseded version (``<stem>_old.<ext>``: the first half of a text file, or a byte copy of a
    binary one), each next to its original. Facts: ``{"type": "clutter", "category", "file", "original"}``."""
    out, facts = list(specs), []
    used = {s.relpath.casefold() for s in specs}
    texts = [s for s in specs if s.kind in ("md", "txt") and _text_of(s) and not s.note]
    docs = [s for s in specs if s.kind in ("md", "txt", "docx", "pdf", "csv", "xlsx", "pptx", "eml") and not s.note]
    pool = texts or docs or [s for s in specs if not s.note] or list(specs)
    picks = rng.sample(pool, min(3, len(pool)))
    while len(picks) < 3:
        picks.append(picks[-1])

    def place(src: FileSpec, name: str) -> str:
        d = src.relpath.rpartition("/")[0]
        rel = f"{d}/{name}" if d else name
        k = 2
        while rel.casefold() in used:
            stem, _, ext = rel.rpartition(".")
            rel = f"{stem}_{k}.{ext}"
            k += 1
        used.add(rel.casefold())
        return rel

    def stem_ext(src: FileSpec) -> tuple[str, str]:
        name = src.relpath.rpartition("/")[2]
        stem, _, ext = name.rpartition(".")
        return stem, ext

    # 1. temporary autosave of a text file (was_temporary on delete, ref §3.4)
    src = picks[0]
    stem, ext = stem_ext(src)
    text = _text_of(src)
    body = "\n".join(text.splitlines()[: max(3, len(text.splitlines()) * 3 // 5)]) + "\n" if text else (
        f"autosave buffer of {src.relpath}\nlast saved by the editor; safe to remove\n")
    rel = place(src, f"{stem}.tmp")
    out.append(FileSpec(rel, "tmp", {"text": body}, "clutter"))
    facts.append({"type": "clutter", "category": "temp", "file": rel, "original": src.relpath})
    # 2. exact duplicate
    src = picks[1]
    stem, ext = stem_ext(src)
    rel = place(src, f"{stem} (1).{ext}")
    out.append(FileSpec(rel, src.kind, {"copy_of": src.relpath}, "clutter"))
    facts.append({"type": "clutter", "category": "duplicate", "file": rel, "original": src.relpath})
    # 3. superseded older version
    src = picks[2]
    stem, ext = stem_ext(src)
    text = _text_of(src)
    rel = place(src, f"{stem}_old.{ext}")
    if text and src.kind in ("md", "txt"):
        lines = text.splitlines()
        old = "\n".join(lines[: max(3, len(lines) // 2)]) + "\n\n(older draft, superseded)\n"
        out.append(FileSpec(rel, src.kind, {"text": old}, "clutter"))
    else:
        out.append(FileSpec(rel, src.kind, {"copy_of": src.relpath}, "clutter"))
    facts.append({"type": "clutter", "category": "superseded", "file": rel, "original": src.relpath})
    return out, facts


_KIND_DIR = {"TSMC": None}


def _subdir_for(task_id: str, kind: str, name: str, i: int, dirs: list[str], rng: random.Random) -> str:
    if not dirs:
        return ""
    by_kind = {
        "T-16": {"eml": "communications", "csv": "data", "md": None, "png": None},
        "T-19": {"docx": "case_reports", "pdf": "legal_reference", "mp3": "audio_memos", "eml": "client_communications",
                 "md": "context"},
        "T-32": {"mp3": "audio", "wav": "audio", "jpg": "media", "png": "media", "mp4": "media", "md": "docs",
                 "docx": "docs", "txt": "docs"},
    }.get(task_id, {})
    if by_kind.get(kind):
        return by_kind[kind]
    if task_id == "T-16":
        return ["TSMC", "SeaLtd", "Intel", "research", "personal"][i % 5]
    return dirs[i % len(dirs)] if rng.random() < 0.8 else ""


def _plant_junk(specs: list[FileSpec], rng: random.Random) -> tuple[list[FileSpec], list[dict]]:
    """Duplicates ('copy (2)', 'final_final_v3'), an 'Untitled Document' and an empty file (T-17/T-21)."""
    text_specs = [s for s in specs if s.kind in ("md", "txt", "docx", "csv")]
    facts = [{"type": "junk", "file": s.relpath, "kind": s.kind} for s in specs if s.note == "junk"]
    out = list(specs)
    used = {s.relpath.casefold() for s in specs}
    for k, src in enumerate(rng.sample(text_specs, min(4, len(text_specs)))):
        stem, ext = src.relpath.rsplit(".", 1)
        new = _claim([f"{stem} copy (2).{ext}", f"{stem}_final_final_v3.{ext}", f"old/{stem.split('/')[-1]}.{ext}",
                      f"{stem}_copy.{ext}"][k % 4], used)
        out.append(FileSpec(new, src.kind, {"copy_of": src.relpath}, "duplicate"))
        facts.append({"type": "duplicate", "file": new, "original": src.relpath})
    md_like = [s for s in specs if s.kind in ("md", "txt")]
    if not any(s.note == "junk" for s in specs):
        for k, src in enumerate(rng.sample(md_like, min(4, len(md_like)))):
            d, _, base = src.relpath.rpartition("/")
            new = [f"autosave_{base}.tmp", f"{base}.bak", f"{base}.swp", f"autosave_{k}.tmp"][k]
            new = _claim(f"{d}/{new}" if d else new, used)
            out.append(FileSpec(new, "tmp" if new.endswith(".tmp") else "bak" if new.endswith(".bak") else src.kind,
                                {"copy_of": src.relpath}, "junk"))
            facts.append({"type": "junk", "file": new, "original": src.relpath})
    untitled = _claim("Untitled Document.txt", used)
    out.append(FileSpec(untitled, "txt", {"text": ""}, "empty"))
    facts.append({"type": "empty_file", "file": untitled})
    return out, facts


def _plant_archive_issues(specs: list[FileSpec], world: World, rng: random.Random
                          ) -> tuple[list[FileSpec], list[dict]]:
    """Duplicate media under other names and md documents referencing missing or mismatched media (T-32)."""
    media = [s for s in specs if s.kind in ("jpg", "png", "mp3", "wav")]
    out, facts = list(specs), []
    used = {s.relpath.casefold() for s in specs}
    for k, src in enumerate(rng.sample(media, min(3, len(media)))):
        stem, ext = src.relpath.rsplit(".", 1)
        new = _claim(f"{stem}_copy{k + 1}.{ext}" if k % 2 else f"backup/{stem.split('/')[-1]}_1.{ext}", used)
        out.append(FileSpec(new, src.kind, {"copy_of": src.relpath}, "duplicate"))
        facts.append({"type": "duplicate_media", "file": new, "original": src.relpath})
    refs = [s.relpath for s in media[:3]]
    overview = _claim("docs/archive_overview.md", used)
    missing = ["media/photo_harbour_999.jpg", "audio/voice_memo_42.mp3"]
    memo = next((s for s in media if s.kind in ("mp3", "wav") and "speech" in s.payload), None)
    lines = [f"- See ![]({'../' + r}) for context." for r in refs] + [f"- Referenced: ../{m}" for m in missing]
    if memo:
        lines.append(f"- The memo ../{memo.relpath} says the meeting is on {world.day(200).isoformat()}.")
        facts.append({"type": "memo_mismatch", "file": overview, "media": memo.relpath,
                      "stated_date": world.day(200).isoformat(), "transcript": memo.payload["speech"]})
    out.append(FileSpec(overview, "md", Doc("Archive overview", [("References", lines)])))
    facts += [{"type": "broken_ref", "file": overview, "target": m} for m in missing]
    return out, facts
