"""``filegram render file|run|recover`` — the render stage and its renderers from the command line.

``render file`` renders every derivative it can: a format that does not fit is reported as skipped, one that fails
is reported with its traceback, and the others are still written (exit code 1 when any failed or none was written).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

from filegram_ray.errors import UserError


def _file(args) -> int:
    from rendering.policy import choose_formats
    from rendering.renderers import FORMATS, NotApplicable, render, text_notes
    from rendering.sections import SectionParams, load_document
    from rendering.stage import derivative_path

    src = Path(args.output)
    doc = load_document(src.read_bytes(), str(src), SectionParams())
    out = Path(args.out)
    if args.formats == ["policy"]:
        picks = choose_formats(doc.sections, seed=args.seed, trajectory_id="cli", path=src.name)
    else:
        fmts = list(FORMATS) if args.formats == ["all"] else args.formats
        bad = sorted(set(fmts) - set(FORMATS))
        if bad:
            raise UserError(f"--formats: unknown {bad}; choose from {', '.join(FORMATS)}, all or policy")
        picks = [(s.index, f) for s in doc.sections for f in fmts]
    print(f"{src}: {len(doc.sections)} sections ({doc.language}), {len(picks)} derivatives")
    n_ok = n_skipped = 0
    failed: list[str] = []
    for idx, fmt in picks:  # one derivative that fails never stops the others (BR-15, BR-19)
        rel = derivative_path("p", "t", src.name, idx, fmt).split("/", 3)[-1]
        try:
            meta = render(fmt, doc.sections[idx], out / rel)
        except NotApplicable as exc:
            n_skipped += 1
            print(f"  s{idx:02d} {fmt:<9} skipped: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - reported with its traceback, then the next derivative
            failed.append(f"s{idx:02d} {fmt}")
            print(f"  s{idx:02d} {fmt:<9} FAILED: {type(exc).__name__}: {exc}")
            traceback.print_exc(file=sys.stderr)
            continue
        n_ok += 1
        notes = text_notes(meta)
        print(f"  s{idx:02d} {fmt:<9} {meta['bytes']:>8} B  {meta['path']}" + (f"  ({notes})" if notes else ""))
    print(f"{n_ok} written, {n_skipped} skipped (format does not fit), {len(failed)} failed"
          + (f": {', '.join(failed)}" if failed else ""))
    return 0 if n_ok and not failed else 1


def _recover(args) -> int:
    from rendering.recover import recover_text

    text = recover_text(args.path)
    print(json.dumps({"path": args.path, "text": text}, ensure_ascii=False) if args.json else text)
    return 0


def register(subparsers) -> None:
    """Add ``filegram render`` with subcommands ``file``, ``run`` and ``recover``."""
    p = subparsers.add_parser("render", help="render agent outputs into multimodal derivatives")
    sub = p.add_subparsers(dest="render_command", metavar="SUBCOMMAND")

    f = sub.add_parser("file", help="render one Markdown/text file into derivatives")
    f.add_argument("output", help="a Markdown or text file")
    f.add_argument("--out", required=True, help="output folder")
    f.add_argument("--formats", nargs="+", default=["policy"],
                   help="formats (pdf docx md pptx xlsx png_page png_chart wav), 'all', or 'policy' (default: the "
                        "seeded format-choice policy)")
    f.add_argument("--seed", type=int, default=7, help="policy seed")
    f.set_defaults(func=_file)

    from filegram_ray.stages.cli import add_stage_door

    add_stage_door(sub, "run", "render", help="run the render stage on a run directory (like jobs/render.py)")

    c = sub.add_parser("recover", help="print the text a derivative carries (pdf docx pptx xlsx png wav md)")
    c.add_argument("path")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=_recover)

    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
