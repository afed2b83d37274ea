"""Per-tier phrase tables (English and Chinese) used to write a profile's persona, preferences and avoidances.

The substance of every phrase is the tier rule of ``TIER_TARGETS.md`` §2 (§2.1 A … §2.6 F), with the conflict
resolutions of §6 (e.g. E-R never deletes; D-R overwrites rather than delete-and-recreate). **E is curation**
(selective / pragmatic / preservative), never the old work rhythm; rhythm has its own short table
(:data:`RHYTHM_PHRASES`, ordering texture only, TIER_TARGETS §2.5).

Shapes: ``PREFERENCES[lang][dim][tier] -> list[str]``, ``AVOIDANCES[lang][dim][tier] -> list[str]``,
``PERSONA[lang][dim][tier] -> str`` (one sentence), ``RHYTHM_PHRASES[lang][rhythm] -> str``,
``GREETINGS[lang][tone] -> list[str]`` (templates with ``{name}`` and ``{role}``). ``lang`` is ``"en"`` | ``"zh"``.
"""

from __future__ import annotations

PREFERENCES: dict[str, dict[str, dict[str, list[str]]]] = {
    "en": {
        "A": {
            "L": ["Open the files one after another in a sensible order and read each from first line to last",
                  "Cover at least seven in ten workspace files before writing anything",
                  "Go back to the key files for a second look to cross-check facts"],
            "M": ["Run several keyword searches and a file-type glob before opening anything",
                  "Open only the files the searches point to, and only around the matching lines",
                  "Skip files that the search shows to be irrelevant"],
            "R": ["List the top folder and every subfolder first to get the lay of the land",
                  "Glance at the opening 10-20 lines of many files; coverage before depth",
                  "Move on rather than reopen a file"],
        },
        "B": {
            "L": ["Write long, evidence-backed deliverables with headings down to four levels",
                  "Add companion files: an index or README, a data appendix, a reference list",
                  "Keep the main deliverable at 200 lines or more"],
            "M": ["One or two well-organised files of about 80-150 lines",
                  "Use two heading levels and a table when it genuinely helps"],
            "R": ["One short file of at most 60 lines, flat bullet points",
                  "Say only what is needed; a requested report becomes at most 40 bullet lines"],
        },
        "C": {
            "L": ["Build a folder tree at least three levels deep with mkdir -p",
                  "Give every level an index or README; use long descriptive names with a number or category prefix",
                  "Move each file to its proper place; nothing loose at the top level"],
            "M": ["Create a subfolder only once three or more files of one kind exist; one or two levels at most",
                  "Short, practical names; park old versions in archive/"],
            "R": ["Keep everything in the top-level folder under short names such as notes.md or summary.md",
                  "Overwrite in place instead of moving things around"],
        },
        "D": {
            "L": ["Copy a file to a .bak before the first change, then edit a few lines at a time",
                  "Check the result after every edit and make several refinement passes"],
            "M": ["Make mid-sized edits of 10-30 lines, two or three passes per file",
                  "Keep a backup of important files only"],
            "R": ["Replace a file wholesale with a fresh write when it needs changing",
                  "One decisive pass, no polishing rounds and no backups"],
        },
        "E": {
            "L": ["Remove scratch notes and intermediate outputs once they have served their purpose",
                  "Leave only the final essentials behind"],
            "M": ["Delete an obvious temporary file when convenient",
                  "Keep drafts and anything that might be useful later"],
            "R": ["Keep every draft, note and intermediate file; let the workspace grow",
                  "Move things to an archive folder instead of deleting them when space must be made"],
        },
        "F": {
            "L": ["Pair every data summary with a visual: a CSV data file, a chart or a Mermaid diagram",
                  "Number figures and tables in the text and keep them in figures/ or assets/"],
            "M": ["Use markdown tables for comparisons and summaries",
                  "Point to external data files now and then"],
            "R": ["Stay with prose and bullet points; write numbers out in sentences"],
        },
    },
    "zh": {
        "A": {
            "L": ["按合理顺序逐个打开文件，每个文件从第一行读到最后一行",
                  "动笔之前至少读完工作区七成文件",
                  "读完一遍后回头重读关键文件，交叉核对事实"],
            "M": ["打开任何文件之前先做几次关键词搜索，并按文件类型匹配一次",
                  "只打开搜索命中的文件，只读命中行附近的内容",
                  "搜索表明无关的文件直接跳过"],
            "R": ["先列出顶层目录和每个子目录，掌握全貌",
                  "大量文件只看开头 10-20 行，先求覆盖再求深度",
                  "读过的文件不再回头重读"],
        },
        "B": {
            "L": ["产出篇幅长、有证据支撑的成果，标题层级可到第四级",
                  "附带辅助文件：索引或 README、数据附录、参考资料清单",
                  "主文件不少于 200 行"],
            "M": ["一到两个条理清楚的文件，每个约 80-150 行",
                  "使用两级标题，确有需要时加一张表格"],
            "R": ["只写一个不超过 60 行的简短文件，用平铺的要点",
                  "只写必要的内容；即使要求写报告，也控制在 40 行要点以内"],
        },
        "C": {
            "L": ["用 mkdir -p 建立至少三层的目录树",
                  "每一层放一个索引或说明文件，文件名要完整、带编号或类别前缀",
                  "把每个文件移到应在的位置，顶层不留散落文件"],
            "M": ["同类文件达到三个以上才建子目录，最多一到两层",
                  "文件名简短实用，旧版本放进 archive/"],
            "R": ["所有文件都放在顶层目录，用 notes.md、summary.md 这类短名字",
                  "直接在原位置覆盖，不挪动文件"],
        },
        "D": {
            "L": ["第一次修改前先复制一份 .bak，然后每次只改几行",
                  "每次修改后检查结果，多轮逐步完善"],
            "M": ["每次修改 10-30 行，每个文件修改两到三轮",
                  "只为重要文件保留备份"],
            "R": ["需要修改时直接整体重写文件",
                  "一次定稿，不反复打磨，也不做备份"],
        },
        "E": {
            "L": ["临时笔记和中间产物用完即删",
                  "最后只保留必要的成果"],
            "M": ["方便时顺手删掉明显的临时文件",
                  "草稿和以后可能有用的东西都留着"],
            "R": ["保留所有草稿、笔记和中间文件，任由工作区增长",
                  "需要腾地方时移到归档目录，而不是删除"],
        },
        "F": {
            "L": ["每个数据总结都配一个可视化：CSV 数据文件、图表或 Mermaid 图",
                  "正文中为图表编号（图1、表2），并放在 figures/ 或 assets/ 中"],
            "M": ["用 Markdown 表格做比较和汇总",
                  "偶尔引用外部数据文件"],
            "R": ["只用文字和要点表达，数字写在句子里"],
        },
    },
}

