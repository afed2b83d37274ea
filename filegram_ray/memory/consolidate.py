"""Stage 2 of FileGramOS: consolidate one profile's Engrams into a three-channel :class:`MemoryStore`
(FILEGRAM_REFERENCE §7.4–§7.6, §7.9, §7.10).

Upstream quirks (§13) are fixed by default and reproduced with ``ConsolidateConfig(upstream_quirks=True)``:
boolean aggregates as ``<key>_true_ratio`` (quirk: numeric ``_mean`` etc. and ratios read as 0), true
``_n_trajectories`` (quirk: counts the 2:1 duplicates), E features labelled "E (Curation)" (quirk: raw
``version_strategy``), behavioural clustering on z-scored fingerprints (quirk: raw fingerprints).
"""

from __future__ import annotations

import logging
import math
import re
import statistics
from collections import Counter
from fractions import Fraction
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from filegram_ray.memory import constants as C
from filegram_ray.memory.classify import classify
from filegram_ray.memory.engram import Engram
from filegram_ray.memory.episodes import LLMFn
from filegram_ray.memory.semantic import MULTIMODAL_TYPES, file_type_of

log = logging.getLogger(__name__)
_SPACE_RE = re.compile(r"\s+")

__all__ = [
    "ConsolidateConfig",
    "FingerprintStats",
    "MemoryStore",
    "aggregate",
    "behavioral_clusters",
    "cluster_episodes",
    "consolidate",
    "content_chunks",
    "deviation",
    "judge_anomaly",
    "locate_shifted",
    "normalize_fingerprints",
    "stratified_samples",
]


class ConsolidateConfig(BaseModel):
    """Consolidation settings; defaults are the reference constants (§7.12)."""

    model_config = ConfigDict(extra="forbid")
    deviation_threshold: float = Field(C.DEVIATION_THRESHOLD, description="τ of the flag rule (§7.4)")
    top_k_shifted: int = Field(C.TOP_K_SHIFTED_DIMS, description="shifted features per flagged session (§7.4)")
    semantic_budget: int = Field(C.SEMANTIC_BUDGET, description="sampler budget in chars (§7.9)")
    min_trajectory_budget: int = Field(C.MIN_TRAJECTORY_BUDGET, description="per-engram floor (§7.9)")
    chunk_size: int = Field(C.CONTENT_CHUNK_SIZE, description="content chunk length in chars (§7.9)")
    chunk_tokens: int = Field(C.CONTENT_CHUNK_TOKENS, ge=0,
                              description="a chunk over this many embedder tokens is cut into pieces that fit "
                                          "(ours: every character is embedded); 0 = off")
    chunk_max: int = Field(C.CONTENT_CHUNK_MAX, description="chunks kept per profile (§7.9)")
    episode_cluster_threshold: float = Field(C.EPISODE_CLUSTER_THRESHOLD,
                                             description="average-linkage cosine similarity stop (§7.10)")
    behavioral_cluster_max: int = Field(C.BEHAVIORAL_CLUSTER_MAX, description="trace clusters (§7.10)")
    upstream_quirks: bool = Field(False, description="reproduce the upstream quirks of §13")


