"""Sectioning of agent outputs: headings, size balancing, paragraphs-only documents, tables, CJK, determinism."""

from __future__ import annotations

import random

import pytest
from synthetic_run import synthetic_markdown

from rendering.policy import MIX, category_of, choose_formats
from rendering.sections import SectionParams, detect_language, load_document, split_sections

EN = """# Quarterly Review

Intro paragraph with **bold** text. Revenue grew across all regions this quarter, driven by strong demand.

## Revenue

Revenue grew in every region. The North led with a 12% increase, while the South recovered from last year's dip
after two slow quarters and a change of distributor.

| Region | Q1 | Q2 |
|---|---|---|
| North | 1,200 | 1,350 |
| South | 900 | 1,010 |

## Risks

- Supply chain delays in the second half of the year, mostly on imported parts
- Hiring freeze affecting the support team and the new regional office
- Currency exposure in two markets where contracts are priced in euros

## Next

Short.
"""

ZH = ("# 项目总结\n\n## 背景\n\n" + "本项目旨在提升团队效率，并减少重复劳动。" * 10
      + "\n\n## 结果\n\n" + "试点区域的完成率明显提升，成本下降。" * 8 + "\n\n| 指标 | 数值 |\n|---|---|\n| 完成率 | 95 |\n| 成本 | 120 |\n")

SMALL = SectionParams(min_chars=100, target_chars=300, max_chars=600)


def test_heading_sections_title_merge_and_tiny_tail():
    doc = split_sections(EN, SMALL)
    assert doc.title == "Quarterly Review" and doc.language == "en"
    titles = [s.title for s in doc.sections]
    # the lone H1 is the document title: the split is at H2; the title + intro is a section of its own;
    # "Next" (6 chars) is below min_chars and joins the previous section
    assert titles == ["Quarterly Review", "Revenue", "Risks"]
    assert [b.kind for b in doc.sections[0].blocks] == ["heading", "paragraph"]
    assert doc.sections[2].blocks[-1].plain == "Short."
    assert doc.sections[1].tables[0].header == ["Region", "Q1", "Q2"]
    assert doc.sections[1].tables[0].numeric_columns() == [1, 2]
    assert doc.sections[2].blocks[1].items[0].startswith("Supply chain delays")
    assert [s.index for s in doc.sections] == [0, 1, 2]
    tiny = split_sections("# Only a title\n\n## Part\n\n" + "text " * 40, SMALL)
    assert [s.title for s in tiny.sections] == ["Part"]  # a heading-only remnant takes the next name


def test_long_section_split_at_block_boundaries():
    body = "\n\n".join(f"Paragraph {i}. " + "word " * 60 for i in range(6))
    doc = split_sections(f"# T\n\n## Long\n\n{body}\n\n## Other\n\n" + "x " * 80, SMALL)
    long_parts = [s for s in doc.sections if s.title.startswith("Long")]
    assert len(long_parts) >= 2 and long_parts[1].title == "Long (2)"
    assert all(s.size <= SMALL.max_chars for s in doc.sections)
    # nothing lost: every paragraph appears exactly once
    joined = "\n".join(s.plain_text for s in doc.sections)
    assert all(joined.count(f"Paragraph {i}.") == 1 for i in range(6))


def test_document_without_headings_is_split_by_paragraphs():
    text = "\n\n".join(f"Para {i} " + "lorem ipsum " * 20 for i in range(7))
    doc = split_sections(text, SMALL, doc_title="notes")
    assert len(doc.sections) >= 3
    assert doc.sections[0].title == "notes"
    assert all(s.level == 0 for s in doc.sections)
    assert sum(s.plain_text.count("Para ") for s in doc.sections) == 7


def test_oversized_single_paragraph_split_at_sentences():
    text = " ".join(f"Sentence number {i} is here." for i in range(80))
    doc = split_sections(text, SMALL)
    assert len(doc.sections) >= 3
    assert all(s.size <= SMALL.max_chars for s in doc.sections)
    assert all(s.plain_text.rstrip().endswith(".") for s in doc.sections)


def test_chinese_sections_and_language():
    doc = split_sections(ZH, SMALL)
    assert doc.language == "zh" and [s.title for s in doc.sections] == ["背景", "结果"]
    assert all(s.language == "zh" for s in doc.sections)
    assert doc.sections[1].tables[0].rows == [["完成率", "95"], ["成本", "120"]]
    assert detect_language("An English report naming 张伟 once.") == "en"


def test_deterministic_and_broken_input():
    a = split_sections(EN, SMALL)
    b = split_sections(EN, SMALL)
    assert [s.to_dict() for s in a.sections] == [s.to_dict() for s in b.sections]
    with pytest.raises(ValueError, match="bad.md: not UTF-8"):
        load_document(b"\xff\xfe abc \xff", "bad.md")
    with pytest.raises(ValueError, match="bin.md: not a text file"):
        load_document(b"PK\x03\x04\x00\x00", "bin.md")


def test_policy_is_seeded_and_near_reference_mix():
    rng = random.Random(3)
    counts: dict[str, int] = {}
    n_out = 0
    for i in range(150):
        doc = split_sections(synthetic_markdown(rng, "zh" if i % 2 else "en", headings=i % 8 != 7))
        picks = choose_formats(doc.sections, seed=7, trajectory_id=f"p{i % 4}/T-01", path=f"o{i}.md")
        assert picks == choose_formats(doc.sections, seed=7, trajectory_id=f"p{i % 4}/T-01", path=f"o{i}.md")
        assert len(picks) >= 4 and len(set(picks)) == len(picks)
        for idx, fmt in picks:
            sec = doc.sections[idx]
            assert fmt != "wav" or sec.language == "en"
            assert fmt != "xlsx" or sec.tables
            counts[category_of(fmt)] = counts.get(category_of(fmt), 0) + 1
        n_out += 1
    total = sum(counts.values())
    assert total / n_out >= 4.0  # >10 K derivatives for ≈2.5 K outputs (ref §0)
    ref_total = sum(MIX.values())
    for cat, ref in MIX.items():  # each category within ±6 points of its §0 share
        assert abs(counts.get(cat, 0) / total - ref / ref_total) < 0.06, (cat, counts)
    other = choose_formats(doc.sections, seed=8, trajectory_id="p3/T-01", path="o149.md")
    assert isinstance(other, list)
