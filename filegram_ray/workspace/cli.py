"""``filegram workspace build|list|import`` — task input bundles from the command line."""

from __future__ import annotations

import argparse
from pathlib import Path


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
        ann = (f.annotation or {}).get("content", "")
        print(f"  {f.kind:<5} {f.bytes:>9}  {f.path}" + (f"   [{ann[:60]}]" if ann else ""))
    for e in b.errors:
        print(f"  ERROR {e['path']}: {e['error']}")
    return 0


def _import(args) -> int:
    from filegram_ray.workspace.bundle import import_bundle

    info = import_bundle(Path(args.dir), args.task, Path(args.out))
    print(f"imported {info.n_files} files ({info.total_bytes / 1e6:.2f} MB) for {info.task_id} -> {info.out_dir}")
    for w in info.warnings:
        print(f"  renamed: {w['warning']}")
    for e in info.errors:
        print(f"  unreadable: {e['path']}: {e['error']}")
    if info.errors:
        print(f"{len(info.errors)} files unreadable or left out (also in bundle.json 'errors'); the rest is imported")
    return 0


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
    im.set_defaults(func=_import)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
