"""Rendering never crashes on text (issue #13, deliverable 4): the replayed reports BR-13, BR-15, BR-19 and BR-22, and
a property test that feeds random Unicode (every plane, controls, surrogates, RTL, long lines, huge cells) through
every renderer and back through ``render recover``."""

from __future__ import annotations

import io
import unicodedata
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filegram_ray.cli import main
from rendering import glyphs as G
from rendering import renderers as R
from rendering.recover import recover_bytes
from rendering.sections import load_document, split_sections

FAST = ("pdf", "docx", "md", "pptx", "xlsx", "png_page", "png_chart")


def _visible(text: str) -> Counter:
    """The characters a reader must get back, whatever it does with spaces and line breaks ("•" and "|", the list
    marker and cell separator of the metadata text, are list and table formatting in DOCX / PDF, not text)."""
    return Counter(ch for ch in text if not ch.isspace() and ch not in "•|")


def _check_round_trip(fmt: str, r: R.Rendered) -> str:
    """The derivative opens in its reader and carries the text its metadata claims (module docstring)."""
    got = recover_bytes(r.data, R.EXTENSIONS[fmt], f"x.{R.EXTENSIONS[fmt]}")
    text = r.meta["text"]
    if fmt in ("md", "png_page", "png_chart", "wav"):
        assert got == text  # stored verbatim (file, iTXt caption, RIFF comment)
    else:  # pdf / docx / pptx / xlsx: readers add separators and reorder RTL runs; no character may be lost
        missing = _visible(text) - _visible(got)
        assert not missing, f"{fmt}: characters lost on read-back: {sorted(missing)[:20]}"
    if fmt in ("pdf", "png_page", "png_chart"):  # never a silent box: every drawn character has a glyph
        undrawable = {c for c in text if c not in "\n " and G.font_for(c) is None}
        assert not undrawable, f"{fmt}: drawn without a glyph: {sorted(undrawable)}"
    if fmt != "md":
        assert not G._CONTROL_RE.search(text), f"{fmt}: control character left in {text!r:.200}"
    return got


# ---------------------------------------------------------------------------------------------- replayed reports
def test_br13_cjk_in_english_section_recovers_with_embedded_fonts():
    """BR-13: a Chinese name and a Korean place inside an English-majority section read back from the PDF (no
    U+25A0 boxes), the fonts are embedded (no unembedded CID font), and a Chinese section embeds its font too."""
    from pypdf import PdfReader

    md = ("# Weekly report\n\nThis week the team reviewed the budget, the hiring plan, the vendor contracts and the "
          "release schedule with 王小明 and agreed on the next steps for the quarter.\n\n- Contact: 王小明\n"
          "- Office: Seoul 서울\n")
    sec = load_document(md.encode(), "report.md").sections[0]
    assert sec.language == "en"
    r = R.build("pdf", sec)
    got = recover_bytes(r.data, "pdf", "report.pdf")
    assert got.count("王小明") == 2 and "서울" in got and "\u25a0" not in got
    assert r.meta["fonts_embedded"] == ["NotoSansKR", "NotoSansSC"] and "missing_glyphs" not in r.meta
    zh = load_document("# 会议纪要\n\n- 项目进度：按计划完成\n- 한국어 메모: 다음 회의는 월요일입니다\n".encode(), "zh.md").sections[0]
    rz = R.build("pdf", zh)
    assert "项目进度：按计划完成" in recover_bytes(rz.data, "pdf") and "다음 회의는 월요일입니다" in recover_bytes(rz.data, "pdf")
    for page in PdfReader(io.BytesIO(rz.data)).pages:
        for f in page["/Resources"]["/Font"].values():
            f = f.get_object()
            fd = (f["/DescendantFonts"][0].get_object() if "/DescendantFonts" in f else f).get("/FontDescriptor")
            if f["/BaseFont"] in ("/Helvetica", "/Helvetica-Bold", "/Courier"):
                continue  # the standard 14 fonts need no program
            assert fd is not None and any(k in fd.get_object() for k in ("/FontFile", "/FontFile2", "/FontFile3"))
    # PNG pages draw the same text with the same fonts (no "font_fallback" boxes)
    png = R.build("png_page", sec)
    assert "王小明" in png.meta["caption"] and "font_fallback" not in png.meta