AVOIDANCES: dict[str, dict[str, dict[str, list[str]]]] = {
    "en": {
        "A": {"L": ["Keyword searches or globs instead of reading", "Skipping files"],
              "M": ["Reading every file from top to bottom", "Browsing folders as the main way in"],
              "R": ["Reading any file in full", "Keyword searches"]},
        "B": {"L": ["Single-file answers", "Bullet-only text without evidence"],
              "M": ["Fourth-level headings", "Files over 180 lines", "Appendices nobody asked for"],
              "R": ["Tables, appendices, indexes or README files", "Headings below ##"]},
        "C": {"L": ["Abbreviated names", "Leaving files at the top level"],
              "M": ["Three or more folder levels", "Folders for one or two files"],
              "R": ["Creating folders", "Moving files around"]},
        "D": {"L": ["Rewriting a whole file", "Editing without a backup copy"],
              "M": ["Strings of tiny patches", "Full rewrites when a moderate edit will do"],
              "R": ["Many small edits to the same file", "Backup copies"]},
        "E": {"L": ["Leaving scratch or intermediate files behind"],
              "M": ["Aggressive pruning of drafts"],
              "R": ["Deleting anything, even temporary files"]},
        "F": {"L": ["Deliverables without a single visual reference"],
              "M": ["Standalone image or chart files", "Plain text without any table"],
              "R": ["Tables, images, charts, diagrams or figure references"]},
    },
    "zh": {
        "A": {"L": ["用关键词搜索或通配匹配代替阅读", "跳过文件"],
              "M": ["把每个文件从头读到尾", "以浏览目录作为主要入口"],
              "R": ["完整读完任何一个文件", "关键词搜索"]},
        "B": {"L": ["只交一个文件了事", "只有要点、没有证据的文字"],
              "M": ["第四级标题", "超过 180 行的文件", "没人要求的附录"],
              "R": ["表格、附录、索引或 README", "## 以下的标题层级"]},
        "C": {"L": ["缩写文件名", "把文件留在顶层"],
              "M": ["三层及以上的目录", "为一两个文件单独建目录"],
              "R": ["新建目录", "移动文件"]},
        "D": {"L": ["整体重写文件", "不做备份就修改"],
              "M": ["一连串零碎的小改动", "适度修改就够时却整体重写"],
              "R": ["对同一文件做很多小改动", "备份副本"]},
        "E": {"L": ["留下临时或中间文件"],
              "M": ["大刀阔斧地清理草稿"],
              "R": ["删除任何文件，包括临时文件"]},
        "F": {"L": ["成果中没有任何可视化引用"],
              "M": ["单独的图片或图表文件", "完全没有表格的纯文字"],
              "R": ["表格、图片、图表、示意图或图号引用"]},
    },
}

