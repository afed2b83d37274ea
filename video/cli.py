"""``filegram video record|caption|events`` — one file at a time, for users bringing their own screen recordings.

* ``filegram video record TRAJ --out X.mp4`` — a trajectory folder → guidance video (+ ``X.timeline.json``).
* ``filegram video caption X.mp4 [--out C.parquet]`` — keyframes → OCR captions (or ``--captioner vlm``).
* ``filegram video events X.mp4 [--out DIR] [--true events.json]`` — captions → ``events.json`` (+ media); with
  ``--true``, precision and recall per event type against those events.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from filegram_ray.errors import UserError


def _record_options(args):
    from video.record import RecordOptions

    kw = {k: getattr(args, k) for k in ("width", "height", "fps", "speed") if getattr(args, k) is not None}
    return RecordOptions(**kw)


def _record(args) -> int:
    from video.record import record_to_file

    info = record_to_file(args.trajectory, args.out, _record_options(args), workspace=args.workspace)
    print(json.dumps(info, ensure_ascii=False, indent=1))
    return 0


def _vlm(args):
    if args.captioner != "vlm":
        return None
    from video.vlm import VlmConfig

    if args.vlm_model_source:
        return VlmConfig(kind="vllm", model_source=args.vlm_model_source)
    if not args.vlm_url:
        raise UserError("--captioner vlm needs --vlm-url (an OpenAI-compatible endpoint with image input) or "
                         "--vlm-model-source (a local VLM directory for vLLM on this machine's GPU)")
    return VlmConfig(kind="http", url=args.vlm_url, model=args.vlm_model or "vlm", api_key_env=args.vlm_api_key_env)


def _captions(args) -> list[dict]:
    from video.caption_stage import caption_file

    if not Path(args.video).exists():
        raise FileNotFoundError(f"{args.video}: no such file")
    return caption_file(args.video, args.captioner, vlm=_vlm(args))


def _caption(args) -> int:
    rows = _captions(args)
    if args.out:
        from filegram_ray.storage import atomic_write_local
        from video.tables import CAPTION_COLUMNS, table

        out = Path(args.out)
        if out.suffix == ".json":
            atomic_write_local(out, json.dumps(rows, ensure_ascii=False, indent=1).encode("utf-8"))
        else:
            import io

            buf = io.BytesIO()
            table(rows, CAPTION_COLUMNS).write_parquet(buf)
            atomic_write_local(out, buf.getvalue())
        print(f"{args.video}: {len(rows)} keyframes captioned -> {out}", file=sys.stderr)
    else:
        for r in rows:
            print(f"[{r['t_s']:8.2f} s] keyframe {r['keyframe']}")
            for line in (r["text"] or "").splitlines():
                print(f"    {line}")
            if r.get("operation"):
                print(f"    operation: {r['operation']}")
    return 0


def _events(args) -> int:
    from filegram_ray.storage import RunDir
    from video.caption_stage import micro_recovery, recovery_table, write_reconstruction
    from video.reconstruct import reconstruct, score_recovery

    rows = _captions(args)
    rid = Path(args.video).stem
    if args.out:
        run = RunDir(args.out)
        info = write_reconstruction(run, rid, args.captioner, rows, None)
        events = info["events"]
        print(f"{args.video}: {len(events)} events -> {run.full(info['events_path'])}", file=sys.stderr)
    else:
        events = reconstruct(rows, rid, args.captioner).events
        print(json.dumps(events, ensure_ascii=False, indent=2))
    if args.true:
        from filegram_ray.limits import load_json

        true = load_json(Path(args.true).read_bytes(), args.true)
        scores = score_recovery(true, events)
        rows_ = [{"event_type": t, **s} for t, s in scores.items()]
        print(recovery_table(micro_recovery(rows_)), file=sys.stderr)
    return 0


def register(subparsers) -> None:
    """Add ``filegram video`` with subcommands ``record``, ``caption`` and ``events``."""
    p = subparsers.add_parser("video", help="guidance videos, screen-recording captions, events from recordings")
    sub = p.add_subparsers(dest="video_command", metavar="SUBCOMMAND")

    r = sub.add_parser("record", help="render a trajectory folder as a guidance video (H.264 MP4)")
    r.add_argument("trajectory", help="trajectory folder (events.json, media/), e.g. runs/default/trajectories/p1/T-01")
    r.add_argument("--out", required=True, help="output .mp4")
    r.add_argument("--workspace", help="the task's workspace folder (files/ + bundle.json) for previews; default: "
                                       "<run>/workspaces/<task> when the folder is inside a run directory")
    r.add_argument("--width", type=int, help="frame width (default 1280)")
    r.add_argument("--height", type=int, help="frame height (default 720)")
    r.add_argument("--fps", type=int, help="frames per second (default 15)")
    r.add_argument("--speed", type=float, help="playback speed factor (default 4; 1 = real time)")
    r.set_defaults(func=_record)

    for name, helptext, fn in (("caption", "caption a screen recording (keyframes → OCR or VLM)", _caption),
                               ("events", "read the file operations of a screen recording back as events.json",
                                _events)):
        c = sub.add_parser(name, help=helptext)
        c.add_argument("video", help="an MP4 (or any video OpenCV reads)")
        c.add_argument("--captioner", choices=["ocr", "vlm"], default="ocr")
        c.add_argument("--vlm-url", help="OpenAI-compatible base URL with image input (captioner vlm)")
        c.add_argument("--vlm-model", help="model name for --vlm-url")
        c.add_argument("--vlm-api-key-env", help="environment variable holding the endpoint's key")
        c.add_argument("--vlm-model-source", help="local VLM directory for vLLM on this machine's GPU")
        if name == "caption":
            c.add_argument("--out", help="write the caption rows (.parquet or .json) instead of printing them")
        else:
            c.add_argument("--out", help="folder for realworld/<video stem>/events.json + media/ (default: print "
                                         "the events)")
            c.add_argument("--true", help="true events.json to score the recovery against (per event type)")
        c.set_defaults(func=fn)

    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
