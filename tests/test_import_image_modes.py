"""Images in every mode people's programs save, read by OCR as a person sees them (case BR2-09): nothing a reader
sees may vanish, and OCR is never claimed on what it could not read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from filegram_ray.workspace.describe import DescribeOptions, MediaDescriber, to_rgb8

TEXT = "INVOICE 4711 PAID"


def _ink() -> np.ndarray:
    """A 640x160 mask: 1.0 where the text is drawn."""
    import matplotlib

    font_path = Path(matplotlib.__file__).parent / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
    base = Image.new("L", (640, 160), 0)
    ImageDraw.Draw(base).text((20, 50), TEXT, fill=255, font=ImageFont.truetype(str(font_path), 40))
    return np.asarray(base, dtype=np.float64) / 255.0


def _write_all(folder: Path) -> dict[str, str]:
    """One file per mode (name → what a program that saves it is), each showing TEXT dark on light."""
    import cv2

    ink = _ink()
    gray = (255 - ink * 255).astype(np.uint8)
    out: dict[str, str] = {}

    def save(name: str, im: Image.Image, what: str, **kw) -> None:
        im.save(folder / name, **kw)
        out[name] = what

    save("l.png", Image.fromarray(gray, "L"), "8-bit grayscale (scanner)")
    save("la.png", Image.merge("LA", (Image.fromarray(gray, "L"), Image.new("L", gray.shape[::-1], 255))),
         "grayscale + alpha (GIMP export)")
    save("rgb.jpg", Image.fromarray(gray, "L").convert("RGB"), "photo JPEG")
    save("cmyk.jpg", Image.fromarray(gray, "L").convert("CMYK"), "CMYK JPEG (print workflow)")
    save("p.png", Image.fromarray(gray, "L").convert("P"), "palette PNG (screenshot tools)")
    save("bilevel.png", Image.fromarray(gray, "L").convert("1"), "1-bit (fax, scanner line-art mode)")
    alpha = (ink * 255).astype(np.uint8)  # black text on a transparent background (a logo, a slide export)
    save("rgba_text_in_alpha.png", Image.merge("RGBA", [Image.new("L", gray.shape[::-1], 0)] * 3
                                               + [Image.fromarray(alpha, "L")]), "RGBA, text only in the alpha")
    g16 = (gray.astype(np.uint16) * 257)
    save("gray16.png", Image.fromarray(g16), "16-bit grayscale PNG (scientific camera, scanner 16-bit mode)")
    cv2.imwrite(str(folder / "gray16.tif"), g16)
    out["gray16.tif"] = "16-bit grayscale TIFF"
    g12 = (gray.astype(np.uint16) * 16)  # 12-bit data in a 16-bit container: max 4080 (a dark picture if clipped)
    cv2.imwrite(str(folder / "gray12in16.tif"), g12)
    out["gray12in16.tif"] = "12-bit sensor data in 16-bit TIFF"
    cv2.imwrite(str(folder / "float32.tif"), (gray / 255.0).astype(np.float32))
    out["float32.tif"] = "32-bit float TIFF (0..1)"
    rgb16 = np.dstack([g16] * 3)
    cv2.imwrite(str(folder / "rgb16.png"), rgb16)
    out["rgb16.png"] = "48-bit RGB PNG"
    cv2.imwrite(str(folder / "rgb16.tif"), rgb16)
    out["rgb16.tif"] = "48-bit RGB TIFF"
    return out


def test_every_image_mode_is_read_by_ocr_as_a_person_sees_it_BR2_09(tmp_path):
    """BR2-09: a 16-bit grayscale PNG was read blank by OCR (Image.convert('RGB') clips 16-bit values to white)
    while the summary said OCR ran. The kind: every mode people's programs save — 8-bit, palette, bilevel, CMYK,
    alpha (text only in the alpha channel too), 16-bit grayscale PNG and TIFF, 12-bit data in 16 bits, 32-bit
    float TIFF, 48-bit RGB PNG and TIFF — is normalised to 8-bit RGB as a viewer shows it, and OCR reads the text
    from each."""
    pytest.importorskip("rapidocr")
    pytest.importorskip("cv2")
    folder = tmp_path / "imgs"
    folder.mkdir()
    made = _write_all(folder)
    from filegram_ray.workspace.bundle import import_bundle

    info = import_bundle(folder, "T-07", tmp_path / "ws", describe={"asr": False})
    assert not info.errors, info.errors
    described = {d["path"]: d for d in info.described}
    missed = {}
    for name, what in made.items():
        view = (tmp_path / "ws" / "extracted" / f"{name}.txt").read_text(encoding="utf-8")
        if TEXT not in view.replace("  ", " ").upper():
            missed[name] = (what, view[-120:])
        assert any(m.startswith("ocr:") for m in described[name]["described_by"]), described[name]
    assert not missed, missed


def test_ocr_is_not_claimed_on_an_image_with_nothing_to_read(tmp_path):
    """BR2-09, the other half: an image of one colour (a blank 16-bit frame) is described, and OCR is listed as
    skipped with the reason, not as having run."""
    pytest.importorskip("rapidocr")
    p = tmp_path / "blank16.png"
    Image.fromarray(np.full((100, 200), 40000, np.uint16)).save(p)
    d = MediaDescriber(DescribeOptions(asr=False)).describe(p, "png")
    assert not any(m.startswith("ocr:") for m in d.methods)
    assert ("ocr", "the image is a single colour: no text to read") in d.skipped
    assert "I;16" in d.annotation()["content"]


def test_to_rgb8_keeps_contrast_of_high_depth_and_composites_alpha():
    g16 = Image.fromarray(np.array([[771, 65535]], np.uint16))
    assert np.asarray(g16.convert("RGB")).min() == 255  # what the old conversion did: a white page
    assert np.asarray(to_rgb8(g16))[0, :, 0].tolist() == [0, 255]
    f = Image.fromarray(np.array([[0.2, 0.8]], np.float32))
    assert np.asarray(to_rgb8(f))[0, :, 0].tolist() == [0, 255]
    rgba = Image.new("RGBA", (2, 1), (0, 0, 0, 0))
    rgba.putpixel((1, 0), (0, 0, 0, 255))
    assert np.asarray(to_rgb8(rgba))[0, :, 0].tolist() == [255, 0]  # transparent → white, black ink stays black
