"""``filegram workspace build|list|import`` — task input bundles from the command line."""

from __future__ import annotations

import argparse
from pathlib import Path

from filegram_ray.errors import UserError


def _task_arg(task_id: str):
    """The Task model of ``task_id`` from conf/tasks when available, else the bare id (built-in spec)."""
    try:
        from filegram_ray.tasks import load_tasks

        for t in load_tasks():
            if t.task_id == task_id:
                return t
    except (ImportError, FileNotFoundError):
        pass
    return task_id


def _build(args) -> int:
    from filegram_ray.workspace.bundle import build_bundle

    info = build_bundle(_task_arg(args.task), args.seed, Path(args.out), tts=args.tts)
    print(f"{info.task_id}: {info.n_files} files, {info.total_bytes / 1e6:.2f} MB -> {info.out_dir}")
    for kind, n in info.by_kind.items():
        print(f"  {kind:<6} {n:>4}")
    return 0


def _list(args) -> int:
    from filegram_ray.workspace.bundle import load_bundle

    b = load_bundle(args.dir)
    print(f"{b.task_id} seed={b.seed} scenario={b.scenario} files={len(b.files)} facts={len(b.facts)}")
    for f in b.files:
        ann = " ".join(str((f.annotation or {}).get("content", "")).split())  # one line: the description's start
        short = ann if len(ann) <= 60 else ann[:59].rstrip() + "…"
        print(f"  {f.kind:<5} {f.bytes:>9}  {f.path}" + (f"   [{short}]" if ann else ""))
    for e in b.errors:
        print(f"  ERROR {e['path']}: {e['error']}")
    return 0


def vlm_spec(value: str | None) -> dict | None:
    """The VLM backbone of ``--vlm``: a YAML/JSON mapping (``{kind: openai, base_url: ..., model: ...}``), or a
    pipeline config file whose ``evaluate.backbone`` is a language-model spec. ValueError names what is wrong."""
    from filegram_ray.limits import load_yaml, load_yaml_file

    if not value:
        return None
    try:
        is_file = "\n" not in value and Path(value).is_file()
    except OSError:  # a spec longer than a file name may be (ENAMETOOLONG) is text, not a path
        is_file = False
    data = load_yaml_file(value) if is_file else load_yaml(value, "--vlm")
    if isinstance(data, dict) and isinstance(data.get("evaluate"), dict):
        data = data["evaluate"].get("backbone")
    if not isinstance(data, dict):
        raise UserError(f"--vlm {value!r}: expected a backbone mapping such as "
                         "'{kind: openai, base_url: http://127.0.0.1:8000/v1, model: NAME}' or a config file whose "
                         "evaluate.backbone is one")
    from filegram_ray.llm.processors import chat_spec

    chat_spec(data)  # validated now: a typo fails before any file is copied
    return data


#: what to install for a describer that is not installed (pyproject core dependencies)
INSTALL_HINT = {"ocr": "pip install 'filegram-ray[media]'", "asr": "pip install 'filegram-ray[media]'"}
DESCRIBER_NAME = {"ocr": "OCR", "asr": "speech-to-text", "vlm": "VLM"}


def properties_only_reason(rows: list[dict]) -> str:
    """Why media files got no description beyond their properties, from their ``skipped`` [(describer, reason)]
    rows (:attr:`BundleInfo.described`): the describers switched off (naming the flag), not installed (naming what
    to install) or failed, with file counts; ``--vlm`` is suggested only when no VLM was configured."""
    from collections import Counter

    from filegram_ray.workspace.describe import SWITCHED_OFF

    off, missing, failed = Counter(), Counter(), Counter()
    for d in rows:
        for what, why in {(w, y) for w, y in d.get("skipped", [])}:
            if why == SWITCHED_OFF.get(what):
                off[what] += 1
            elif "not installed" in why:
                missing[what] += 1
            else:
                failed[what] += 1
    parts = [f"{DESCRIBER_NAME.get(w, w)} switched off by --no-{w} ({n})" for w, n in sorted(off.items())]
    parts += [f"{DESCRIBER_NAME.get(w, w)} not installed ({n}): {INSTALL_HINT.get(w, 'see the lines above')}"
              for w, n in sorted(missing.items())]
    parts += [f"{DESCRIBER_NAME.get(w, w)} failed ({n}; reasons above)" for w, n in sorted(failed.items())]
    if any(d.get("modality") in ("image", "video") for d in rows) and not any(
            w == "vlm" for d in rows for w, _ in d.get("skipped", [])):
        parts.append("pass --vlm BACKBONE for a VLM description")
    return "; ".join(parts)


