"""Prompts of the LLM agent: a persona system prompt built from a profile, and the task prompt.

The system prompt is the profile in its own language (reference §5.5: identity override, role, personality and
work-habit lines, preferences, avoidances): the persona paragraph, one line per behavioural attribute, the
preference and avoidance lists, then how to use the tools. **Ground truth never reaches the model**: no tier letter
(``L``/``M``/``R``), no dimension letter or name (consumption, production, … — :data:`DIMENSION_NAMES`), no
attribute key and no snake_case attribute value; attributes are rendered through the phrase tables below, which
describe behaviour in plain words (:func:`leaked_terms` checks a text for all of these).

Perturbation (reference §5.7): the profile is shifted by one tier on one dimension exactly as the simulator's plan
says (``{"dimension", "from", "to"}``). The system prompt is rendered from the shifted profile (that dimension's
preference and avoidance lines, its persona sentence and the attributes that follow it take the new tier's
phrases, as :class:`~filegram_ray.engine.simulator.persona.Persona` shifts them), and the task prompt ends with
upstream's "behavioural adjustment" header plus the new tier's instructions, in the profile's language. The shift
itself (dimension, tiers) is recorded in ``meta.json`` only.

Public API: :func:`system_prompt`, :func:`task_prompt`, :func:`continue_prompt`, :func:`leaked_terms`,
:data:`ATTRIBUTE_PHRASES`.
"""

from __future__ import annotations

import re
from typing import Any

from filegram_ray.profiles.phrases import AVOIDANCES, PERSONA, PREFERENCES
from filegram_ray.schema.profile import (
    BEHAVIOURAL_ATTRIBUTES,
    DETERMINISTIC_ATTRIBUTES,
    DIMENSION_NAMES,
    DIMENSIONS,
    TIER_NAMES,
)

__all__ = ["ATTRIBUTE_PHRASES", "CONFIRMATION_PHRASES", "assistant_prompt", "continue_prompt", "leaked_terms",
           "shifted_profile", "system_prompt", "task_prompt"]

