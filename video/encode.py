"""H.264 MP4 encoding through the ffmpeg binary that imageio-ffmpeg ships, fed by an ffmpeg-python pipe.

Frames go in as raw ``yuv420p`` (converted once per distinct frame with OpenCV, so ffmpeg does no colour conversion;
a repeated frame is the same bytes written again, never drawn again). Output: libx264, yuv420p, constant frame
rate, ``+faststart``. Reproducibility (same frames → same bytes): ``-fflags +bitexact -flags +bitexact
-map_metadata -1`` and one encoder thread (ENVIRONMENT_FACTS §7; the workspace writers use the same flags).

There is no ffprobe next to that binary (ENVIRONMENT_FACTS §7), so :func:`probe` reads a file back with OpenCV.
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from typing import Any

import numpy as np

from filegram_ray.errors import UserError

__all__ = ["EncodeParams", "Mp4Writer", "VideoInfo", "ffmpeg_exe", "probe"]


@functools.lru_cache(maxsize=1)
def ffmpeg_exe() -> str:
    """Path of the imageio-ffmpeg binary (ENVIRONMENT_FACTS §7)."""
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()


@dataclass(frozen=True)
class EncodeParams:
    """libx264 settings.

    Attributes:
        preset: x264 speed preset; ``ultrafast`` is the default because a screen recording is mostly repeated frames
            and the encoder, not the drawing, bounds the speed (tests/benchmarks/bench_video.py).
        qp: constant quantiser (x264 ``-qp``; lower = better, larger files). On our screens qp 20 gives ~41 dB PSNR
            at 2/3 of the CPU time and size of ``-crf 23`` (measured on a 98-s guidance video: 2.2 vs 3.4 ms and
            6.8 vs 10.4 MB per frame / video), because repeated frames cost nothing to rate control.
        crf: constant-quality factor instead of ``qp`` when set.
        gop: keyframe interval in frames (0 = 10 × fps); seeking lands at most this far from a keyframe.
        tune: x264 tune (``zerolatency``: no look-ahead; measured ~10 % faster than ``stillimage`` on screens).
        threads: encoder threads (1 keeps the output bit-exact across machines).
    """

    preset: str = "ultrafast"
    qp: int | None = 20
    crf: int | None = None
    gop: int = 0
    tune: str | None = "zerolatency"
    threads: int = 1


class Mp4Writer:
    """Write frames to an MP4 file.

    Args:
        path: local output path (the caller moves it into the run directory).
        width, height: frame size (even).
        fps: frames per second.
        params: :class:`EncodeParams`.

    Raises:
        RuntimeError: ffmpeg failed (the message carries ffmpeg's last stderr lines).

    Use as a context manager; :meth:`write` takes a BGR ``uint8`` array of shape ``(height, width, 3)`` and a repeat
    count.
    """

    def __init__(self, path: str | os.PathLike, width: int, height: int, fps: int,
                 params: EncodeParams | None = None):
        import ffmpeg

        self.path = os.fspath(path)
        self.width, self.height, self.fps = width, height, fps
        p = params or EncodeParams()
        out_kwargs: dict[str, Any] = {"vcodec": "libx264", "pix_fmt": "yuv420p", "preset": p.preset,
                                      "g": p.gop or 10 * fps, "threads": p.threads, "movflags": "+faststart",
                                      "fflags": "+bitexact", "flags": "+bitexact", "map_metadata": -1}
        if p.crf is not None:
            out_kwargs["crf"] = p.crf
        else:
            out_kwargs["qp"] = 20 if p.qp is None else p.qp
        if p.tune:
            out_kwargs["tune"] = p.tune
        stream = (ffmpeg.input("pipe:", format="rawvideo", pix_fmt="yuv420p", s=f"{width}x{height}", framerate=fps)
                  .output(self.path, **out_kwargs)
                  .global_args("-hide_banner", "-loglevel", "error", "-nostdin")
                  .overwrite_output())
        self._proc: subprocess.Popen = stream.run_async(pipe_stdin=True, pipe_stderr=True, cmd=ffmpeg_exe())
        self.frames = 0
        self._last_id: int | None = None
        self._last_buf: bytes = b""

    def write(self, frame: np.ndarray, repeat: int = 1) -> None:
        """Append ``frame`` ``repeat`` times (the YUV conversion is done once per distinct array)."""
        import cv2

        if frame.shape != (self.height, self.width, 3) or frame.dtype != np.uint8:
            raise ValueError(f"frame must be uint8 ({self.height}, {self.width}, 3), got {frame.dtype} {frame.shape}")
        if id(frame) != self._last_id:
            self._last_buf = cv2.cvtColor(frame, cv2.COLOR_BGR2YUV_I420).tobytes()
            self._last_id = id(frame)
        try:
            for _ in range(repeat):
                self._proc.stdin.write(self._last_buf)
        except BrokenPipeError:
            self._fail()
        self.frames += repeat

    def _fail(self) -> None:
        err = b""
        try:
            self._proc.stdin.close()
        except Exception:  # noqa: BLE001 - already broken
            pass
        if self._proc.stderr is not None:
            err = self._proc.stderr.read()
        self._proc.wait()
        raise RuntimeError(f"{self.path}: ffmpeg failed (exit {self._proc.returncode}): "
                           f"{err.decode(errors='replace')[-800:]}")

    def close(self) -> None:
        """Finish the file; raises RuntimeError when ffmpeg did not exit cleanly."""
        if self._proc.stdin and not self._proc.stdin.closed:
            self._proc.stdin.close()
        err = self._proc.stderr.read() if self._proc.stderr is not None else b""
        rc = self._proc.wait()
        if rc != 0:
            raise RuntimeError(f"{self.path}: ffmpeg failed (exit {rc}): {err.decode(errors='replace')[-800:]}")

    def abort(self) -> None:
        """Stop ffmpeg without finishing the file (on an error of the caller)."""
        try:
            if self._proc.stdin and not self._proc.stdin.closed:
                self._proc.stdin.close()
        finally:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> Mp4Writer:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


@dataclass(frozen=True)
class VideoInfo:
    """What OpenCV reads back from a video: ``frames`` (decoded count), ``fps``, ``duration_s`` = frames / fps,
    ``width``, ``height``."""

    frames: int
    fps: float
    duration_s: float
    width: int
    height: int


def probe(path: str | os.PathLike, count: bool = True) -> VideoInfo:
    """Open a video with OpenCV and report its size, rate and length.

    Args:
        path: local file.
        count: decode every frame to count them (exact); False trusts the container's frame count.

    Raises:
        ValueError: OpenCV cannot open the file or it has no decodable frame (names the file).
    """
    import cv2

    cap = cv2.VideoCapture(os.fspath(path))
    try:
        if not cap.isOpened():
            raise UserError(f"{path}: not a readable video (OpenCV cannot open it)")
        fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
        w, h = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        if count:
            n = 0
            while cap.grab():
                n += 1
        else:
            n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
    finally:
        cap.release()
    if n <= 0 or fps <= 0:
        raise UserError(f"{path}: no decodable video frames")
    return VideoInfo(frames=n, fps=fps, duration_s=n / fps, width=w, height=h)
