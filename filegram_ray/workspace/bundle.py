"""Build, load and import task workspaces ("bundles").

On disk a bundle is ``<dir>/files/**`` (the visible workspace the agent sees) and ``<dir>/bundle.json`` (never
visible to the agent)::

    {"task_id", "seed", "scenario", "language", "source": "generated" | "imported",
     "files": [{"path", "kind", "bytes", "sha256", "annotation": {"modality", "content"} | null}],
     "facts": [...planted facts, e.g. T-11 inconsistencies...], "errors": [{"path", "error"}],
     "tts_engine": "piper:joe-us" | "synthetic-tone" | null}

Media files carry an annotation (caption, transcript or scene list) — the content the engine's ``read`` tool
returns for them (ref §1.1). Imported bundles describe their media on import (:mod:`filegram_ray.workspace.describe`:
properties always, OCR, speech-to-text, a VLM when configured; the annotation adds ``source: "import"``,
``described_by`` and ``properties``) and add ``text_chars`` per file; every file's view — a document's extracted
text, a media file's annotation — is written to ``<dir>/extracted/<path>.txt``, the same text the engine's ``read``
and ``grep`` show. A mail's ``Date`` as written stays in the view; its normalised form goes beside it, in the row's
``date`` (:func:`~filegram_ray.workspace.extract.normalise_mail_date`).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from filegram_ray.errors import UserError
from filegram_ray.limits import load_json
from filegram_ray.names import escape_name, free_name, name_problem, printable
from filegram_ray.workspace import writers as W
from filegram_ray.workspace.extract import (
    ExtractionError,
    eml_headers,
    extract_text,
    is_media,
    kind_of,
    media_class,
    normalise_mail_date,
)
from filegram_ray.workspace.scenarios import FileSpec, build_plan
from filegram_ray.workspace.specs import default_workspace
from filegram_ray.workspace.world import World, sub_seed

if TYPE_CHECKING:
    from filegram_ray.workspace.describe import DescribeOptions

__all__ = ["Bundle", "BundleFile", "BundleInfo", "build_bundle", "bundle_content_hash", "import_bundle", "load_bundle",
           "task_workspace"]


@dataclass(frozen=True)
class BundleFile:
    path: str
    kind: str
    bytes: int
    sha256: str
    annotation: dict[str, str] | None = None


@dataclass
class BundleInfo:
    """What :func:`build_bundle` / :func:`import_bundle` wrote. ``by_kind``: kind -> count."""

    task_id: str
    seed: int | None
    out_dir: Path
    n_files: int
    total_bytes: int
    by_kind: dict[str, int]
    errors: list[dict[str, str]] = field(default_factory=list)
    #: import only: files imported under another name (``{"path", "warning"}``)
    warnings: list[dict[str, str]] = field(default_factory=list)
    #: import only: one row per media file, ``{"path", "modality", "described_by": [...], "skipped": [[what, why]]}``
    described: list[dict[str, Any]] = field(default_factory=list)
    #: :func:`bundle_content_hash` of the written bundle.json
    content_hash: str = ""
    #: import only: hidden entries (a name starting with ".": ``.env``, ``.git/``) left out; folders end in "/"
    hidden: list[str] = field(default_factory=list)
    #: import only: paths of ``errors`` that were imported all the same (a file without a text view); the other
    #: errors' entries were left out (links, special files, copy failures)
    kept_unreadable: list[str] = field(default_factory=list)


@dataclass
class Bundle:
    dir: Path
    task_id: str
    seed: int | None
    scenario: str
    files: list[BundleFile]
    facts: list[dict[str, Any]]
    errors: list[dict[str, str]]
    meta: dict[str, Any]

    @property
    def files_dir(self) -> Path:
        return self.dir / "files"

    def annotations(self) -> dict[str, dict[str, str]]:
        """{relpath: {"modality", "content"}} for every file with an annotation (media files)."""
        return {f.path: dict(f.annotation) for f in self.files if f.annotation}


def task_workspace(task: Any) -> tuple[str, dict[str, Any]]:
    """(task_id, workspace dict) from a Task model, a dict, or a bare task id (built-in spec, ref §6.3).

    The Task model's ``workspace`` (WorkspaceSpec: scenario, empty, inputs, subdirs, plants, language) wins; fields
    it lacks are taken from the built-in spec of that task id.
    """
    if isinstance(task, str):
        return task, default_workspace(task)
    if hasattr(task, "model_dump"):
        task = task.model_dump(mode="python")
    if not isinstance(task, dict) or "task_id" not in task:
        raise ValueError(f"task must be a Task, a dict with task_id, or a task id string; got {type(task).__name__}")
    tid = str(task["task_id"])
    ws = task.get("workspace")
    try:
        base = default_workspace(tid)
    except KeyError:
        base = {"scenario": "business_docs", "empty": False, "inputs": {}, "subdirs": [], "plants": [],
                "language": "en"}
    if isinstance(ws, dict):
        merged = dict(base)
        merged.update({k: v for k, v in ws.items() if v is not None})
        if not ws.get("plants") and base.get("plants"):
            merged["plants"] = base["plants"]
        return tid, merged
    return tid, base


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def bundle_content_hash(meta: dict[str, Any]) -> str:
    """SHA-256 (hex) of what a trajectory made on a bundle depends on: every file's path, sha256 and annotation,
    and the planted facts (case R2-generate-stale-trajectory-after-reimport: a re-imported folder changes it)."""
    files = sorted(([f.get("path"), f.get("sha256"), f.get("annotation")] for f in meta.get("files", [])),
                   key=lambda r: str(r[0]))
    blob = json.dumps({"files": files, "facts": meta.get("facts", [])}, sort_keys=True, ensure_ascii=False,
                      default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


#: planned file kinds whose writers need the ``video`` extra (workspace/writers.py: charts, photos and GIF frames
#: drawn with OpenCV; MP3 and MP4 encoded by the imageio-ffmpeg binary)
MEDIA_KINDS = frozenset({"png", "jpg", "gif", "mp3", "mp4"})


def _render(spec: FileSpec, path: Path, world: World, seed: int, files_dir: Path, state: dict) -> dict | None:
    """Write one planned file; returns its annotation (media) or None."""
    kind, p = spec.kind, spec.payload
    if kind in MEDIA_KINDS:  # drawn with OpenCV, encoded by imageio-ffmpeg: the `video` extra
        from filegram_ray.extras import require_extras

        require_extras(("video",), f"{spec.relpath} ({kind}) of task {world.task_id}")
    author = world.owner_en
    frng = np.random.default_rng(sub_seed(world.task_id, seed, "render", spec.relpath))
    if isinstance(p, dict) and "copy_of" in p:
        shutil.copyfile(files_dir / p["copy_of"], path)
        return state["annotations"].get(p["copy_of"])
    if isinstance(p, dict) and "text" in p:
        path.write_text(p["text"], encoding="utf-8")
        return None
    if kind == "md":
        W.write_md(p, path)
    elif kind == "txt":
        W.write_txt(p, path)
    elif kind == "pdf":
        W.write_pdf(p, path, author)
    elif kind == "docx":
        W.write_docx(p, path, author)
    elif kind == "pptx":
        W.write_pptx(p, path, author)
    elif kind == "eml":
        W.write_eml(p, path, message_id=hashlib.sha256(f"{world.task_id}|{seed}|{spec.relpath}".encode())
                    .hexdigest()[:24])
    elif kind == "ics":
        W.write_ics(p, path, uid_prefix=f"{world.task_id}-{seed}-{path.stem}")
    elif kind == "csv":
        W.write_csv(p, path)
    elif kind == "xlsx":
        W.write_xlsx(p, path, author, title=path.stem)
    elif kind == "json":
        W.write_json(p, path)
    elif kind in ("png", "jpg"):
        if "chart" in p:
            title, labels, series, style = p["chart"]
            return {"modality": "image", "content": W.write_chart_png(path, title, labels, series, style)}
        return {"modality": "image", "content": W.write_photo(path, p["photo"], frng, p.get("label", ""))}
    elif kind == "gif":
        return {"modality": "image", "content": W.write_gif(path, p["scene"], frng, label=p.get("label", ""))}
    elif kind in ("mp3", "wav"):
        if "music" in p:
            data, content = W.music_wav_bytes(int(frng.integers(2**31))), f"Music: {p['music']} (no speech)."
        else:
            data, engine = W.speech_wav_bytes(p["speech"], int(frng.integers(2**31)),
                                              use_piper=state["tts"] != "tone", cache_dir=state.get("speech_cache"))
            state["tts_engine"] = engine
            content = f"Transcript: {p['speech']}"
        if kind == "wav":
            path.write_bytes(data)
        else:
            W.wav_to_mp3(data, path)
        return {"modality": "audio", "content": content}
    elif kind == "mp4":
        return {"modality": "video", "content": W.write_video(path, p["scenes"], frng)}
    else:
        raise ValueError(f"{spec.relpath}: no writer for kind {kind!r}")
    return None


def build_bundle(task: Any, seed: int, out_dir: Path | str, *, tts: str = "auto", speech_cache: str | None = None
                 ) -> BundleInfo:
    """Generate the workspace bundle of ``task`` for ``seed`` into ``out_dir`` (files/ + bundle.json).

    Args:
        task: a Task model, a dict with ``task_id`` (and optional ``workspace``), or a task id ("T-07").
        seed: master seed; the bundle is a pure function of (task_id, seed).
        out_dir: target directory; an existing ``files/`` there is replaced.
        tts: "auto" (piper voice when it loads, else the synthetic signal) or "tone" (always the synthetic
            signal; fast, used by quick tests).
        speech_cache: folder of spoken sentences shared by a run's processes
            (:func:`filegram_ray.speech.speech_cache_dir`); the audio is the same with or without it.
    Returns: :class:`BundleInfo`.
    Raises: ValueError for an unknown task / unsupported kind (message names the task and file).
    """
    task_id, ws = task_workspace(task)
    out_dir = Path(out_dir)
    files_dir = out_dir / "files"
    if files_dir.exists():
        shutil.rmtree(files_dir)
    files_dir.mkdir(parents=True)
    world = World(task_id, seed, ws.get("language", "en"))
    plan, facts = build_plan(task_id, world, ws, seed)
    for d in ws.get("subdirs") or []:
        if ws.get("empty"):
            break
        (files_dir / d).mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {"annotations": {}, "tts_engine": None, "tts": tts, "speech_cache": speech_cache}
    random.seed(0)  # libraries that use the global RNG (none known) stay reproducible
    for spec in plan:
        path = files_dir / spec.relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            ann = _render(spec, path, world, seed, files_dir, state)
        except Exception as exc:
            raise ValueError(f"{task_id}: cannot write {spec.relpath} ({spec.kind}): {exc}") from exc
        if ann:
            state["annotations"][spec.relpath] = ann
    return _finish(out_dir, task_id, seed, ws, facts, [], source="generated", tts=state["tts_engine"],
                   annotations=state["annotations"])


def _finish(out_dir: Path, task_id: str, seed: int | None, ws: dict, facts: list, errors: list, source: str,
            tts: str | None, annotations: dict, extra: dict[str, dict] | None = None,
            warnings: list[dict[str, str]] | None = None, hidden: list[str] | None = None) -> BundleInfo:
    files_dir = out_dir / "files"
    rows = []
    for path in sorted(p for p in files_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(files_dir).as_posix()
        row = {"path": rel, "kind": kind_of(path), "bytes": path.stat().st_size, "sha256": _sha256(path),
               "annotation": annotations.get(rel)}
        row.update((extra or {}).get(rel, {}))
        rows.append(row)
    meta = {"task_id": task_id, "seed": seed, "scenario": ws.get("scenario", ""), "language": ws.get("language", "en"),
            "source": source, "files": rows, "facts": facts, "errors": errors, "tts_engine": tts}
    if warnings is not None:
        meta["warnings"] = warnings
    if hidden:  # only when something was left out: earlier imports keep their bytes
        meta["hidden_left_out"] = hidden
    data = (json.dumps(meta, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")  # before any write
    tmp = out_dir / "bundle.json.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, out_dir / "bundle.json")
    by_kind: dict[str, int] = {}
    for r in rows:
        by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + 1
    return BundleInfo(task_id, seed, out_dir, len(rows), sum(r["bytes"] for r in rows), dict(sorted(by_kind.items())),
                      errors, list(warnings or []), content_hash=bundle_content_hash(meta), hidden=list(hidden or []),
                      kept_unreadable=[e["path"] for e in errors if e["path"] in {r["path"] for r in rows}])


def load_bundle(dir: Path | str) -> Bundle:
    """Read ``<dir>/bundle.json``.

    Raises: FileNotFoundError when it is missing; ValueError naming the file and field when malformed.
    """
    d = Path(dir)
    meta_path = d / "bundle.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"{meta_path}: bundle.json not found")
    try:
        meta = load_json(meta_path.read_bytes(), str(meta_path))
        files = [BundleFile(f["path"], f["kind"], int(f["bytes"]), f["sha256"], f.get("annotation"))
                 for f in meta["files"]]
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{meta_path}: malformed bundle metadata ({type(exc).__name__}: {exc})") from exc
    return Bundle(d, meta.get("task_id", ""), meta.get("seed"), meta.get("scenario", ""), files,
                  meta.get("facts", []), meta.get("errors", []), meta)


#: most seconds one media file may take to decode its first :data:`MEDIA_PROBE_SECONDS` (ours)
MEDIA_PROBE_TIMEOUT_S = 60
#: seconds of an audio / video file decoded to check it is not corrupt (ours: the header, the codec set-up and
#: the first frames are where a truncated or mislabelled file fails)
MEDIA_PROBE_SECONDS = 10


#: ``name`` with every byte that is not valid UTF-8 (os.fsdecode turns such bytes into lone surrogates, which no
#: UTF-8 file can hold) and every control, line-separator or bidi character written as ``%XX``: the one names rule
#: of :mod:`filegram_ray.names`, shared with the engine (cases BR-27, REL2-IMPORT-control-char-names-dropped-by-engine)
_safe_component = escape_name


def _safe_path(raw: str) -> str:
    """``raw`` (a ``/``-separated path) with each component escaped by :data:`_safe_component`."""
    return "/".join(_safe_component(c) for c in raw.split("/"))
#: a path for messages: valid UTF-8 with undecodable bytes shown as ``\xNN``
_printable = printable


def _verify_media(path: Path, kind: str) -> str | None:
    """Why the media file ``path`` does not decode, or None when it does.

    Images: Pillow ``verify`` (also refuses decompression bombs). Audio and video: ffmpeg (the imageio-ffmpeg
    binary) decodes the first :data:`MEDIA_PROBE_SECONDS` with ``-xerror``, within :data:`MEDIA_PROBE_TIMEOUT_S`.
    """
    cls = media_class(kind)
    if cls == "image":
        from PIL import Image

        try:
            with Image.open(path) as im:
                im.verify()
        except Exception as exc:  # noqa: BLE001 - any decoder failure means "unreadable"
            return f"unreadable image: {exc}".replace(str(path), path.name)
        return None
    import subprocess

    import imageio_ffmpeg

    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-nostdin", "-v", "error", "-xerror", "-i", str(path),
           "-t", str(MEDIA_PROBE_SECONDS), "-f", "null", "-"]
    try:
        res = subprocess.run(cmd, capture_output=True, timeout=MEDIA_PROBE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return f"unreadable {cls}: not decoded within {MEDIA_PROBE_TIMEOUT_S} s"
    if res.returncode != 0:
        lines = [x for x in res.stderr.decode("utf-8", "replace").splitlines() if x.strip()]
        why = lines[0] if lines else f"ffmpeg exit code {res.returncode}"
        why = why.split("] ", 1)[-1].replace(str(path), path.name)
        return f"unreadable {cls}: {why}"
    return None


def import_bundle(src_dir: Path | str, task_id: str, out_dir: Path | str, *,
                  describe: DescribeOptions | dict | None = None, progress: Callable[[str], None] | None = None,
                  include_hidden: bool = False) -> BundleInfo:
    """Bring your own workspace: copy ``src_dir`` into ``out_dir/files``, hash it, extract its text and describe
    its media.

    Every media file that decodes gets an annotation (:mod:`filegram_ray.workspace.describe`: properties always;
    OCR, speech-to-text and a VLM as ``describe`` allows and the packages are installed); what ran and what was
    skipped is in ``BundleInfo.described``. ``describe``: :class:`DescribeOptions` (or its dict); ``None`` = the
    defaults (OCR and speech on, no VLM). ``progress``: called with one line per media file described.
    One bad file never aborts the import: a file that
    cannot be read (corrupt or oversized container, a zip bomb, an image / audio / video file that does not decode,
    a link, a special file, an unreadable folder) is listed in ``errors`` [{"path", "error"}] and the rest is
    imported; the extracted text of each readable document goes to ``out_dir/extracted/<path>.txt``. A name that
    is not valid UTF-8, or that holds a control, line-separator or bidi character (the names rule of
    :mod:`filegram_ray.names`, the engine's), is imported under a safe name (each such byte or character written
    ``%XX``; ``renamed_from`` in its row, one entry in ``warnings``), so everything written is UTF-8 and every
    imported file reaches the sandbox (cases BR-27, REL-import-invalid-utf8-filename-aborts,
    REL2-IMPORT-control-char-names-dropped-by-engine).
    Hidden entries (a file or folder whose name starts with ``.``: ``.env``, ``.git/``, ``.DS_Store``) are left out
    unless ``include_hidden``, as the watcher leaves them out (docs/watch.md); they are listed in
    ``BundleInfo.hidden`` and in bundle.json ``hidden_left_out``, never copied or read.
    Raises: FileNotFoundError when ``src_dir`` is not a directory.
    """
    import stat as _stat

    from filegram_ray.workspace.describe import (
        DescribeOptions,
        MediaDescribeError,
        MediaDescriber,
        describe_with_vlm,
    )

    opts = describe if isinstance(describe, DescribeOptions) else DescribeOptions.model_validate(describe or {})
    describer = MediaDescriber(opts)
    descs: dict[str, Any] = {}
    src = Path(src_dir)
    if not src.is_dir():
        raise FileNotFoundError(f"{src}: import source is not a directory")
    out_dir = Path(out_dir)
    files_dir, ext_dir = out_dir / "files", out_dir / "extracted"
    for d in (files_dir, ext_dir):
        if d.exists():
            shutil.rmtree(d)
    files_dir.mkdir(parents=True)
    errors: list[dict[str, str]] = []
    warnings: list[dict[str, str]] = []
    extra: dict[str, dict] = {}

    def walk_error(exc: OSError) -> None:
        rel = Path(exc.filename).relative_to(src).as_posix() if exc.filename else "."
        errors.append({"path": _safe_component(rel), "error": f"cannot read folder: {exc.strerror or exc}"})

    entries: list[str] = []
    hidden: list[str] = []
    for root, dirs, names in os.walk(src, onerror=walk_error, followlinks=False):
        base = Path(root).relative_to(src)
        for d in list(dirs):
            if not include_hidden and d.startswith("."):  # never descended into, never read
                hidden.append(_safe_path((base / d).as_posix()) + "/")
                dirs.remove(d)
            elif os.path.islink(os.path.join(root, d)):  # never follow links (module docstring of import)
                entries.append((base / d).as_posix())
                dirs.remove(d)
        for n in names:
            if not include_hidden and n.startswith("."):
                hidden.append(_safe_path((base / n).as_posix()))
            else:
                entries.append((base / n).as_posix())
    for raw in sorted(entries):
        rel = _safe_path(raw)
        try:
            if rel != raw:  # a taken %XX name gets ~2, ~3 … before its extension (filegram_ray.names)
                head, _, base = rel.rpartition("/")
                rel = (f"{head}/" if head else "") + free_name(
                    base, lambda n, h=head: (f"{h}/{n}" if h else n) in extra or (files_dir / h / n).exists())
                why = next(p for p in map(name_problem, raw.split("/")) if p)
                warnings.append({"path": rel, "warning": f"file name {why} ({_printable(raw)}): "
                                                         f"imported as {rel!r}"})
            path = src / raw
            st = os.lstat(path)
            # Never follow links: a link (or a file reached through a linked folder) could pull in anything on the
            # host, e.g. /etc/passwd. Such entries are reported and left out; so are FIFOs, sockets and devices
            # (copying a FIFO would block forever).
            if _stat.S_ISLNK(st.st_mode):
                errors.append({"path": rel, "error": "symbolic link: not imported"})
                continue
            if not _stat.S_ISREG(st.st_mode):
                errors.append({"path": rel, "error": "not a regular file: not imported"})
                continue
            dest = files_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.copyfile(path, dest)
            except OSError as exc:
                errors.append({"path": rel, "error": f"cannot copy: {exc.strerror or exc}"})
                continue
            if rel != raw:
                extra[rel] = {"renamed_from": _printable(raw)}
            kind = kind_of(dest)
            if is_media(kind):
                extra[rel] = {**extra.get(rel, {}), "text_chars": None, "modality": media_class(kind)}
                why = _verify_media(dest, kind)  # a media file that does not decode is reported like a document
                if why:
                    errors.append({"path": rel, "error": why})
                    continue
                if progress:
                    progress(f"describing {rel} ({media_class(kind)})")
                try:
                    descs[rel] = describer.describe(dest, kind)
                except MediaDescribeError as exc:
                    errors.append({"path": rel, "error": str(exc).replace(dest.name, rel, 1)})
                continue
            try:
                text = extract_text(dest)
            except ExtractionError as exc:
                errors.append({"path": rel, "error": exc.reason.replace(str(dest), rel)})
                extra[rel] = {**extra.get(rel, {}), "text_chars": None}
                continue
            view = _write_view(ext_dir, rel, text)
            extra[rel] = {**extra.get(rel, {}), "text_chars": len(text), **_view_field(rel, view)}
            if kind == "eml":  # the normalised date beside the view, never in it (R2-eml-date-year-0001-rewritten)
                date = eml_headers(dest.read_bytes()).get("Date")
                if date is not None:
                    extra[rel]["date"] = normalise_mail_date(date)
        except Exception as exc:  # noqa: BLE001 - one bad file never aborts the import; it is named in errors
            errors.append({"path": rel, "error": f"{type(exc).__name__}: {exc}"})
    if opts.vlm and descs:
        if progress:
            progress(f"describing {sum(d.modality != 'audio' for d in descs.values())} images / videos with the VLM")
        describe_with_vlm(descs, opts.vlm)
    annotations: dict[str, dict] = {}
    described: list[dict[str, Any]] = []
    for rel, d in sorted(descs.items()):
        annotations[rel] = d.annotation()
        text = annotations[rel]["content"]
        view = _write_view(ext_dir, rel, text)
        extra[rel] = {**extra.get(rel, {}), "text_chars": len(text), **_view_field(rel, view)}
        if d.skipped:
            extra[rel]["description_skipped"] = [list(x) for x in d.skipped]
        described.append({"path": rel, "modality": d.modality, "described_by": list(d.methods),
                          "skipped": [list(x) for x in d.skipped]})
    try:
        ws = default_workspace(task_id)
    except KeyError:
        ws = {"scenario": "imported"}
    ws = {**ws, "scenario": f"imported:{_safe_component(src.name)}"}
    info = _finish(out_dir, task_id, None, ws, [], errors, source="imported", tts=None, annotations=annotations,
                   extra=extra, warnings=warnings, hidden=sorted(hidden))
    info.described = described
    return info


#: longest file name (bytes) of the view folder's file system (Linux NAME_MAX; asked of the folder when it can be)
_NAME_MAX = 255


def view_name(name: str, name_max: int = _NAME_MAX) -> str:
    """The file name of the text view of a file named ``name``: ``<name>.txt``, or, when that is longer than
    ``name_max`` bytes (a legal 255-byte name plus ``.txt``: ENAMETOOLONG), the longest UTF-8 prefix of ``name``
    that fits with ``~<8 hex of the name's sha256>.txt`` — distinct names keep distinct views."""
    full = name + ".txt"
    if len(full.encode("utf-8", "surrogateescape")) <= name_max:
        return full
    tag = "~" + hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:8] + ".txt"
    room = name_max - len(tag)
    head = name.encode("utf-8", "surrogateescape")[:room].decode("utf-8", "ignore")
    return head + tag


