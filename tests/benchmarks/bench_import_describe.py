"""Import of a folder with one real file of every kind: PRINT where the time goes (model loads, each media file's
description, document extraction, the engine's grep over extracted views, cold and cached).

Usage: python tests/benchmarks/bench_import_describe.py [FOLDER]
(default: the folder of tests/test_import_all_kinds.py, built in a temp dir: docx, pdf, md, xlsx, csv, pptx, eml,
ics, png with text, a 4 s piper speech wav, a 4 s 640×360 mp4 with two text scenes and that speech.)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from import_helpers import open_on_bundle  # noqa: E402
from test_import_all_kinds import make_folder  # noqa: E402

from filegram_ray.workspace.bundle import import_bundle  # noqa: E402
from filegram_ray.workspace.describe import MediaDescriber  # noqa: E402
from filegram_ray.workspace.extract import extract_text, is_media, kind_of  # noqa: E402


def main(argv: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src = Path(argv[0]) if argv else make_folder(root)
        files = sorted(p for p in src.rglob("*") if p.is_file())
        m = MediaDescriber()
        t = time.perf_counter()
        m.ocr_engine()
        print(f"load RapidOCR           {time.perf_counter() - t:7.2f} s")
        t = time.perf_counter()
        m.asr_model()
        print(f"load Whisper tiny.en    {time.perf_counter() - t:7.2f} s")
        for p in files:
            kind = kind_of(p)
            t = time.perf_counter()
            if is_media(kind):
                d = m.describe(p, kind)
                what = ", ".join(d.methods)
            else:
                what = f"{len(extract_text(p))} chars"
            print(f"{p.relative_to(src).as_posix():<28} {time.perf_counter() - t:7.2f} s  {what}")
        t = time.perf_counter()
        import_bundle(src, "T-07", root / "out")
        print(f"whole import (models loaded again) {time.perf_counter() - t:7.2f} s, {len(files)} files")
        sess = open_on_bundle(root / "out", root / "w")
        for label in ("grep, views extracted", "grep, views cached"):
            t = time.perf_counter()
            with sess.iteration():
                res = sess.call("grep", pattern="(?i)budget", path=".")
            print(f"{label:<28} {time.perf_counter() - t:7.2f} s  {res.output.splitlines()[0]}")
        sess.finish()
        sess.close()


if __name__ == "__main__":
    main(sys.argv[1:])
