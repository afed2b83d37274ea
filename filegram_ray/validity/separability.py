"""Does one count in one session give the tier away? (separability, η², count rules)

Measures on the sessions of a run (:class:`~filegram_ray.validity.core.SessionSet`), each against the tier that
generated the session (the profile's tier, or the perturbation's target tier on the perturbed dimension):

* :func:`session_features` — the trajectory-level table: every scalar feature of the memory's procedural
  extraction (:func:`filegram_ray.memory.features.extract_procedural`: searches, browses, reads, deletes, moves,
  renames, images / structured files written, created-folder depth, lines per edit, output chars, …; booleans as
  0/1; the 17 fingerprint features of reference §7.3 are among them) plus ``reading_strategy.searches_and_browses``.
* :func:`separability` — per dimension, the best **one-feature depth-2 decision tree** (scikit-learn
  ``DecisionTreeClassifier(max_depth=2)``) fitted on one set's sessions and scored on another's (``cross``), or
  leave-profiles-out inside one set (5-fold ``GroupKFold`` by profile). "Best" = the highest held-out accuracy
  over all features, i.e. the adversary's best single count chosen with hindsight (an upper bound of what a
  single count reads). Bound: ≤ :data:`BOUNDS` ``["separability"]``.
* :func:`eta_squared` / :func:`task_tier_eta2` — share of a feature's variance explained by the task × tier cells
  (one-way ANOVA over the cells: SS_between / SS_total), for the tier of each dimension; reported per feature as
  the largest over dimensions. Bound for the 17 fingerprint features: ≤ :data:`BOUNDS` ``["eta2"]``.
* :func:`rule_tiers` — hand-written single-count rules, no fitting; thresholds are the hard limits of
  TIER_TARGETS §2 (E: deletes ≥ 2 → L, 1 → M, 0 → R; C: created-folder depth ≥ 3 → L, ≥ 1 → M, else R; D: no edit
  → R, < 10 lines per edit → L, < 30 → M, else R; A: searches ≥ 3 → M, browses ≥ 2 → R, else L; B: output chars
  ≥ 9,000 → L, ≤ 3,000 → R, else M; F: an image written → L, a table row → M, else R).
* :class:`CountRuleAnswerer` — answers ShiftAna and AnomDet items from :func:`rule_tiers` of the sessions the item
  shows, with no memory: ShiftAna = the option whose dimension's rule tier in the last session differs from the
  baseline's most common rule tier and lands on the option's target tier; AnomDet = the session whose rule-tier
  vector is farthest (Hamming) from the others' most common tiers. Ties go to a seeded draw. Bound: accuracy ≤
  chance + :data:`BOUNDS` ``["rule_answerer_margin"]`` (chance = mean 1/k over the items).
"""

from __future__ import annotations

import functools
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from filegram_ray.memory.constants import FINGERPRINT_FEATURES

DIMENSIONS = ("A", "B", "C", "D", "E", "F")
TIERS = ("L", "M", "R")
FINGERPRINT_NAMES = tuple(f"{attr}.{key}" for _, attr, key in FINGERPRINT_FEATURES)
#: The project's bounds (ours; the bounds table of docs/validity.md): separability and η² at most, the rule answerer
#: at most chance + 15 points, profile-level recovery at least, motivation shares at least.
BOUNDS = {"separability": 0.80, "eta2": 0.80, "profile": 0.90, "rule_answerer_margin": 0.15,
          "search_hits": 0.90, "inspected_before_change": 0.90, "sourced_sentences": 0.80}
#: Depth of the one-feature trees (ours: depth 2 lets one count split three tiers).
TREE_DEPTH = 2
#: Fewest sessions per task × tier cell, on average, for an η² (ours; with n sessions in k cells pure noise gives
#: η² ≈ (k − 1) / (n − 1), so 1–2 sessions a cell read as a deterministic feature).
MIN_CELL_SESSIONS = 3
#: Folds of the within-set (leave-profiles-out) separability.
N_SPLITS = 5


