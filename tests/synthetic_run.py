"""Synthetic agent outputs for tests and benchmarks of the render stage (until real trajectories exist).

``synthetic_markdown(rng, lang)`` writes a report-like Markdown file in English or Chinese with headings, paragraphs,
bullet lists and (sometimes numeric) tables, 600–4,000 characters — the span of the output-detail values of
FILEGRAM_REFERENCE §9.4 (concise < 1,000, balanced 1,000–3,000, detailed 3,000+). ``write_synthetic_run`` lays out
``trajectories/<profile_id>/<task_id>/outputs/*.md`` and ``trajectories/outputs.parquet`` in a run directory.
"""

from __future__ import annotations

import hashlib
import random

from filegram_ray.storage import RunDir

__all__ = ["synthetic_markdown", "write_synthetic_run"]

_EN_WORDS = ["budget", "review", "timeline", "vendor", "risk", "customer", "survey", "quarterly", "revenue", "pilot", "regional", "team", "hiring", "supply", "chain", "forecast", "migration", "audit", "metrics", "policy", "onboarding", "training", "feedback", "roadmap", "launch", "report", "summary", "analysis", "cost", "savings", "latency", "incident", "backlog", "priority", "stakeholder"]
_EN_HEAD = ["Background", "Key Findings", "Revenue", "Risks", "Recommendations", "Next Steps", "Timeline",
            "Budget", "Methodology", "Open Questions", "Summary"]
_ZH_CHARS = "项目团队进度预算风险客户调研季度收入试点区域招聘供应链预测迁移审计指标政策培训反馈路线图发布报告总结分析成本节约"
_ZH_HEAD = ["背景", "主要发现", "收入", "风险", "建议", "下一步", "时间表", "预算", "方法", "待定问题", "总结"]


def _en_sentence(rng: random.Random) -> str:
    words = [rng.choice(_EN_WORDS) for _ in range(rng.randint(8, 18))]
    return words[0].capitalize() + " " + " ".join(words[1:]) + rng.choice([".", ".", ".", "!", "?"])


def _zh_sentence(rng: random.Random) -> str:
    return "".join(rng.choice(_ZH_CHARS) for _ in range(rng.randint(12, 30))) + rng.choice(["。", "。", "！"])


def synthetic_markdown(rng: random.Random, lang: str = "en", headings: bool = True) -> str:
    """One synthetic report (``lang`` ``en`` or ``zh``); ``headings=False`` gives plain paragraphs only."""
    sent = _en_sentence if lang == "en" else _zh_sentence
    heads = _EN_HEAD if lang == "en" else _ZH_HEAD
    joiner = " " if lang == "en" else ""
    if not headings:
        return "\n\n".join(joiner.join(sent(rng) for _ in range(rng.randint(3, 7)))
                           for _ in range(rng.randint(3, 8))) + "\n"
    parts = [f"# {rng.choice(heads)} {rng.randint(1, 99)}" if lang == "en" else f"# {rng.choice(heads)}报告"]
    for h in rng.sample(heads, rng.randint(2, 5)):
        parts.append(f"## {h}")
        parts.append(joiner.join(sent(rng) for _ in range(rng.randint(2, 6))))
        r = rng.random()
        if r < 0.4:
            parts.append("\n".join(f"- {sent(rng)}" for _ in range(rng.randint(2, 5))))
        elif r < 0.6:
            cols = ["Item", "Q1", "Q2"] if lang == "en" else ["项目", "一季度", "二季度"]
            rows = [f"| {rng.choice(_EN_WORDS) if lang == 'en' else rng.choice(_ZH_CHARS) * 2} | "
                    f"{rng.randint(10, 2000):,} | {rng.randint(10, 2000):,} |" for _ in range(rng.randint(2, 6))]
            parts.append("\n".join([f"| {' | '.join(cols)} |", "|---|---|---|", *rows]))
        elif r < 0.7:
            cols = ["Owner", "Task"] if lang == "en" else ["负责人", "任务"]
            rows = [f"| {rng.choice(_EN_WORDS)} | {sent(rng)} |" for _ in range(rng.randint(2, 4))]
            parts.append("\n".join([f"| {' | '.join(cols)} |", "|---|---|", *rows]))
    return "\n\n".join(parts) + "\n"


def write_synthetic_run(run: RunDir, n_outputs: int, seed: int = 0, n_profiles: int = 4) -> list[dict]:
    """Write ``n_outputs`` synthetic outputs (half English, half Chinese profiles; 1 in 8 without headings) and
    ``trajectories/outputs.parquet``; returns the index rows."""
    rng = random.Random(seed)
    rows = []
    for i in range(n_outputs):
        p = i % n_profiles
        lang = "zh" if p % 2 else "en"
        profile_id = f"p{p + 1}_{'zh' if lang == 'zh' else 'en'}"
        task_id = f"T-{(i // n_profiles) // 3 + 1:02d}"
        path = f"out_{i:04d}.md" if i % 5 else f"reports/draft_{i:04d}.md"
        text = synthetic_markdown(rng, lang, headings=(i % 8 != 7)).encode("utf-8")
        run.write_bytes(f"trajectories/{profile_id}/{task_id}/outputs/{path}", text)
        rows.append({"trajectory_id": f"{profile_id}/{task_id}", "profile_id": profile_id, "task_id": task_id,
                     "path": path, "file_type": "md", "bytes": len(text),
                     "sha256": hashlib.sha256(text).hexdigest()})
    run.write_table("trajectories/outputs.parquet", rows)
    return rows
