"""The embedded default agent: a seeded persona simulator (no LLM, no API) acting through the engine's tools.

Public API::

    from filegram_ray.engine.simulator import simulate_trajectory, Persona, AGENT_VERSION
    sess = simulate_trajectory(profile, task, bundle_dir, work_root, seed=7, perturbation=None)
    sess.write_trajectory(dest)

See :mod:`filegram_ray.engine.simulator.agent` for the policy and TIER_TARGETS.md for the calibration targets.
"""

from filegram_ray.engine.simulator.agent import AGENT_VERSION, PersonaAgent
from filegram_ray.engine.simulator.persona import Persona, derive_seed
from filegram_ray.engine.simulator.simulate import session_start_ms, simulate_trajectory

__all__ = ["AGENT_VERSION", "Persona", "PersonaAgent", "derive_seed", "session_start_ms", "simulate_trajectory"]
