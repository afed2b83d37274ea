"""What the bench builders work from: profiles, tasks, usable trajectories and (optionally) their fingerprints.

The builders take plain records so they run on any profile set (the 20 FileGram profiles, a synthetic set in
tests, thousands of generated profiles). :func:`load_bench_inputs` fills them from a run directory:

* profiles: ``filegram_ray.profiles.load_profiles(dir)`` (Profile models or dicts) → :class:`ProfileRec`;
* tasks: ``filegram_ray.tasks.load_tasks(dir)`` → :class:`TaskRec` (task ids of the index when the task loader
  is not available);
* trajectories: ``trajectories/index.parquet`` (rows whose ``status`` is not an error) + each perturbed
  trajectory's ``meta.json`` perturbation;
* fingerprints: ``engrams/<profile_id>/<task_id>.json`` field ``fingerprint`` (17 floats, reference §7.3), if the
  encode stage ran.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from filegram_ray.bench.recordings import load_recordings
from filegram_ray.bench.vocab import DIMENSIONS, TIERS
from filegram_ray.memory.constants import FINGERPRINT_NAMES

log = logging.getLogger(__name__)

#: The 17 fingerprint features in order (reference §7.3): the memory's own names, ``attribute.key``.
FINGERPRINT_FEATURES: tuple[str, ...] = FINGERPRINT_NAMES

#: Index ``status`` values that make a trajectory unusable for the bench.
BAD_STATUSES = frozenset({"error", "failed", "skipped", "incomplete"})


@dataclass(frozen=True)
class ProfileRec:
    """A profile as the bench needs it.

    Attributes:
        profile_id: e.g. ``"p1_methodical"``.
        name, role, language: identity (reference §5.2), language ``"English"``/``"Chinese"``.
        tiers: ``{"A": "L", …, "F": "M"}`` (matrix tiers, E = curation; reference §5.1).
        attributes: the behavioural attributes (reference §5.2/5.4), e.g. ``{"tone": "professional", …}``.
    """

    profile_id: str
    name: str
    role: str
    language: str
    tiers: dict[str, str]
    attributes: dict[str, str]

    def vector(self) -> tuple[str, ...]:
        return tuple(self.tiers[d] for d in DIMENSIONS)


@dataclass(frozen=True)
class TaskRec:
    """A task: id, type (understand/create/…), probed dimensions in priority order, short English title."""

    task_id: str
    type: str = ""
    dimensions: tuple[str, ...] = ()
    title: str = ""


@dataclass(frozen=True)
class TrajRec:
    """A usable trajectory; ``perturbation`` = ``{"dimension", "from", "to"}`` or ``None`` (reference §5.7).

    ``shift_real``: the generator's counterfactual check (``meta.json`` ``perturbation_check``): True = the shift
    changed the perturbed dimension's features, False = it did not (a no-op), None = not checked.
    ``acting_tiers``: perturbed persona-simulator sessions only (``meta.json``): the tier each dimension acted in
    (``{dim: tier}``); None otherwise."""

    trajectory_id: str
    profile_id: str
    task_id: str
    perturbation: dict[str, str] | None = None
    fingerprint: tuple[float, ...] | None = None
    shift_real: bool | None = None
    acting_tiers: dict[str, str] | None = None

    @property
    def perturbed(self) -> bool:
        return self.perturbation is not None


@dataclass
class BenchInputs:
    """Everything the builders read. ``trajectories`` holds usable trajectories only; ``rendered`` the ids of
    trajectories whose outputs the render stage turned into PDFs/images (FileGrd); ``recordings`` the recorded and
    captioned trajectories (:class:`~filegram_ray.bench.recordings.RecordingRec` by id, VisGrd)."""

    profiles: list[ProfileRec]
    tasks: list[TaskRec]
    trajectories: list[TrajRec]
    rendered: frozenset[str] = frozenset()
    #: trajectories of the index left out because a file of theirs is unreadable or malformed:
    #: ``{"trajectory_id", "file", "error"}`` (the error names the file and the field); one bad trajectory never
    #: stops the stage
    skipped: list[dict[str, str]] = field(default_factory=list)
    recordings: dict[str, Any] = field(default_factory=dict)
    #: what the render stage did, for FileGrd's note: ``{"ran": bool, "limit": int | None}`` (``ran`` = a
    #: ``derivatives/index.parquet`` exists; ``limit`` = the ``render.limit`` its last run recorded in ``run.json``);
    #: empty = unknown (inputs built in memory)
    render: dict[str, Any] = field(default_factory=dict)
    #: the profile / task ids the run holds (``run.json`` generate record, else the trajectory index): default
    #: counts scale to them (:attr:`n_profiles`, :attr:`n_tasks`), while ``profiles`` stays the whole set that
    #: distractor profiles are drawn from. Empty = the whole set.
    run_profiles: frozenset[str] = frozenset()
    run_tasks: frozenset[str] = frozenset()
    _by_profile: dict[str, list[TrajRec]] = field(default_factory=dict, init=False, repr=False)
    _profiles: dict[str, ProfileRec] = field(default_factory=dict, init=False, repr=False)
    _tasks: dict[str, TaskRec] = field(default_factory=dict, init=False, repr=False)
    _similar: dict[tuple[str, int], list[ProfileRec]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.profiles = sorted(self.profiles, key=lambda p: p.profile_id)
        self.tasks = sorted(self.tasks, key=lambda t: t.task_id)
        self.trajectories = sorted(self.trajectories, key=lambda t: t.trajectory_id)
        for t in self.trajectories:
            self._by_profile.setdefault(t.profile_id, []).append(t)
        self._profiles = {p.profile_id: p for p in self.profiles}
        self._tasks = {t.task_id: t for t in self.tasks}

    def scaled_profiles(self) -> list[ProfileRec]:
        """The profiles counts scale to: those of ``profiles`` the run holds (all of them when unknown, or when
        none of the run's ids is in the set)."""
        held = [p for p in self.profiles if p.profile_id in self.run_profiles]
        return held or list(self.profiles)

    @property
    def n_profiles(self) -> int:
        """Number of profiles the default counts scale to (reference §9.1 counts are for 20)."""
        return len(self.scaled_profiles())

    @property
    def n_tasks(self) -> int:
        """Number of tasks the default counts scale to (reference §9.1 counts are for 32)."""
        return sum(t.task_id in self.run_tasks for t in self.tasks) or len(self.tasks)

    def profile(self, pid: str) -> ProfileRec:
        try:
            return self._profiles[pid]
        except KeyError:
            raise KeyError(f"unknown profile {pid!r}") from None

    def task(self, tid: str) -> TaskRec:
        return self._tasks.get(tid) or TaskRec(task_id=tid)

    def similar(self, pid: str, min_shared: int) -> list[ProfileRec]:
        """Profiles 1..(6 − ``min_shared``) dimensions away from ``pid``, nearest first (cached)."""
        key = (pid, min_shared)
        if key not in self._similar:
            target = self.profile(pid)
            near = []
            for p in self.profiles:
                dist = sum(a != b for a, b in zip(target.vector(), p.vector()))
                if 1 <= dist <= len(DIMENSIONS) - min_shared:
                    near.append((dist, p.profile_id, p))
            self._similar[key] = [p for _, _, p in sorted(near, key=lambda x: x[:2])]
        return self._similar[key]

    def trajectories_of(self, pid: str) -> list[TrajRec]:
        return list(self._by_profile.get(pid, []))

    def effective_tiers(self, traj: TrajRec) -> dict[str, str]:
        """The tiers the trajectory was generated under: the profile's, with the perturbation applied."""
        tiers = dict(self.profile(traj.profile_id).tiers)
        if traj.perturbation:
            tiers[traj.perturbation["dimension"]] = traj.perturbation["to"]
        return tiers


# ------------------------------------------------------------------------------------------------ normalisers
def _as_dict(obj: Any) -> dict[str, Any]:
    if isinstance(obj, dict):
        return obj
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json", by_alias=True)
    return dict(vars(obj))


def profile_record(obj: Any, source: str = "<profile>") -> ProfileRec:
    """Normalise a Profile model or dict into a :class:`ProfileRec`.

    Raises:
        ValueError: a required field is missing or a tier is not L/M/R (message names ``source`` and the field).
    """
    d = _as_dict(obj)
    pid = d.get("profile_id") or d.get("id")
    if not pid:
        raise ValueError(f"{source}: field 'profile_id' is missing")
    tiers = d.get("tiers")
    if not isinstance(tiers, dict):
        raise ValueError(f"{source}: field 'tiers' must be a mapping A..F -> L/M/R")  # noqa: TRY004
    tiers = {k: str(v) for k, v in tiers.items()}
    for dim in DIMENSIONS:
        if tiers.get(dim) not in TIERS:
            raise ValueError(f"{source}: field 'tiers.{dim}' must be one of L/M/R, got {tiers.get(dim)!r}")
    attrs = d.get("attributes") or {}
    if not isinstance(attrs, dict):
        raise ValueError(f"{source}: field 'attributes' must be a mapping")  # noqa: TRY004
    return ProfileRec(profile_id=str(pid), name=str(d.get("name") or ""), role=str(d.get("role") or ""),
                      language=str(d.get("language") or ""), tiers={k: tiers[k] for k in DIMENSIONS},
                      attributes={str(k): str(v) for k, v in attrs.items() if v is not None})


def task_record(obj: Any) -> TaskRec:
    """Normalise a Task model or dict into a :class:`TaskRec` (unknown dimensions dropped)."""
    d = _as_dict(obj)
    dims = tuple(x for x in (d.get("dimensions") or []) if x in DIMENSIONS)
    title = d.get("name_en") or d.get("title") or d.get("name") or ""
    return TaskRec(task_id=str(d.get("task_id") or d.get("id")), type=str(d.get("type") or ""),
                   dimensions=dims, title=str(title))


# ------------------------------------------------------------------------------------------------ run loader
def load_bench_inputs(run, profiles: list[Any] | None = None, tasks: list[Any] | None = None,
                      profiles_dir: str | None = None, tasks_dir: str | None = None,
                      profile_ids: list[str] | None = None) -> BenchInputs:
    """Read the bench inputs from a :class:`~filegram_ray.storage.RunDir`.

    Args:
        run: the run directory (needs ``trajectories/index.parquet``).
        profiles / tasks: already-loaded records (models or dicts); ``None`` = use the project loaders.
        profiles_dir / tasks_dir: passed to the loaders.
        profile_ids: restrict to these profiles (full ids or the short ``p<N>`` form).

    A trajectory whose folder is missing, or whose ``meta.json`` or Engram is unreadable or malformed (truncated, not UTF-8, not an object,
    a perturbation field missing or not a dimension/tier, a fingerprint that is not 17 numbers), or whose
    ``meta.json`` is missing although the index marks it perturbed, is left out and listed in
    :attr:`BenchInputs.skipped` with an error naming the file and the field.

    Raises:
        StorageError: the trajectory index is missing or unreadable; ValueError: it lacks a column.
        ValueError: a profile is malformed (message names the file and field); a profile id of
            ``profile_ids`` is not in the profile set.
    """
    if profiles is None:
        from filegram_ray.profiles import load_profiles  # the profile area's loader

        profiles = load_profiles(profiles_dir) if profiles_dir else load_profiles()
    precs = [profile_record(p, source=f"profile #{i}") for i, p in enumerate(profiles)]
    if profile_ids:  # short ids (p1 → p1_methodical) resolve as in the generate stage; an unknown id is an error
        from filegram_ray.config import match_ids

        keep = set(match_ids(profile_ids, [p.profile_id for p in precs], "profiles",
                             f"the profile set {profiles_dir or 'conf/profiles'}"))
        precs = [p for p in precs if p.profile_id in keep]
    known = {p.profile_id for p in precs}

    index = run.read_table("trajectories/index.parquet")
    rows = index.to_dicts()
    if tasks is None:
        try:
            from filegram_ray.tasks import load_tasks

            tasks = load_tasks(tasks_dir) if tasks_dir else load_tasks()
        except (ImportError, AttributeError):  # task area not built: fall back to the ids in the index
            log.warning("filegram_ray.tasks.load_tasks unavailable; tasks taken from the index without dimensions")
            tasks = [{"task_id": t} for t in sorted({r["task_id"] for r in rows})]
    trecs = [task_record(t) for t in tasks]

    missing = [c for c in ("trajectory_id", "profile_id", "task_id") if c not in index.columns]
    if missing:
        raise ValueError(f"{run.url('trajectories/index.parquet')}: column(s) {', '.join(missing)} missing")
    trajs: list[TrajRec] = []
    skipped: list[dict[str, str]] = []
    for r in rows:
        if r.get("profile_id") not in known:
            continue
        if str(r.get("status") or "ok").lower() in BAD_STATUSES:
            continue
        tid = r["trajectory_id"]
        try:
            if not run.exists(f"trajectories/{tid}"):
                raise _UnitProblem(f"trajectories/{tid}", f"{run.url(f'trajectories/{tid}')}: missing, but the index "
                                                          f"lists {tid} as generated")
            pert, shift_real, acting = _perturbation(run, tid, r.get("perturbed"))
            fp = _fingerprint(run, r["profile_id"], r["task_id"])
        except _UnitProblem as exc:
            skipped.append({"trajectory_id": str(tid), "file": exc.file, "error": str(exc)})
            log.warning("bench: trajectory %s left out: %s", tid, exc)
            continue
        trajs.append(TrajRec(trajectory_id=tid, profile_id=r["profile_id"], task_id=r["task_id"],
                             perturbation=pert, fingerprint=fp, shift_real=shift_real, acting_tiers=acting))
    rendered = rendered_trajectories(run, [t.trajectory_id for t in trajs])
    return BenchInputs(profiles=precs, tasks=trecs, trajectories=trajs, rendered=rendered, skipped=skipped,
                       recordings=load_recordings(run, [t.trajectory_id for t in trajs]),
                       render=render_state(run))


def render_state(run) -> dict[str, Any]:
    """``{"ran", "limit"}``: whether the render stage has written ``derivatives/index.parquet``, and the
    ``render.limit`` of its last run (``run.json`` → ``stages.render.options.limit``; None = unlimited or not
    recorded)."""
    limit = None
    if run.exists("run.json"):
        try:
            from filegram_ray.schema.meta import read_manifest

            rec = (read_manifest(run).get("stages") or {}).get("render") or {}
            limit = (rec.get("options") or {}).get("limit")
        except Exception:  # noqa: BLE001 - only a note depends on it; a bad run.json is reported by its stage
            limit = None
    return {"ran": run.exists("derivatives/index.parquet"), "limit": limit if isinstance(limit, int) else None}


class _UnitProblem(ValueError):
    """A per-trajectory file of the bench inputs is unreadable or malformed; ``file`` is its run-relative path."""

    def __init__(self, file: str, message: str) -> None:
        super().__init__(message)
        self.file = file


def _read_unit_json(run, rel: str) -> Any:
    from filegram_ray.storage import StorageError

    try:
        return run.read_json(rel)
    except StorageError as exc:
        raise _UnitProblem(rel, str(exc)) from None


def _perturbation(run, tid: str, perturbed: Any
                  ) -> tuple[dict[str, str] | None, bool | None, dict[str, str] | None]:
    """(perturbation, shift_real, acting_tiers) of trajectory ``tid`` from its ``meta.json`` (read only when the
    index does not say the trajectory is unperturbed; acting tiers only of a perturbed session). Raises
    :class:`_UnitProblem` naming the file and the field."""
    if perturbed is not None and not bool(perturbed):
        return None, None, None
    meta_rel = f"trajectories/{tid}/meta.json"
    where = run.url(meta_rel)
    if not run.exists(meta_rel):
        if perturbed:
            raise _UnitProblem(meta_rel, f"{where}: missing, but the index marks {tid} as perturbed")
        return None, None, None
    meta = _read_unit_json(run, meta_rel)
    if not isinstance(meta, dict):
        raise _UnitProblem(meta_rel, f"{where}: expected a JSON object, got {type(meta).__name__}")
    pert = meta.get("perturbation")
    if pert is None:
        if perturbed:
            raise _UnitProblem(meta_rel, f"{where}: field 'perturbation' is null, but the index marks {tid} as "
                                         "perturbed")
        return None, None, None
    if not isinstance(pert, dict):
        raise _UnitProblem(meta_rel, f"{where}: field 'perturbation' must be an object or null, got "
                                     f"{type(pert).__name__}")
    for f, allowed in (("dimension", DIMENSIONS), ("from", TIERS), ("to", TIERS)):
        if f not in pert:
            raise _UnitProblem(meta_rel, f"{where}: field 'perturbation.{f}' is missing")
        if pert[f] not in allowed:
            raise _UnitProblem(meta_rel, f"{where}: field 'perturbation.{f}' must be one of "
                                         f"{'/'.join(allowed)}, got {pert[f]!r:.80}")
    check = meta.get("perturbation_check")
    if check is None:
        check = {}
    if not isinstance(check, dict):
        raise _UnitProblem(meta_rel, f"{where}: field 'perturbation_check' must be an object or null, got "
                                     f"{type(check).__name__}")
    shift_real = None
    if check.get("status") in ("real", "replaced", "dropped"):
        shift_real = check["status"] != "dropped" and bool(check.get("shift"))
    acting = meta.get("acting_tiers")
    if acting is not None and not (isinstance(acting, dict) and set(acting) == set(DIMENSIONS)
                                   and all(v in TIERS for v in acting.values())):
        raise _UnitProblem(meta_rel, f"{where}: field 'acting_tiers' must map each of {'/'.join(DIMENSIONS)} to "
                                     f"one of {'/'.join(TIERS)}, got {acting!r:.80}")
    return ({"dimension": pert["dimension"], "from": pert["from"], "to": pert["to"]}, shift_real,
            dict(acting) if acting is not None else None)


def _fingerprint(run, profile_id: str, task_id: str) -> tuple[float, ...] | None:
    """The 17-D fingerprint of ``engrams/<profile_id>/<task_id>.json`` (None without an Engram: encode has not
    run). Raises :class:`_UnitProblem` naming the file and the field when the Engram is unreadable or its
    fingerprint is not 17 finite numbers (or a mapping holding the 17 feature names)."""
    import math

    eng_rel = f"engrams/{profile_id}/{task_id}.json"
    if not run.exists(eng_rel):
        return None
    eng = _read_unit_json(run, eng_rel)
    where = run.url(eng_rel)
    if not isinstance(eng, dict):
        raise _UnitProblem(eng_rel, f"{where}: expected a JSON object, got {type(eng).__name__}")
    raw = eng.get("fingerprint")
    if raw is None:
        return None
    if isinstance(raw, dict):  # keyed by feature name: put it in the reference §7.3 order
        if not set(FINGERPRINT_FEATURES) <= set(raw):
            return None
        raw = [raw[k] for k in FINGERPRINT_FEATURES]
    if not isinstance(raw, list) or len(raw) != len(FINGERPRINT_FEATURES) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in raw):
        raise _UnitProblem(eng_rel, f"{where}: field 'fingerprint' must be {len(FINGERPRINT_FEATURES)} finite "
                                    f"numbers, got {str(raw)[:80]}")
    return tuple(float(x) for x in raw)