def test_br13_uncovered_character_is_recorded_not_boxed():
    """BR-13, the whole kind: a character no font covers becomes a visible U+FFFD and is recorded in the metadata;
    characters outside the BMP that a font has (an emoji) read back from the PDF (reportlab's ToUnicode fixed)."""
    sec = split_sections("# Notes\n\nPrivate use \U0010fffd, emoji 😀, math ∑ and arrows → stay readable here.\n")
    for fmt in ("pdf", "png_page"):
        r = R.build(fmt, sec.sections[0])
        assert r.meta["missing_glyphs"] == 1 and r.meta["missing_glyph_chars"] == ["U+10FFFD"]
        got = _check_round_trip(fmt, r)
        assert "😀" in got and "∑" in got and "\ufffd" in got


@pytest.mark.parametrize("label,bad", [("vertical tab", "Status\x0bdone"), ("form feed", "Page one\x0cPage two"),
                                       ("ANSI escape", "Build \x1b[31mFAILED\x1b[0m"), ("U+FFFF", "Odd \uffff char"),
                                       ("NUL and DEL", "a\x00b\x7fc"), ("C1 control", "x\x85y\x9bz")])
def test_br15_control_characters_removed_and_counted(label, bad):
    """BR-15: control characters that XML 1.0 cannot hold no longer abort DOCX / XLSX / PPTX (nor PDF / PNG): they
    are removed, counted in the metadata, and the rest of the text is kept."""
    md = (f"# Report\n\nIntro paragraph long enough to stand alone.\n\n- {bad}\n\n| col | val |\n|---|---|\n"
          f"| a | {bad} |\n")
    sec = split_sections(md).sections[0]
    for fmt in ("docx", "pptx", "xlsx", "pdf", "png_page"):
        r = R.build(fmt, sec)
        assert r.meta.get("control_chars_removed", 0) >= 1, (fmt, r.meta)
        got = _check_round_trip(fmt, r)
        assert ("FAILED" in got) if label == "ANSI escape" else True
        assert "[31m" not in got  # an ANSI sequence goes whole, not just its ESC


def test_br15_cli_renders_what_it_can(tmp_path, capsys, monkeypatch):
    """BR-15: `filegram render file` with a vertical tab writes docx, pptx and pdf; a derivative that fails for
    another reason is reported and the others are still written (exit 1)."""
    src = tmp_path / "report.md"
    src.write_text("# Weekly\n\nAll good this week, nothing to add here at all.\n\n- step\x0bdone\n- ok\n")
    out = tmp_path / "out"
    assert main(["render", "file", str(src), "--out", str(out), "--formats", "docx", "pptx", "pdf"]) == 0
    text = capsys.readouterr().out
    assert "3 written, 0 skipped (format does not fit), 0 failed" in text and "(1 control characters removed)" in text
    assert sorted(p.name for p in (out / "report").iterdir()) == ["s00.docx", "s00.pdf", "s00.pptx"]

    def broken(obj):
        raise RuntimeError("renderer bug")

    monkeypatch.setitem(R._BUILDERS, "pptx", broken)
    assert main(["render", "file", str(src), "--out", str(tmp_path / "out2"), "--formats", "pptx", "pdf"]) == 1
    captured = capsys.readouterr()
    assert "s00 pptx      FAILED: RuntimeError: renderer bug" in captured.out
    assert "1 written, 0 skipped (format does not fit), 1 failed: s00 pptx" in captured.out
    assert "Traceback" in captured.err  # an internal error keeps its traceback
    assert (tmp_path / "out2" / "report" / "s00.pdf").exists()