def print_import_summary(info, file=None) -> None:
    """The import's summary: files, views, and what each media file became for the agent."""
    import sys

    out = file or sys.stdout
    print(f"imported {info.n_files} files ({info.total_bytes / 1e6:.2f} MB) for {info.task_id} -> {info.out_dir}",
          file=out)
    kinds = ", ".join(f"{k} {n}" for k, n in info.by_kind.items())
    print(f"  kinds: {kinds}", file=out)
    n_media = len(info.described)
    if n_media:
        print(f"  media described for the agent ({n_media}; the text read/grep show is in extracted/<path>.txt):",
              file=out)
        for d in info.described:
            how = ", ".join(d["described_by"])
            miss = "; ".join(f"{w} skipped: {why}" for w, why in d["skipped"])
            print(f"    {d['modality']:<5} {d['path']}: {how}" + (f"  [{miss}]" if miss else ""), file=out)
        only = [d for d in info.described if d["described_by"] == ["properties"]]
        if only:
            print(f"  {len(only)} media file(s) described by their properties only ({properties_only_reason(only)}):"
                  f" {', '.join(d['path'] for d in only)}", file=out)
    for w in info.warnings:
        print(f"  renamed: {w['warning']}", file=out)
    hidden = info.hidden
    if hidden:
        shown = ", ".join(hidden[:5]) + (f" … ({len(hidden) - 5} more)" if len(hidden) > 5 else "")
        print(f"  {len(hidden)} hidden entr{'y' if len(hidden) == 1 else 'ies'} left out, not read: {shown} "
              "(--include-hidden imports them; bundle.json 'hidden_left_out')", file=out)
    kept = set(info.kept_unreadable)
    for e in info.errors:
        how = "unreadable, kept without a text view" if e["path"] in kept else "left out"
        print(f"  {how}: {e['path']}: {e['error']}", file=out)
    if info.errors:
        n_out = len(info.errors) - len(kept)
        print(f"{len(kept)} file(s) kept without a text view (counted above: listings show them, the agent cannot "
              f"read their text), {n_out} {'entry' if n_out == 1 else 'entries'} left out; all in bundle.json "
              "'errors'", file=out)


def _import(args) -> int:
    import sys

    from filegram_ray.workspace.bundle import import_bundle
    from filegram_ray.workspace.describe import DescribeOptions

    opts = DescribeOptions(ocr=not args.no_ocr, asr=not args.no_asr, vlm=vlm_spec(args.vlm),
                           max_audio_s=args.max_audio_s, max_keyframes=args.max_keyframes, threads=args.threads)
    info = import_bundle(Path(args.dir), args.task, Path(args.out), describe=opts,
                         progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True),
                         include_hidden=args.include_hidden)
    print_import_summary(info)
    return 0


def _run_folder(args) -> int:
    import sys

    from filegram_ray.jobargs import config_from_args
    from filegram_ray.workspace.byof import run_folder
    from filegram_ray.workspace.describe import DescribeOptions

    extra = {}
    if args.profiles:
        extra["profiles"] = [p for item in args.profiles for p in item.split(",") if p]
    if args.profiles_dir:
        extra["profiles_dir"] = args.profiles_dir
    cfg = config_from_args(args, extra)
    opts = DescribeOptions(ocr=not args.no_ocr, asr=not args.no_asr, vlm=vlm_spec(args.vlm),
                           max_audio_s=args.max_audio_s, max_keyframes=args.max_keyframes, threads=args.threads)
    stages = [] if args.import_only else (args.stages or None)
    res = run_folder(Path(args.dir), args.task, cfg, describe=opts,
                     progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True),
                     on_import=print_import_summary, include_hidden=args.include_hidden,
                     **({"stages": stages} if stages is not None else {}))
    if res["pipeline"] and "evaluate" in res["pipeline"]:
        print(f"\nReport: {cfg.run().url('results/report.md')}")
    return 0


