"""How a statement (:class:`~.knowledge.Statement`) is put into words: a clause per statement key, in English and
Chinese, a few wordings each (the writer draws one with the agent's generator), and the sentence frames that join
clauses about one subject. Every value comes from the statement's slots, so each clause states what was read, in
the writer's own words (ours; no wording is taken from the inputs' sentences).
"""

from __future__ import annotations

import random
import re

from filegram_ray.engine.simulator.knowledge import Statement

#: key -> (English wordings, Chinese wordings); ``{S}`` is the statement's subject where a wording needs it.
CLAUSES: dict[str, tuple[list[str], list[str]]] = {
    "revenue": (["{q} revenue of {amt}, {pct}% ahead of consensus", "revenue came to {amt} in {q}, beating "
                 "consensus by {pct}%", "{amt} of {q} revenue ({pct}% over consensus)"],
                ["{q}营收{amt}，高出市场预期{pct}%", "{q}收入{amt}，超出一致预期{pct}%"]),
    "margin": (["gross margin at {pct}% with a narrow guide for next quarter", "a {pct}% gross margin"],
               ["毛利率{pct}%，下季度指引区间较窄", "毛利率为{pct}%"]),
    "risk_flag": (["inventory build-up is the nearest risk, as {who} pointed out", "{who} sees inventory build-up "
                   "as the main short-term risk"],
                  ["{who}指出库存积压是近期主要风险", "近期风险在于库存积压（{who}提出）"]),
    "target": (["12-month target price stays at {price}, rating unchanged", "target held at {price} over twelve "
                "months"],
               ["12个月目标价维持{price}，评级不变", "目标价仍为{price}"]),
    "capex": (["capex guided at {amt}, with capacity growth planned into {year}", "plans {amt} of capital "
               "spending, expanding capacity until {year}"],
              ["资本开支指引{amt}，产能扩张持续至{year}年", "计划资本开支{amt}，扩产到{year}年"]),
    "call": (["a call on {d} covered {topic}", "spoke on {d} about {topic}"],
             ["{d}通话，讨论{topic}", "{d}沟通了{topic}"]),
    "fcf": (["free cash flow of {amt}, about {x} times the dividend", "{amt} free cash flow covers the dividend "
             "{x}x"],
            ["自由现金流{amt}，约为股息的{x}倍"]),
    "revisit": (["thesis due for review before results on {d}", "the investment case needs another look before "
                 "the {d} release"],
                ["须在{d}财报前重新审视投资逻辑", "{d}发布财报前要复核投资判断"]),
    "leverage": (["debt to equity of {r}, inside covenant limits", "leverage at {r} debt/equity, well within "
                  "covenants"],
                 ["债务权益比{r}，低于契约上限"]),
    "watch": (["items to watch: {items}", "keep an eye on {items}"], ["需关注：{items}"]),
    "instructed": (["client {client}, instructions taken {d1}, next in court {d2}", "{client} instructed us on "
                    "{d1}; hearing set for {d2}"],
                   ["委托人{client}，{d1}接受委托，下次开庭{d2}", "{client}于{d1}委托，{d2}开庭"]),
    "affidavit": (["the respondent's affidavit is due for filing and service by {d}", "affidavit deadline: {d}"],
                  ["被申请人宣誓书须于{d}前提交并送达", "宣誓书截止日期：{d}"]),
    "attend": (["{who} is attending the directions hearing at {court}", "directions hearing at {court}, covered "
                "by {who}"],
               ["{who}出席{court}的指示聆讯"]),
    "section": (["section {n} puts the child's best interests first", "s.{n} applies: the child's best interests "
                 "are paramount"],
                ["第{n}条：以儿童最大利益为首要考虑"]),
    "disclosure": (["new prosecution evidence disclosed {d} still has to be reviewed", "further disclosure on "
                    "{d}, to read before the mention"],
                   ["控方{d}补充披露了证据，提讯前需审阅"]),
    "legal_aid": (["legal aid granted with a {amt} contribution", "on legal aid, contributing {amt}"],
                  ["已获法律援助，自付{amt}"]),
    "anxious": (["the client wants each stage explained in plain words", "the client is worried about timing and "
                 "asked for a simple walk-through of the stages"],
                ["客户担心时间安排，希望逐步用通俗语言解释"]),
    "bail": (["on bail, reporting to police {freq}", "bail terms: police check-in {freq}"],
             ["保释条件：每周两次到警局报到"]),
    "mediation": (["mediation set for {d}; {who} prepares the settlement options", "{who} is drafting settlement "
                   "options for the mediation on {d}"],
                  ["{d}调解，{who}准备和解方案"]),
    "stage": (["at the interlocutory stage, waiting on expert reports", "expert reports outstanding "
               "(interlocutory stage)"],
              ["处于中间程序阶段，等待专家报告"]),
    "milestone": (["milestone {n} reached on {d}, {late} behind plan", "hit milestone {n} on {d} ({late} late)"],
                  ["{d}完成第{n}个里程碑，比计划晚"]),
    "owners": (["{a} runs the integration, {b} reviews the API contract", "integration with {a}; API contract "
                "review with {b}"],
               ["{a}负责集成，{b}审核API合同"]),
    "budget": (["budget {amt}, {pct}% used so far", "{pct}% of a {amt} budget spent"],
               ["预算{amt}，已使用{pct}%", "{amt}预算已花掉{pct}%"]),
    "proposal": (["wants a revised proposal by {d}", "revised proposal owed by {d}"],
                 ["要求{d}前提交修订提案"]),
    "action": (["to send round the updated timeline before {when}", "owes the team the new timeline by {when}"],
               ["需在周五前分发更新的时间表"]),
    "csat": (["customer satisfaction up to {pct}% since the onboarding changes", "onboarding changes lifted "
              "satisfaction to {pct}%"],
             ["入职流程调整后客户满意度升至{pct}%"]),
    "risks": (["open risks: {items}", "risks named: {items}"], ["风险：{items}"]),
    "course": (["completed the {topic} module and wrote up notes", "{topic} course module finished"],
               ["完成{topic}课程模块并整理了笔记"]),
    "target_met": (["the target of {n} signed accounts was reached on {d}", "{n} accounts signed by {d}, on "
                    "target"],
                   ["{d}达成季度签约{n}个客户的目标"]),
    "focus": (["next quarter's priorities are reliability and the rollout", "the rollout and reliability lead "
               "next quarter"],
              ["下季度重点是稳定性和上线"]),
    "run": (["an early river run with {who} on {d}", "ran by the river with {who} ({d})"],
            ["{d}早起和{who}沿河跑步"]),
    "watercolor": (["evenings go into watercolour practice, with sky gradients improving", "keeps practising "
                    "watercolour washes"],
                   ["晚上练习水彩晕染，天空渐变越来越好"]),
    "moving": (["thinking about a move to {city}, talked over with {who}, not decided", "undecided about moving "
                "to {city} (discussed with {who})"],
               ["和{who}商量过搬去{city}，仍未决定"]),
    "book": (["finished {book}: a slow middle, a good ending", "read {book} to the end despite a slow middle"],
             ["读完《{book}》，中段拖沓，结尾不错"]),
    "rent": (["rent of {amt}, groceries and transport under budget", "pays {amt} in rent and kept other spending "
              "under plan"],
             ["房租{amt}，伙食和交通开支低于计划"]),
    "stretched": (["torn between work deadlines and the {topic} course", "work deadlines and the {topic} course "
                   "compete for time"],
                  ["工作截止期和{topic}课程两头忙"]),
    "trip": (["a weekend away booked for {d}, cat sitter still to find", "trip on {d} booked; needs a cat sitter"],
             ["订了{d}的周末出行，还要找猫保姆"]),
    "dinner": (["dinner with {a} and {b}, laughing about the {what}", "shared a dinner and the old {what} story "
                "with {a} and {b}"],
               ["和{a}、{b}聚餐，聊起那次{what}"]),
    "heart": (["resting heart rate around {n} bpm, better sleep without late coffee", "heart rate at rest about "
               "{n} bpm"],
              ["静息心率约{n}次/分，晚上不喝咖啡后睡得更好"]),
    "passport": (["passport renewal due before {d}, and a Sunday call home", "must renew the passport before {d}"],
                 ["{d}前要续签护照，周日给妈妈打电话"]),
    "film_pace": (["slow and patient, long takes that reward attention", "a quiet film built on long takes"],
                  ["节奏舒缓，长镜头耐看"]),
    "film_animation": (["hand-drawn backgrounds lit with simple 3D", "animation mixing hand-drawn backdrops and "
                        "basic 3D light"],
                       ["手绘背景配简单三维光照"]),
    "director": (["director {who} calls it a love letter to {what}", "{who} directed it as a tribute to {what}"],
                 ["导演{who}称其为献给{what}的情书"]),
    "runtime": (["{n} minutes, rated {stars}/5", "runs {n} minutes; {stars} out of 5"],
                ["片长{n}分钟，评分{stars}/5"]),
    "watched": (["watched with {who} on {d}", "seen on {d} together with {who}"], ["{d}和{who}一起看的"]),
    "double_bill": (["good for a rainy-evening double bill", "pairs well with another slow drama"],
                    ["适合雨夜连看两部慢片"]),
    "weight": (["weighed {kg} kg at the {d} check-up", "{kg} kg on {d}, growth on track"],
               ["{d}体检体重{kg}公斤", "{d}称重{kg}公斤，生长正常"]),
    "booster": (["vaccination booster due {d}", "next booster on {d}"], ["{d}需打加强针"]),
    "scratching": (["still scratches the sofa, so a taller sisal post was ordered", "sofa scratching continues; a "
                    "sisal post is on order"],
                   ["仍抓沙发，已订更高的剑麻猫抓柱"]),
    "food": (["now on grain-free kitten food from {co}, {g} g a day", "eats {g} g a day of {co} grain-free food"],
             ["改吃{co}的无谷幼猫粮，每天{g}克"]),
    "tartar": (["Dr. {who} found mild tartar and suggested dental treats", "mild tartar noted by Dr. {who}"],
               ["{who}医生发现轻微牙垢，建议吃洁齿零食"]),
    "adopted": (["adopted from the {shelter} on {d}, microchipped to {owner}", "came home from the {shelter} on "
                 "{d} (chip registered to {owner})"],
                ["{d}从{shelter}领养，芯片登记在{owner}名下"]),
    "degree": (["a {degree} from {uni}, GPA {gpa}", "graduated from {uni} ({degree}, GPA {gpa})"],
               ["{uni}{degree}，GPA {gpa}"]),
    "thesis": (["thesis on {topic}, supervised by Professor {who}", "wrote the {topic} thesis under Professor "
                "{who}"],
               ["毕业论文研究{topic}，导师{who}教授"]),
    "internship": (["interned from {d1} to {d2}, building data pipelines and dashboards", "internship {d1} to "
                    "{d2}: pipelines and dashboards"],
                   ["{d1}至{d2}实习，搭建数据管道和看板"]),
    "deans_list": (["on the Dean's List in {year}, with a conference travel grant", "Dean's List {year}"],
                   ["{year}年入选院长嘉许名单"]),
    "skills": (["skills include {items}", "brings {items}"], ["技能：{items}"]),
    "graduation": (["graduation ceremony on {d}; gowns collected two days before", "graduates on {d}"],
                   ["{d}举行毕业典礼"]),
    "ceo": (["CEO given as {who}", "names {who} as CEO"], ["CEO为{who}"]),
    "headcount": (["headcount of {n}", "{n} employees"], ["员工{n}人"]),
    "launch": (["launch on {d}", "launch date {d}"], ["上线日期{d}"]),
    "annual_revenue": (["annual revenue of {amt}", "revenue stated as {amt}"], ["年收入{amt}"]),
    "project_budget": (["project budget of {amt}", "budget stated as {amt}"], ["项目预算{amt}"]),
    "cagr_claim": (["claims revenue growth of {pct}% a year", "a {pct}% revenue CAGR claimed"],
                   ["称营收年复合增长{pct}%"]),
    "share_claim": (["claims market share steady near {pct}%", "says share holds at about {pct}%"],
                    ["称市场份额稳定在{pct}%左右"]),
    "debt_claim": (["says debt rose to {amt} as share slipped to {pct}%", "debt up to {amt}, share down to {pct}%"],
                   ["称债务升至{amt}，份额降到{pct}%"]),
    "revision": (["revised on {d} by {who}", "{who} made the {d} revision"], ["{d}由{who}修订"]),
    "batch_add": (["a summary of {case} goes into {folder} ({d})", "add {case} to {folder}, dated {d}"],
                  ["在{folder}中加入{case}摘要（{d}）"]),
    "batch_update": (["{folder} gets the new listing time for {d}", "listing time for {d} to be updated in "
                      "{folder}"],
                     ["更新{folder}中{d}的排期"]),
    "batch_supersede": (["batch {b} item {i} is superseded: the summary moves to {folder}", "the earlier case "
                         "summary (batch {b}, item {i}) now belongs in {folder}"],
                        ["第{b}批第{i}项作废：摘要改放{folder}"]),
    "zh_progress": (["discussed project progress with {who} on {d}; more data needed next week"],
                    ["{d}与{who}讨论项目进度，下周需补充数据", "{d}和{who}过了一遍进度"]),
    "zh_notes": (["tidied notes on {topic}"], ["整理笔记，重点在{topic}"]),
    "zh_todo": (["to confirm a meeting time with {who} and update the budget sheet"], ["待办：与{who}确认会议时间"]),
    "zh_walk": (["a relaxed weekend walk in the park"], ["周末公园散步，放松心情"]),
    "zh_quarter": (["the quarter's goals are mostly met; documentation is what remains"],
                   ["本季度目标基本完成，只剩文档整理"]),
    "industry": (["registered in {ind} (SSIC {code})", "{ind}, SSIC code {code}"], ["行业：{ind}（SSIC {code}）"]),
    "entity": (["registered as {name}", "entity name {name}"], ["登记名称{name}"]),
    # structural kinds
    "email": (["{from} wrote to {to} on {d} about “{topic}”", "mail from {from} ({d}): “{topic}”"],
              ["{d}{from}来信，主题“{topic}”", "{from}于{d}发邮件谈“{topic}”"]),
    "event": (["{what} on {d} at {time}, {where}", "{d} {time}: {what} ({where})"],
              ["{d} {time}：{what}（{where}）"]),
    "series": (["in “{chart}”, from {first} in {first_at} to {last} in {last_at}, peaking at {peak} in {peak_at}",
                "{first} ({first_at}) to {last} ({last_at}) on the “{chart}” chart"],
               ["“{chart}”中由{first_at}的{first}变为{last_at}的{last}，峰值{peak}（{peak_at}）"]),
    "photo": (["a photo of {scene}", "picture: {scene}"], ["照片：{scene}"]),
    "clip": (["a GIF loop of {scene}", "looping clip of {scene}"], ["GIF动图：{scene}"]),
    "video": (["video of {n} scenes opening on {scene}", "{n}-scene clip starting with {scene}"],
              ["{n}个镜头的视频，开头是{scene}"]),
    "music": (["music only: {what}", "a recording of {what}, no speech"], ["纯音乐：{what}"]),
    "recording": (["a recorded {gist}", "voice recording ({gist})"], ["录音：{gist}"]),
    "figure": (["{label}: {v}", "{v} for {label}"], ["{label}：{v}"]),
    "dated": (["{what} on {d}", "{d}: {what}"], ["{d}：{what}"]),
    "mention": (["{who} comes up about {gist}", "{who}, regarding {gist}"], ["提到{who}（{gist}）"]),
}

