"""The import summary says *why* media files got no description beyond their properties (fresh-user report:
`workspace run … --no-ocr --no-asr` told the user to install rapidocr / faster-whisper, which were installed):
switched off by the flag, not installed (with what to install), or failed."""

from __future__ import annotations

import io
import wave
from pathlib import Path

from filegram_ray.workspace.bundle import import_bundle
from filegram_ray.workspace.cli import print_import_summary, properties_only_reason
from filegram_ray.workspace.describe import DescribeOptions


def _folder(root: Path) -> Path:
    from PIL import Image

    src = root / "src"
    src.mkdir()
    Image.new("RGB", (64, 32), "white").save(src / "pic.png")
    with wave.open(str(src / "tone.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\x00\x00" * 8000)
    (src / "notes.md").write_text("# notes\n", encoding="utf-8")
    return src


def test_switched_off_describers_are_named_as_such_not_as_missing_packages(tmp_path):
    info = import_bundle(_folder(tmp_path), "T-07", tmp_path / "out",
                         describe=DescribeOptions(ocr=False, asr=False))
    buf = io.StringIO()
    print_import_summary(info, file=buf)
    out = buf.getvalue()
    [line] = [ln for ln in out.splitlines() if "properties only" in ln]
    assert line.strip().startswith("2 media file(s) described by their properties only")
    assert "OCR switched off by --no-ocr (1)" in line and "speech-to-text switched off by --no-asr (1)" in line
    assert "install" not in line and "pass --vlm" in line
    assert "[ocr skipped: switched off (--no-ocr)]" in out  # the per-file line says it too


def test_missing_and_failed_describers_name_the_fix():
    rows = [{"path": "a.wav", "modality": "audio", "skipped": [["asr", "faster_whisper not installed"]]},
            {"path": "b.png", "modality": "image", "skipped": [["ocr", "rapidocr not installed (rapidocr)"]]},
            {"path": "c.mp4", "modality": "video", "skipped": [["ocr", "RuntimeError: bad frame"],
                                                               ["vlm", "server refused"]]}]
    why = properties_only_reason(rows)
    assert "speech-to-text not installed (1): pip install 'filegram-ray[media]'" in why
    assert "OCR not installed (1): pip install 'filegram-ray[media]'" in why and "OCR failed (1" in why
    assert "--vlm" not in why  # a VLM was configured (it failed): no advice to pass one
    assert "--vlm" not in properties_only_reason(rows[:1])  # audio only: a VLM would not help