#: One sentence per (attribute, value), per language: how the persona behaves, in plain words (our own wording of
#: the value spaces of reference §5.2; no dimension or tier vocabulary).
ATTRIBUTE_PHRASES: dict[str, dict[str, dict[str, str]]] = {
    "en": {
        "tone": {"professional": "Your writing tone is professional and measured.",
                 "friendly": "Your writing tone is warm and friendly.",
                 "casual": "Your writing tone is casual and relaxed."},
        "verbosity": {"detailed": "You explain things at length.",
                      "balanced": "You explain things at moderate length.",
                      "concise": "You keep explanations short."},
        "output_detail": {"detailed": "Your documents are long and detailed.",
                          "balanced": "Your documents are of moderate length.",
                          "concise": "Your documents are brief."},
        "documentation": {"comprehensive": "You document your work thoroughly, with notes on sources.",
                          "moderate": "You document what matters.",
                          "minimal": "You write almost no documentation."},
        "output_structure": {"hierarchical": "You structure documents with nested headings.",
                             "flat_list": "You write flat lists of points.",
                             "narrative": "You write flowing prose."},
        "reading_strategy": {"sequential_deep": "You read files one by one, from start to end.",
                             "targeted_search": "You search for keywords first and read only what matches.",
                             "breadth_first": "You glance at many files rather than reading a few in full."},
        "thoroughness": {"exhaustive": "You leave nothing unchecked.",
                         "balanced": "You check the important things.",
                         "minimal": "You check only what is strictly needed."},
        "organization_style": {"deeply_nested": "You sort work into folders inside folders.",
                               "by_type": "You group files by their type.",
                               "flat": "You keep all files side by side in one folder."},
        "naming_convention": {"descriptive_long": "You give files long, descriptive names.",
                              "short_abbreviation": "You give files short, abbreviated names.",
                              "date_prefixed": "You start file names with a date."},
        "directory_style": {"nested_by_topic": "You make a folder per topic, several levels deep.",
                            "adaptive": "You make a folder only when a group of files needs one.",
                            "flat": "You do not make folders."},
        "naming": {"long_descriptive": "Your file names spell out their content.",
                   "short_abbrev": "Your file names are short.",
                   "date_prefix": "Your file names carry a date prefix.",
                   "mixed": "Your file names vary with the situation."},
        "edit_strategy": {"incremental_small": "You change files in many small steps.",
                          "balanced": "You change files in a few medium-sized passes.",
                          "bulk_rewrite": "You rewrite a file in one go when it needs changing."},
        "version_strategy": {"keep_history": "You keep copies of earlier versions.",
                             "archive_old": "You move old versions into an archive folder.",
                             "overwrite": "You overwrite old versions."},
        "error_handling": {"defensive": "You double-check before every risky step.",
                           "balanced": "You take reasonable care with risky steps.",
                           "optimistic": "You go ahead and fix problems if they come up."},
        "working_style": {"methodical": "You work methodically, one step after another.",
                          "exploratory": "You explore freely and follow what looks interesting.",
                          "pragmatic": "You do what gets the job done."},
        "cross_modal_behavior": {"visual_heavy": "You like charts, diagrams and data files next to text.",
                                 "tables_and_references": "You like tables and references to data files.",
                                 "balanced": "You mix text with the occasional table.",
                                 "text_only": "You write plain text only."},
    },
    "zh": {
        "tone": {"professional": "你的文字语气专业、稳重。",
                 "friendly": "你的文字语气亲切友好。",
                 "casual": "你的文字语气随意轻松。"},
        "verbosity": {"detailed": "你说明问题时讲得很充分。",
                      "balanced": "你说明问题时长短适中。",
                      "concise": "你说明问题时言简意赅。"},
        "output_detail": {"detailed": "你写的文档篇幅长、内容详尽。",
                          "balanced": "你写的文档篇幅适中。",
                          "concise": "你写的文档很简短。"},
        "documentation": {"comprehensive": "你会把工作过程和出处都记录清楚。",
                          "moderate": "你只记录要紧的内容。",
                          "minimal": "你几乎不写说明文档。"},
        "output_structure": {"hierarchical": "你用多级标题组织文档。",
                             "flat_list": "你用平铺的要点列表写作。",
                             "narrative": "你用连贯的段落写作。"},
        "reading_strategy": {"sequential_deep": "你逐个文件从头读到尾。",
                             "targeted_search": "你先搜关键词，只读命中的部分。",
                             "breadth_first": "你浏览很多文件的开头，而不是通读少数几个。"},
        "thoroughness": {"exhaustive": "你什么都要核对一遍。",
                         "balanced": "你只核对重要的地方。",
                         "minimal": "你只核对必不可少的地方。"},
        "organization_style": {"deeply_nested": "你把工作放进一层套一层的文件夹。",
                               "by_type": "你按文件类型分组。",
                               "flat": "你把所有文件并排放在同一个文件夹里。"},
        "naming_convention": {"descriptive_long": "你给文件起长而具体的名字。",
                              "short_abbreviation": "你给文件起简短的缩写名。",
                              "date_prefixed": "你的文件名以日期开头。"},
        "directory_style": {"nested_by_topic": "你按主题建文件夹，分好几层。",
                            "adaptive": "只有一组文件需要时你才建文件夹。",
                            "flat": "你不建文件夹。"},
        "naming": {"long_descriptive": "你的文件名把内容写得清清楚楚。",
                   "short_abbrev": "你的文件名很短。",
                   "date_prefix": "你的文件名带日期前缀。",
                   "mixed": "你的文件名视情况而定。"},
        "edit_strategy": {"incremental_small": "你分很多小步修改文件。",
                          "balanced": "你分几轮、每轮改一部分。",
                          "bulk_rewrite": "需要修改时你一次性重写整个文件。"},
        "version_strategy": {"keep_history": "你会保留旧版本的副本。",
                             "archive_old": "你把旧版本移进归档文件夹。",
                             "overwrite": "你直接覆盖旧版本。"},
        "error_handling": {"defensive": "每一步有风险的操作前你都会再三确认。",
                           "balanced": "对有风险的操作你会适度小心。",
                           "optimistic": "你先做，遇到问题再修。"},
        "working_style": {"methodical": "你按部就班，一步接一步地工作。",
                          "exploratory": "你喜欢自由探索，看到有意思的就跟进。",
                          "pragmatic": "你讲求实效，怎么能完成就怎么做。"},
        "cross_modal_behavior": {"visual_heavy": "你喜欢在文字旁配上图表、示意图和数据文件。",
                                 "tables_and_references": "你喜欢用表格，并引用数据文件。",
                                 "balanced": "你在文字中偶尔穿插表格。",
                                 "text_only": "你只写纯文字。"},
    },
}

