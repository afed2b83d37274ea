"""Imports read what is in the file (case BR2-01 and its kind): every importable kind is built here with the content a
reader sees outside the plain body — text in grouped shapes (nested too), tables, notes and chart titles of slides;
headers, footers, text boxes, footnotes, comments and nested tables of documents; every sheet, shared strings and
cell comments of workbooks; annotations, form fields and attachments of PDFs; inline parts, HTML-only bodies,
forwarded messages and attachment names of mails — and the view either holds it or names it in a closing
``[not extracted: …]`` line."""

from __future__ import annotations

import subprocess
import sys
from email.message import EmailMessage
from pathlib import Path

import pytest

from filegram_ray.workspace.extract import extract_text


def _grouped_deck(path: Path) -> None:
    """The BR2-01 deck: one text box in a group, one in a group nested in a group, one ungrouped."""
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    s = deck.slides.add_slide(deck.slide_layouts[6])
    box = s.shapes.add_textbox(Inches(1), Inches(1), Inches(6), Inches(1))
    box.text = "Launch date: 2026-10-01"
    s.shapes.add_group_shape([box])
    box2 = s.shapes.add_textbox(Inches(1), Inches(3), Inches(6), Inches(1))
    box2.text = "Budget owner: Priya"
    inner = s.shapes.add_group_shape([box2])
    s.shapes.add_group_shape([inner])
    s.shapes.add_textbox(Inches(1), Inches(5), Inches(6), Inches(1)).text = "Ungrouped control line"
    deck.save(path)