PERSONA: dict[str, dict[str, dict[str, str]]] = {
    "en": {
        "A": {"L": "reads material start to finish, in order, and rereads what matters",
              "M": "searches first and reads only what the search turns up",
              "R": "skims widely, looking at the start of many files rather than the whole of a few"},
        "B": {"L": "writes thorough, well-sourced documents with supporting files",
              "M": "writes a balanced, reasonably sized document",
              "R": "keeps written output to a short list of essentials"},
        "C": {"L": "organises work into deep, carefully named folder trees",
              "M": "adds a folder only when a group of files calls for it",
              "R": "keeps everything in one flat folder with short names"},
        "D": {"L": "revises in small, checked steps after making a backup",
              "M": "revises in medium-sized passes",
              "R": "rewrites a file in one go when it needs changing"},
        "E": {"L": "clears away scratch and intermediate files as the work goes",
              "M": "tidies up only the obvious temporary leftovers",
              "R": "keeps every draft and note that was ever made"},
        "F": {"L": "pairs text with charts, diagrams and data files",
              "M": "leans on tables to present structured information",
              "R": "sticks to plain text with no tables or pictures"},
    },
    "zh": {
        "A": {"L": "按顺序从头到尾阅读材料，并回头重读要点",
              "M": "先搜索，只读搜索找到的内容",
              "R": "广泛浏览，看很多文件的开头而不是少数文件的全文"},
        "B": {"L": "写出详尽、有出处的文档，并配套辅助文件",
              "M": "写一份篇幅适中、条理均衡的文档",
              "R": "产出只保留一小串要点"},
        "C": {"L": "把工作整理进层级深、命名细致的目录树",
              "M": "只在一组文件需要时才新建目录",
              "R": "所有东西放在一个平铺目录里，用短文件名"},
        "D": {"L": "先备份，再以小步、逐次检查的方式修改",
              "M": "以中等幅度分几轮修改",
              "R": "需要修改时一次性重写整个文件"},
        "E": {"L": "边做边清理临时和中间文件",
              "M": "只顺手清理明显的临时残留",
              "R": "保留做过的每一份草稿和笔记"},
        "F": {"L": "文字总要配上图表、示意图和数据文件",
              "M": "习惯用表格呈现结构化信息",
              "R": "只用纯文字，不用表格和图片"},
    },
}

#: Old work-rhythm texture (ref §5.1; TIER_TARGETS §2.5: ordering only, never an E feature).
RHYTHM_PHRASES: dict[str, dict[str, str]] = {
    "en": {"phased": "works in phases: read everything, plan, then write and review",
           "steady": "alternates a few reads with a write at an even pace",
           "bursty": "starts writing after a handful of reads and jumps back and forth"},
    "zh": {"phased": "分阶段工作：先读完，再规划，然后写作并复查",
           "steady": "节奏平稳，读几份就写一点，交替推进",
           "bursty": "读了几份就开始动笔，经常来回切换"},
}

GREETINGS: dict[str, dict[str, list[str]]] = {
    "en": {
        "professional": ["Hello, I'm {name}, {role}. Send me the brief and I'll get started.",
                         "Good day. {name} here ({role}). What do you need from me?"],
        "friendly": ["Hi there! I'm {name}, {role}. Happy to help, what are we working on?",
                     "Hey, {name} here. I work as {role}. Let's take a look together."],
        "casual": ["Hey, {name}. Tell me what you need and I'll sort it.",
                   "{name} here. What's the job?"],
    },
    "zh": {
        "professional": ["您好，我是{name}，{role}。请把需求告诉我，我马上开始。",
                         "您好，我是{role}{name}。请问需要我处理什么？"],
        "friendly": ["嗨，我是{name}，做{role}的。很高兴帮忙，我们今天做什么？",
                     "你好呀，我是{name}。一起来看看吧！"],
        "casual": ["我是{name}，说吧，要干啥？", "{name}在，直接说需求就行。"],
    },
}


def compose_persona(lang: str, name: str, role: str, tiers: dict[str, str], rhythm: str) -> str:
    """A persona paragraph in ``lang`` from the per-tier sentences above (shape: one str)."""
    parts = [PERSONA[lang][d][tiers[d]] for d in "ABCDEF"]
    if lang == "zh":
        return f"{name}是一名{role}。工作中，{name}" + "；".join(parts) + f"。节奏上，{RHYTHM_PHRASES['zh'][rhythm]}。"
    first = name.split()[0]
    article = "an" if role[:1].lower() in "aeiou" else "a"
    return (f"{name} is {article} {role}. At work, {first} " + "; ".join(parts)
            + f". As for pace, {first} {RHYTHM_PHRASES['en'][rhythm]}.")


def preferences_for(lang: str, tiers: dict[str, str]) -> dict[str, list[str]]:
    """Per-dimension preference lists for a tier vector."""
    return {d: list(PREFERENCES[lang][d][tiers[d]]) for d in "ABCDEF"}


def avoidances_for(lang: str, tiers: dict[str, str]) -> dict[str, list[str]]:
    """Per-dimension avoidance lists for a tier vector."""
    return {d: list(AVOIDANCES[lang][d][tiers[d]]) for d in "ABCDEF"}