#: Frames joining a subject and its clauses (ours). ``{S}`` subject, ``{C}`` the clauses joined.
FRAMES = {
    "en": ["{S}: {C}.", "{S} — {C}.", "For {S}, {C}.", "{S}: {C}."],
    "zh": ["{S}：{C}。", "关于{S}，{C}。", "{S}方面，{C}。"],
}


def _fill(tpl: str, st: Statement) -> str | None:
    slots = dict(st.slots)
    slots["S"] = st.subject
    try:
        out = tpl.format_map(slots)
    except (KeyError, IndexError, ValueError):
        return None
    return out if "{" not in out else None


#: Column names of the workspace's tables as a Chinese writer names them (ours).
ZH_HEADERS = {"revenue (USD m)": "营收（百万美元）", "gross margin (%)": "毛利率（%）", "eps (USD)": "每股收益（美元）",
              "steps": "步数", "sleep (hours)": "睡眠（小时）", "sleep hours": "睡眠（小时）", "resting hr": "静息心率",
              "note": "备注", "date": "日期", "owner": "负责人", "task": "任务", "status": "状态",
              "hours": "工时", "hours (hours)": "工时", "quarter": "季度", "company": "公司", "case no": "案号",
              "client": "客户", "stage": "阶段", "next date": "下次日期", "responsible": "负责人",
              "year": "年份", "share (%)": "份额（%）", "total debt (USD m)": "总债务（百万美元）",
              "ssic code": "SSIC代码", "industry": "行业", "section": "类别"}