def add_describe_args(p: argparse.ArgumentParser) -> None:
    """The media-description options of ``workspace import`` (also used by ``filegram byof``)."""
    g = p.add_argument_group("media description (images, audio, video)")
    g.add_argument("--no-ocr", action="store_true", help="do not read text in images and video keyframes")
    g.add_argument("--no-asr", action="store_true", help="do not transcribe speech (audio, video sound tracks)")
    g.add_argument("--vlm", default=None, metavar="SPEC",
                   help="describe images and video keyframes with a vision-language model: a backbone mapping "
                        "('{kind: openai, base_url: URL, model: NAME}' or '{kind: vllm_engine, model_source: DIR}') "
                        "or a config file whose evaluate.backbone is one")
    g.add_argument("--max-audio-s", type=float, default=900.0, help="seconds of sound transcribed per file")
    g.add_argument("--max-keyframes", type=int, default=12, help="video keyframes read by OCR per file")
    g.add_argument("--threads", type=int, default=1, help="CPU threads of the OCR and speech models")
    h = p.add_argument_group("what is imported")
    h.add_argument("--include-hidden", action="store_true",
                   help="import hidden files and folders too (names starting with '.': .env, .git/); default: left "
                        "out and listed, as the watcher does")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("workspace", help="build, list or import task input bundles")
    sub = p.add_subparsers(dest="workspace_cmd", metavar="ACTION")
    b = sub.add_parser("build", help="generate one task's bundle")
    b.add_argument("--task", required=True, help="task id, e.g. T-01")
    b.add_argument("--seed", type=int, default=7)
    b.add_argument("--out", required=True, help="output directory (files/ + bundle.json)")
    b.add_argument("--tts", default="auto", choices=["auto", "tone"], help="speech engine for audio files")
    b.set_defaults(func=_build)
    ls = sub.add_parser("list", help="list a bundle's files and annotations")
    ls.add_argument("dir")
    ls.set_defaults(func=_list)
    im = sub.add_parser("import", help="bring your own workspace folder as a task's bundle")
    im.add_argument("dir", help="source folder")
    im.add_argument("--task", required=True, help="task id the folder serves, e.g. T-07")
    im.add_argument("--out", required=True)
    add_describe_args(im)
    im.set_defaults(func=_import)
    from filegram_ray.jobargs import add_common_options
    from filegram_ray.workspace.byof import BYOF_STAGES

    rn = sub.add_parser("run", help="bring your own folder: import it as a task's workspace of a run, then run "
                                    "generate -> encode -> render -> bench -> evaluate on it",
                        description="Import DIR as TASK's workspace in the run directory (documents extracted, "
                                    "media described), then run the pipeline for that task and the chosen profiles. "
                                    "Rerunning resumes; a changed folder regenerates what was built on the old one.")
    rn.add_argument("dir", help="source folder")
    rn.add_argument("--task", required=True, help="task id the folder serves, e.g. T-07 (its instructions are run)")
    rn.add_argument("--profiles", nargs="+", default=None, metavar="ID",
                    help="profile ids (e.g. p3 p11 or p3,p11); default: the profiles of the config / set")
    rn.add_argument("--profiles-dir", default=None, help="a profile set (from `filegram profiles new`)")
    rn.add_argument("--stages", nargs="+", choices=list(BYOF_STAGES), default=None,
                    help=f"stages to run after the import (default: {' '.join(BYOF_STAGES)})")
    rn.add_argument("--import-only", action="store_true", help="only import into the run directory")
    add_common_options(rn)
    add_describe_args(rn)
    rn.set_defaults(func=_run_folder)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