#: Fixed texts per language (our own wording).
_TEXT: dict[str, dict[str, str]] = {
    "en": {
        "identity": "You are {name}, {role}. You are not an AI assistant: you do this work yourself, the way "
                    "{name} always works.",
        "assistant": "You are an assistant doing file work for a person, in their working folder. File paths "
                     "are relative to that folder (report.md, notes/plan.md); a path starting with / is refused.",
        "memory": "What you know about how this person works:",
        "habits": "How you work:",
        "prefer": "You like to:",
        "avoid": "You avoid:",
        "tools": "You work inside one folder, the current working folder, and act on it only through the tools "
                 "you are given (read, write, edit, multiedit, grep, glob, list, bash). Use paths relative to "
                 "the folder. Call one or more tools per reply; you see their results before your next step. "
                 "If your reply cannot carry a native tool call, reply with JSON objects only, one per call: "
                 '{"name": "<tool>", "arguments": {...}}. Nobody will answer questions: decide for yourself. '
                 "When the task is complete, reply with a short plain-text note and no tool call.",
        "adjust": "Behavioural adjustment: for this task only, follow these temporary changes:",
        "do": "Do:", "dont": "Do not:",
        "continue": "Nobody will answer questions. Continue and carry out the task yourself with the tools; "
                    "write the results into files.",
        "proceed": "Yes, proceed.",
        "bad_call": "Your tool call could not be used: {error}. Reply with a valid tool call, for example "
                    '{{"name": "list", "arguments": {{"path": "."}}}}.',
        "tool_result": "Result of {name}:",
    },
    "zh": {
        "identity": "你是{name}，{role}。你不是 AI 助手：这份工作由你亲自完成，按{name}一贯的方式来做。",
        "assistant": "你是一名助手，在一个人的工作文件夹里替他处理文件。文件路径相对于该文件夹（如 report.md、"
                     "notes/plan.md）；以 / 开头的路径会被拒绝。",
        "memory": "关于这个人工作方式的已知信息：",
        "habits": "你的工作方式：",
        "prefer": "你喜欢：",
        "avoid": "你避免：",
        "tools": "你在一个文件夹（当前工作文件夹）里工作，只能通过给你的工具操作它（read、write、edit、"
                 "multiedit、grep、glob、list、bash）。使用相对于该文件夹的路径。每次回复可以调用一个或多个工具，"
                 "下一步之前你会看到结果。如果无法使用原生工具调用，请只回复 JSON 对象，每个调用一个："
                 '{"name": "<工具名>", "arguments": {...}}。没有人会回答你的问题：请自己做决定。'
                 "任务完成后，用一段简短的纯文字回复，不再调用工具。",
        "adjust": "行为调整：仅在本次任务中，请遵循以下临时变化：",
        "do": "要：", "dont": "不要：",
        "continue": "没有人会回答问题。请继续用工具亲自完成任务，并把结果写进文件。",
        "proceed": "是的，继续。",
        "bad_call": "你的工具调用无法执行：{error}。请回复一个有效的工具调用，例如 "
                    '{{"name": "list", "arguments": {{"path": "."}}}}。',
        "tool_result": "{name} 的结果：",
    },
}

#: Replies that ask for confirmation instead of acting (reference §1.1 lists ~30 such phrases upstream; these are
#: our own, lower-case, matched as substrings).
CONFIRMATION_PHRASES: tuple[str, ...] = (
    "shall i", "should i", "would you like", "do you want", "let me know if", "please confirm", "can i proceed",
    "may i proceed", "want me to", "is that ok", "is this ok", "if you'd like", "if you want me",
    "是否继续", "要不要", "需要我", "请确认", "可以吗", "是否需要", "您看", "你看这样",
)

