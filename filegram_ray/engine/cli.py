"""``filegram engine ...`` subcommands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


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


def register(subparsers) -> None:
    p = subparsers.add_parser("engine", help="trajectory engine utilities")
    sub = p.add_subparsers(dest="engine_command", metavar="ENGINE_COMMAND")
    f = sub.add_parser("filter", help="apply the post-execution filter (ref §4) to an events_raw.json")
    f.add_argument("src", metavar="SRC_EVENTS_JSON", help="raw events file (validated against the schema)")
    f.add_argument("-o", "--output", help="write here instead of stdout")
    f.set_defaults(func=_filter)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
