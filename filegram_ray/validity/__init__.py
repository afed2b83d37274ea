"""Stage-quality check: does the generated behaviour carry the profile? (``filegram validity RUN``)

An evaluation of a run directory against its ground truth (profile tiers, ``meta.json`` perturbations); nothing
here is ever given to a memory method (ARCHITECTURE rule 6). See :mod:`filegram_ray.validity.core` for the
measures and :func:`~filegram_ray.validity.report.run_validity` for the entry point.
"""

from filegram_ray._lazy import lazy_exports

# imported on first use, so `filegram validity --help` does not load numpy (start-up under 0.5 s)
__getattr__, __dir__ = lazy_exports(__name__, {
    **dict.fromkeys(["SessionSet", "aggregate_counts", "load_sessions", "perturbation_effects", "recovery",
                     "rule_recovery", "tau_flags"], "filegram_ray.validity.core"),
    **dict.fromkeys(["run_validity", "summary_lines"], "filegram_ray.validity.report")})

__all__ = ["SessionSet", "aggregate_counts", "load_sessions", "perturbation_effects", "recovery", "rule_recovery",
           "run_validity", "summary_lines", "tau_flags"]