def test_br19_nothing_to_pronounce_is_skipped(tmp_path, capsys):
    """BR-19: a section of dashes and ellipses gives NotApplicable (recorded as skipped), not wave.Error; the CLI
    still writes the PDF asked for; a narration the voice turns into no audio is NotApplicable too."""
    src = tmp_path / "dashes.md"
    src.write_text("# ———\n\n" + "… " * 16 + "\n", encoding="utf-8")
    sec = load_document(src.read_bytes(), "dashes.md").sections[0]
    assert len(R.narration_script(sec)) >= 20
    with pytest.raises(R.NotApplicable, match="no letters or digits"):
        R.build("wav", sec)
    assert main(["render", "file", str(src), "--out", str(tmp_path / "o"), "--formats", "wav", "pdf"]) == 0
    assert "s00 wav       skipped: audio: the narration has no letters or digits" in capsys.readouterr().out
    tts = R.TtsEngine()
    with pytest.raises(R.NotApplicable, match="produced no speech"):
        tts.wav_bytes("— … —")  # the guard behind the letter check: piper writes no audio chunk


def test_br22_formula_like_cells_stored_as_text():
    """BR-22: '=SUM(1,2)', '=HYPERLINK(…)' and '+7' are stored as text (data type 's'), read back with exactly
    their characters; numbers stay numbers shown with the same characters ('1,200', '0.50'); huge cells are cut
    to Excel's 32,767 characters and counted."""
    import openpyxl

    md = ("# Budget\n\nNumbers for the quarter, copied from the finance sheet as plain text.\n\n| item | note |\n"
          "|---|---|\n| total | =SUM(1,2) |\n| link | =HYPERLINK(\"http://example.invalid/?q=\"&A1,\"open\") |\n"
          "| plus | +7 |\n| at | @cmd |\n| neg | -0 |\n| big | 1,200 |\n| half | 0.50 |\n| n | 42 |\n"
          "| long | 12345678901234567 |\n")
    sec = split_sections(md).sections[0]
    r = R.build("xlsx", sec)
    ws = openpyxl.load_workbook(io.BytesIO(r.data)).worksheets[0]
    cells = {row[0].value: row[1] for row in ws.iter_rows(min_row=2)}
    for k in ("total", "link", "plus", "at", "neg", "long"):
        assert cells[k].data_type == "s", (k, cells[k].value)
    assert cells["total"].value == "=SUM(1,2)" and cells["plus"].value == "+7"
    assert (cells["big"].value, cells["big"].number_format) == (1200, "#,##0") and cells["n"].value == 42
    assert (cells["half"].value, cells["half"].number_format) == (0.5, "0.00")
    got = recover_bytes(r.data, "xlsx", "budget.xlsx")
    for line in ("total\t=SUM(1,2)", "plus\t+7", "big\t1,200", "half\t0.50", "neg\t-0", "long\t12345678901234567"):
        assert line in got and line in r.meta["text"]
    huge = split_sections("# T\n\nA table with one huge cell follows here.\n\n| a | b |\n|---|---|\n| x | "
                          + "y" * 40_000 + " |\n")  # the whole document: the table is a section of its own
    rh = R.build("xlsx", huge)
    assert rh.meta["cells_truncated"] == 1
    assert len(openpyxl.load_workbook(io.BytesIO(rh.data)).worksheets[0]["B2"].value) == R.XLSX_MAX_CELL_CHARS
    _check_round_trip("xlsx", rh)


def test_huge_cells_and_long_lines_render_everywhere():
    """A table cell taller than a page (reportlab LayoutError) and a 20,000-character line without spaces: every
    format renders them (the PDF lays such a table out as paragraphs) and reads them back."""
    md = ("# Huge\n\nSome words before the table so that the section is not tiny.\n\n| k | v |\n|---|---|\n| a | "
          + "word " * 3000 + "|\n\n" + "x" * 20_000 + "\n")
    doc = split_sections(md)
    for fmt in FAST:
        try:
            r = R.build(fmt, doc)
        except R.NotApplicable:
            continue
        _check_round_trip(fmt, r)
        if fmt == "pdf":
            assert "layout_fallback" in r.meta


