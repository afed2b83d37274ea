"""Keyframes of a screen recording by scene change (OpenCV).

A screen recording is mostly still pictures joined by short transitions (a menu opens, text is typed, a pane
scrolls). The detector reads every frame (every ``fps / analysis_fps``-th when the video is faster), shrinks it to
``analysis_width`` wide **in colour** (grayscale differencing misses cuts between scenes of equal luminance,
ENVIRONMENT_FACTS §7) and marks a frame as *changed* when more than ``change_fraction`` of its pixels differ from
the previous analysed frame by more than ``pixel_threshold`` in some channel (a fraction of pixels, not a mean
difference, because a screen change is local: a status line or one tree row can be all that changes). A keyframe is
the first frame of every *stable run* — no change for ``min_stable_s`` — whose picture differs from the previous
keyframe (compared at half resolution, so that a change as small as a clock's digits counts: the same operation
done twice in a row differs only there); so the settled state of each operation is captioned once, and transient
states (menus flashing by, typing) are not. Continuously changing video (camera footage, a test pattern) gets a forced keyframe every
``max_gap_s``. The first stable picture is always a keyframe.

Errors: :func:`extract_keyframes` raises ``ValueError`` naming the file when OpenCV cannot open it, decodes no
frame (a non-video file, a file cut inside its header), or stops decoding well before the frame count that the
container declares (a file cut inside its frames: more than 2 frames and 1 % short) — the caption stage turns that
into an error row, so that a recording cut short never passes for a whole one with fewer operations.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from filegram_ray.errors import UserError

if TYPE_CHECKING:  # numpy is imported where frames are handled (a stage's --help loads none)
    import numpy as np

__all__ = ["Keyframe", "KeyframeParams", "extract_keyframes"]


class KeyframeParams(BaseModel):
    """Scene-change settings (see module doc)."""

    model_config = ConfigDict(extra="forbid")
    analysis_width: int = Field(320, ge=32, description="width of the colour thumbnails compared, pixels")
    analysis_fps: float = Field(15.0, gt=0, description="frames analysed per second of video (at most the video's)")
    pixel_threshold: int = Field(24, ge=1, le=255, description="per-channel difference that counts as changed")
    change_fraction: float = Field(0.001, gt=0, lt=1, description="fraction of changed pixels that is a change "
                                                                  "(0.1 %: more than a moving mouse pointer)")
    min_stable_s: float = Field(0.5, ge=0, description="stillness that makes a keyframe, seconds")
    max_gap_s: float = Field(4.0, gt=0, description="longest stretch without a keyframe in moving video, seconds")
    max_keyframes: int = Field(5000, ge=1, description="stop after this many keyframes (pathological inputs)")
    same_pixels: int = Field(8, ge=0, description="a settled picture that differs from the previous keyframe in at "
                                                  "most this many pixels (half resolution) is the same picture")


@dataclass
class Keyframe:
    """One keyframe: ``index`` (0-based, in order), ``frame`` (frame number), ``t_s`` (seconds from the start),
    ``image`` (BGR, full size), ``change`` (fraction of pixels that changed when its scene began)."""

    index: int
    frame: int
    t_s: float
    image: np.ndarray
    change: float


def _thumb(frame: np.ndarray, width: int) -> np.ndarray:
    import cv2

    h, w = frame.shape[:2]
    tw = min(width, w)
    th = max(1, int(round(h * tw / w)))
    return cv2.resize(frame, (tw, th), interpolation=cv2.INTER_AREA)


def _half(frame: np.ndarray) -> np.ndarray:
    import cv2

    h, w = frame.shape[:2]
    return cv2.resize(frame, (max(1, w // 2), max(1, h // 2)), interpolation=cv2.INTER_AREA)


def _changed_pixels(a: np.ndarray, b: np.ndarray, thr: int) -> int:
    import cv2

    return int((cv2.absdiff(a, b).max(axis=2) > thr).sum())


def _changed(a: np.ndarray, b: np.ndarray, thr: int) -> float:
    import cv2

    return float((cv2.absdiff(a, b).max(axis=2) > thr).mean())


def extract_keyframes(path: str | os.PathLike, params: KeyframeParams | None = None
                      ) -> tuple[list[Keyframe], dict[str, float]]:
    """Keyframes of the video at ``path``.

    Args:
        path: a local video file (any container/codec the OpenCV build decodes; MP4/H.264 for ours).
        params: :class:`KeyframeParams`.

    Returns:
        ``(keyframes, info)`` with info ``{frames, fps, duration_s, width, height, analysed, declared_frames}``
        (``frames`` decoded; ``declared_frames`` by the container, 0 when it declares none).

    Raises:
        ValueError: the file cannot be opened, has no decodable frame, or decodes well short of its declared
            frame count (names the file).
    """
    import cv2

    p = params or KeyframeParams()
    cap = cv2.VideoCapture(os.fspath(path))
    if not cap.isOpened():
        raise UserError(f"{path}: not a readable video (OpenCV cannot open it)")
    fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
    declared = float(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0.0)
    declared = int(declared) if math.isfinite(declared) and declared > 0 else 0
    if not math.isfinite(fps) or fps <= 0 or fps > 1000:
        fps = 25.0  # containers without a rate: timestamps are then approximate
    step = max(1, int(round(fps / p.analysis_fps)))
    min_stable = max(1, int(math.ceil(p.min_stable_s * fps / step))) if p.min_stable_s > 0 else 1
    max_gap = max(1, int(round(p.max_gap_s * fps)))
    kfs: list[Keyframe] = []
    prev_small = None
    last_kf_small = None
    cand: tuple[int, np.ndarray, np.ndarray, float] | None = None  # (frame, image, thumb, change)
    stable = 0
    emitted = False
    ended = False  # the decoder ran out of frames (not the max_keyframes cap)
    last_kf_frame = -max_gap
    i = -1
    analysed = 0
    w = h = 0

    def emit(fidx: int, img: np.ndarray, small: np.ndarray, change: float) -> None:
        nonlocal last_kf_small, last_kf_frame
        half = _half(img)
        if last_kf_small is not None and last_kf_small.shape == half.shape \
                and _changed_pixels(half, last_kf_small, p.pixel_threshold) <= p.same_pixels:
            return  # back to the picture of the previous keyframe: nothing new to caption
        kfs.append(Keyframe(len(kfs), fidx, round(fidx / fps, 4), img, round(change, 6)))
        last_kf_small, last_kf_frame = half, fidx

    try:
        while len(kfs) < p.max_keyframes:
            if not cap.grab():
                ended = True
                break
            i += 1
            if i % step:
                continue
            ok, frame = cap.retrieve()
            if not ok or frame is None:
                ended = True
                break
            analysed += 1
            h, w = frame.shape[:2]
            small = _thumb(frame, p.analysis_width)
            change = 1.0 if prev_small is None or prev_small.shape != small.shape \
                else _changed(small, prev_small, p.pixel_threshold)
            prev_small = small
            if change > p.change_fraction:
                cand, stable, emitted = (i, frame.copy(), small, change), 1, False
                if i - last_kf_frame >= max_gap:  # moving picture: force a keyframe
                    emit(i, frame.copy(), small, change)
                    emitted = True
                continue
            stable += 1
            if cand is not None and not emitted and stable >= min_stable:
                emit(*cand)
                emitted = True
        if cand is not None and not emitted and (stable >= min_stable or not kfs):
            emit(*cand)  # a last picture that settled (or the only one): a picture cut short at the end is not
    finally:
        cap.release()
    if analysed == 0:
        raise UserError(f"{path}: no decodable video frames")
    n = i + 1
    if ended and declared and declared - n > max(2, 0.01 * declared):
        raise UserError(f"{path}: truncated or damaged video: {n} of the {declared} frames its container declares "
                         f"could be decoded")
    return kfs, {"frames": n, "fps": fps, "duration_s": round(n / fps, 4), "width": w, "height": h,
                 "analysed": analysed, "declared_frames": declared}
