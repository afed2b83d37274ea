"""The evaluate stage: methods × items through a backbone → results.parquet, report.md, plots."""

from filegram_ray.evaluate.stage import EvaluateConfig, run_evaluate

__all__ = ["EvaluateConfig", "run_evaluate"]
