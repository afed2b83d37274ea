"""Memory methods behind one interface (ARCHITECTURE rule 4): ``ingest(views) -> state``,
``retrieve(state, query) -> Context``.

Registered names: ``no_context``, ``full_context``, ``naive_rag``, ``eager_summarization``, ``filegramos``,
``filegramos_no_procedural``, ``filegramos_no_semantic``, ``filegramos_no_episodic`` and the comparison methods of
reference §8.2: ``mem0``, ``zep``, ``memos``, ``evermemos``, ``simplemem``, ``memu``, ``mma``, ``visrag``; plus any
method an installed package declares in the ``filegram_ray.methods`` entry-point group (:func:`load_plugins`).
"""

from filegram_ray._lazy import lazy_exports

# imported on first use, so `filegram methods --help` does not load the methods (start-up under 0.5 s)
__getattr__, __dir__ = lazy_exports(__name__, {
    **dict.fromkeys(["ENTRY_POINT_GROUP", "METHODS", "Context", "MemoryMethod", "load_plugins", "make_method",
                     "method_names", "register"], "filegram_ray.methods.base"),
    **dict.fromkeys(["TrajectoryView", "build_views", "events_to_narrative", "load_view"],
                    "filegram_ray.methods.trajectory")})

__all__ = [
           "ENTRY_POINT_GROUP",
           "METHODS",
           "Context",
           "MemoryMethod",
           "TrajectoryView",
           "build_views",
           "events_to_narrative",
           "load_plugins",
           "load_view",
           "make_method",
           "method_names",
           "register",
]