class MemoryStore(BaseModel):
    """The consolidated memory of one profile (§7.10 "MemoryStore fields"); JSON round-trippable.

    ``profile_id`` is a label for storage only — the retriever never prints it.
    """

    model_config = ConfigDict(extra="forbid")
    profile_id: str = ""
    engrams: list[Engram]
    upstream_quirks: bool = False
    # procedural channel
    procedural_aggregate: dict[str, dict[str, Any]] = Field(default_factory=dict)
    behavioral_patterns: list[str] = Field(default_factory=list)
    dimension_classifications: list[dict[str, Any]] = Field(default_factory=list)
    # semantic channel
    representative_samples: list[dict[str, Any]] = Field(default_factory=list)
    all_filenames: list[str] = Field(default_factory=list)
    dir_structure_union: list[str] = Field(default_factory=list)
    llm_narratives: list[dict[str, Any]] = Field(default_factory=list)
    content_chunks: list[dict[str, Any]] = Field(default_factory=list)
    content_profile: str = ""
    # episodic channel
    centroid: list[float] = Field(default_factory=list)
    per_session_distances: dict[str, float] = Field(default_factory=dict)
    deviation_flags: dict[str, bool] = Field(default_factory=dict)
    deviation_details: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    consistency_flags: dict[str, dict[str, Any]] = Field(default_factory=dict)
    absence_flags: list[str] = Field(default_factory=list)
    episode_clusters: list[dict[str, Any]] = Field(default_factory=list)
    behavioral_clusters: list[dict[str, Any]] = Field(default_factory=list)
    cluster_centroids: list[list[float]] = Field(default_factory=list)
    llm_deviation_analysis: dict[str, str] = Field(default_factory=dict)

    @property
    def n_sessions(self) -> int:
        return len(self.engrams)

    def episodes(self) -> list[dict[str, Any]]:
        """All episodes of all engrams, in engram order."""
        return [ep for e in self.engrams for ep in e.episodes]

    def filter_by_tasks(self, task_ids: list[str] | set[str]) -> MemoryStore:
        """A view keeping engram-level data of ``task_ids`` only; profile-level aggregates, classifications,
        clusters and consistency flags are reused unchanged (as upstream, §7.10 last paragraph)."""
        keep = set(task_ids)
        eng = [e for e in self.engrams if e.task_id in keep]
        tids = {e.trajectory_id for e in eng}
        return self.model_copy(update={
            "engrams": eng,
            "representative_samples": [s for s in self.representative_samples if s["trajectory_id"] in tids],
            "content_chunks": [c for c in self.content_chunks if c["trajectory_id"] in tids],
            "per_session_distances": {k: v for k, v in self.per_session_distances.items() if k in tids},
            "deviation_flags": {k: v for k, v in self.deviation_flags.items() if k in tids},
            "deviation_details": {k: v for k, v in self.deviation_details.items() if k in tids},
            "llm_deviation_analysis": {k: v for k, v in self.llm_deviation_analysis.items() if k in tids},
        })

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> MemoryStore:
        return cls.model_validate_json(text)


# ------------------------------------------------------------------ §7.4
_DIM = len(C.FINGERPRINT_FEATURES)  # 17 (§7.3)


class FingerprintStats(BaseModel):
    """Running per-feature statistics of fingerprints for the z-scores of §7.4, kept as *exact* sums.

    ``sums[k]`` = Σ f_k and ``squares[k]`` = Σ f_k² over the ``n`` sessions added so far, as exact rationals
    (``fractions.Fraction`` of the float64 values, stored as ``"p/q"`` strings), so adding sessions in any
    order, in one batch or over many incremental updates gives bit-identical means and standard deviations —
    an incremental consolidation equals a from-scratch one. μ_k is Σf/n and σ_k the sample standard deviation
    √((Σf² − (Σf)²/n)/(n − 1)), each computed exactly and rounded once to float64 (then √).
    """

    model_config = ConfigDict(extra="forbid")
    n: int = 0
    sums: list[str] = Field(default_factory=lambda: ["0"] * _DIM)
    squares: list[str] = Field(default_factory=lambda: ["0"] * _DIM)

    @classmethod
    def of(cls, F: np.ndarray) -> FingerprintStats:
        """Statistics of the rows of ``F`` (N, 17)."""
        st = cls()
        st.add_many(F)
        return st

    def add_many(self, F: np.ndarray) -> FingerprintStats:
        """Add the rows of ``F`` (N, 17) (returns self).

        Raises:
            ValueError: rows are not 17 wide, or hold NaN/inf.
        """
        F = np.asarray(F, dtype=np.float64).reshape(-1, _DIM) if np.size(F) else \
            np.zeros((0, _DIM))
        if not np.isfinite(F).all():
            raise ValueError("FingerprintStats: fingerprints must be finite")
        sums = [Fraction(x) for x in self.sums]
        sq = [Fraction(x) for x in self.squares]
        for row in F.tolist():
            for k, v in enumerate(row):
                fv = Fraction(v)
                sums[k] += fv
                sq[k] += fv * fv
        self.n += F.shape[0]
        self.sums = [str(x) for x in sums]
        self.squares = [str(x) for x in sq]
        return self

    def mean_std(self) -> tuple[np.ndarray, np.ndarray]:
        """(μ, σ), each (17,) float64; σ is the sample standard deviation (0 when n < 2)."""
        n = self.n
        if n == 0:
            return np.zeros(_DIM), np.zeros(_DIM)
        mu, sd = [], []
        for s, q in zip(self.sums, self.squares, strict=True):
            s, q = Fraction(s), Fraction(q)
            mu.append(float(s / n))
            var = (q - s * s / n) / (n - 1) if n > 1 else Fraction(0)
            sd.append(math.sqrt(float(var)) if var > 0 else 0.0)
        return np.asarray(mu), np.asarray(sd)

    def zscores(self, F: np.ndarray) -> np.ndarray:
        """Z-scores of ``F`` (N, 17) under these statistics (§7.4: constant features → 0; n < 2 → ``F``)."""
        F = np.asarray(F, dtype=np.float64)
        if self.n < 2:
            return F.copy()
        mu, sd = self.mean_std()
        Z = np.zeros_like(F)
        nz = sd > 0
        Z[:, nz] = (F[:, nz] - mu[nz]) / sd[nz]
        return Z