def test_br2_01_text_in_grouped_shapes_reaches_the_agent_view(tmp_path):
    """BR2-01: `filegram workspace import` of a deck whose text sits in a group and a nested group: the agent's
    view (extracted/<file>.txt, what read and grep show) holds all three lines, in slide order."""
    folder = tmp_path / "folder"
    folder.mkdir()
    _grouped_deck(folder / "grouped.pptx")
    out = tmp_path / "ws"
    proc = subprocess.run([str(Path(sys.executable).parent / "filegram"), "workspace", "import", str(folder), "--task", "T-07", "--out", str(out),
                           "--no-ocr", "--no-asr"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    view = (out / "extracted" / "grouped.pptx.txt").read_text(encoding="utf-8")
    lines = view.splitlines()
    assert lines[:4] == ["## Slide 1:", "Launch date: 2026-10-01", "Budget owner: Priya", "Ungrouped control line"]


def test_pptx_tables_charts_pictures_notes_in_groups(tmp_path):
    from PIL import Image
    from pptx import Presentation
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    deck = Presentation()
    s = deck.slides.add_slide(deck.slide_layouts[5])
    s.shapes.title.text = "Quarter review"
    table = s.shapes.add_table(2, 2, Inches(0.5), Inches(1.5), Inches(4), Inches(1)).table
    for (r, c), v in {(0, 0): "Region", (0, 1): "Sales", (1, 0): "North", (1, 1): "42"}.items():
        table.cell(r, c).text = v
    data = CategoryChartData()
    data.categories = ["Q1", "Q2"]
    data.add_series("Revenue", (1.0, 2.0))
    chart = s.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(5), Inches(1.5), Inches(4), Inches(3),
                               data).chart
    chart.has_title = True
    chart.chart_title.text_frame.text = "Revenue by quarter"
    Image.new("RGB", (8, 8), "red").save(tmp_path / "dot.png")
    pic = s.shapes.add_picture(str(tmp_path / "dot.png"), Inches(1), Inches(5))
    pic._element.nvPicPr.cNvPr.attrib.pop("descr", None)  # python-pptx writes the file name as alt text
    pic2 = s.shapes.add_picture(str(tmp_path / "dot.png"), Inches(2), Inches(5))
    pic2._element.nvPicPr.cNvPr.set("descr", "Map of the northern sales region")
    deep = s.shapes.add_textbox(Inches(1), Inches(6), Inches(3), Inches(1))
    deep.text = "Deep in three groups"
    g = s.shapes.add_group_shape([deep, pic])
    g = s.shapes.add_group_shape([g])
    s.shapes.add_group_shape([g])
    s.notes_slide.notes_text_frame.text = "Mention the northern dip"
    deck.save(tmp_path / "d.pptx")
    view = extract_text(tmp_path / "d.pptx")
    for needle in ("## Slide 1: Quarter review", "Region\tSales", "North\t42", "[chart] Revenue by quarter",
                   "[picture] Map of the northern sales region", "Deep in three groups",
                   "[notes] Mention the northern dip"):
        assert needle in view, needle
    assert view.splitlines()[-1] == "[not extracted: chart data; picture (no text)]"


def test_docx_everything_a_reader_sees(tmp_path):
    import docx
    from docx.oxml import parse_xml

    d = docx.Document()
    d.add_paragraph("Body paragraph one")
    sec = d.sections[0]
    sec.header.is_linked_to_previous = False
    sec.header.paragraphs[0].text = "Confidential draft header"
    sec.footer.is_linked_to_previous = False
    sec.footer.paragraphs[0].text = "Page footer: ACME Legal"
    t = d.add_table(rows=1, cols=2)
    t.cell(0, 0).text = "outer cell"
    inner = t.cell(0, 1).add_table(rows=1, cols=1)
    inner.cell(0, 0).text = "nested table cell"
    p = d.add_paragraph("Tracked: ")
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    p._p.append(parse_xml(f'<w:ins xmlns:w="{w}" w:id="9" w:author="A" w:date="2024-01-01T00:00:00Z">'
                          '<w:r><w:t>inserted words</w:t></w:r></w:ins>'))
    p._p.append(parse_xml(f'<w:del xmlns:w="{w}" w:id="10" w:author="A" w:date="2024-01-01T00:00:00Z">'
                          '<w:r><w:delText>deleted words</w:delText></w:r></w:del>'))
    box = d.add_paragraph()
    wps = "http://schemas.microsoft.com/office/word/2010/wordprocessingShape"
    box._p.append(parse_xml(
        f'<w:r xmlns:w="{w}" xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
        f'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:wps="{wps}"><w:drawing><wp:inline>'
        '<wp:extent cx="1" cy="1"/><wp:docPr id="5" name="Text Box 1"/><a:graphic><a:graphicData '
        f'uri="{wps}"><wps:wsp><wps:txbx><w:txbxContent><w:p><w:r><w:t>Text box: call Priya</w:t></w:r></w:p>'
        '</w:txbxContent></wps:txbx></wps:wsp></a:graphicData></a:graphic></wp:inline></w:drawing></w:r>'))
    para = d.add_paragraph("Commented sentence")
    d.add_comment(para.runs, text="Check this figure", author="Dana")
    d.save(tmp_path / "d.docx")
    view = extract_text(tmp_path / "d.docx")
    for needle in ("Body paragraph one", "outer cell", "nested table cell", "Tracked: inserted words",
                   "[text box] Text box: call Priya", "[header] Confidential draft header",
                   "[footer] Page footer: ACME Legal", "[comment, Dana] Check this figure"):
        assert needle in view, needle
    assert "deleted words" not in view


def test_docx_footnotes_and_pictures(tmp_path):
    """A footnote part (python-docx writes none, so one is added to the package by hand) and a picture."""
    import docx
    from docx.opc.constants import RELATIONSHIP_TYPE as RT
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part
    from PIL import Image

    d = docx.Document()
    d.add_paragraph("See the note")
    Image.new("RGB", (8, 8), "blue").save(tmp_path / "b.png")
    d.add_picture(str(tmp_path / "b.png"))
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    xml = (f'<w:footnotes xmlns:w="{w}"><w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:t>---</w:t></w:r>'
           '</w:p></w:footnote><w:footnote w:id="1"><w:p><w:r><w:t>Source: 2023 annual report</w:t></w:r></w:p>'
           '</w:footnote></w:footnotes>').encode()
    part = Part(PackURI("/word/footnotes.xml"),
                "application/vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml", xml, d.part.package)
    d.part.relate_to(part, RT.FOOTNOTES)
    d.save(tmp_path / "f.docx")
    view = extract_text(tmp_path / "f.docx")
    assert "[footnote 1] Source: 2023 annual report" in view and "---" not in view
    assert view.splitlines()[-1] == "[not extracted: picture (no text)]"


def test_xlsx_every_sheet_shared_strings_and_comments(tmp_path):
    import openpyxl
    from openpyxl.chart import BarChart, Reference
    from openpyxl.comments import Comment

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Budget"
    ws.append(["Item", "Cost"])
    ws.append(["Travel", 1200])
    ws["B2"].comment = Comment("Approved by finance", "Lee")
    hidden = wb.create_sheet("Archive")
    hidden.append(["old row", "same text"])
    hidden.append(["same text", 3])
    hidden.sheet_state = "hidden"
    hidden["A1"].comment = Comment("Keep until 2026", "")
    cs = wb.create_chartsheet("Chart1")
    chart = BarChart()
    chart.add_data(Reference(ws, min_col=2, min_row=1, max_row=2), titles_from_data=True)
    cs.add_chart(chart)
    wb.save(tmp_path / "w.xlsx")
    view = extract_text(tmp_path / "w.xlsx")
    lines = view.splitlines()
    assert "# sheet: Budget" in lines and "Travel\t1200" in lines and "[comment B2, Lee] Approved by finance" in lines
    assert "# sheet: Archive (hidden)" in lines and "same text\t3" in lines
    assert "[comment A1] Keep until 2026" in lines
    assert "[chart] (untitled)" in lines  # the chart sheet's chart: read from its part, its data named below
    assert lines[-1] == "[not extracted: chart sheet 'Chart1'; chart data]"


def test_pdf_annotations_forms_attachments_and_image_only_pages(tmp_path):
    from pypdf import PdfWriter
    from pypdf.annotations import FreeText, Text
    from pypdf.generic import NameObject, TextStringObject
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(tmp_path / "base.pdf"))
    c.drawString(72, 720, "Contract summary")
    c.acroForm.textfield(name="client", x=72, y=600, value="Northwind Ltd")
    c.showPage()
    c.drawImage(__import__("reportlab.lib.utils", fromlist=["ImageReader"]).ImageReader(
        _png(tmp_path)), 72, 500, 50, 50)
    c.showPage()
    c.save()
    w = PdfWriter(clone_from=str(tmp_path / "base.pdf"))
    note = Text(rect=(50, 550, 200, 650), text="Sticky: confirm the fee")
    note[NameObject("/T")] = TextStringObject("Sam")
    w.add_annotation(page_number=0, annotation=note)
    w.add_annotation(page_number=0, annotation=FreeText(text="Typed on the page: VOID", rect=(50, 400, 300, 450)))
    w.add_attachment("terms.txt", b"terms")
    w.write(tmp_path / "p.pdf")
    view = extract_text(tmp_path / "p.pdf")
    for needle in ("Contract summary", "[comment p.1, Sam] Sticky: confirm the fee",
                   "[comment p.1] Typed on the page: VOID", "[form] client: Northwind Ltd",
                   "[attachments] terms.txt"):
        assert needle in view, needle
    assert view.splitlines()[-1] == "[not extracted: page 2: no text layer (a scanned image?)]"