#: outputs the render stage turns into derivatives (``rendering.stage.RenderConfig.text_extensions`` default)
RENDERED_EXTENSIONS = (".md", ".markdown", ".txt")


def rendered_trajectories(run, trajectory_ids: list[str] | None = None,
                          extensions: tuple[str, ...] = RENDERED_EXTENSIONS) -> frozenset[str]:
    """Trajectories a method can be shown in the Multimodal setting (FileGrd's pool, reference §9.1 T4).

    A trajectory qualifies once the render stage has run (``derivatives/index.parquet`` exists) and each of its
    text outputs (``trajectories/outputs.parquet`` rows whose path ends with one of ``extensions``) has at least
    one row in that index, whatever its status: a derivative that failed leaves a gap in what the method sees,
    as a failed conversion would. A trajectory of ``trajectory_ids`` with no text output qualifies as well: it has
    nothing to render, so the setting shows it exactly as the text setting does. (Counting only the ids listed
    in the index, as before, dropped every all-sessions item of a user with one such trajectory: an AttrRec
    item needs all 32 of them.) Without ``outputs.parquet``, or an index without a ``source`` column, the ids
    listed in the index qualify.

    Returns:
        the qualifying trajectory ids (empty when the render stage has not run).
    """
    if not run.exists("derivatives/index.parquet"):
        return frozenset()
    der = run.read_table("derivatives/index.parquet")
    if "trajectory_id" not in der.columns:
        return frozenset()
    listed = {str(x) for x in der["trajectory_id"].to_list()}
    if "source" not in der.columns or not run.exists("trajectories/outputs.parquet"):
        return frozenset(listed)
    handled = {(str(t), str(s)) for t, s in zip(der["trajectory_id"].to_list(), der["source"].to_list())}
    outs = run.read_table("trajectories/outputs.parquet")
    text: dict[str, set[str]] = {}
    for t, path in zip(outs["trajectory_id"].to_list(), outs["path"].to_list()):
        if str(path).lower().endswith(extensions):
            text.setdefault(str(t), set()).add(str(path))
    ready = {t for t, paths in text.items() if all((t, p) in handled for p in paths)}
    ready |= {str(t) for t in (trajectory_ids or []) if str(t) not in text}
    return frozenset(ready)
