"""The evaluate stage: methods × items through a backbone → results.parquet, report.md, plots."""

from filegram_ray._lazy import lazy_exports

# imported on first use, so `filegram findings --help` does not load polars (start-up under 0.5 s)
__getattr__, __dir__ = lazy_exports(__name__, {"EvaluateConfig": "filegram_ray.evaluate.config",
                                               "run_evaluate": "filegram_ray.evaluate.stage"})

__all__ = ["EvaluateConfig", "run_evaluate"]