def _png(tmp_path: Path) -> str:
    from PIL import Image

    Image.new("RGB", (16, 16), "green").save(tmp_path / "g.png")
    return str(tmp_path / "g.png")


def test_eml_alternative_html_inline_forwarded_and_attachments(tmp_path):
    fwd = EmailMessage()
    fwd["From"] = "carol@example.com"
    fwd["Subject"] = "Original numbers"
    fwd.set_content("Forwarded body: revenue 12M")
    msg = EmailMessage()
    msg["From"] = "a@example.com"
    msg["To"] = "b@example.com"
    msg["Subject"] = "Status"
    msg.set_content("Plain body line")
    msg.add_alternative("<html><body><p>Plain body line</p></body></html>", subtype="html")
    msg.make_mixed()
    extra = EmailMessage()
    extra.set_content("Second inline note: see below")
    msg.attach(extra)
    msg.add_attachment(b"%PDF-1.4", maintype="application", subtype="pdf", filename="invoice.pdf")
    msg.add_attachment(b"\x00\x01", maintype="application", subtype="octet-stream")
    msg.add_attachment(fwd)
    (tmp_path / "m.eml").write_bytes(bytes(msg))
    view = extract_text(tmp_path / "m.eml")
    assert view.count("Plain body line") == 1  # the HTML twin of the body is not repeated
    for needle in ("Second inline note: see below", "[forwarded message] From: carol@example.com; Subject: Original "
                   "numbers", "Forwarded body: revenue 12M"):
        assert needle in view, needle
    assert view.splitlines()[-1] == "Attachments: invoice.pdf, (unnamed application/octet-stream)"


@pytest.mark.parametrize("html", [
    "<html><head><style>p{color:red}</style><script>var x=1;</script></head><body><p>Fish &amp; chips&nbsp;at "
    "noon</p><table><tr><td>a</td><td>b</td></tr></table></body></html>",
])
def test_eml_html_only_body_is_its_text(tmp_path, html):
    msg = EmailMessage()
    msg["From"] = "a@example.com"
    msg["Subject"] = "Lunch"
    msg.set_content(html, subtype="html")
    (tmp_path / "h.eml").write_bytes(bytes(msg))
    view = extract_text(tmp_path / "h.eml")
    assert "Fish & chips at noon" in view and "a\tb" in view
    assert "color:red" not in view and "var x" not in view and "<p>" not in view