ZH_VALUES = {"done": "已完成", "blocked": "受阻", "in progress": "进行中", "intake": "受理", "pleadings": "诉状",
             "discovery": "证据开示", "hearing": "庭审", "judgment": "判决", "appeal": "上诉", "run": "跑步",
             "gym": "健身", "rest": "休息", "walk": "散步", "swim": "游泳"}


def header(h: str, lang: str) -> str:
    return ZH_HEADERS.get(h, h) if lang == "zh" else h


def row_clause(st: Statement, lang: str, rng: random.Random, keep: int = 4) -> str:
    """A table row's cells as a clause: its first text cell, then the other cells in brackets, numbers with their
    column name ("Beacon: client call (blocked, 2024-02-20, hours 10)")."""
    items = [(header(h, lang), ZH_VALUES.get(v, v) if lang == "zh" else v) for h, v in st.slots.items()
             if not h.startswith("_") and v][:keep]
    head = next(((h, v) for h, v in items if not re.fullmatch(r"[\d$.,%:/ -]+|\d{4}Q\d", v)), None)
    rest = [(h, v) for h, v in items if (h, v) != head]
    parts = [f"{h} {v}" if re.fullmatch(r"[\d$.,%-]+", v) else v for h, v in rest]
    if head is None:  # all numbers: the first (a period, a date) leads, the rest follow it
        if not items:
            return ""
        lead, rest = items[0][1], [f"{h} {v}" for h, v in items[1:]]
        return lead + ("：" if lang == "zh" else ": ") + ("，" if lang == "zh" else ", ").join(rest)
    if lang == "zh":
        return head[1] + ("（" + "，".join(parts) + "）" if parts else "")
    return head[1] + (f" ({', '.join(parts)})" if parts else "")


