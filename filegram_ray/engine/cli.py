"""``filegram engine ...`` subcommands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from filegram_ray.errors import UserError


def _filter(args: argparse.Namespace) -> int:
    from filegram_ray.engine.filter import filter_events
    from filegram_ray.schema.events import dumps_events, event_to_dict, read_events_json

    src = Path(args.src)
    if not src.is_file():
        raise FileNotFoundError(f"{src}: no such events file")
    events = [event_to_dict(e) for e in read_events_json(src)]
    kept = filter_events(events)
    data = dumps_events(kept)
    if args.output:
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(out)
        print(f"{len(kept)} of {len(events)} events kept -> {out}", file=sys.stderr)
    else:
        sys.stdout.write(data.decode("utf-8") + "\n")
    return 0


def _prompt(args: argparse.Namespace) -> int:
    from filegram_ray.config import match_ids
    from filegram_ray.engine.agents.prompts import leaked_terms, system_prompt, task_prompt
    from filegram_ray.profiles import load_profiles
    from filegram_ray.tasks import load_tasks

    profiles = {p.profile_id: p for p in load_profiles(args.profiles_dir)}
    tasks = {t.task_id: t for t in load_tasks(args.tasks_dir)}
    profile = profiles[match_ids([args.profile], list(profiles), "profile", label="argument PROFILE")[0]]
    task = tasks[match_ids([args.task], list(tasks), "task", label="argument TASK")[0]]
    pert = None
    if args.perturb:
        dim, _, to = args.perturb.partition(":")
        if dim not in "ABCDEF" or len(dim) != 1 or to not in ("L", "M", "R"):
            raise UserError(f"--perturb {args.perturb!r}: expected DIMENSION:TIER, e.g. C:M")
        pert = {"dimension": dim, "from": profile.tiers[dim], "to": to}
    for title, text in (("system", system_prompt(profile, pert)), ("user", task_prompt(task, profile, pert))):
        print(f"===== {title} =====\n{text}\n")
        if leaked_terms(text):  # never expected: the tests check every profile x task
            print(f"WARNING: ground-truth terms in the {title} prompt: {leaked_terms(text)}", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("engine", help="trajectory engine utilities")
    sub = p.add_subparsers(dest="engine_command", metavar="ENGINE_COMMAND")
    f = sub.add_parser("filter", help="apply the post-execution filter (ref §4) to an events_raw.json")
    f.add_argument("src", metavar="SRC_EVENTS_JSON", help="raw events file (validated against the schema)")
    f.add_argument("-o", "--output", help="write here instead of stdout")
    f.set_defaults(func=_filter)
    q = sub.add_parser("prompt", help="print the LLM agent's system and task prompts for a profile and a task",
                       description="Print exactly what the LLM agent (generate.agent=llm) sends first: the persona "
                       "system prompt and the task prompt, in the profile's language.")
    q.add_argument("profile", help="profile id (p1 or p1_methodical)")
    q.add_argument("task", help="task id (T-01 …)")
    q.add_argument("--perturb", metavar="DIM:TIER", help="shift one dimension to a tier, e.g. C:M (reference §5.7)")
    q.add_argument("--profiles-dir", default=None, help="a profile set directory (default conf/profiles)")
    q.add_argument("--tasks-dir", default=None, help="a task set directory (default conf/tasks)")
    q.set_defaults(func=_prompt)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
