"""Each renderer's output opens in its standard reader, carries the expected text, and is byte-deterministic."""

from __future__ import annotations

import io
import wave

import pytest

from rendering import renderers as R
from rendering.recover import recover_bytes, recover_text
from rendering.sections import SectionParams, split_sections

EN = """# Quarterly Review

## Revenue

Revenue grew in every region. The North led with a 12% increase, while the South recovered from last year's dip.

| Region | Q1 | Q2 |
|---|---|---|
| North | 1,200 | 1,350 |
| South | 900 | 1,010 |

- Supply chain delays in the second half
- Hiring freeze affecting the support team
"""
ZH = ("# 项目总结\n\n## 结果\n\n试点区域的完成率明显提升，成本下降。团队反馈积极。\n\n- 完成率提升\n- 成本下降\n\n"
      "| 指标 | 数值 |\n|---|---|\n| 完成率 | 95 |\n| 成本 | 120 |\n")
P = SectionParams(min_chars=50, target_chars=400, max_chars=1200)


@pytest.fixture(scope="module")
def en():
    return split_sections(EN, P).sections[0]


@pytest.fixture(scope="module")
def zh():
    return split_sections(ZH, P).sections[0]


@pytest.mark.parametrize("fmt", ["pdf", "docx", "md", "pptx", "xlsx", "png_page", "png_chart"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_renderer_opens_and_text_recovers(fmt, lang, en, zh, tmp_path):
    sec = en if lang == "en" else zh
    meta = R.render(fmt, sec, tmp_path / f"x.{R.EXTENSIONS[fmt]}")
    data = (tmp_path / f"x.{R.EXTENSIONS[fmt]}").read_bytes()
    assert meta["bytes"] == len(data) > 0
    # the standard reader opens it
    if fmt == "pdf":
        from pypdf import PdfReader

        assert len(PdfReader(io.BytesIO(data)).pages) >= 1
    elif fmt == "docx":
        import docx

        assert docx.Document(io.BytesIO(data)).paragraphs
    elif fmt == "pptx":
        from pptx import Presentation

        assert len(Presentation(io.BytesIO(data)).slides) >= 2  # title + content (ref §10: ≥2 slides)
    elif fmt == "xlsx":
        from openpyxl import load_workbook

        ws = load_workbook(io.BytesIO(data)).worksheets[0]
        assert ws.cell(1, 1).font.bold and ws.cell(1, 1).fill.fgColor.rgb.endswith("E0E0E0")
    elif fmt.startswith("png"):
        from PIL import Image

        with Image.open(io.BytesIO(data)) as im:
            assert im.format == "PNG" and im.size[0] >= 800
    text = recover_text(tmp_path / f"x.{R.EXTENSIONS[fmt]}")
    if lang == "en":
        # xlsx: the cells read back with the characters of the table ("1,200" is 1200 shown as #,##0; BR-22)
        expect = {"xlsx": "North\t1,200\t1,350", "png_chart": "North = 1200"}.get(fmt, "North led with a 12% increase")
        if fmt == "pptx":
            expect = "Revenue grew in every region."
    else:
        expect = {"xlsx": "完成率\t95", "png_chart": "完成率 = 95"}.get(fmt, "完成率明显提升")
    assert expect in text.replace("\n", "" if lang == "zh" and fmt == "pdf" else "\n")
    # same input → same bytes
    assert R.build(fmt, sec).data == data


def test_cjk_png_fallback_is_recorded(zh):
    meta = R.build("png_page", zh).meta
    if R.find_cjk_font() is None:
        assert "no CJK font" in meta["font_fallback"]
    else:
        assert "font_fallback" not in meta


def test_not_applicable_formats(tmp_path):
    sec = split_sections("# A\n\nJust a paragraph of words with no table at all, long enough.\n", P).sections[0]
    with pytest.raises(R.NotApplicable, match="table"):
        R.build("xlsx", sec)
    with pytest.raises(R.NotApplicable, match="numeric"):
        R.build("png_chart", sec)
    with pytest.raises(ValueError, match="unknown derivative format"):
        R.build("gif", sec)
    with pytest.raises(ValueError, match="cannot recover text from a .gif"):
        recover_bytes(b"GIF89a", "gif", "x.gif")


def test_wav_narration_english_deterministic_and_chinese_skipped(en, zh, tmp_path):
    tts = R.TtsEngine()
    a = R.build("wav", en, max_words=12, tts=tts)
    b = R.build("wav", en, max_words=12, tts=tts)
    assert a.data == b.data  # noise scales 0 → deterministic samples
    with wave.open(io.BytesIO(a.data)) as w:
        assert w.getframerate() == 22050 and w.getnchannels() == 1 and w.getnframes() > 22050
    script = R.narration_script(en, 12)
    assert script.startswith("Revenue.") and len(script.split()) <= 12
    assert recover_bytes(a.data, "wav") == script == a.meta["transcript"]
    with pytest.raises(R.NotApplicable, match="holds Han characters and no Chinese piper voice"):
        R.build("wav", zh, tts=tts)


def test_whole_document_renders(tmp_path):
    doc = split_sections(EN + "\n## Outlook\n\n" + "Steady growth is expected next year. " * 8, P)
    assert len(doc.sections) >= 2
    meta = R.render_pdf(doc, tmp_path / "doc.pdf")
    text = recover_text(meta["path"])
    assert "Quarterly Review" in text and "Outlook" in text
