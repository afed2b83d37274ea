"""Hostile and broken inputs (issue #13, deliverable 2): every case is rebuilt here from scratch, the expected value of
its README is the assertion. Each error names the file (and the field); one bad file never aborts an import or a
stage; nothing is silently dropped or read as something else; a stage that processes 0 of N units fails loudly."""

from __future__ import annotations

import io
import json
import os
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from test_memory_stage import complete, make_run

from filegram_ray.cli import main
from filegram_ray.config import load_config, match_ids
from filegram_ray.limits import InputLimitError, check_zip, load_json, load_yaml
from filegram_ray.memory.api import build_store_from_trajectory_dirs
from filegram_ray.memory.stage import run_encode
from filegram_ray.storage import RunDir
from filegram_ray.workspace.bundle import import_bundle, load_bundle
from filegram_ray.workspace.extract import ExtractionError, extract_text

_CHUNK = b"<w:p><w:r><w:t>" + b"A" * 66 + b"</w:t></w:r></w:p>"
_CT = ('<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
       'content-types"><Default Extension="xml" ContentType="application/xml"/></Types>')


def _bomb(path: Path, inner: str, mib: int, level: int = 1) -> Path:
    """A valid OOXML-shaped zip whose ``inner`` member inflates to ``mib`` MiB of repeated XML."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=level) as z:
        z.writestr("[Content_Types].xml", _CT)
        with z.open(inner, "w", force_zip64=True) as w:
            w.write(b'<?xml version="1.0"?><w:document><w:body>')
            block = _CHUNK * 10_000
            for _ in range((mib << 20) // len(block)):
                w.write(block)
            w.write(b"</w:body></w:document>")
    return path


def _one_line_error(capsys, argv: list[str], *needles: str) -> str:
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


# ---------------------------------------------------------------------------------------------- import: containers
def test_import_docx_zip_bomb_reported_rest_imported(tmp_path):
    """REL-import-docx-zip-bomb: a .docx whose document.xml inflates past the limits is refused from the zip
    directory alone ('report.docx: too large' in errors) and the rest imports in seconds."""
    src = tmp_path / "import_bomb"
    src.mkdir()
    (src / "good.md").write_text("# good file\nstill imported\n", encoding="utf-8")
    _bomb(src / "report.docx", "word/document.xml", 300)  # 300 MiB inflated from ~4 MB
    t0 = time.perf_counter()
    info = import_bundle(src, "T-07", tmp_path / "out")
    assert time.perf_counter() - t0 < 30  # the unguarded import ran 300 s into an 8.8 GB RSS and was killed
    errs = {e["path"]: e["error"] for e in info.errors}
    assert list(errs) == ["report.docx"] and errs["report.docx"].startswith("too large: member word/document.xml")
    b = load_bundle(info.out_dir)
    assert {f.path for f in b.files} == {"good.md", "report.docx"}
    assert (info.out_dir / "extracted" / "good.md.txt").read_text(encoding="utf-8").startswith("# good file")


@pytest.mark.parametrize("name,inner", [("deck.pptx", "ppt/slides/slide1.xml"), ("book.xlsx", "xl/sharedStrings.xml"),
                                        ("memo.docx", "word/document.xml")])
def test_every_ooxml_reader_refuses_a_ratio_bomb(tmp_path, name, inner):
    """REL-import-docx-zip-bomb, the whole kind: extraction (import + the engine's read tool) and derivative text
    recovery refuse a member that compresses better than the ratio limit, before any library inflates it."""
    from rendering.recover import recover_bytes

    p = _bomb(tmp_path / name, inner, 64, level=6)  # 64 MiB in ~200 KB: 330x
    with pytest.raises(ExtractionError, match=rf"{name}: cannot extract text: too large: member {inner} inflates"):
        extract_text(p)
    with pytest.raises(InputLimitError, match=rf"{name}: too large: .*decompression bomb"):
        recover_bytes(p.read_bytes(), p.suffix, name)


def test_check_zip_limits_and_non_zip():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for i in range(3):
            z.writestr(f"m{i}.xml", "<a/>")
    check_zip(buf.getvalue(), "ok.docx")  # small and sane: accepted
    with pytest.raises(ValueError, match="junk.docx: not a valid zip container"):
        check_zip(b"not a zip at all", "junk.docx")


def test_import_invalid_utf8_filename_is_renamed_not_fatal(tmp_path):
    """REL-import-invalid-utf8-filename-aborts: one name that is not UTF-8 no longer aborts the import (no stray
    bundle.json.tmp); the file is imported under a safe recorded name and named in the warnings."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "notes.md").write_text("# notes\n", encoding="utf-8")
    with open(os.path.join(os.fsencode(src), b"bad\xffname.txt"), "wb") as fh:
        fh.write(b"x")
    info = import_bundle(src, "T-07", tmp_path / "out")
    assert not (tmp_path / "out" / "bundle.json.tmp").exists() and info.errors == []
    b = load_bundle(info.out_dir)
    row = {f.path: f for f in b.files}
    assert set(row) == {"notes.md", "bad%FFname.txt"}
    assert b.meta["files"][0]["renamed_from"] == "bad\\xffname.txt"
    assert info.warnings == [{"path": "bad%FFname.txt",
                              "warning": "file name is not valid UTF-8 (bad\\xffname.txt): imported as "
                                         "'bad%FFname.txt'"}]


def test_import_latin1_name_everything_written_is_utf8(tmp_path, capsys):
    """BR-27: a Latin-1 file name (and a colliding literal '%E9' name): the rest of the folder imports, the
    renamed file keeps its content and text, and every file written (bundle.json, extracted/) is valid UTF-8."""
    src = tmp_path / "input"
    src.mkdir()
    (src / "notes.txt").write_text("hello\n", encoding="utf-8")
    with open(os.path.join(os.fsencode(src), b"caf\xe9_latin1.txt"), "wb") as fh:
        fh.write(b"a file named in latin-1\n")
    (src / "caf%E9_latin1.txt").write_text("a literal percent name\n", encoding="utf-8")
    out = tmp_path / "br27-out"
    assert main(["workspace", "import", str(src), "--task", "T-07", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "renamed: file name is not valid UTF-8 (caf\\xe9_latin1.txt): imported as 'caf%E9_latin1~2.txt'" in printed
    for p in out.rglob("*"):
        if p.is_file() and p.suffix in (".json", ".txt"):
            p.read_bytes().decode("utf-8")  # valid UTF-8 throughout
    assert (out / "files" / "caf%E9_latin1~2.txt").read_bytes() == b"a file named in latin-1\n"
    assert (out / "extracted" / "caf%E9_latin1~2.txt.txt").read_text(encoding="utf-8") == "a file named in latin-1\n"
    assert (out / "files" / "caf%E9_latin1.txt").read_text(encoding="utf-8") == "a literal percent name\n"
    assert {f.path for f in load_bundle(out).files} == {"notes.txt", "caf%E9_latin1.txt", "caf%E9_latin1~2.txt"}


def test_import_special_files_reported(tmp_path):
    """Nothing silently dropped: a FIFO (which would block a copy forever) and a link are named in errors."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("# a\n", encoding="utf-8")
    os.mkfifo(src / "pipe")
    (src / "link.md").symlink_to(src / "a.md")
    info = import_bundle(src, "T-07", tmp_path / "out")
    assert {e["path"]: e["error"] for e in info.errors} == {"pipe": "not a regular file: not imported",
                                                           "link.md": "symbolic link: not imported"}


def test_import_corrupt_media_reported_valid_media_pass(tmp_path):
    """REL-import-corrupt-media-not-reported: a WAV and an MP4 of random bytes behind a valid header are listed
    as unreadable like a broken PNG; real WAV / MP3 / PNG files of the workspace writers are not."""
    from filegram_ray.workspace import writers as W

    rng = np.random.default_rng(3)
    src = tmp_path / "src"
    src.mkdir()
    (src / "notes.md").write_text("# notes\n", encoding="utf-8")
    (src / "memo.wav").write_bytes(b"RIFF\xff\xff\x00\x00WAVEfmt " + rng.bytes(400))
    (src / "clip.mp4").write_bytes(b"\x00\x00\x00\x20ftypmp42" + rng.bytes(2000))
    (src / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n" + rng.bytes(300))
    wav, _ = W.speech_wav_bytes("The quarterly budget meeting moved to Monday.", 1, use_piper=False)
    (src / "ok.wav").write_bytes(wav)
    W.wav_to_mp3(wav, src / "ok.mp3")
    W.write_photo(src / "ok.png", "office", rng)
    info = import_bundle(src, "T-07", tmp_path / "out")
    errs = {e["path"]: e["error"] for e in info.errors}
    assert set(errs) == {"memo.wav", "clip.mp4", "bad.png"}, errs
    assert errs["memo.wav"].startswith("unreadable audio: ") and errs["clip.mp4"].startswith("unreadable video: ")
    assert errs["bad.png"].startswith("unreadable image: ")
    assert str(src) not in json.dumps(errs) and str(tmp_path) not in json.dumps(errs)  # names, not host paths
    assert info.n_files == 7


def test_extract_text_size_limits(tmp_path, monkeypatch):
    """A text file past the size limit is refused before it is read into memory; a PDF past the page limit too."""
    from filegram_ray.workspace import extract as X

    monkeypatch.setattr(X, "MAX_TEXT_FILE_BYTES", 1000)
    big = tmp_path / "big.txt"
    big.write_text("x" * 2000, encoding="utf-8")
    with pytest.raises(ExtractionError, match=r"big.txt: cannot extract text: too large: file of"):
        extract_text(big)
    from reportlab.pdfgen import canvas

    pdf = tmp_path / "pages.pdf"
    c = canvas.Canvas(str(pdf))
    for i in range(4):
        c.drawString(72, 720, f"page {i}")
        c.showPage()
    c.save()
    monkeypatch.setattr(X, "PDF_MAX_PAGES", 3)
    with pytest.raises(ExtractionError, match=r"pages.pdf: cannot extract text: too large: 4 pages \(limit 3\)"):
        extract_text(pdf)


# ---------------------------------------------------------------------------------------------- YAML / JSON loaders
def test_non_utf8_yaml_error_names_the_file(tmp_path, capsys):
    """REL-non-utf8-yaml-error-without-filename: `profiles list` / `tasks list` name the file that is not UTF-8."""
    (tmp_path / "profiles").mkdir()
    (tmp_path / "tasks").mkdir()
    (tmp_path / "profiles" / "p1_x.yaml").write_bytes(b"profile_id: p1_x\nname: NAME_\xff_PLACEHOLDER\n")
    (tmp_path / "tasks" / "t01.yaml").write_bytes(b"task_id: T-01\nname_en: Task \xff placeholder\n")
    _one_line_error(capsys, ["profiles", "list", "--dir", str(tmp_path / "profiles")],
                    f"{tmp_path / 'profiles' / 'p1_x.yaml'}: not UTF-8")
    _one_line_error(capsys, ["tasks", "list", "--dir", str(tmp_path / "tasks")],
                    f"{tmp_path / 'tasks' / 't01.yaml'}: not UTF-8")
    cfg = tmp_path / "conf.yaml"
    cfg.write_bytes(b"run_dir: r\xff\n")
    with pytest.raises(ValueError, match=r"conf.yaml: not UTF-8"):
        load_config(cfg)


def test_deep_nesting_one_line_error(tmp_path, capsys, monkeypatch):
    """REL-deep-nesting-recursionerror-traceback: 20,000 nested '[' in a profile and 200,000 in events.json end in
    one error line naming the file (exit 2), with the libyaml loader and with the pure-Python one."""
    import yaml

    from filegram_ray import limits

    prof = tmp_path / "profiles"
    prof.mkdir()
    (prof / "p1_x.yaml").write_text("profile_id: p1_x\nx: " + "[" * 20_000 + "]" * 20_000 + "\n", encoding="utf-8")
    _one_line_error(capsys, ["profiles", "list", "--dir", str(prof)], str(prof / "p1_x.yaml"))

    class PurePython(yaml.SafeLoader):  # PyYAML without libyaml recursed in its composer here
        construct_mapping = limits.StrictYamlLoader.construct_mapping

    monkeypatch.setattr(limits, "StrictYamlLoader", PurePython)
    with pytest.raises(ValueError, match=r"p1_x.yaml: not valid YAML: nesting too deep"):
        limits.load_yaml_file(prof / "p1_x.yaml")
    monkeypatch.undo()

    deep = tmp_path / "events_deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")
    _one_line_error(capsys, ["engine", "filter", str(deep), "-o", str(tmp_path / "out.json")],
                    f"{deep}: invalid JSON: nesting too deep")
    # the encode stage names the file in its error row (it named only the trajectory id before)
    root = make_run(tmp_path / "run", bad=None)
    (root / "trajectories" / "pa_reader" / "T-01" / "events.json").write_text("[" * 200_000 + "]" * 200_000)
    s = run_encode(load_config(None, [f"run_dir={root}", "encode.embedder=hashing"]), executor="serial")
    err = RunDir(root).error_rows("encode")
    assert s["error_ids"] == ["pa_reader/T-01"]
    assert "trajectories/pa_reader/T-01/events.json: invalid JSON: nesting too deep" in err[0]["error"]


def test_every_yaml_json_entry_point_has_a_depth_limit(tmp_path, capsys):
    """REL-deep-nesting-recursionerror-traceback, the kind: a deeply nested ``--set`` value ended in a RecursionError
    traceback (exit 1) although config files, profiles and events.json were already one line. Every entry point that
    reads YAML or JSON from outside refuses more than MAX_NESTING levels in one line naming the file or option
    (exit 2) — 20,000 levels (past Python's recursion limit) and 150 (below it, past ours) alike."""
    from filegram_ray.limits import MAX_NESTING

    assert MAX_NESTING == 100
    for n in (20_000, 150):
        flow = "[" * n + "]" * n
        # --set value (flow and block mappings), --set key, a config file
        _one_line_error(capsys, ["run", "generate", "--run-dir", str(tmp_path / "r"), "--set", f"generate.x={flow}"],
                        "--set generate.x: the value is not valid YAML: nesting too deep (more than 100 levels)")
        _one_line_error(capsys, ["run", "generate", "--run-dir", str(tmp_path / "r"),
                                 "--set", "generate.x=" + "{a: " * n + "}" * n], "--set generate.x", "nesting too deep")
        _one_line_error(capsys, ["run", "encode", "--run-dir", str(tmp_path / "r"),
                                 "--set", ".".join(["a"] * n) + "=1"], "nested more than 100 levels")
        conf = tmp_path / f"conf{n}.yaml"
        conf.write_text("run_dir: r\ngenerate:\n  x: " + flow + "\n", encoding="utf-8")
        _one_line_error(capsys, ["run", "generate", "--config", str(conf)], f"{conf}: not valid YAML: nesting too deep")
        # --vlm of workspace import, as text and as a file
        src = tmp_path / "src"
        src.mkdir(exist_ok=True)
        (src / "a.md").write_text("hello\n", encoding="utf-8")
        _one_line_error(capsys, ["workspace", "import", str(src), "--task", "T-07", "--out", str(tmp_path / f"ws{n}"),
                                 "--vlm", flow],
                        "--vlm: not valid YAML: nesting too deep")
        # a task set, a profile set's matrix, events.json for the engine's filter
        tasks = tmp_path / f"tasks{n}"
        tasks.mkdir()
        (tasks / "t01.yaml").write_text("task_id: T-01\nx: " + flow + "\n", encoding="utf-8")
        _one_line_error(capsys, ["tasks", "list", "--dir", str(tasks)], "t01.yaml", "nesting too deep")
        profs = tmp_path / f"profiles{n}"
        profs.mkdir()
        (profs / "profile_matrix.json").write_text('{"profiles": ' + flow + "}", encoding="utf-8")
        _one_line_error(capsys, ["profiles", "list", "--dir", str(profs)], "profile_matrix.json", "nesting too deep")
        ev = tmp_path / f"events{n}.json"
        ev.write_text(flow, encoding="utf-8")
        _one_line_error(capsys, ["engine", "filter", str(ev), "-o", str(tmp_path / "out.json")],
                        f"{ev}: invalid JSON: nesting too deep")
        # a bundle's metadata and a run directory's JSON files (run.json, the lock record)
        b = tmp_path / f"bundle{n}"
        b.mkdir()
        (b / "bundle.json").write_text('{"files": ' + flow + "}", encoding="utf-8")
        with pytest.raises(ValueError, match="bundle.json: invalid JSON: nesting too deep"):
            load_bundle(b)
        run = RunDir(str(tmp_path / f"run{n}"))
        run.write_bytes("run.json", flow.encode())
        with pytest.raises(ValueError, match="run.json: invalid JSON: nesting too deep"):
            run.read_json("run.json")
    # 100 levels is still read: the limit refuses only what is deeper
    assert load_json("[" * 100 + "]" * 100, "x") and load_yaml("[" * 100 + "]" * 100, "x")
    # YAML aliases that share one list many times are walked once per depth, not once per path (billion laughs)
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join('*' + chr(97 + i) for _ in range(9))}]\n" for i in range(9))
    t0 = time.perf_counter()
    assert set(load_yaml(laughs, "laughs")) == set("abcdefghij") and time.perf_counter() - t0 < 5


def test_yaml_and_json_from_outside_go_through_the_strict_readers():
    """REL-deep-nesting-recursionerror-traceback, kept closed: every ``json.loads`` / ``yaml.load`` call in the product
    is either inside filegram_ray/limits.py (load_json / load_yaml: depth limit, duplicate keys, one-line errors) or
    reads data this process made or a pinned package ships, listed here with the reason. A new reader of outside
    YAML/JSON that bypasses the limits fails this test until it uses them (or is listed with its reason)."""
    import ast

    root = Path(__file__).resolve().parents[1]
    internal = {  # (module, function): why its input is not from outside
        ("filegram_ray/limits.py", "load_yaml"): "the strict reader",
        ("filegram_ray/limits.py", "load_json"): "the strict reader",
        ("filegram_ray/config.py", "parse_override"): "--set values: depth-checked by check_nesting",
        ("filegram_ray/bench/schema.py", "Item.from_row"): "bench rows this project wrote (parquet)",
        ("filegram_ray/bench/schema.py", "AnswerKey.from_row"): "bench rows this project wrote (parquet)",
        ("filegram_ray/engine/agents/llm_agent.py", "probe_endpoint"): "a /v1/models probe: only .get('data')",
        ("filegram_ray/engine/bounded.py", "_read_frame"): "frames of our own grep helper process",
        ("filegram_ray/engine/session.py", "_jsonable"): "json.dumps round trip in memory",
        ("filegram_ray/engine/simulator/calibration.py", "procedural"): "calibration of generated trajectories",
        ("filegram_ray/engine/worker.py", "_read_events"): "events.json the engine just wrote",
        ("filegram_ray/evaluate/embedding.py", "prepare_vectors"): "a JSON round trip of the planner's own units",
        ("filegram_ray/llm/reader_train.py", "Featurizer.__call__"): "rows the trainer just made",
        ("filegram_ray/validity/outcomes.py", "Inputs.__init__"): "bundle.json the seed stage wrote",
        ("filegram_ray/validity/outcomes.py", "replay"): "events_raw.json / bundle.json the engine wrote",
        ("filegram_ray/validity/realism.py", "acting_count_accuracy"): "meta.json the engine wrote",
        ("filegram_ray/evaluate/answer.py", "PromptBuilder.process"): "prompt rows this builder just made",
        ("filegram_ray/evaluate/answer.py", "_answer_row"): "prompt rows the prompt builder made",
        ("filegram_ray/evaluate/reader_validity.py", "gold_evidence"): "bench facts this project wrote",
        ("filegram_ray/llm/parsing.py", "parse_json_object"): "model replies: RecursionError caught there",
        ("filegram_ray/llm/processors.py", "CheckedSession._exchange"): "the request body we built",
        ("filegram_ray/llm/replies.py", "read_completion"): "model replies: json_depth checked first",
        ("filegram_ray/llm/replies.py", "read_letter"): "model replies: json_depth checked first",
        ("filegram_ray/llm/server.py", "LlamaCppServer.start"): "our own server's /v1/models",
        ("filegram_ray/memory/embed.py", "_read_json_file"): "a pinned weight package's config files",
        ("filegram_ray/memory/stage.py", "_settings"): "json.dumps round trip in memory",
        ("filegram_ray/speech.py", "SpeechEngine.__init__"): "a pinned voice package's config",
        ("filegram_ray/stages/executors.py", "_DataCall.__call__"): "unit JSON made by the runner",
        ("filegram_ray/stages/executors.py", "RayDataExecutor._run"): "rows made by the runner",
        ("filegram_ray/view/build.py", "items_section"): "bench rows this project wrote (parquet)",
        ("filegram_ray/watch/export.py", "import_store"): "events this function just serialised",
        ("filegram_ray/weights.py", "manifest"): "filegram_ray/models.yaml, shipped with the package",
        ("filegram_ray/workspace/stage.py", "SeedWorker.process"): "bundle.json the seed worker just wrote",
        ("video/caption_stage.py", "vlm_keyframe_rows"): "caption rows this project wrote",
        ("video/caption_stage.py", "caption_vlm"): "caption rows this project wrote",
        ("video/reconstruct.py", "_ops_from_ocr"): "caption rows this project wrote",
        ("video/reconstruct.py", "_ops_from_vlm"): "caption rows this project wrote",
        ("rendering/worker.py", "RenderWorker._prefetch_speech"): "unit JSON made by the render planner",
        ("rendering/worker.py", "RenderWorker._render_unit"): "unit JSON made by the render planner",
    }
    loaders = {("json", "loads"), ("json", "load"), ("yaml", "load"), ("yaml", "safe_load"), ("yaml", "full_load"),
               ("yaml", "unsafe_load"), ("yaml", "load_all"), ("yaml", "safe_load_all"), ("orjson", "loads")}
    found: set[tuple[str, str]] = set()
    for pkg in ("filegram_ray", "video", "rendering", "jobs"):
        for f in sorted((root / pkg).rglob("*.py")):
            rel = f.relative_to(root).as_posix()
            scope: list[str] = []

            class Calls(ast.NodeVisitor):
                def _scoped(self, node):
                    scope.append(node.name)
                    self.generic_visit(node)
                    scope.pop()

                visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

                def visit_Call(self, node):
                    fn = node.func
                    if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name) \
                            and (fn.value.id, fn.attr) in loaders:
                        found.add((rel, ".".join(scope)))
                    self.generic_visit(node)

            Calls().visit(ast.parse(f.read_text(encoding="utf-8")))
    unlisted = sorted(found - set(internal))
    assert not unlisted, f"read YAML/JSON with filegram_ray.limits.load_json / load_yaml: {unlisted}"
    assert len(found) >= 30  # the scan sees the product's readers


def test_empty_task_file_is_an_error(tmp_path, capsys):
    """REL-empty-task-file-silently-skipped: an empty task YAML is an error naming it (T-01 was silently missing);
    an empty profile too; a YAML mapping that is no task is skipped with a warning, not silently."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "t01.yaml").write_bytes(b"")
    from filegram_ray.paths import tasks_dir

    (tasks / "t02.yaml").write_bytes((tasks_dir() / "t02.yaml").read_bytes())
    _one_line_error(capsys, ["tasks", "list", "--dir", str(tasks)], f"{tasks / 't01.yaml'}: empty file")
    prof = tmp_path / "profiles"
    prof.mkdir()
    (prof / "p1.yaml").write_text("# nothing here\n", encoding="utf-8")
    _one_line_error(capsys, ["profiles", "list", "--dir", str(prof)], f"{prof / 'p1.yaml'}: field '<root>': empty")


def test_yaml_and_json_duplicate_keys_are_errors(tmp_path):
    """Nothing read as something else: PyYAML keeps the last of two equal keys silently; ours refuses them (line
    named), in profiles, tasks, the pipeline config and JSON documents alike."""
    with pytest.raises(ValueError, match=r"t.yaml: not valid YAML: .*duplicate key 'type' \(first given on line 2\) "
                                         r"\(line 3, column 1\)"):
        load_yaml("task_id: T-01\ntype: create\ntype: organize\n", "t.yaml")
    assert load_yaml("base: &b {x: 1}\nk:\n  <<: *b\n  x: 2\n", "m.yaml") == {"base": {"x": 1}, "k": {"x": 2}}
    cfg = tmp_path / "c.yaml"
    cfg.write_text("seed: 1\nrun_dir: a\nseed: 2\n", encoding="utf-8")
    with pytest.raises(ValueError, match="c.yaml: not valid YAML: .*duplicate key 'seed'"):
        load_config(cfg)
    with pytest.raises(ValueError, match=r"e.json: invalid JSON: duplicate key 'event_type'"):
        load_json(b'[{"event_type": "file_read", "event_type": "file_write"}]', "e.json")
    from filegram_ray.tasks import TaskError, load_task

    (tmp_path / "t01.yaml").write_text("task_id: T-01\ntask_id: T-02\n", encoding="utf-8")
    with pytest.raises(TaskError, match="t01.yaml: not valid YAML: .*duplicate key 'task_id'"):
        load_task(tmp_path / "t01.yaml")


# ---------------------------------------------------------------------------------------------- events / encode
def test_encode_huge_event_bounded_not_amplified(tmp_path, capsys):
    """REL-encode-huge-event-amplification: a multi-MB file_path is refused by the event schema in encode (the
    event is skipped and counted, naming file, index and field) and in `engine filter` alike; nothing of it is
    copied into the Engram, the store or the indices."""
    root = make_run(tmp_path / "run", bad=None)
    f = root / "trajectories" / "pb_writer" / "T-04" / "events.json"
    ev = json.loads(f.read_text(encoding="utf-8"))
    i = next(i for i, e in enumerate(ev) if e["event_type"] == "file_read")
    ev[i]["file_path"] += "X" * 5_000_000
    n = len(ev[i]["file_path"])
    f.write_text(json.dumps(ev), encoding="utf-8")
    s = run_encode(load_config(None, [f"run_dir={root}", "encode.embedder=hashing"]), executor="serial")
    assert s["errors"] == 0 and s["events_skipped"] == 1
    assert s["skipped_event_examples"] == [
        f"{f}: event[{i}] (file_read): field 'file_path': too large: {n:,} characters (limit 4,096)"]
    total = sum(p.stat().st_size for d in ("engrams", "memory", "indices") for p in (root / d).rglob("*") if p.is_file())
    assert total < 2_000_000  # the unbounded run wrote 690 MB from a 50 MB input
    capsys.readouterr()  # the stage's progress lines on stderr; the filter's error is read alone
    _one_line_error(capsys, ["engine", "filter", str(f), "-o", str(tmp_path / "o.json")],
                    f"{f}: event[{i}] (file_read): field 'file_path': too large")


def test_encode_validates_like_engine_filter(tmp_path):
    """Encode checks events.json with the event schema `engine filter` uses (strict types: a string timestamp, a
    boolean timestamp, NaN, an unknown type are refused), skips the invalid events and counts them; a file whose
    events are all invalid is an error row naming the file."""
    root = make_run(tmp_path / "run", bad=None)
    f = root / "trajectories" / "pa_reader" / "T-02" / "events.json"
    ev = json.loads(f.read_text(encoding="utf-8"))
    ev[0]["timestamp"] = "yesterday"
    ev[1]["timestamp"] = True
    ev[2]["timestamp"] = float("nan")
    ev[3] = {**ev[3], "event_type": "quantum_leap"}
    f.write_text(json.dumps(ev), encoding="utf-8")
    g = root / "trajectories" / "pb_writer" / "T-01" / "events.json"
    g.write_text("[1, 2, 3]", encoding="utf-8")
    s = run_encode(load_config(None, [f"run_dir={root}", "encode.embedder=hashing"]), executor="serial")
    assert s["events_skipped"] == 4 and s["error_ids"] == ["pb_writer/T-01"]
    msgs = "\n".join(s["skipped_event_examples"])
    for needle in ("event[0] (file_search): field 'timestamp'", "event[1] (file_search): field 'timestamp'",
                   "event[2] (file_read): field 'timestamp'", "event[3]: field 'event_type': unknown event type"):
        assert f"{f}: {needle}" in msgs
    err = RunDir(root).error_rows("encode")[0]["error"]
    assert f"{g}: no valid event: all 3 events fail validation (first: event[0]: expected a JSON object" in err
    eng = json.loads((root / "engrams" / "pa_reader" / "T-02.json").read_text(encoding="utf-8"))
    assert eng["event_count"] == len(ev) - 4


def test_fid_missing_event_type_skipped_and_counted(tmp_path, caplog):
    """FID/missing_event_type: one event without event_type is skipped and counted with a warning naming the file
    and index, as the original FileGramOS loader skips it; the trajectory keeps its Engram (ours raised)."""
    d = tmp_path / "p0_case_T-01"
    (d / "media" / "blobs").mkdir(parents=True)
    (d / "media" / "blobs" / "f80b166bc311babf.blob").write_text("hello world. again.\n", encoding="utf-8")
    good = [
        {"event_id": "e0", "event_type": "file_read", "timestamp": 1.0, "session_id": "s", "profile_id": "p0",
         "file_path": "input.md", "file_type": "md", "directory_depth": 0, "view_count": 1, "view_range": [1, 3],
         "content_length": 30, "revisit_interval_ms": None},
        {"event_id": "w0", "event_type": "file_write", "timestamp": 2.0, "session_id": "s", "profile_id": "p0",
         "file_path": "a.md", "file_type": "md", "directory_depth": 0, "operation": "create", "content_length": 20,
         "before_hash": None, "after_hash": "f80b166bc311babf",
         "media_ref": {"type": "blob", "hash": "f80b166bc311babf", "path": "blobs/f80b166bc311babf.blob"}}]
    (d / "events.json").write_text(json.dumps(good + [{"event_id": "x", "timestamp": 9.0, "file_path": "q.md"}]))
    with caplog.at_level("WARNING"):
        mem = build_store_from_trajectory_dirs([d])
    assert f"{d / 'events.json'}: event[2]: missing field 'event_type'" in caplog.text
    (eng,) = mem.store.engrams
    ref = tmp_path / "ref" / "p0_case_T-01"
    (ref / "media").mkdir(parents=True)
    (ref / "media" / "blobs").symlink_to(d / "media" / "blobs")
    (ref / "events.json").write_text(json.dumps(good))
    (eng_ref,) = build_store_from_trajectory_dirs([ref]).store.engrams
    assert eng.event_count == 2 and eng.fingerprint == eng_ref.fingerprint and eng.procedural == eng_ref.procedural
    # the encode stage keeps the trajectory too and counts the skip
    root = make_run(tmp_path / "run", bad=None)
    f = root / "trajectories" / "pa_reader" / "T-01" / "events.json"
    ev = json.loads(f.read_text(encoding="utf-8"))
    del ev[3]["event_type"]
    f.write_text(json.dumps(ev), encoding="utf-8")
    s = run_encode(load_config(None, [f"run_dir={root}", "encode.embedder=hashing"]), executor="serial")
    assert s["errors"] == 0 and s["events_skipped"] == 1
    assert s["skipped_event_examples"] == [f"{f}: event[3]: missing field 'event_type'"]


def test_short_profile_ids_resolve_in_encode_and_bench(tmp_path, monkeypatch):
    """REL-short-profile-ids-empty-encode-bench: `profiles=[pa]` selects pa_reader in encode (and bench) as it
    does in generate; an unknown id is a clear error; a selection that leaves nothing to do fails loudly."""
    root = make_run(tmp_path / "run", bad=None)

    def cfg(*sets):
        return load_config(None, [f"run_dir={root}", "encode.embedder=hashing", *sets])

    s = run_encode(cfg("profiles=[pa]", "tasks=[T-01,T-02]"), executor="serial")
    assert s["trajectories"] == 2 and s["encoded_now"] == 2
    assert sorted(p.name for p in (root / "engrams" / "pa_reader").iterdir()) == ["T-01.json", "T-02.json"]
    with pytest.raises(ValueError, match=r"config field profiles: unknown id 'p9' \(trajectories/index.parquet "
                                         r"has: pa_reader, pb_writer\)"):
        run_encode(cfg("profiles=[p9]"), executor="serial")
    assert match_ids(["s6"], ["s1_x", "s6_opposite"], "profiles") == ["s6_opposite"]
    assert match_ids(None, ["a", "b"], "profiles") == ["a", "b"]

    import bench_synth as bs

    from filegram_ray.bench.inputs import load_bench_inputs

    run = RunDir(tmp_path / "bench")
    bs.write_run(run)
    got = load_bench_inputs(run, profiles=bs.profiles(), tasks=bs.tasks(), profile_ids=["s6"])
    assert [p.profile_id for p in got.profiles] == ["s6_opposite"] and got.trajectories
    with pytest.raises(ValueError, match="config field profiles: unknown id 'zz'"):
        load_bench_inputs(run, profiles=bs.profiles(), tasks=bs.tasks(), profile_ids=["zz"])


def test_zero_of_n_units_fails_loudly(tmp_path, monkeypatch):
    """REL-short-profile-ids-empty-encode-bench, the whole kind: encode with every trajectory failing, or with no
    trajectory generated ok, raises instead of reporting 'done'; bench with no usable trajectory raises too."""
    root = make_run(tmp_path / "run", bad=None)
    for p in (root / "trajectories").glob("*/*/events.json"):
        p.write_text("{}", encoding="utf-8")
    cfg = load_config(None, [f"run_dir={root}", "encode.embedder=hashing"])
    with pytest.raises(ValueError, match=r"encode: 0 of 8 trajectories encoded \(see errors/encode.parquet\); "
                                         r"first error: .*expected a JSON array"):
        run_encode(cfg, executor="serial")
    errs = RunDir(root).error_rows("encode")  # the table the message points at, written first
    assert len(errs) == 8 and all("expected a JSON array" in e["error"] for e in errs)
    import polars as pl

    idx = RunDir(root).read_table("trajectories/index.parquet").with_columns(pl.lit("error").alias("status"))
    RunDir(root).write_table("trajectories/index.parquet", idx)
    with pytest.raises(ValueError, match="encode: no trajectory to encode: .* has 8 trajectories .* none with "
                                         "status ok"):
        run_encode(cfg, executor="serial")

    import bench_synth as bs

    from filegram_ray.bench import stage

    run = RunDir(tmp_path / "bench")
    bs.write_run(run, failed=tuple(f"{p['profile_id']}/{t['task_id']}" for p in bs.profiles() for t in bs.tasks()))
    real = stage.load_bench_inputs
    monkeypatch.setattr(stage, "load_bench_inputs", lambda r, **kw: real(r, profiles=bs.profiles(), tasks=bs.tasks()))
    with pytest.raises(ValueError, match="bench: no usable trajectory"):
        stage.run_bench(load_config(overrides={"run_dir": run.root}))


def test_events_complete_helper_matches_schema():
    """The schema-complete events the encode tests write validate against the engine's event schema."""
    from filegram_ray.schema.events import parse_event

    for i, e in enumerate(complete([{"event_type": "file_read", "file_path": "a.md", "file_type": "md",
                                     "view_count": 1, "content_length": 3}], "pa_reader")):
        parse_event(e, i)


def test_xlsx_extraction_bounds_cells_and_characters(tmp_path, monkeypatch):
    """Both xlsx bounds hold together: the cell count (BR-28) and the text budget (MAX_EXTRACTED_CHARS); the merge of
    the two once shadowed one counter with the other and every xlsx extraction raised AttributeError."""
    import openpyxl

    from filegram_ray.workspace import extract as X

    p = tmp_path / "book.xlsx"
    wb = openpyxl.Workbook()
    wb.active["A1"], wb.active["B2"] = "name", 3
    wb.save(p)
    assert extract_text(p) == "# sheet: Sheet\nname\n\t3"
    monkeypatch.setattr(X._TextBudget.__init__, "__defaults__", (3,))
    with pytest.raises(ExtractionError, match=r"book.xlsx: cannot extract text: too large: more than 3 characters"):
        extract_text(p)


@pytest.mark.parametrize("content", ["[1, 2]", '{"config": [1], "stages": {}}', '{"stages": {"seed": 3}}', "null"])
def test_a_run_json_that_is_not_a_manifest_is_one_line_for_every_stage(tmp_path, capsys, content):
    """Attack pass, tracebacks: ``generate`` on a run directory whose run.json is a list ended in an AttributeError
    traceback. Every stage (and findings / validity) reads run.json through one reader that refuses anything but
    a run manifest in one line naming the file (exit 2), and nothing is written."""
    (tmp_path / "run.json").write_text(content, encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    for argv in ([["run", s, "--run-dir", str(tmp_path), "--serial", "--set", "profiles=[p1_methodical]",
                   "--set", "tasks=[T-01]"] for s in ("seed", "generate", "encode", "render", "record", "caption",
                                                       "bench", "evaluate")]
                 + [["findings", str(tmp_path)], ["validity", str(tmp_path)]]):
        rc = main(argv)
        err = capsys.readouterr().err.strip()
        assert rc == 2 and err.startswith("error: ") and "\n" not in err, (argv, err)
        assert "run.json" in err or argv[0] != "run", (argv, err)  # findings/validity may miss results first
    after = sorted(p.name for p in tmp_path.iterdir() if p.name != ".lock")  # the released, empty lock file
    assert after == before and (not (tmp_path / ".lock").exists() or (tmp_path / ".lock").stat().st_size == 0)
    assert (tmp_path / "run.json").read_text(encoding="utf-8") == content