# ---------------------------------------------------------------------------------------------- property test
_ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
_SPECIAL = st.sampled_from(["\x0b", "\x0c", "\x1b[31m", "\x1b]0;t\x07", "\uffff", "\ufffe", "\x00", "\x7f", "\x9b",
                            "\ud800", "\u202e", "\u200d", "\u00ad", "\u2028", "\t", "\r", "مرحبا بالعالم", "עברית",
                            "王小明", "서울", "かな", "😀", "\U0010fffd", "\U00020000", "=SUM(1,2)", "+7", "$x$",
                            "$", "1,200", "-0", "&amp; <b>", "]]>", "*", "|", "`", "#"])
_CHUNK = st.one_of(st.text(_ANY_CHAR, max_size=30), _SPECIAL, st.text("abc xyz.", min_size=1, max_size=60))
_LINE = st.lists(_CHUNK, min_size=1, max_size=8).map("".join)


@st.composite
def _markdown(draw) -> str:
    """A random Markdown output: headings, paragraphs, lists, a table, code, with random Unicode everywhere."""
    parts = [f"# {draw(_LINE)}"]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["p", "list", "table", "code", "h2", "long"]))
        if kind == "p":
            parts.append(draw(_LINE))
        elif kind == "h2":
            parts.append(f"## {draw(_LINE)}")
        elif kind == "list":
            parts.append("\n".join(f"- {draw(_LINE)}" for _ in range(draw(st.integers(1, 4)))))
        elif kind == "table":
            n = draw(st.integers(1, 3))
            cell = _LINE.map(lambda s: s.replace("|", "/").replace("\n", " "))
            rows = [" | ".join(draw(cell) for _ in range(n)) for _ in range(draw(st.integers(1, 4)))]
            parts.append("| " + " | ".join(f"h{j}" for j in range(n)) + " |\n|" + "---|" * n + "\n"
                         + "\n".join(f"| {r} |" for r in rows))
        elif kind == "code":
            parts.append("```\n" + draw(_LINE) + "\n```")
        else:
            parts.append(draw(st.sampled_from(["x", "漢", "ش", "😀"])) * draw(st.integers(200, 1500)))
    return "\n\n".join(parts) + "\n"


@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_markdown())
def test_random_unicode_through_every_renderer_and_back(md):
    """Property: for any text, every renderer either writes a derivative or says the format does not fit
    (NotApplicable: xlsx without a table, a chart without numbers); the derivative opens in its reader, carries
    the text its metadata claims, draws no character without a glyph and keeps no control character."""
    doc = split_sections(md)
    for fmt in FAST:
        try:
            r = R.build(fmt, doc)
        except R.NotApplicable:
            assert fmt in ("xlsx", "png_chart")
            continue
        assert r.meta["bytes"] == len(r.data) > 0
        _check_round_trip(fmt, r)


@pytest.fixture(scope="module")
def tts():
    return R.TtsEngine()


@settings(max_examples=4, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(_LINE, _LINE)
def test_random_unicode_narration(tts, title, body):
    """Property (audio): any narration either becomes a WAV whose stored transcript reads back, or NotApplicable."""
    sec = split_sections(f"# {title}\n\n{body} The meeting moved to Monday.\n").sections[0]
    try:
        r = R.build("wav", sec, tts=tts)
    except R.NotApplicable:
        return
    _check_round_trip("wav", r)
    assert not any(unicodedata.category(c) == "Cc" and c not in "\t\n\r" for c in r.meta["transcript"])


def test_recover_cli_names_a_corrupt_derivative(tmp_path, capsys):
    """`filegram render recover` on a corrupt PDF / DOCX / WAV ends in one line naming the file (exit 2)."""
    for name, data in (("bad.pdf", b"%PDF-1.4 garbage"), ("bad.docx", b"PK garbage"), ("bad.wav", b"RIFX....")):
        p = tmp_path / name
        p.write_bytes(data)
        rc = main(["render", "recover", str(p)])
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert rc == 2 and err.startswith(f"error: {p}: ") and "Traceback" not in err, err