# ------------------------------------------------------------------------------------------------ features
def flat_features(proc: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """Every scalar number of a procedural-feature dict as ``{"attr.key": value}`` (booleans as 0/1; dicts and
    lists skipped) plus ``reading_strategy.searches_and_browses``."""
    out: dict[str, float] = {}
    for attr, feats in sorted(proc.items()):
        if not isinstance(feats, Mapping):
            continue
        for k, v in sorted(feats.items()):
            if isinstance(v, (bool, int, float)) and not str(k).startswith("_"):
                out[f"{attr}.{k}"] = float(v)
    rs = proc.get("reading_strategy") or {}
    out["reading_strategy.searches_and_browses"] = float(rs.get("total_searches", 0) + rs.get("total_browses", 0))
    return out


def session_features(sessions: Sequence[Any]) -> tuple[np.ndarray, list[str]]:
    """The trajectory-level table of ``sessions`` (objects with ``.proc``): ``(X [n_sessions, n_features],
    names)``; a feature missing in a session reads 0. Column order: sorted names."""
    rows = [flat_features(s.proc) for s in sessions]
    names = sorted({k for r in rows for k in r})
    X = np.array([[r.get(k, 0.0) for k in names] for r in rows], dtype=np.float64).reshape(len(rows), len(names))
    return X, names


# ------------------------------------------------------------------------------------------------ trees
def tree_accuracy(x_train: np.ndarray, y_train: Sequence[str], x_test: np.ndarray, y_test: Sequence[str]) -> float:
    """Held-out accuracy of a depth-:data:`TREE_DEPTH` tree on one feature (1-D arrays)."""
    from sklearn.tree import DecisionTreeClassifier

    clf = DecisionTreeClassifier(max_depth=TREE_DEPTH, random_state=0)
    clf.fit(np.asarray(x_train, dtype=np.float64).reshape(-1, 1), list(y_train))
    pred = clf.predict(np.asarray(x_test, dtype=np.float64).reshape(-1, 1))
    return float(np.mean(pred == np.asarray(list(y_test), dtype=object)))


def best_single_feature(X_train: np.ndarray, y_train: Sequence[str], X_test: np.ndarray, y_test: Sequence[str],
                        names: Sequence[str]) -> dict[str, Any]:
    """For each column a one-feature tree fitted on the train rows and scored on the test rows; returns
    ``{"accuracy", "feature", "per_feature": {name: accuracy}}`` of the best column."""
    per = {n: tree_accuracy(X_train[:, j], y_train, X_test[:, j], y_test) for j, n in enumerate(names)}
    best = max(per, key=lambda n: (per[n], n))
    return {"accuracy": per[best], "feature": best, "per_feature": per}


def _chance(y: Sequence[str]) -> float:
    return max(Counter(y).values()) / len(y) if len(y) else float("nan")


def separability(test: Sequence[Any], train: Sequence[Any] | None = None,
                 n_splits: int = N_SPLITS) -> dict[str, Any]:
    """Single-session separability per dimension (module docstring).

    Args:
        test: sessions scored (objects with ``.proc``, ``.effective`` tiers and ``.profile_id``).
        train: sessions of another set to fit on (cross-set); None = leave-profiles-out inside ``test``
            (``GroupKFold`` by profile; a fold's accuracy is pooled over all held-out sessions).

    Returns:
        ``{dim: {"accuracy", "feature", "chance", "n_sessions", "top": [(feature, accuracy) × 5],
        "fingerprint_best": {"feature", "accuracy"}}}``; ``{dim: {"na": reason}}`` with fewer than
        ``n_splits`` profiles inside one set.
    """
    X, names = session_features(test)
    out: dict[str, Any] = {}
    if train is not None:
        Xtr_raw, names_tr = session_features(train)
        col = {n: j for j, n in enumerate(names_tr)}
        Xtr = np.array([[Xtr_raw[i, col[n]] if n in col else 0.0 for n in names] for i in range(len(train))])
        for d in DIMENSIONS:
            res = best_single_feature(Xtr, [s.effective[d] for s in train], X, [s.effective[d] for s in test],
                                      names)
            out[d] = _pack(res, [s.effective[d] for s in test])
        return out
    from sklearn.model_selection import GroupKFold

    groups = np.asarray([s.profile_id for s in test])
    if len(set(groups.tolist())) < n_splits:
        return {d: {"na": f"too few profiles: {len(set(groups.tolist()))}, need ≥ {n_splits}"} for d in DIMENSIONS}
    folds = list(GroupKFold(n_splits=n_splits).split(X, groups=groups))
    for d in DIMENSIONS:
        y = np.asarray([s.effective[d] for s in test], dtype=object)
        per: dict[str, float] = {}
        for j, n in enumerate(names):
            hits = 0
            for tr, te in folds:
                hits += round(tree_accuracy(X[tr, j], y[tr], X[te, j], y[te]) * len(te))
            per[n] = hits / len(y)
        best = max(per, key=lambda n: (per[n], n))
        out[d] = _pack({"accuracy": per[best], "feature": best, "per_feature": per}, list(y))
    return out


def _pack(res: dict[str, Any], y_test: Sequence[str]) -> dict[str, Any]:
    per = res["per_feature"]
    top = sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    fp = {n: per[n] for n in FINGERPRINT_NAMES if n in per}
    fbest = max(fp, key=lambda n: (fp[n], n)) if fp else None
    return {"accuracy": res["accuracy"], "feature": res["feature"], "chance": _chance(list(y_test)),
            "n_sessions": len(y_test), "top": [[n, a] for n, a in top],
            "fingerprint_best": {"feature": fbest, "accuracy": fp[fbest]} if fbest else None}


# ------------------------------------------------------------------------------------------------ η²
def eta_squared(values: Sequence[float], groups: Sequence[Any]) -> float:
    """Share of the variance of ``values`` explained by ``groups`` (SS_between / SS_total, 0..1); NaN when the
    values do not vary at all."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return float("nan")
    ss_tot = float(((v - v.mean()) ** 2).sum())
    if ss_tot <= 1e-12 * max(1.0, float((v ** 2).sum())):
        return float("nan")
    by: dict[Any, list[float]] = {}
    for x, g in zip(v.tolist(), groups):
        by.setdefault(g, []).append(x)
    ss_b = sum(len(xs) * (float(np.mean(xs)) - v.mean()) ** 2 for xs in by.values())
    return float(min(1.0, ss_b / ss_tot))


def task_tier_eta2(sessions: Sequence[Any], names: Iterable[str] | None = None) -> dict[str, Any]:
    """η² of task × tier per feature: ``{feature: {"eta2", "dimension", "by_dimension": {dim: η²}}}`` where
    ``eta2`` is the largest over the six dimensions' tiers (the session's effective tier) and ``dimension`` the one
    it belongs to; a feature that never varies, or a run with fewer than :data:`MIN_CELL_SESSIONS` sessions per
    cell on average, has ``eta2`` None. ``names`` = which features (default: the 17
    fingerprint features)."""
    X, all_names = session_features(sessions)
    col = {n: j for j, n in enumerate(all_names)}
    out: dict[str, Any] = {}
    for n in (list(names) if names is not None else list(FINGERPRINT_NAMES)):
        vals = X[:, col[n]] if n in col else np.zeros(len(sessions))
        by = {}
        for d in DIMENSIONS:
            cells = [(s.task_id, s.effective[d]) for s in sessions]
            # η² of cells holding one or two sessions each is close to 1 whatever the behaviour: not reported
            by[d] = (eta_squared(vals, cells) if len(cells) >= MIN_CELL_SESSIONS * len(set(cells))
                     else float("nan"))
        ok = {d: e for d, e in by.items() if e == e}
        dmax = max(ok, key=lambda d: ok[d]) if ok else None
        out[n] = {"eta2": ok[dmax] if dmax else None, "dimension": dmax, "by_dimension": by}
    return out


# ------------------------------------------------------------------------------------------------ count rules
def rule_tiers(proc: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """One session's tier per dimension by hand-written single-count rules (module docstring; thresholds = the
    TIER_TARGETS §2 hard limits, nothing fitted)."""
    rs, od = proc.get("reading_strategy") or {}, proc.get("output_detail") or {}
    ds, es = proc.get("directory_style") or {}, proc.get("edit_strategy") or {}
    vs, cm = proc.get("version_strategy") or {}, proc.get("cross_modal_behavior") or {}
    a = "M" if rs.get("total_searches", 0) >= 3 else "R" if rs.get("total_browses", 0) >= 2 else "L"
    chars = od.get("total_output_chars", 0)
    b = "L" if chars >= 9000 else "R" if chars <= 3000 else "M"
    depth = ds.get("max_dir_depth", 0)
    c = "L" if depth >= 3 else "M" if depth >= 1 else "R"
    lines = es.get("avg_lines_changed", 0)
    d = "R" if es.get("total_edits", 0) == 0 else "L" if lines < 10 else "M" if lines < 30 else "R"
    dels = vs.get("total_deletes", 0)
    e = "L" if dels >= 2 else "M" if dels == 1 else "R"
    f = ("L" if cm.get("image_files_created", 0) >= 1 else "M" if cm.get("markdown_table_rows", 0) >= 1 else "R")
    return {"A": a, "B": b, "C": c, "D": d, "E": e, "F": f}


def rule_session_accuracy(sessions: Sequence[Any]) -> dict[str, float]:
    """Share of sessions whose effective tier :func:`rule_tiers` reads, per dimension."""
    got = [rule_tiers(s.proc) for s in sessions]
    return {d: float(np.mean([g[d] == s.effective[d] for g, s in zip(got, sessions)])) if sessions else float("nan")
            for d in DIMENSIONS}


@functools.cache
def _shift_of_text() -> dict[str, tuple[str, str, str]]:
    """ShiftAna option text → ``(dimension, from, to)`` (the bench builder's own :func:`shift_text`)."""
    from filegram_ray.bench.builders.shiftana import shift_text

    return {shift_text(d, a, b): (d, a, b) for d in DIMENSIONS for a in TIERS for b in TIERS if a != b}


def _mode(xs: Sequence[str]) -> str:
    c = Counter(xs)
    return max(sorted(c), key=lambda t: c[t])


class CountRuleAnswerer:
    """A memory-less answerer of ShiftAna / AnomDet items from :func:`rule_tiers` of the shown sessions.

    Args:
        tiers_of: ``trajectory_id -> {dim: rule tier}`` of the sessions an item may show.
        seed: seeds the tie-break draw (per question id).
    """

    name = "count-rules"

    def __init__(self, tiers_of: Callable[[str], dict[str, str]], seed: int = 0):
        self.tiers_of = tiers_of
        self.seed = seed

    def _pick(self, qid: str, scores: dict[str, float]) -> str:
        top = max(scores.values())
        best = sorted(k for k, v in scores.items() if v == top)
        return random.Random(f"{self.seed}:{qid}").choice(best)

    def answer_shiftana(self, qid: str, choices: Mapping[str, str], trajectories: Sequence[str],
                        profile_id: str = "") -> str:  # noqa: ARG002 - memory-less: the user is not looked up
        parse = _shift_of_text()
        tiers = [self.tiers_of(t) for t in trajectories]
        base, last = tiers[:-1], tiers[-1]
        usual = {d: _mode([t[d] for t in base]) for d in DIMENSIONS} if base else dict(last)
        scores = {}
        for letter, text in choices.items():
            d, a, b = parse.get(text, (None, None, None))
            if d is None:
                scores[letter] = 0.0
                continue
            changed = last[d] != usual[d]
            scores[letter] = 2.0 * (changed and last[d] == b) + 1.0 * changed + 0.5 * (usual[d] == a)
        return self._pick(qid, scores)

    def answer_anomdet(self, qid: str, choices: Mapping[str, str], trajectories: Sequence[str],
                       labels: Sequence[str], profile_id: str = "") -> str:  # noqa: ARG002 - memory-less
        tiers = {lab: self.tiers_of(t) for lab, t in zip(labels, trajectories)}
        scores = {}
        for letter, lab in choices.items():
            if lab not in tiers:
                scores[letter] = 0.0
                continue
            others = [v for k, v in tiers.items() if k != lab]
            usual = {d: _mode([o[d] for o in others]) for d in DIMENSIONS} if others else tiers[lab]
            scores[letter] = float(sum(tiers[lab][d] != usual[d] for d in DIMENSIONS))
        return self._pick(qid, scores)


class MemoryRuleAnswerer(CountRuleAnswerer):
    """The same single-count readings (:func:`rule_tiers`), but the user's usual way comes from *memory*: how often
    each reading occurs over all of the user's other sessions in the run (Laplace-smoothed shares, the asked-about
    sessions left out), not from the sessions the item shows. The reference for "the items reward memory": what
    the count-rule bound takes away from a memory-less reader must stay open to one that remembers the user.

    ShiftAna: an option "``a`` → ``b`` on dimension ``e``" scores the surprise ``-log share(e reads b)`` when the
    shown session reads ``b`` on ``e`` (0 otherwise); AnomDet: each shown session's summed surprise over the six
    readings, the user's shares taken without that session.

    Args:
        tiers_of: ``trajectory_id -> {dim: rule tier}`` of every session of the run.
        sessions_of: ``profile_id -> trajectory ids`` of every session of that user in the run (perturbed ones
            included: a memory does not know which sessions were perturbed).
    """

    name = "memory-rules"

    def __init__(self, tiers_of: Callable[[str], dict[str, str]], sessions_of: Callable[[str], Sequence[str]],
                 seed: int = 0):
        super().__init__(tiers_of, seed)
        self.sessions_of = sessions_of

    def _shares(self, profile_id: str, leave_out: set[str]) -> dict[str, dict[str, float]]:
        seen = [self.tiers_of(t) for t in self.sessions_of(profile_id) if t not in leave_out]
        return {d: {t: (sum(s[d] == t for s in seen) + 1.0) / (len(seen) + len(TIERS)) for t in TIERS}
                for d in DIMENSIONS}

    def answer_shiftana(self, qid: str, choices: Mapping[str, str], trajectories: Sequence[str],
                        profile_id: str = "") -> str:
        parse = _shift_of_text()
        last = self.tiers_of(trajectories[-1])
        share = self._shares(profile_id or trajectories[-1].split("/")[0], {trajectories[-1]})
        scores = {}
        for letter, text in choices.items():
            d, _a, b = parse.get(text, (None, None, None))
            scores[letter] = -math.log(share[d][b]) if d is not None and last.get(d) == b else 0.0
        return self._pick(qid, scores)

    def answer_anomdet(self, qid: str, choices: Mapping[str, str], trajectories: Sequence[str],
                       labels: Sequence[str], profile_id: str = "") -> str:
        by_label = dict(zip(labels, trajectories))
        scores = {}
        for letter, lab in choices.items():
            t = by_label.get(lab)
            if t is None or not profile_id:
                scores[letter] = 0.0
                continue
            share, tiers = self._shares(profile_id, {t}), self.tiers_of(t)
            scores[letter] = float(sum(-math.log(share[d][tiers[d]]) for d in DIMENSIONS if tiers[d] in TIERS))
        return self._pick(qid, scores)


def score_rule_answerer(items: Sequence[Any], keys: Mapping[str, str], answerer: CountRuleAnswerer
                        ) -> dict[str, Any]:
    """Accuracy of ``answerer`` on the ShiftAna / AnomDet items among ``items`` (bench
    :class:`~filegram_ray.bench.schema.Item`), with ``keys`` = ``question_id -> correct letter``.

    Returns ``{sub_task: {"accuracy", "chance", "n", "margin" (accuracy − chance), "interval" ([lo, hi], the
    margin's 95 % percentile interval by bootstrap over the items' profiles, filegram_ray.stats.bootstrap_ci: a
    profile's items share its sessions; None with fewer than 2 profiles), "n_profiles"}}``."""
    from filegram_ray.bench.schema import LETTERS
    from filegram_ray.stats import bootstrap_ci

    hits: dict[str, list[float]] = {}
    chance: dict[str, list[float]] = {}
    users: dict[str, list[str]] = {}
    for it in items:
        if it.sub_track not in ("ShiftAna", "AnomDet") or not it.choices:
            continue
        choices = {LETTERS[i]: c for i, c in enumerate(it.choices)}
        if it.sub_track == "ShiftAna":
            got = answerer.answer_shiftana(it.question_id, choices, it.context.trajectories, it.profile_id)
        else:
            got = answerer.answer_anomdet(it.question_id, choices, it.context.trajectories, it.context.labels,
                                          it.profile_id)
        hits.setdefault(it.sub_track, []).append(float(got == keys[it.question_id]))
        chance.setdefault(it.sub_track, []).append(1.0 / len(it.choices))
        users.setdefault(it.sub_track, []).append(it.profile_id)
    out = {}
    for s in sorted(hits):
        acc, ch = float(np.mean(hits[s])), float(np.mean(chance[s]))
        k = len(set(users[s]))
        # accuracy − chance is the mean over items of (hit − 1 / choices): its interval is that mean's
        _, lo, hi = bootstrap_ci([h - c for h, c in zip(hits[s], chance[s])], users[s])
        out[s] = {"accuracy": acc, "chance": ch, "n": len(hits[s]), "margin": acc - ch, "n_profiles": k,
                  "interval": [lo, hi] if k >= 2 else None}
    return out