#: Keys whose repeats about one subject are said once, with their values listed: (main slot, English, Chinese).
MERGE = {"csat": ("pct", "customer satisfaction readings of {v}%", "客户满意度先后为{v}%"),
         "target_met": ("n", "signed-account targets of {v} met", "签约目标{v}个均已达成"),
         "milestone": ("n", "milestones {v} reached", "完成里程碑{v}"),
         "budget": ("amt", "budgets of {v}", "预算分别为{v}"),
         "legal_aid": ("amt", "legal aid contributions of {v}", "法律援助自付{v}"),
         "target": ("price", "target prices of {v}", "目标价{v}"),
         "revisit": ("d", "thesis reviews due before {v}", "{v}前需复核投资逻辑"),
         "affidavit": ("d", "affidavit deadlines on {v}", "宣誓书截止日期{v}"),
         "disclosure": ("d", "disclosures on {v} to review", "{v}的补充披露待审阅"),
         "bail": ("freq", "bail reporting {v}", "保释报到：{v}"),
         "section": ("n", "sections {v} on the child's best interests", "第{v}条（儿童最大利益）"),
         "weight": ("kg", "weights of {v} kg at check-ups", "体检体重{v}公斤"),
         "margin": ("pct", "gross margins of {v}%", "毛利率{v}%"),
         "revenue": ("amt", "quarterly revenues of {v}", "季度营收{v}")}