def test_pptx_slide_comments_legacy_and_modern(tmp_path):
    """Review comments (the comments pane) of a slide, in both part formats PowerPoint writes; python-pptx has no
    comments API, so the parts are added to the package by hand."""
    from pptx import Presentation
    from pptx.opc.package import Part
    from pptx.opc.packuri import PackURI

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    p = "http://schemas.openxmlformats.org/presentationml/2006/main"
    legacy = (f'<p:cmLst xmlns:p="{p}"><p:cm authorId="0" idx="1"><p:pos x="1" y="1"/>'
              '<p:text>Legacy: swap the chart colours</p:text></p:cm></p:cmLst>').encode()
    a = "http://schemas.openxmlformats.org/drawingml/2006/main"
    modern = ('<p188:cmLst xmlns:p188="http://schemas.microsoft.com/office/powerpoint/2018/8/main" '
              f'xmlns:a="{a}"><p188:cm id="{{1}}" authorId="{{2}}"><p188:txBody><a:bodyPr/><a:p><a:r>'
              '<a:t>Modern: cite the source</a:t></a:r></a:p></p188:txBody></p188:cm></p188:cmLst>').encode()
    for uri, ctype, blob, rt in (
            ("/ppt/comments/comment1.xml", "application/vnd.openxmlformats-officedocument.presentationml.comments+xml",
             legacy, "http://schemas.openxmlformats.org/officeDocument/2006/relationships/comments"),
            ("/ppt/comments/modernComment_1.xml", "application/vnd.ms-powerpoint.comments+xml", modern,
             "http://schemas.microsoft.com/office/2018/10/relationships/comments")):
        slide.part.relate_to(Part(PackURI(uri), ctype, deck.part.package, blob), rt)
    deck.save(tmp_path / "c.pptx")
    view = extract_text(tmp_path / "c.pptx")
    assert "[comment] Legacy: swap the chart colours" in view and "[comment] Modern: cite the source" in view


def test_xlsx_charts_and_pictures_in_sheets(tmp_path):
    import openpyxl
    from openpyxl.chart import LineChart, Reference
    from openpyxl.drawing.image import Image as XLImage
    from PIL import Image

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["Month", "Visits"])
    ws.append(["Jan", 10])
    chart = LineChart()
    chart.title = "Visits per month"
    chart.add_data(Reference(ws, min_col=2, min_row=1, max_row=2), titles_from_data=True)
    ws.add_chart(chart, "D2")
    Image.new("RGB", (8, 8), "red").save(tmp_path / "logo.png")
    ws.add_image(XLImage(str(tmp_path / "logo.png")), "D20")
    wb.save(tmp_path / "c.xlsx")
    view = extract_text(tmp_path / "c.xlsx")
    assert "[chart] Visits per month" in view.splitlines()
    assert view.splitlines()[-1] == "[not extracted: chart data; picture (no text)]"


def test_xlsx_formula_cells_never_vanish_in_any_writer_mode_BR2_03(tmp_path):
    """BR2-03: a workbook written by a library (openpyxl) with formulas and no saved values lost every formula cell
    (no value, no formula text, no note). The kind, for each way people's programs save a workbook:
    * openpyxl (no saved value): each formula cell is shown as its formula, array formulas included, and a note
      line counts them;
    * XlsxWriter (saves 0 for every formula and asks for a recalculation on load): the 0 is not shown as data,
      the formula is, with the reason;
    * a spreadsheet program (Excel Online, real file of the R1 bundle): the saved values are shown, not formulas.
    """
    import openpyxl
    import xlsxwriter
    from openpyxl.worksheet.formula import ArrayFormula

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Budget"
    ws.append(["item", "q1", "q2", "total"])
    ws.append(["rent", 1200, 1300, "=B2+C2"])
    ws.append(["travel", 300, 450, "=SUM(B3:C3)"])
    ws.append(["label", '=CONCATENATE("grand ","total")', None, "=SUM(D2:D3)"])
    ws["E2"] = ArrayFormula("E2:E2", "=MAX(B2:C3)")
    wb.save(tmp_path / "openpyxl.xlsx")
    view = extract_text(tmp_path / "openpyxl.xlsx").splitlines()
    assert view[:5] == ["# sheet: Budget", "item\tq1\tq2\ttotal", "rent\t1200\t1300\t=B2+C2\t=MAX(B2:C3)",
                        "travel\t300\t450\t=SUM(B3:C3)", 'label\t=CONCATENATE("grand ","total")\t\t=SUM(D2:D3)']
    assert view[5].startswith("[5 formula cell(s) of this sheet: ") and "shown as their formula]" in view[5]
    assert view[-1] == "[not extracted: formula value (not saved in the file) ×5]"

    xw = xlsxwriter.Workbook(str(tmp_path / "xlsxwriter.xlsx"))
    s = xw.add_worksheet("Totals")
    s.write_row(0, 0, ["rent", 1200, 1300])
    s.write_formula(0, 3, "=B1+C1")
    xw.close()
    view = extract_text(tmp_path / "xlsxwriter.xlsx")
    assert "rent\t1200\t1300\t=B1+C1\n" in view and "\t0\n" not in view
    assert "asks to be recalculated when opened" in view

    real = Path("/work/shared/real-bundles/R1_office/2023-half-year-analyses-by-segment.xlsx")
    if real.is_file():  # saved by Excel Online: formulas (SUM(B9:B17) …) with their values
        view = extract_text(real)
        assert "=SUM(" not in view and "formula cell" not in view and "Zone NA\t12553\t2713" in view
