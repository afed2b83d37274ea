"""``filegram view RUN [--out DIR] [--serve]``: write the static run viewer (:mod:`filegram_ray.view.build`)."""

from __future__ import annotations

import argparse
import os

HELP = "write a static viewer of a run (results, items with contexts, trajectories, run) → RUN/view/index.html"


def _view(args: argparse.Namespace) -> int:
    from filegram_ray.errors import UserError
    from filegram_ray.view.build import build_view, serve

    index = build_view(args.run_dir, args.out)
    print(f"open {index}")
    if args.serve:
        if not os.path.exists(index):
            raise UserError(f"--serve needs a local site; {index} is on an object store (add --out DIR)")
        serve(os.path.dirname(index), args.port)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("view", help=HELP)
    p.add_argument("run_dir", help="a run directory (local path or fsspec URI such as s3://bucket/run)")
    p.add_argument("--out", help="local folder for the site (default: RUN/view)")
    p.add_argument("--serve", action="store_true", help="then serve the site on http://127.0.0.1:PORT/ (loopback only)")
    p.add_argument("--port", type=int, default=8000, help="port for --serve (default 8000; 0 picks a free one)")
    p.set_defaults(func=_view)
