"""Behaviour validity of a run — superseded by the stage-quality check ``filegram validity RUN``
(:mod:`filegram_ray.validity`), which this script now calls.

    python tests/benchmarks/validity_memory.py RUN_DIR [--profiles-dir DIR] [--train-run OTHER_RUN]

Prints per-dimension tier recovery (leave-profiles-out per session / per profile, cross-set, the store's rule
classifier), perturbation effect sizes and no-ops, τ-flag precision / recall and the aggregate counts, and writes
``RUN_DIR/results/validity.md`` and ``validity.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from filegram_ray.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["validity", *sys.argv[1:]]))