def normalize_fingerprints(F: np.ndarray) -> np.ndarray:
    """Z-scores per feature over sessions: sample σ (n−1); constant features → 0; N < 2 → returned unchanged.
    μ and σ come from :class:`FingerprintStats` (exact sums), as in incremental consolidation.

    Args:
        F: (N, 17) fingerprints. Returns: (N, 17) float64.
    """
    F = np.asarray(F, dtype=np.float64)
    if F.shape[0] < 2:
        return F.copy()
    return FingerprintStats.of(F).zscores(F)


def deviation(Z: np.ndarray, tau: float = C.DEVIATION_THRESHOLD) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Centroid, distances (rounded 4) and flags (§7.4): flagged iff δ > mean(δ) + τ·stdev(δ); none if N < 3.

    Returns: centroid (17,), distances (N,), flags (N,) bool.
    """
    n = Z.shape[0]
    if n == 0:
        return np.zeros(Z.shape[1] if Z.ndim == 2 else 17), np.zeros(0), np.zeros(0, dtype=bool)
    c = Z.mean(axis=0)
    d = np.round(np.linalg.norm(Z - c, axis=1), 4)
    if n < 3:
        return c, d, np.zeros(n, dtype=bool)
    cutoff = d.mean() + tau * d.std(ddof=1)
    return c, d, d > cutoff


def locate_shifted(z: np.ndarray, c: np.ndarray, top_k: int = C.TOP_K_SHIFTED_DIMS, *,
                   upstream_quirks: bool = False) -> list[dict[str, Any]]:
    """Top-``top_k`` features by |z − c| (§7.4): ``[{feature: "attr.key", delta, dimension}]``."""
    delta = np.abs(np.asarray(z) - np.asarray(c))
    order = np.argsort(-delta, kind="stable")[:top_k]
    out = []
    for k in order:
        _, attr, key = C.FINGERPRINT_FEATURES[int(k)]
        label = attr if (upstream_quirks and attr == "version_strategy") else C.DIMENSION_LABELS.get(attr, attr)
        out.append({"feature": f"{attr}.{key}", "delta": round(float(delta[k]), 3), "dimension": label})
    return out


# ------------------------------------------------------------------ §7.5
def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float))


def aggregate(procedurals: list[dict[str, dict[str, Any]]], n_sessions: int, *, upstream_quirks: bool = False
              ) -> dict[str, dict[str, Any]]:
    """Aggregation statistics over a (weighted) list of procedural dicts (§7.5).

    Numbers → ``_mean``/``_median`` (rounded 3), ``_std`` (sample, rounded 3, ≥ 2 values), ``_min``/``_max``;
    all booleans → ``_true_ratio`` (rounded 3; quirk: treated as numbers); all dicts → ``_merged`` counters.
    ``_n_trajectories`` = ``n_sessions`` (quirk: the weighted list's length); ``_n_weighted`` = list length.
    """
    if not procedurals:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for attr in procedurals[0]:
        stats: dict[str, Any] = {}
        keys = sorted(k for k in procedurals[0][attr] if not k.startswith("_"))
        for key in keys:
            vals = [p.get(attr, {}).get(key) for p in procedurals]
            if not upstream_quirks and vals and all(isinstance(v, bool) for v in vals):
                stats[f"{key}_true_ratio"] = round(sum(vals) / len(vals), 3)
            elif vals and all(_is_num(v) for v in vals):
                fv = [float(v) for v in vals]
                stats[f"{key}_mean"] = round(statistics.fmean(fv), 3)
                stats[f"{key}_median"] = round(statistics.median(fv), 3)
                if len(fv) >= 2:
                    stats[f"{key}_std"] = round(statistics.stdev(fv), 3)
                stats[f"{key}_min"] = min(vals)
                stats[f"{key}_max"] = max(vals)
            elif vals and all(isinstance(v, dict) for v in vals):
                merged: Counter[str] = Counter()
                for v in vals:
                    merged.update({k: int(x) for k, x in v.items() if _is_num(x)})
                stats[f"{key}_merged"] = dict(sorted(merged.items()))
        stats["_n_trajectories"] = len(procedurals) if upstream_quirks else n_sessions
        stats["_n_weighted"] = len(procedurals)
        out[attr] = stats
    return out


def consistency_flags(engrams: list[Engram]) -> dict[str, dict[str, Any]]:
    """Per-key mean, sample std, CV (0 if mean = 0) and ``stable`` (CV < 0.3) over ≥ 2 sessions (§7.5)."""
    if len(engrams) < 2:
        return {}
    out = {}
    for attr, keys in C.CONSISTENCY_KEYS.items():
        for key in keys:
            vals = [float(e.procedural.get(attr, {}).get(key, 0) or 0) for e in engrams]
            mean = statistics.fmean(vals)
            std = statistics.stdev(vals)
            cv = std / mean if mean else 0.0
            out[f"{attr}.{key}"] = {"mean": round(mean, 3), "std": round(std, 3), "cv": round(cv, 3),
                                    "stable": cv < C.CV_STABILITY_THRESHOLD}
    return out


_ABSENCE = (
    ("directory_style", "dirs_created", "created directories"),
    ("reading_strategy", "total_searches", "used search"),
    ("edit_strategy", "total_edits", "edited files"),
    ("version_strategy", "backup_copies", "made backup copies"),
    ("version_strategy", "total_deletes", "deleted files"),
    ("reading_strategy", "total_browses", "browsed directories"),
)


def absence_flags(engrams: list[Engram]) -> list[str]:
    """"Never … in any of N trajectories" lines for behaviours no session showed (§7.5)."""
    n = len(engrams)
    if not n:
        return []
    out = []
    for attr, key, what in _ABSENCE:
        if all(not e.procedural.get(attr, {}).get(key) for e in engrams):
            out.append(f"Never {what} in any of {n} trajectories")
    cm = [e.procedural.get("cross_modal_behavior", {}) for e in engrams]
    if all(not (c.get("image_files_created") or c.get("structured_files_created")) for c in cm):
        out.append(f"Never created image or structured-data files in any of {n} trajectories")
    return out


# ------------------------------------------------------------------ §7.9
def _budgets(engs: list[Engram], total: int, floor: int) -> list[int]:
    s = sum(e.importance_score for e in engs)
    if s <= 0:
        b = [max(floor, total // max(len(engs), 1)) for _ in engs]
    else:
        b = [max(floor, math.floor(total * e.importance_score / s)) for e in engs]
    if sum(b) > total:
        scale = total / sum(b)
        b = [max(floor, math.floor(x * scale)) for x in b]
    return b


def stratified_samples(engrams: list[Engram], flags: dict[str, bool], cfg: ConsolidateConfig
                       ) -> list[dict[str, Any]]:
    """Representative samples (§7.9): non-deviant engrams (all if every one is deviant) by importance desc;
    per-engram char budget; at most one create, one major edit (> 10 lines) and one minor edit, preferring
    file types not yet seen, then the longest; previews cut to the remaining budget."""
    pool = [e for e in engrams if not flags.get(e.trajectory_id)] or list(engrams)
    pool = sorted(pool, key=lambda e: (-e.importance_score, e.trajectory_id))
    seen: set[str] = set()
    out = []
    for e, budget in zip(pool, _budgets(pool, cfg.semantic_budget, cfg.min_trajectory_budget), strict=True):
        sem = e.semantic
        cands = {
            "create": [(c["path"], c["file_type"], c["full_content"] or c["content_preview"], c["content_length"])
                       for c in sem.get("created_files", [])],
            "major_edit": [], "minor_edit": [],
        }
        for ch in sem.get("edit_chains", []):
            kind = "major_edit" if ch["lines_added"] + ch["lines_deleted"] > C.MAJOR_EDIT_LINE_THRESHOLD \
                else "minor_edit"
            cands[kind].append((ch["path"], file_type_of(ch["path"]), ch["full_diff"], len(ch["full_diff"])))
        left = budget
        for kind in ("create", "major_edit", "minor_edit"):
            if left <= 0 or not cands[kind]:
                continue
            best = min(cands[kind], key=lambda c: (c[1] in seen, -len(c[2])))
            text = best[2]
            if best[1] in MULTIMODAL_TYPES:
                from filegram_ray.memory.semantic import parse_content
                text = parse_content(text, best[1])
            preview = text[:left]
            left -= len(preview)
            seen.add(best[1])
            out.append({"trajectory_id": e.trajectory_id, "task_id": e.task_id, "path": best[0],
                        "sample_type": kind, "file_type": best[1], "content_length": best[3],
                        "preview": preview})
    return out


def _token_pieces(piece: str, cfg: ConsolidateConfig) -> list[tuple[str, int]]:
    """``piece`` as ``[(text, tokens)]``: itself when it fits in ``cfg.chunk_tokens`` tokens of the packaged
    MiniLM's tokenizer, else consecutive pieces that do (:func:`filegram_ray.memory.embed.split_by_tokens`)."""
    if not cfg.chunk_tokens:
        return [(piece, 0)]
    from filegram_ray.memory.embed import minilm_tokenizer, split_by_tokens

    tok = minilm_tokenizer()
    parts = [p.strip() for p in split_by_tokens(piece, cfg.chunk_tokens, tok)]
    return [(p, len(tok.encode(p).ids)) for p in parts if p]


def content_chunks(engrams: list[Engram], flags: dict[str, bool], cfg: ConsolidateConfig) -> list[dict[str, Any]]:
    """Content chunks (§7.9): non-deviant engrams first, then by importance; created files cut into consecutive
    ``chunk_size`` slices (files < 50 non-space chars and slices < 50 chars dropped; multimodal files skipped —
    their content is not parsed), then each edit diff's first ``chunk_size`` chars; first ``chunk_max`` slices kept.

    Ours (case BR2-18): a slice longer than ``chunk_tokens`` embedder tokens (an 800-char Chinese slice is ≈790
    MiniLM tokens, a diff ≈460, against the model's 256) is cut by the tokenizer into pieces that fit, so every
    character is embedded; the pieces of one slice count as one of the ``chunk_max``. Each record carries
    ``tokens`` (its token count, special tokens included; 0 when ``chunk_tokens`` is 0) and, for a cut slice,
    ``piece`` / ``pieces`` (1-based index, count)."""
    order = sorted(engrams, key=lambda e: (bool(flags.get(e.trajectory_id)), -e.importance_score, e.trajectory_id))
    slices: list[tuple[dict[str, Any], str]] = []
    for e in order:
        for c in e.semantic.get("created_files", []):
            if c["file_type"] in MULTIMODAL_TYPES:
                continue
            text = c["full_content"] or c["content_preview"]
            if len(_SPACE_RE.sub("", text)) < C.CONTENT_CHUNK_MIN_CHARS:
                continue
            for i in range(0, len(text), cfg.chunk_size):
                piece = text[i:i + cfg.chunk_size].strip()
                if len(piece) >= C.CONTENT_CHUNK_MIN_CHARS:
                    slices.append(({"trajectory_id": e.trajectory_id, "task_id": e.task_id, "path": c["path"],
                                    "chunk_type": "created_file"}, piece))
        for ch in e.semantic.get("edit_chains", []):
            piece = ch["full_diff"][:cfg.chunk_size].strip()
            if len(piece) >= C.CONTENT_CHUNK_MIN_CHARS:
                slices.append(({"trajectory_id": e.trajectory_id, "task_id": e.task_id, "path": ch["path"],
                                "chunk_type": "edit_diff"}, piece))
    out: list[dict[str, Any]] = []
    for rec, piece in slices[:cfg.chunk_max]:
        parts = _token_pieces(piece, cfg)
        for k, (text, n) in enumerate(parts, 1):
            out.append({**rec, "text": text, "tokens": n, **({"piece": k, "pieces": len(parts)} if len(parts) > 1
                                                             else {})})
    for i, c in enumerate(out):
        c["chunk_id"] = i
    return out


def content_profile(narratives: list[dict[str, Any]], llm_fn: LLMFn | None = None) -> str:
    """A short third-person content profile merged from per-session descriptors (§7.9): LLM when configured,
    else a deterministic summary of the detail levels and the most frequent habits (*ours*)."""
    if not narratives:
        return ""
    if llm_fn is not None:
        rendered = "\n".join(
            f"[{n['task_id']}] " + " | ".join(f"{k}: {v}" for k, v in n["descriptor"].items() if k != "source")
            for n in narratives)
        try:
            text = llm_fn("Merge these per-session descriptions into a 3-6 sentence third-person profile of the "
                          "user's content, focusing on cross-session patterns:\n" + rendered,
                          system="You summarise a user's writing across sessions.")
            if isinstance(text, str) and text.strip():
                return text.strip()
        except Exception as exc:  # noqa: BLE001 - fall back to the deterministic profile
            log.warning("content profile LLM call failed (%s); using the deterministic profile", exc)
    levels = Counter(str(n["descriptor"].get("detail_level", "")).split(" ", 1)[0] for n in narratives)
    habits = Counter(h.split(" (", 1)[0] for n in narratives for h in n["descriptor"].get("notable_habits", []))
    lvl = ", ".join(f"{k} in {v}" for k, v in levels.most_common() if k)
    hab = "; ".join(f"{k} ({v}/{len(narratives)} sessions)" for k, v in habits.most_common(4))
    return (f"Across {len(narratives)} sessions the output detail level is {lvl}. "
            + (f"Recurring habits: {hab}." if hab else ""))


# ------------------------------------------------------------------ §7.10
def _tfidf_vectors(texts: list[str]) -> np.ndarray:
    from sklearn.feature_extraction.text import TfidfVectorizer

    if not any(t.strip() for t in texts):
        return np.zeros((len(texts), 1))
    return TfidfVectorizer().fit_transform(texts).toarray()


def cluster_episodes(episodes: list[dict[str, Any]], vectors: np.ndarray | None,
                     threshold: float = C.EPISODE_CLUSTER_THRESHOLD) -> list[dict[str, Any]]:
    """Average-linkage agglomerative clustering of episodes on cosine similarity, stopping at mean similarity
    ``threshold`` (§7.10) — scikit-learn ``AgglomerativeClustering(metric="cosine", linkage="average",
    distance_threshold=1 - threshold)``. Zero vectors stay singletons.

    Args:
        episodes: episode records. vectors: (N, d) embeddings of each episode's content (fallback summary);
            None → TF-IDF vectors of those texts (deterministic fallback, *ours*).

    Returns:
        ``[{cluster_id, theme, episode_ids, trajectory_ids (sorted), task_ids (sorted), size}]`` by size desc.
    """
    n = len(episodes)
    if n == 0:
        return []
    if vectors is None:
        vectors = _tfidf_vectors([ep.get("content") or ep.get("summary") or "" for ep in episodes])
    X = np.asarray(vectors, dtype=np.float64)
    labels = np.full(n, -1)
    nz = np.linalg.norm(X, axis=1) > 0
    idx = np.flatnonzero(nz)
    if len(idx) >= 2:
        from sklearn.cluster import AgglomerativeClustering

        model = AgglomerativeClustering(n_clusters=None, metric="cosine", linkage="average",
                                        distance_threshold=1.0 - threshold)
        labels[idx] = model.fit_predict(X[idx])
    elif len(idx) == 1:
        labels[idx[0]] = 0
    nxt = int(labels.max()) + 1
    for i in np.flatnonzero(labels < 0):
        labels[i] = nxt
        nxt += 1
    groups: dict[int, list[int]] = {}
    for i, lab in enumerate(labels.tolist()):
        groups.setdefault(lab, []).append(i)
    clusters = []
    for cid, members in enumerate(groups.values()):  # cluster ids by first appearance, before sorting
        eps = [episodes[i] for i in members]
        top = max(eps, key=lambda ep: ep["event_count"])
        clusters.append({"cluster_id": cid, "theme": top.get("title") or top.get("summary", ""),
                         "episode_ids": [ep["episode_id"] for ep in eps],
                         "trajectory_ids": sorted({ep["trajectory_id"] for ep in eps}),
                         "task_ids": sorted({ep["task_id"] for ep in eps}), "size": len(eps)})
    return sorted(clusters, key=lambda c: -c["size"])


def behavioral_clusters(engrams: list[Engram], X: np.ndarray, max_clusters: int = C.BEHAVIORAL_CLUSTER_MAX
                        ) -> tuple[list[dict[str, Any]], list[list[float]]]:
    """Trace-level clusters of sessions on fingerprints (§7.10): scikit-learn Ward agglomerative clustering into
    min(``max_clusters``, N) clusters (Ward merges the clusters whose centroids are closest, weighted by size;
    upstream merges the closest centroids unweighted). Cluster ids by size desc; centroids are raw fingerprint
    means.

    Args:
        X: (N, 17) vectors to cluster (z-scores by default, raw with upstream quirks).
    """
    n = len(engrams)
    if n == 0:
        return [], []
    k = min(max_clusters, n)
    if k < 2 or np.allclose(X, X[0]):
        labels = np.zeros(n, dtype=int)
    else:
        from sklearn.cluster import AgglomerativeClustering

        labels = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(X)
    raw = np.asarray([e.fingerprint for e in engrams], dtype=np.float64)
    groups: dict[int, list[int]] = {}
    for i, lab in enumerate(labels.tolist()):
        groups.setdefault(lab, []).append(i)
    ordered = sorted(groups.values(), key=lambda m: (-len(m), m[0]))
    clusters, cents = [], []
    for cid, m in enumerate(ordered):
        clusters.append({"cluster_id": cid, "trajectory_ids": [engrams[i].trajectory_id for i in m],
                         "task_ids": [engrams[i].task_id for i in m], "size": len(m)})
        cents.append([round(float(x), 4) for x in raw[m].mean(axis=0)])
    return clusters, cents


def judge_anomaly(details: list[dict[str, Any]], engram: Engram, normal_task_ids: list[str],
                  llm_fn: LLMFn | None = None) -> str:
    """Label a flagged session ``task_dependent`` | ``genuine_perturbation`` | ``uncertain`` (§7.10 labels).

    Deterministic default (*ours*): a perturbation moves one dimension, a different task moves many. So
    ``genuine_perturbation`` if ≥ 2 of the top shifted features share one dimension and the largest shift is
    ≥ 2 (z units); ``task_dependent`` if the top features span ≥ 3 dimensions; else ``uncertain``. With
    ``llm_fn``: one call with the task id, phase pattern, dominant transition, event count and the non-deviant
    task ids; the label is parsed by substring (failure → ``uncertain``).
    """
    labels = ("task_dependent", "genuine_perturbation", "uncertain")
    if llm_fn is not None:
        sf = engram.sequence_features
        prompt = (f"Session {engram.task_id} deviates from the user's usual behaviour. Phase pattern: "
                  f"{sf.get('phase_pattern')}; dominant transition: {sf.get('dominant_transition')}; behavioural "
                  f"events: {engram.behavioral_event_count}. Typical sessions: {', '.join(normal_task_ids)}. "
                  "Answer with exactly one of: task_dependent, genuine_perturbation, uncertain.")
        try:
            reply = str(llm_fn(prompt, system="You judge behavioural anomalies.")).lower()
        except Exception:  # noqa: BLE001
            return "uncertain"
        return next((lab for lab in labels if lab in reply), "uncertain")
    if not details:
        return "uncertain"
    dims = Counter(d["dimension"] for d in details)
    if dims.most_common(1)[0][1] >= 2 and details[0]["delta"] >= 2.0:
        return "genuine_perturbation"
    if len(dims) >= 3:
        return "task_dependent"
    return "uncertain"


# ------------------------------------------------------------------ the whole of Stage 2
def _deviations(engrams: list[Engram], cfg: ConsolidateConfig, fingerprint_stats: FingerprintStats | None = None):
    """``(F, Z, centroid, distances, flags)`` of engrams sorted by trajectory id: raw and normalised fingerprints,
    the §7.4 deviation and each session's flag ``{trajectory_id: deviant}``."""
    F = np.asarray([e.fingerprint for e in engrams], dtype=np.float64)
    if fingerprint_stats is not None and fingerprint_stats.n != len(engrams):
        raise ValueError(f"consolidate: fingerprint_stats count {fingerprint_stats.n} sessions, "
                         f"but {len(engrams)} engrams were given")
    Z = fingerprint_stats.zscores(F) if fingerprint_stats is not None else normalize_fingerprints(F)
    c, d, fl = deviation(Z, cfg.deviation_threshold)
    return F, Z, c, d, {e.trajectory_id: bool(f) for e, f in zip(engrams, fl.tolist(), strict=True)}


def embedding_texts(engrams: list[Engram], config: ConsolidateConfig | dict[str, Any] | None = None) -> list[str]:
    """Every text that :func:`consolidate` (episode clustering) and the store's indices
    (:func:`~filegram_ray.memory.index.chunk_texts`, :func:`~filegram_ray.memory.index.episode_texts`) embed for
    these engrams: each episode's content (fallback summary) and each content chunk — computed without an
    embedder or an LLM (the chunks depend on the deviation flags, not on vectors).

    Raises:
        ValueError: no engrams."""
    cfg = config if isinstance(config, ConsolidateConfig) else ConsolidateConfig.model_validate(config or {})
    if not engrams:
        raise ValueError("consolidate: no engrams")
    engrams = sorted(engrams, key=lambda e: e.trajectory_id)
    flags = _deviations(engrams, cfg)[4]
    return ([ep.get("content") or ep.get("summary") or "" for e in engrams for ep in e.episodes]
            + [ch["text"] for ch in content_chunks(engrams, flags, cfg)])


def consolidate(engrams: list[Engram], *, embedder=None, llm_fn: LLMFn | None = None,
                config: ConsolidateConfig | dict[str, Any] | None = None, profile_id: str = "",
                episode_vectors: np.ndarray | None = None,
                fingerprint_stats: FingerprintStats | None = None) -> MemoryStore:
    """Consolidate one profile's Engrams into a :class:`MemoryStore` (§7.4–§7.10).

    Args:
        engrams: the profile's Engrams (sorted by trajectory_id here, as upstream).
        embedder: optional :class:`~filegram_ray.memory.embed.Embedder` for episode clustering; without it (and
            without ``episode_vectors``) clustering uses TF-IDF vectors.
        llm_fn: optional ``llm_fn(prompt, system=None) -> str`` for classification, content profile and the
            anomaly judge; default deterministic.
        config: :class:`ConsolidateConfig` or its dict.
        profile_id: storage label (never printed by the retriever).
        episode_vectors: precomputed (n_episodes, d) episode embeddings in :meth:`MemoryStore.episodes` order.
        fingerprint_stats: running statistics of exactly these engrams' fingerprints (incremental memory,
            :mod:`filegram_ray.memory.incremental`); None → computed here. Either way the result is the same.

    Raises:
        ValueError: no engrams, ``episode_vectors`` has the wrong number of rows, or ``fingerprint_stats`` counts
            a different number of sessions.
    """
    cfg = config if isinstance(config, ConsolidateConfig) else ConsolidateConfig.model_validate(config or {})
    if not engrams:
        raise ValueError(f"consolidate: profile {profile_id!r} has no engrams")
    engrams = sorted(engrams, key=lambda e: e.trajectory_id)
    q = cfg.upstream_quirks
    ids = [e.trajectory_id for e in engrams]
    F, Z, c, d, flags = _deviations(engrams, cfg, fingerprint_stats)
    details = {t: locate_shifted(Z[i], c, cfg.top_k_shifted, upstream_quirks=q)
               for i, t in enumerate(ids) if flags[t]}
    weighted = []
    for e in engrams:
        weighted.append(e.procedural)
        if not flags[e.trajectory_id]:
            weighted.append(e.procedural)  # non-deviant sessions count twice (§7.4)
    agg = aggregate(weighted, len(engrams), upstream_quirks=q)
    classes, patterns = classify(agg, llm_fn=llm_fn, upstream_quirks=q)

    narratives = [{"trajectory_id": e.trajectory_id, "task_id": e.task_id, "descriptor": e.semantic["llm_encoding"]}
                  for e in engrams if not flags[e.trajectory_id] and e.semantic.get("llm_encoding")]
    filenames = list(dict.fromkeys(n for e in engrams for n in e.semantic.get("created_filenames", [])))
    dirs = list(dict.fromkeys(x for e in engrams for x in e.semantic.get("dir_structure_diff", [])))

    episodes = [ep for e in engrams for ep in e.episodes]
    if episode_vectors is None and embedder is not None and episodes:
        episode_vectors = embedder.encode([ep.get("content") or ep.get("summary") or "" for ep in episodes])
    if episode_vectors is not None and len(episode_vectors) != len(episodes):
        raise ValueError(f"consolidate: {len(episode_vectors)} episode vectors for {len(episodes)} episodes")
    ep_clusters = cluster_episodes(episodes, episode_vectors, cfg.episode_cluster_threshold)
    b_clusters, b_cents = behavioral_clusters(engrams, F if q else Z, cfg.behavioral_cluster_max)
    normal = [e.task_id for e in engrams if not flags[e.trajectory_id]]
    judge = {e.trajectory_id: judge_anomaly(details[e.trajectory_id], e, normal, llm_fn)
             for e in engrams if flags[e.trajectory_id]}
    return MemoryStore(
        profile_id=profile_id,
        engrams=engrams,
        upstream_quirks=q,
        procedural_aggregate=agg,
        behavioral_patterns=patterns,
        dimension_classifications=classes,
        representative_samples=stratified_samples(engrams, flags, cfg),
        all_filenames=filenames,
        dir_structure_union=dirs,
        llm_narratives=narratives,
        content_chunks=content_chunks(engrams, flags, cfg),
        content_profile=content_profile(narratives, llm_fn),
        centroid=[round(float(x), 4) for x in c],
        per_session_distances={t: float(x) for t, x in zip(ids, d.tolist(), strict=True)},
        deviation_flags=flags,
        deviation_details=details,
        consistency_flags=consistency_flags(engrams),
        absence_flags=absence_flags(engrams),
        episode_clusters=ep_clusters,
        behavioral_clusters=b_clusters,
        cluster_centroids=b_cents,
        llm_deviation_analysis=judge,
    )
