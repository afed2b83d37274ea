"""Guidance videos: real H.264 MP4s through the imageio-ffmpeg binary, read back with OpenCV."""

from __future__ import annotations

import hashlib
import json

import pytest
from video_helpers import write_trajectory

from video.encode import probe
from video.record import RecordOptions, TrajectorySource, record, record_to_file


@pytest.fixture(scope="module")
def traj(tmp_path_factory):
    return write_trajectory(tmp_path_factory.mktemp("run"))


@pytest.mark.parametrize("opts", [RecordOptions(), RecordOptions(width=640, height=360, fps=10, speed=2.0)],
                         ids=["default-1280x720@15", "640x360@10"])
def test_mp4_opens_with_opencv_with_the_expected_duration_and_size(traj, tmp_path, opts):
    out = tmp_path / "t.mp4"
    info = record_to_file(traj, out, opts)
    tl = json.loads(out.with_suffix(".timeline.json").read_text(encoding="utf-8"))
    got = probe(out)  # decodes every frame with OpenCV
    assert (got.width, got.height) == (opts.width, opts.height)
    assert got.fps == pytest.approx(opts.fps)
    assert got.frames == tl["frames"] == info["frames"]
    assert got.duration_s == pytest.approx(tl["duration_s"], abs=1.0 / opts.fps)
    # the timeline accounts for every gesture: lead-in + gestures + tail
    assert tl["duration_s"] >= sum(g["duration_s"] for g in tl["gestures"])
    assert len(tl["gestures"]) == 13 and info["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()


def test_same_events_same_bytes_and_identical_frames_drawn_once(traj):
    a = record(TrajectorySource.from_folder(traj))
    b = record(TrajectorySource.from_folder(traj))
    assert a.mp4 == b.mp4
    distinct = len(a.timeline.steps)
    assert a.drawn <= distinct < a.frames / 5  # one drawing per distinct screen, not per frame


def test_previews_use_the_workspace_and_the_initial_listing(traj):
    src = TrajectorySource.from_folder(traj)
    assert sorted(src.initial_files()) == ["data/sales_q3.csv", "notes/meeting_notes.md", "readme.txt"]
    assert "Budget review" in (src.text_of("notes/meeting_notes.md") or "")
    res = record(src, RecordOptions(width=640, height=360, fps=8))
    read = next(s.screen for s in res.timeline.steps if s.screen.body.kind == "preview"
                and "meeting_notes" in s.screen.body.title)
    assert read.body.lines[0] == "# Meeting notes"


def test_bad_trajectory_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no events.json"):
        TrajectorySource.from_folder(tmp_path)
    (tmp_path / "events.json").write_text('{"not": "a list"}', encoding="utf-8")
    with pytest.raises(ValueError, match="events.json"):
        TrajectorySource.from_folder(tmp_path)
    from video.frames import layout

    with pytest.raises(ValueError, match="even"):
        layout(641, 360)


def test_chinese_text_is_drawn_with_glyphs_not_question_marks():
    """A character the OpenCV face lacks is drawn with the font chain's Noto CJK face. opencv-python-headless 5.1
    dropped the Unicode face 5.0 embedded behind ``sans``: 会议纪要 became ``????`` and OCR lost a rename (CI,
    2026-12-02). Checked on pixels (the Chinese run differs from ``????``, each character has its own glyph) and on
    the runs and widths the drawing uses."""
    import numpy as np

    from video.frames import _Text

    t = _Text("sans")

    def ink(text: str) -> np.ndarray:
        img = np.zeros((40, 240, 3), np.uint8)
        t.draw(img, text, 4, 4, 24, (255, 255, 255))
        return img

    drawn = ink("会议纪要")
    assert drawn.any()
    assert not np.array_equal(drawn, ink("????"))
    assert not np.array_equal(ink("会"), ink("议"))  # each Han character its own glyph, not one repeated box
    faces = [face for face, _ in t._runs("output/会议纪要_final.md")]
    if t._face_has("会"):  # an OpenCV whose own face draws Han (5.0's wheel): one run
        assert faces == [t.face]
    else:  # Latin in the main face, Han in Noto Sans SC
        assert len(faces) == 3 and faces[0] is faces[2] is t.face and faces[1] is not t.face
    assert t.width("output/会议纪要.md", 24) == sum(t.width(s, 24) for s in ("output/", "会议纪要", ".md"))


@pytest.mark.parametrize("argv_tail, needle", [
    (["--width", "853", "--height", "480"], "frame size 853x480: width and height must be even"),
    (["--width", "1920", "--height", "975"], "frame size 1920x975: width and height must be even"),
    (["--width", "577", "--height", "324"], "frame size 577x324"),
    (["--width", "200", "--height", "100"], "at least 320x180"),
    (["--fps", "0"], "fps: Input should be greater than or equal to 1"),
    (["--speed", "0"], "speed"),
], ids=["853x480", "1920x975", "577x324", "too-small", "fps-0", "speed-0"])
def test_bad_video_options_are_one_line_exit_2(traj, tmp_path, capsys, argv_tail, needle):
    """BR2-08 (a regression): ``filegram video record`` with an odd frame size (853x480, 1920x975, 577x324 from the
    bug reports) or another bad option ended in a ValueError traceback, exit 1, once only UserError counted as the
    user's mistake. The kind: every refusal of a video option or input file is one ``error:`` line, exit 2, and
    nothing is written."""
    from filegram_ray.cli import main

    out = tmp_path / "r.mp4"
    rc = main(["video", "record", str(traj), "--out", str(out), *argv_tail])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    assert needle in err, err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_unreadable_video_inputs_are_one_line_exit_2(tmp_path, capsys):
    """BR2-08's kind on the reading side: ``filegram video caption`` / ``events`` on a file that is no video, and
    ``video record`` on events.json that is no list, are one line naming the file (exit 2)."""
    from filegram_ray.cli import main

    bad = tmp_path / "not_a_video.mp4"
    bad.write_bytes(b"this is text, not an MP4\n" * 10)
    for argv in (["video", "caption", str(bad)], ["video", "events", str(bad), "--out", str(tmp_path / "ev")]):
        rc = main(argv)
        err = capsys.readouterr().err.strip()
        assert rc == 2 and err.startswith("error: ") and "\n" not in err and str(bad) in err, (argv, err)
    traj = tmp_path / "traj"
    traj.mkdir()
    (traj / "events.json").write_text('[{"no_type": 1}]', encoding="utf-8")
    rc = main(["video", "record", str(traj), "--out", str(tmp_path / "x.mp4")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "events.json: event [0] has no field 'event_type'" in err and "\n" not in err, err
