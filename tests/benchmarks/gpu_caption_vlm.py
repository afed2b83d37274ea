"""GPU benchmark: caption guidance videos with a real vision-language model through vLLM (``ray.data.llm``), read
the file operations back as events and score them against the true events, side by side with the OCR captioner.

Needs a CUDA GPU, ``pip install vllm`` on the machine that runs the engine (its CUDA torch replaces the CPU one: use a
separate environment or the cluster's GPU image) and a VLM in Hugging Face layout on local disk or a mounted volume
(e.g. Qwen2.5-VL-3B-Instruct / Qwen2-VL-2B-Instruct; nothing is downloaded: ``HF_HUB_OFFLINE=1`` is set).
PRINTS figures; asserts nothing; never part of the test suite (pytest collects ``tests/test_*.py`` only).

Usage:
    python tests/benchmarks/gpu_caption_vlm.py --model /models/Qwen2.5-VL-3B-Instruct            # fixed trajectory
    python tests/benchmarks/gpu_caption_vlm.py --model /models/Qwen2.5-VL-3B-Instruct --from-run runs/default \\
        [--n 6] [--max-model-len 8192] [--batch-size 8] [--concurrency 1] [--image-width 1280] [--no-ocr]
    python tests/benchmarks/gpu_caption_vlm.py --base-url http://gpu-node:8000/v1 --served-name NAME ...  # a server
    python tests/benchmarks/gpu_caption_vlm.py --model M --video screen.mp4 [--video other.mp4]        # your MP4s

What it runs (all of it the pipeline's own code, in a scratch run directory ``--out``):

1. the recordings: ``--from-run RUN`` copies a seeded sample of ``--n`` trajectories of RUN (events, media, the
   task workspaces) and records them with the record stage; without it, the fixed 16-event test trajectory of
   ``tests/video_helpers.py`` (every kept event type, English and Chinese paths) is written and recorded;
   ``--video`` adds MP4s of your own (captioned, read back, not scored: there are no true events);
2. the caption stage with ``caption.captioner=vlm``: keyframes by scene change (Ray Data ``map``), one row per
   keyframe (``flat_map``), then the ``ray.data.llm`` processor — ``vLLMEngineProcessorConfig(model_source=M,
   prepare_multimodal_stage on, engine_kwargs={max_model_len, limit_mm_per_prompt: {image: 1}})`` on a GPU
   worker (``--model``), or ``HttpRequestProcessorConfig`` against ``--base-url`` — then events read back from the
   captions (``realworld/``) and scored per event type against the true events;
3. unless ``--no-ocr``: the same stage with the OCR captioner (CPU) on the same recordings, for comparison;
4. prints per captioner: the stage's recovery table (true / found / matched, precision, recall per event type),
   keyframes, wall seconds, keyframes/s, caption errors (replies that are not JSON) and two VLM replies.

The VLM's wall time includes the engine start-up (loading the weights, CUDA graphs): it is printed separately
from a second pass over the same keyframes (``--repeat``, default 1 = no second pass) when you want the steady
rate.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _copy_trajectories(src_run: str, out: Path, n: int, seed: int) -> list[str]:
    """A seeded sample of ``n`` ok trajectories of ``src_run`` (+ their workspaces) copied into ``out``."""
    import polars as pl

    from filegram_ray.storage import RunDir
    from video.record_stage import sample_trajectories

    src = RunDir(src_run)
    idx = src.read_table("trajectories/index.parquet").to_dicts()
    ok = [r for r in idx if str(r.get("status") or "ok") == "ok"]
    ids = sample_trajectories([str(r["trajectory_id"]) for r in ok], n, seed)
    root = Path(src.full(""))
    for tid in ids:
        shutil.copytree(root / "trajectories" / tid, out / "trajectories" / tid, dirs_exist_ok=True)
        task = tid.rsplit("/", 1)[-1]
        if (root / "workspaces" / task).is_dir():
            shutil.copytree(root / "workspaces" / task, out / "workspaces" / task, dirs_exist_ok=True)
    rows = [r for r in ok if r["trajectory_id"] in set(ids)]
    (out / "trajectories").mkdir(parents=True, exist_ok=True)
    pl.DataFrame(rows).write_parquet(out / "trajectories" / "index.parquet")
    return ids


def _caption(out: Path, captioner: str, vlm: dict | None, videos: list[str], force: bool) -> tuple[dict, float]:
    from filegram_ray.config import load_config
    from video.caption_stage import run_caption

    over = {"run_dir": str(out), "caption": {"captioner": captioner, "vlm": vlm, "inputs": videos, "force": force}}
    t0 = time.perf_counter()
    rec = run_caption(load_config(overrides=over))
    return rec, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="local VLM directory for vLLM (the engine runs on a GPU worker)")
    ap.add_argument("--base-url", help="an OpenAI-compatible endpoint with image input instead of --model")
    ap.add_argument("--served-name", default="vlm", help="model name sent to --base-url")
    ap.add_argument("--from-run", help="record a seeded sample of this run's trajectories (default: the fixed "
                                       "test trajectory)")
    ap.add_argument("--n", type=int, default=6, help="trajectories sampled from --from-run")
    ap.add_argument("--video", action="append", default=[], help="an MP4 of your own to caption as well")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-model-len", type=int, default=8192)
    ap.add_argument("--max-tokens", type=int, default=384)
    ap.add_argument("--batch-size", type=int, default=8, help="keyframes per vLLM call")
    ap.add_argument("--concurrency", type=int, default=1, help="vLLM engine replicas (one GPU each)")
    ap.add_argument("--image-width", type=int, default=1280, help="keyframes are scaled to this width")
    ap.add_argument("--accelerator-type", help="e.g. H100 (default: any GPU)")
    ap.add_argument("--repeat", type=int, default=1, help="caption passes with the VLM (2 = steady rate too)")
    ap.add_argument("--no-ocr", action="store_true", help="skip the OCR comparison")
    ap.add_argument("--out", default="/tmp/gpu_caption_vlm", help="scratch run directory (emptied first)")
    args = ap.parse_args(argv)
    if not args.model and not args.base_url:
        ap.error("give --model (a local VLM directory) or --base-url")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    from filegram_ray.config import load_config
    from filegram_ray.storage import RunDir
    from video.record_stage import run_record

    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    if args.from_run:
        ids = _copy_trajectories(args.from_run, out, args.n, args.seed)
    else:
        from video_helpers import TRAJECTORY_ID, write_trajectory

        write_trajectory(out)
        ids = [TRAJECTORY_ID]
    videos = [str(Path(v).resolve()) for v in args.video]
    t0 = time.perf_counter()
    rec = run_record(load_config(overrides={"run_dir": str(out), "record": {"sample": None}}))
    print(f"recorded {rec['recorded']} of {len(ids)} trajectories ({rec['video_s']:.0f} s of video) in "
          f"{time.perf_counter() - t0:.1f} s\n", flush=True)

    if args.model:
        vlm = {"kind": "vllm", "model_source": args.model, "batch_size": args.batch_size,
               "concurrency": args.concurrency, "accelerator_type": args.accelerator_type,
               "max_tokens": args.max_tokens, "image_width": args.image_width,
               "engine_kwargs": {"max_model_len": args.max_model_len, "limit_mm_per_prompt": {"image": 1},
                                 "trust_remote_code": True}}
    else:
        vlm = {"kind": "http", "url": args.base_url, "model": args.served_name, "batch_size": args.batch_size,
               "concurrency": args.concurrency, "max_tokens": args.max_tokens, "image_width": args.image_width}
    runs = [("vlm", vlm, k > 0) for k in range(max(1, args.repeat))]
    if not args.no_ocr:
        runs.append(("ocr", None, False))
    run = RunDir(str(out))
    for i, (captioner, cfg, again) in enumerate(runs):
        rec, wall = _caption(out, captioner, cfg, videos, force=again)
        label = f"{captioner}{' (pass 2)' if again else ''}"
        kf = rec.get("keyframes") or 0
        idx = [r for r in run.read_table("captions/index.parquet").to_dicts() if r.get("captioner") == captioner]
        bad = sum(1 for r in idx if r.get("status") != "ok")
        cap_errors = 0
        sample = []
        for r in idx:
            if r.get("status") == "ok" and r.get("path"):
                rows = run.read_table(r["path"]).to_dicts()
                cap_errors += sum(1 for c in rows if c.get("error"))
                sample += [c for c in rows if c.get("operation")][:2]
        print(f"\n== {label}: {kf} keyframes of {rec.get('recordings')} recordings in {wall:.1f} s wall "
              f"(caption {rec.get('caption_wall_s')} s, {kf / max(rec.get('caption_wall_s') or wall, 1e-9):.2f} "
              f"keyframes/s); {bad} recordings failed, {cap_errors} keyframes without a parsable reply")
        if captioner == "vlm" and i == 0:
            for c in sample[:2]:
                print(f"  [{c['t_s']:.1f} s] {c['operation'][:400]}")
        print(json.dumps({k: rec.get(k) for k in ("units", "keyframes_per_s", "reconstructed")}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
