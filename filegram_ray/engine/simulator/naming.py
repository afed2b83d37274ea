"""File names per naming attribute, C tier and language (TIER_TARGETS §2.3 and §4).

* long_descriptive: ≥ 3 tokens joined by ``_`` with a numeric prefix ``01_``; English stems ≥ 25 chars, Chinese
  stems ≥ 10 chars (``01_基础分析框架_完整版``).
* short_abbrev: 1–2 tokens, stem ≤ 12 chars (``rpt``, ``ref``, ``notes``, ``summary``, ``brief``, ``audit``).
* date_prefix: ``YYYY-MM-DD_`` + a short stem (the date feature needs full dates, TIER_TARGETS §6 p4/p6).
* mixed: short, descriptive and dated names side by side (p5).
Short names stay ASCII even for Chinese profiles (§4).
"""

from __future__ import annotations

import random
import re
import time

SHORT = {
    "main": ["summary", "rpt", "report", "brief", "notes", "overview"],
    "readme": ["README"], "index": ["index"], "appendix": ["app", "appendix", "data_app"],
    "references": ["ref", "refs", "sources"], "scratch": ["scratch", "tmp_notes", "wip"],
    "outline": ["outline", "draft"], "csv": ["data", "figs"], "chart": ["chart", "fig1"], "log": ["log", "changes"],
}
LONG_EN = {
    "main": "{topic}_full_report", "readme": "README", "index": "index_and_navigation_guide",
    "appendix": "{topic}_data_appendix_tables", "references": "{topic}_source_reference_list",
    "scratch": "working_notes_scratch_pad", "outline": "{topic}_outline_intermediate_draft",
    "csv": "{topic}_key_figures_dataset", "chart": "figure_01_{topic}_key_figures_chart",
    "log": "{topic}_change_log_record",
}
LONG_ZH = {
    "main": "{topic}_完整分析报告", "readme": "README", "index": "目录索引_使用指南",
    "appendix": "{topic}_数据附录_明细", "references": "{topic}_参考资料_来源清单",
    "scratch": "工作笔记_临时草稿_记录", "outline": "{topic}_提纲_中间稿件",
    "csv": "{topic}_关键数据_数据集", "chart": "图01_{topic}_关键数据图表", "log": "{topic}_修改记录_日志",
}


def topic_tokens(title_en: str, k: int = 3) -> str:
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", title_en) if len(w) > 2 and w.lower() not in
             {"the", "and", "for", "with", "from", "into", "this", "that"}]
    return "_".join(words[:k]) or "task"


def date_str(ms: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ms / 1000.0))


def make_name(kind: str, ext: str, naming: str, lang: str, topic_en: str, topic_zh: str, rng: random.Random,
              start_ms: float, seq: int = 1) -> str:
    """A file name (no folder) for an output of ``kind`` (main, readme, index, appendix, references, scratch,
    outline, csv, chart, log)."""
    style = naming
    if naming == "mixed":
        style = rng.choice(("short_abbrev", "long_descriptive", "date_prefix"))
    if kind == "readme" and style != "date_prefix":
        return "README" + ext
    if style == "long_descriptive":
        if lang == "zh":
            stem = f"{seq:02d}_" + LONG_ZH.get(kind, "{topic}_文件").format(topic=topic_zh[:10] or "任务")
        else:
            stem = f"{seq:02d}_" + LONG_EN.get(kind, "{topic}_document").format(topic=topic_tokens(topic_en))
            if len(stem) < 25:
                stem += "_detailed_version"
        return stem + ext
    short = rng.choice(SHORT.get(kind, ["file"]))
    if style == "date_prefix":
        return f"{date_str(start_ms)}_{short}{ext}"
    return short + ext
