"""Caption stage: keyframes of screen recordings → OCR (CPU) or VLM (ray.data.llm) captions → events read back.

Usage:
    python jobs/caption.py --run-dir runs/demo                                  # OCR the record stage's videos
    python jobs/caption.py --run-dir runs/demo --set 'caption.inputs=[/data/screen.mp4]'   # also your own MP4s
    python jobs/caption.py --run-dir runs/demo --set caption.captioner=vlm \\
        --set caption.vlm.kind=http --set caption.vlm.url=http://127.0.0.1:8000/v1 --set caption.vlm.model=qwen-vl
    ray job submit --working-dir . -- python jobs/caption.py --config conf/cluster.yaml \\
        --set caption.captioner=vlm --set caption.vlm.kind=vllm --set caption.vlm.model_source=/models/vlm
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a bare checkout / Ray working_dir

from filegram_ray.jobargs import run_job
from filegram_ray.stages.cli import stage_main


def main(argv=None) -> int:
    return stage_main("caption", argv)


if __name__ == "__main__":
    sys.exit(run_job(main))