def merged_clause(stmts: list[Statement], lang: str) -> str | None:
    """Several statements of one key about one subject as one clause listing their values (:data:`MERGE`)."""
    key = stmts[0].key
    if key not in MERGE or len(stmts) < 2 or any(s.key != key for s in stmts):
        return None
    slot, en, zh = MERGE[key]
    def val(s: Statement) -> str:
        v = s.slots.get(slot, "")
        if s.date and s.date not in v:  # the date each value belongs to stays with it
            v += f"（{s.date}）" if lang == "zh" else f" ({s.date})"
        return v

    vals = list(dict.fromkeys(val(s) for s in stmts if s.slots.get(slot)))
    if lang == "zh":
        return zh.format(v="、".join(vals))
    return en.format(v=", ".join(vals[:-1]) + " and " + vals[-1] if len(vals) > 1 else vals[0])


def clause(st: Statement, lang: str, rng: random.Random) -> str:
    """One wording of ``st`` without its subject (``lang`` ``en`` | ``zh``)."""
    if st.key == "row":
        return row_clause(st, lang, rng)
    en, zh = CLAUSES.get(st.key, (["{S}"], ["{S}"]))
    options = [w for w in (zh if lang == "zh" else en) if _fill(w, st)]
    if not options:
        return " ".join(v for v in st.slots.values() if v)
    return _fill(rng.choice(options), st) or ""


def join_clauses(parts: list[str], lang: str) -> str:
    parts = [p for p in parts if p]
    if lang == "zh":
        return "；".join(parts)
    if len(parts) <= 1:
        return "".join(parts)
    return "; ".join(parts[:-1]) + "; " + parts[-1] if len(parts) > 2 else f"{parts[0]}, and {parts[1]}"


def sentence(subject: str, clauses: list[str], lang: str, rng: random.Random) -> str:
    """Clauses about ``subject`` as one sentence (a frame of :data:`FRAMES`); without a subject the clauses
    stand alone, the first word capitalised."""
    body = join_clauses(clauses, lang)
    if not body:
        return ""
    if not subject:
        return (body + "。") if lang == "zh" else cap(body) + "."
    out = rng.choice(FRAMES[lang]).format(S=subject, C=body)
    return out.replace("..", ".")


def cap(s: str) -> str:
    return s[:1].upper() + s[1:] if s else s


def about(st: Statement, lang: str, rng: random.Random) -> str:
    """One statement as a sentence about its subject."""
    return sentence(st.subject, [clause(st, lang, rng)], lang, rng)