_DIM_LETTER_RX = re.compile(r"(?<![A-Za-z0-9])[A-F]\s*[:=：]\s*[LMR](?![A-Za-z])|(?<![A-Za-z0-9])[A-F]-[LMR](?![A-Za-z])"
                            r"|(?<![A-Za-z0-9])[LMR]\s*(?:→|->)\s*[LMR](?![A-Za-z])"
                            r"|\btier\b|\bdimension\b|维度|层级向量")


def _lang(profile: Any) -> str:
    lang = getattr(profile, "lang", None)
    if lang in ("en", "zh"):
        return lang
    return "zh" if str(getattr(profile, "language", "English")).lower().startswith(("chinese", "zh")) else "en"


def _pert(perturbation: Any) -> tuple[str, str, str] | None:
    if not perturbation:
        return None
    get = perturbation.get if isinstance(perturbation, dict) else (lambda k, d=None: getattr(perturbation, k, d))
    dim, to = get("dimension"), get("to")
    frm = get("from_", None) or get("from", None)
    if dim not in DIMENSIONS or to not in ("L", "M", "R"):
        raise ValueError(f"malformed perturbation {perturbation!r}: need dimension A-F and to L|M|R")
    return dim, frm or "", to


def shifted_profile(profile: Any, perturbation: Any = None) -> dict[str, Any]:
    """The parts of a profile that the system prompt shows, after the perturbation (module docstring).

    Returns ``{"lang", "name", "role", "persona", "attributes" {attr: value}, "preferences" {dim: [str]},
    "avoidances" {dim: [str]}}``. Attributes follow the simulator's :class:`Persona` shift plus the tier-determined
    attributes of the shifted dimension (``DETERMINISTIC_ATTRIBUTES``, reference §5.2).

    Raises:
        ValueError: a malformed perturbation.
    """
    from filegram_ray.engine.simulator.persona import Persona

    lang = _lang(profile)
    pert = _pert(perturbation)
    attrs = dict(profile.attributes)
    prefs = {d: list(v) for d, v in (profile.preferences or {}).items()}
    avoid = {d: list(v) for d, v in (profile.avoidances or {}).items()}
    persona = profile.persona or ""
    if pert is not None:
        dim, _frm, to = pert
        base = profile.tiers[dim]
        attrs = dict(Persona.from_profile(profile, {"dimension": dim, "from": base, "to": to}).attrs)
        for attr, (adim, values) in DETERMINISTIC_ATTRIBUTES.items():
            if adim == dim:
                attrs[attr] = values[to]
        prefs[dim] = list(PREFERENCES[lang][dim][to])
        avoid[dim] = list(AVOIDANCES[lang][dim][to])
        old, new = PERSONA[lang][dim][base], PERSONA[lang][dim][to]
        if old in persona:
            persona = persona.replace(old, new)
    return {"lang": lang, "name": profile.name, "role": profile.role, "persona": persona, "attributes": attrs,
            "preferences": prefs, "avoidances": avoid}


def _attribute_lines(lang: str, attrs: dict[str, str]) -> list[str]:
    lines: list[str] = []
    for attr in BEHAVIOURAL_ATTRIBUTES:
        value = attrs.get(attr)
        phrase = ATTRIBUTE_PHRASES[lang].get(attr, {}).get(str(value)) if value else None
        if phrase and phrase not in lines:  # an unknown value is left out rather than shown raw
            lines.append(phrase)
    return lines


def system_prompt(profile: Any, perturbation: Any = None) -> str:
    """The persona system prompt (module docstring), in the profile's language.

    Args:
        profile: a :class:`~filegram_ray.schema.profile.Profile`.
        perturbation: None or ``{"dimension", "from", "to"}`` (reference §5.7).

    Raises:
        ValueError: a malformed perturbation.
    """
    sp = shifted_profile(profile, perturbation)
    lang, t = sp["lang"], _TEXT[sp["lang"]]
    parts = [t["identity"].format(name=sp["name"], role=sp["role"])]
    if sp["persona"].strip():
        parts.append(sp["persona"].strip())
    parts.append(t["habits"] + "\n" + "\n".join(f"- {x}" for x in _attribute_lines(lang, sp["attributes"])))
    prefs = [x for d in DIMENSIONS for x in sp["preferences"].get(d, [])]
    if prefs:
        parts.append(t["prefer"] + "\n" + "\n".join(f"- {x}" for x in prefs))
    avoid = [x for d in DIMENSIONS for x in sp["avoidances"].get(d, [])]
    if avoid:
        parts.append(t["avoid"] + "\n" + "\n".join(f"- {x}" for x in avoid))
    parts.append(t["tools"])
    return "\n\n".join(parts)


