"""FileGramOS behind the method interface, and its three channel ablations (reference §7, §8.4 Table 13).

Ingest = one Engram per view (:func:`filegram_ray.memory.encode_engram`; the Engram's trajectory id is the view's
opaque session label, so no profile id enters the store) + :func:`filegram_ray.memory.consolidate`; retrieve =
:func:`filegram_ray.memory.retrieve` with the method's channel set. ``In.`` is the memory's own token count
(``tokens_memory``), ``Out.`` the rendered context's (``tokens_context``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from filegram_ray.methods.base import Context, MemoryMethod, register
from filegram_ray.methods.trajectory import TrajectoryView

__all__ = ["ALL_CHANNELS", "FileGramOS"]

#: The three memory channels (reference §7, §9.5).
ALL_CHANNELS = ("procedural", "semantic", "episodic")


class FileGramOS(MemoryMethod):
    """FileGramOS with a configurable channel set (default: all three).

    Options:
        channels: tuple of channel names used at retrieval (ablations remove one).
    """

    name, display = "filegramos", "FileGramOS"
    options_schema = {"channels": (list, tuple)}
    channels: tuple[str, ...] = ALL_CHANNELS

    def mode(self, llm: bool) -> str:
        used = tuple(self.options.get("channels") or self.channels)
        how = ("LLM descriptors, episode segmentation and profile merge through the backbone" if llm
               else "rule descriptors, episodes and classification (no LLM backbone)")
        return f"{how}; channels: {', '.join(used)}"
    #: the ablations share FileGramOS's ingest state (they differ only in the retrieved channels)
    state_group = "filegramos"

    def _embedder(self):
        if self.embedder is None:
            from filegram_ray.methods.embed import default_embedder

            self.embedder = default_embedder()
        if not hasattr(self.embedder, "encode_query"):
            self.embedder = _QueryAdapter(self.embedder)
        return self.embedder

    def ingest(self, trajectories: Sequence[TrajectoryView]) -> Any:
        """Engrams → MemoryStore, plus the chunk and episode vectors (embedded once here, not per query).

        Returns:
            ``{"store": MemoryStore, "chunks": (vectors, meta), "episodes": (vectors, meta)}``.
        """
        from filegram_ray.memory.consolidate import consolidate
        from filegram_ray.memory.index import chunk_texts, episode_texts, window_rows
        emb = self._embedder()
        engrams = [self._engram(v) for v in trajectories]
        engrams.sort(key=lambda e: e.trajectory_id)  # reference §7: engrams sorted by trajectory id
        store = consolidate(engrams, embedder=emb, llm_fn=self.llm_fn)
        ct, cm = chunk_texts(store)
        et, em = episode_texts(store)
        return {"store": store, "chunks": window_rows(emb, ct, cm), "episodes": window_rows(emb, et, em)}

    def _engram(self, view: TrajectoryView):
        """Stage 1 of one trajectory, memoised on (label, task, events): a trajectory recurs in many context
        specs of one evaluation (each held-out, impostor and baseline spec), and its Engram never changes."""
        import hashlib
        import json

        from filegram_ray.memory.engram import encode_engram
        digest = hashlib.sha1(json.dumps(view.events, sort_keys=True, ensure_ascii=False, default=str)
                              .encode("utf-8", "surrogatepass")).hexdigest()
        key = (view.label, view.task_id, digest)
        memo = self.__dict__.setdefault("_engram_memo", {})
        if key not in memo:
            if len(memo) >= 4096:  # bounded: a long evaluation never grows without limit
                memo.pop(next(iter(memo)))
            memo[key] = encode_engram(view.events, trajectory_id=view.label, task_id=view.task_id, media_dir=None,
                                      llm_fn=self.llm_fn, source=view.label)
        return memo[key].model_copy(deep=True)

    def retrieve(self, state: Any, query: str) -> Context:
        from filegram_ray.memory.index import ProfileIndices, build_index
        from filegram_ray.memory.retrieve import retrieve
        channels = tuple(self.options.get("channels") or self.channels)
        indices = ProfileIndices(build_index(*state["chunks"]), build_index(*state["episodes"]))
        rc = retrieve(state["store"], query=query or None, channels=channels, indices=indices,
                      embedder=self._embedder())
        return Context(rc.text, int(rc.tokens_memory), int(rc.tokens_context))


class _QueryAdapter:
    """Gives an ``encode(texts)`` embedder the ``encode_query(text)`` method FileGramOS's retriever calls."""

    def __init__(self, inner):
        self.inner = inner

    def encode(self, texts):
        return self.inner.encode(texts)

    def encode_query(self, text):
        return self.inner.encode([text])


register("filegramos")(FileGramOS)


def _ablation(drop: str):
    keep = tuple(c for c in ALL_CHANNELS if c != drop)

    class _Ablated(FileGramOS):
        __doc__ = f"FileGramOS without the {drop} channel (reference §8.4, Table 13)."
        name, display, channels = f"filegramos_no_{drop}", f"FileGramOS − {drop.capitalize()}", keep

    _Ablated.__name__ = _Ablated.__qualname__ = f"FileGramOSNo{drop.capitalize()}"
    return register(_Ablated.name)(_Ablated)


FileGramOSNoProcedural = _ablation("procedural")
FileGramOSNoSemantic = _ablation("semantic")
FileGramOSNoEpisodic = _ablation("episodic")
