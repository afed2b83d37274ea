"""``filegram tasks list [--dir DIR]``: print the task set (id, type, modality, dims, ops, inputs, English title)."""

from __future__ import annotations

import argparse


def format_table(tasks) -> str:
    """Plain-text table of tasks, one line each (shape: str ending without newline)."""
    head = f"{'task':<6} {'type':<11} {'modality':<10} {'dims':<8} {'ops':>3} {'inputs':>6}  name"
    lines = [head, "-" * len(head)]
    for t in tasks:
        n_in = "empty" if t.workspace.empty else (str(t.workspace.total_files) if t.workspace.inputs else "-")
        lines.append(f"{t.task_id:<6} {t.type:<11} {t.modality:<10} {','.join(t.dimensions):<8} "
                     f"{t.expected_file_ops:>3} {n_in:>6}  {t.name_en}")
    mm = sum(t.modality == "multimodal" for t in tasks)
    lines.append(f"{len(tasks)} tasks ({mm} multimodal, {len(tasks) - mm} text), "
                 f"{sum(t.workspace.total_files for t in tasks)} planned input files (the task files' "
                 "workspace.total_files; the seed stage adds clutter files where a task asks for them: the built "
                 "count is in RUN/workspaces/index.parquet)")
    return "\n".join(lines)


def _list(args: argparse.Namespace) -> int:
    from filegram_ray.tasks import load_tasks

    print(format_table(load_tasks(args.dir)))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("tasks", help="inspect the task set")
    sub = p.add_subparsers(dest="tasks_command", metavar="ACTION")
    ls = sub.add_parser("list", help="list tasks with type, modality and probed dimensions")
    ls.add_argument("--dir", default=None, help="task directory or file (default conf/tasks; upstream JSON ok)")
    ls.set_defaults(func=_list)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
