"""Memory methods behind one interface (ARCHITECTURE rule 4): ``ingest(views) -> state``,
``retrieve(state, query) -> Context``.

Registered names: ``no_context``, ``full_context``, ``naive_rag``, ``eager_summarization``, ``filegramos``,
``filegramos_no_procedural``, ``filegramos_no_semantic``, ``filegramos_no_episodic``.
"""

from filegram_ray.methods.base import METHODS, Context, MemoryMethod, make_method, method_names, register
from filegram_ray.methods.trajectory import TrajectoryView, build_views, events_to_narrative, load_view

__all__ = [
           "METHODS",
           "Context",
           "MemoryMethod",
           "TrajectoryView",
           "build_views",
           "events_to_narrative",
           "load_view",
           "make_method",
           "method_names",
           "register",
]