def assistant_prompt(lang: str = "en", memory: str | None = None) -> str:
    """The system prompt of an assistant working *for* a person rather than as them: no persona, the tool rules of
    :func:`system_prompt`, and ``memory`` (what a memory of the person says, e.g. an MCP server's prompt) when given.
    Used to measure whether a memory changes what the agent does (tests/benchmarks/bench_mcp_agent.py)."""
    t = _TEXT[lang if lang in _TEXT else "en"]
    parts = [t["assistant"]]
    if memory and memory.strip():
        parts.append(t["memory"] + "\n" + memory.strip())
    parts.append(t["tools"])
    return "\n\n".join(parts)


def task_prompt(task: Any, profile: Any, perturbation: Any = None) -> str:
    """The task instruction in the profile's language (reference §1.1: Chinese profiles get ``prompt_zh``), with
    the perturbation block appended when the trajectory is perturbed (reference §5.7)."""
    lang = _lang(profile)
    text = task.prompt(lang).strip()
    pert = _pert(perturbation)
    if pert is None:
        return text
    dim, _frm, to = pert
    t = _TEXT[lang]
    lines = [t["adjust"], t["do"]] + [f"- {x}" for x in PREFERENCES[lang][dim][to]]
    lines += [t["dont"]] + [f"- {x}" for x in AVOIDANCES[lang][dim][to]]
    return text + "\n\n" + "\n".join(lines)


def continue_prompt(lang: str, kind: str) -> str:
    """The user turn injected when the model stops early (reference §1.1 autonomous continuation):
    ``kind`` = ``"continue"`` (stopped without writing anything) or ``"proceed"`` (asked for confirmation)."""
    return _TEXT[lang if lang in _TEXT else "en"][kind]


def text(lang: str, key: str, **kw: Any) -> str:
    """A fixed text of :data:`_TEXT` (``bad_call``, ``tool_result`` …) in ``lang``."""
    s = _TEXT[lang if lang in _TEXT else "en"][key]
    return s.format(**kw) if kw else s


def asks_confirmation(reply: str) -> bool:
    """True when a reply asks for confirmation (:data:`CONFIRMATION_PHRASES`)."""
    low = (reply or "").lower()
    return any(p in low for p in CONFIRMATION_PHRASES)


def leaked_terms(text_: str) -> list[str]:
    """Ground-truth vocabulary found in a prompt: tier/dimension letter codes (``C:L``, ``B-R``, ``M→R``), the words
    tier/dimension, dimension names (:data:`DIMENSION_NAMES`, also with ``-``/space for ``_``), tier labels and
    attribute keys or snake_case values (:data:`TIER_NAMES`, :data:`BEHAVIOURAL_ATTRIBUTES`,
    :data:`ATTRIBUTE_PHRASES` value keys). Empty list = clean."""
    found = [m.group(0) for m in _DIM_LETTER_RX.finditer(text_)]
    low = text_.lower()
    names = set(DIMENSION_NAMES.values())
    codes = {n for names_ in TIER_NAMES.values() for n in names_.values() if "_" in n}
    codes |= {a for a in BEHAVIOURAL_ATTRIBUTES if "_" in a}
    codes |= {v for table in ATTRIBUTE_PHRASES["en"].values() for v in table if "_" in v}
    forms = {f for w in names for f in (w, w.replace("_", "-"), w.replace("_", " "))}
    forms |= {f for w in codes for f in (w, w.replace("_", "-"))}
    for form in sorted(forms):
        if re.search(rf"(?<![a-z]){re.escape(form)}(?![a-z])", low):
            found.append(form)
    return found