def _write_view(ext_dir: Path, rel: str, text: str) -> str:
    """Write the text view of ``rel`` under ``ext_dir`` (temp name, then rename); returns its path relative to
    ``ext_dir`` (``<rel>.txt``, or the shortened name of :func:`view_name` for a name near the length limit)."""
    head, _, base = rel.rpartition("/")
    folder = ext_dir / head if head else ext_dir
    folder.mkdir(parents=True, exist_ok=True)
    try:
        name_max = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = _NAME_MAX
    out = folder / view_name(base, name_max)
    tmp = folder / f".view-{os.getpid()}.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)
    return out.relative_to(ext_dir).as_posix()


def _view_field(rel: str, view: str) -> dict[str, str]:
    """``{"view": "extracted/<view>"}`` in a file's bundle.json row when its view is not at ``extracted/<rel>.txt``."""
    return {} if view == rel + ".txt" else {"view": f"extracted/{view}"}


def check_bundle_meta(data: bytes, source: str) -> dict[str, Any]:
    """The parsed ``bundle.json`` of a workspace, checked for what the engine reads (``files``: a list of objects
    with a string ``path``; ``annotation`` an object or null). Raises ValueError naming ``source`` and the field
    (a unit with a malformed bundle becomes an error row)."""
    from filegram_ray.limits import load_json

    meta = load_json(data, source)
    if not isinstance(meta, dict):
        raise UserError(f"{source}: expected a JSON object, got {type(meta).__name__}")  # noqa: TRY004
    files = meta.get("files", [])
    if not isinstance(files, list):
        raise UserError(f"{source}: field 'files' must be a list, got {type(files).__name__}")  # noqa: TRY004
    for i, f in enumerate(files):
        if not isinstance(f, dict) or not isinstance(f.get("path"), str):
            raise UserError(f"{source}: field 'files[{i}].path' must be a string")
        if f.get("annotation") is not None and not isinstance(f["annotation"], dict):
            raise UserError(f"{source}: field 'files[{i}].annotation' must be an object or null")
    return meta
