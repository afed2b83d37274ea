"""Profile sets: load personas from ``conf/profiles/*.yaml`` (ours) or upstream ``profiles/pN_*.yaml``.

**E means CURATION in this project** (L selective, M pragmatic, R preservative — upstream ``profile_matrix.json``).
Upstream's YAML header vectors (``# L/M/R Vector: A:M B:R ...``) use the old *work rhythm* E (L phased, M steady,
R bursty) whose M and R are swapped relative to curation for 13 of the 20 profiles (ref §5.1). Loading upstream
files we therefore take tiers from ``profile_matrix.json`` when it sits in the same directory, and otherwise convert
the header's E by swapping M<->R; the header's own E becomes :attr:`Profile.rhythm`.

Public API:

- :func:`load_profiles(path=None) -> list[Profile]` — a directory (default
  :func:`filegram_ray.paths.profiles_dir`, i.e. ``conf/profiles``) or one file; sorted by the number in the id
  (``p2`` before ``p10``), ids without a number after those, by id.
- :func:`load_profile(file, matrix=None) -> Profile` — one YAML file, either format.
- :class:`ProfileError` (``ValueError``): the message names the file, the field and the problem — missing tier,
  unknown tier, wrong type, duplicate id, missing attribute, unreadable YAML.

Upstream mapping: ``basic.{name, role, language}``; ``personality.{tone, verbosity, output_detail}`` and the 13
``work_habits`` attributes form the 16 attributes; ``system_prompt_addition`` becomes ``persona``; the flat
``preferences``/``avoidances`` lists are split per dimension by their ``"A:L - "`` tag, or — when untagged — by a
keyword rule (:func:`_guess_dimension`; no keyword: dimension B, the production catch-all).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from filegram_ray.errors import UserError
from filegram_ray.limits import load_json, load_yaml, read_utf8
from filegram_ray.schema.profile import (
    BEHAVIOURAL_ATTRIBUTES,
    DIMENSIONS,
    RHYTHM_BY_TIER,
    TIERS,
    Profile,
)

_VECTOR_RE = re.compile(r"L/M/R Vector:\s*((?:[A-F]\s*:\s*\S+\s*)+)")
_TAG_RE = re.compile(r"^\s*([A-F])\s*:\s*[LMR]\s*[-–—:]\s*(.*)$", re.DOTALL)
MATRIX_FILE = "profile_matrix.json"

#: keyword rule for untagged upstream preference lines (first match wins; order matters).
_DIM_KEYWORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("F", ("table", "image", "chart", "visual", "diagram", "figure", "mermaid", "表格", "图", "可视")),
    ("E", ("delete", "temporary", "temp file", "clean", "prune", "rm ", "删除", "清理", "临时")),
    ("D", ("edit", "rewrite", "backup", "overwrite", "revision", "修改", "重写", "备份", "覆盖")),
    ("C", ("director", "folder", "mkdir", "subdir", "file name", "naming", "名", "目录", "文件夹")),
    ("A", ("read", "grep", "glob", "search", "skim", "scan", "browse", "阅读", "搜索", "浏览", "读")),
)


class ProfileError(UserError):
    """A profile file that cannot be loaded; the message names file, field and problem."""


def _fail(source: Any, field: str, problem: str) -> ProfileError:
    return ProfileError(f"{source}: field '{field}': {problem}")


def _read_yaml(path: Path) -> tuple[dict[str, Any], str]:
    try:
        text = read_utf8(path)
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from exc
    except ValueError as exc:  # not UTF-8, too large (names the file)
        raise ProfileError(str(exc)) from None
    try:
        data = load_yaml(text, str(path))  # duplicate keys are errors; deep nesting is "nesting too deep"
    except ValueError as exc:
        raise ProfileError(str(exc)) from None
    if data is None:
        raise _fail(path, "<root>", "empty file: expected a profile mapping")
    if not isinstance(data, dict):
        raise _fail(path, "<root>", f"wrong type: expected a mapping, got {type(data).__name__}")
    return data, text


def _check_tiers(path: Path, tiers: Any, field: str = "tiers") -> dict[str, str]:
    if not isinstance(tiers, dict):
        raise _fail(path, field, f"wrong type: expected a mapping A..F -> L|M|R, got {type(tiers).__name__}")
    for d in DIMENSIONS:
        if d not in tiers:
            raise _fail(path, f"{field}.{d}", "missing tier")
        if not isinstance(tiers[d], str):
            raise _fail(path, f"{field}.{d}", f"wrong type: expected one of L/M/R, got {type(tiers[d]).__name__}")
        if tiers[d] not in TIERS:
            raise _fail(path, f"{field}.{d}", f"unknown tier {tiers[d]!r} (expected L, M or R)")
    extra = sorted(set(tiers) - set(DIMENSIONS))
    if extra:
        raise _fail(path, field, f"unknown dimension(s) {extra}")
    return {d: tiers[d] for d in DIMENSIONS}


def _guess_dimension(line: str) -> str:
    low = line.lower()
    for dim, words in _DIM_KEYWORDS:
        if any(w in low for w in words):
            return dim
    return "B"


def _split_by_dim(items: Any, path: Path, field: str) -> dict[str, list[str]]:
    if items is None:
        return {}
    if isinstance(items, dict):
        return items
    if not isinstance(items, list):
        raise _fail(path, field, f"wrong type: expected a list of strings, got {type(items).__name__}")
    out: dict[str, list[str]] = {}
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise _fail(path, f"{field}[{i}]", f"wrong type: expected str, got {type(item).__name__}")
        m = _TAG_RE.match(item)
        dim, text = (m.group(1), m.group(2).strip()) if m else (_guess_dimension(item), item.strip())
        out.setdefault(dim, []).append(text)
    return out


def _read_matrix(directory: Path) -> dict[str, dict[str, str]] | None:
    f = directory / MATRIX_FILE
    if not f.is_file():
        return None
    try:
        data = load_json(f.read_bytes(), str(f))
        return {pid: dict(v["dimensions"]) for pid, v in data["profiles"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ProfileError(f"{f}: field 'profiles.<id>.dimensions': unreadable profile matrix: {exc}") from exc


def _from_upstream(path: Path, data: dict[str, Any], text: str,
                   matrix: dict[str, dict[str, str]] | None) -> dict[str, Any]:
    basic = data.get("basic")
    if not isinstance(basic, dict):
        raise _fail(path, "basic", "missing or wrong type (expected a mapping with name/role/language)")
    pers = data.get("personality") or {}
    habits = data.get("work_habits") or {}
    if not isinstance(pers, dict) or not isinstance(habits, dict):
        raise _fail(path, "personality/work_habits", "wrong type: expected mappings")
    pid = path.stem
    m = _VECTOR_RE.search(text)
    header: dict[str, str] | None = None
    if m:
        header = dict(tok.replace(" ", "").split(":", 1) for tok in re.findall(r"[A-F]\s*:\s*\S+", m.group(1)))
        header = _check_tiers(path, header, "L/M/R Vector (header comment)")
    if matrix is not None and pid in matrix:
        tiers = _check_tiers(path, matrix[pid], f"{MATRIX_FILE}:profiles.{pid}.dimensions")
    elif header is not None:
        tiers = dict(header)
        tiers["E"] = {"L": "L", "M": "R", "R": "M"}[header["E"]]  # rhythm-E -> curation-E (ref §5.1)
    else:
        raise _fail(path, "L/M/R Vector (header comment)", f"missing tier vector and no {MATRIX_FILE} entry")
    if header is not None:
        rhythm = RHYTHM_BY_TIER[header["E"]]
    else:
        rhythm = RHYTHM_BY_TIER[{"L": "L", "M": "R", "R": "M"}[tiers["E"]]]
    attrs: dict[str, Any] = {}
    for a in BEHAVIOURAL_ATTRIBUTES:
        src = pers if a in ("tone", "verbosity", "output_detail") else habits
        if a not in src:
            raise _fail(path, f"{'personality' if src is pers else 'work_habits'}.{a}", "missing attribute")
        attrs[a] = src[a]
    return {
        "profile_id": pid, "name": basic.get("name"), "role": basic.get("role"),
        "language": basic.get("language"), "tiers": tiers, "rhythm": rhythm, "attributes": attrs,
        "persona": str(data.get("system_prompt_addition") or "").strip(),
        "preferences": _split_by_dim(habits.get("preferences"), path, "work_habits.preferences"),
        "avoidances": _split_by_dim(habits.get("avoidances"), path, "work_habits.avoidances"),
        "greeting": str(data.get("greeting") or "").strip(),
    }


def _misspelt(data: dict[str, Any], field: str) -> str:
    """``" (unknown key 'teirs': did you mean 'tiers'?)"`` when a key of ``data`` that no profile has is close to
    the missing ``field`` (difflib ratio ≥ 0.75: one swap or typo in a short key), else ``""``."""
    import difflib

    known = set(Profile.model_fields)
    close = difflib.get_close_matches(field, [str(k) for k in data if str(k) not in known], n=1, cutoff=0.75)
    return f" (unknown key {close[0]!r}: did you mean {field!r}?)" if close else ""


def load_profile(file: str | Path, matrix: dict[str, dict[str, str]] | None = None) -> Profile:
    """Load one profile YAML (ours or upstream's). For upstream files, ``matrix`` (profile id -> tiers, E =
    curation) overrides the header vector; when None, ``profile_matrix.json`` beside the file is used if present.
    Raises :class:`ProfileError`."""
    path = Path(file)
    data, text = _read_yaml(path)
    if "basic" in data and "profile_id" not in data:
        if matrix is None:
            matrix = _read_matrix(path.parent)
        data = _from_upstream(path, data, text, matrix)
    else:
        if "tiers" not in data:
            raise _fail(path, "tiers", "missing tier vector" + _misspelt(data, "tiers"))
        data = dict(data, tiers=_check_tiers(path, data["tiers"]))
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"field '{'.'.join(str(p) for p in e['loc']) or '<root>'}': {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors())
        raise ProfileError(f"{path}: {problems}") from None


def _sort_key(p: Profile) -> tuple[int, int, str]:
    n = p.number
    return (0, n, p.profile_id) if n is not None else (1, 0, p.profile_id)


def load_profiles(path: str | Path | None = None) -> list[Profile]:
    """All profiles under ``path`` (directory of ``*.yaml``/``*.yml``, or one file), sorted by id number.

    Raises :class:`ProfileError` on a malformed file or a duplicate ``profile_id`` (naming both files), and when the
    directory holds no profile; ``FileNotFoundError`` when ``path`` does not exist."""
    from filegram_ray.paths import profiles_dir

    root = Path(path) if path is not None else profiles_dir()
    if not root.exists():
        raise FileNotFoundError(f"profile path not found: {root}")
    files = [root] if root.is_file() else sorted(p for p in root.iterdir() if p.suffix in (".yaml", ".yml"))
    matrix = _read_matrix(root if root.is_dir() else root.parent)
    seen: dict[str, Path] = {}
    out: list[Profile] = []
    for f in files:
        prof = load_profile(f, matrix=matrix)
        if prof.profile_id in seen:
            raise _fail(f, "profile_id", f"duplicate id {prof.profile_id!r} (also in {seen[prof.profile_id]})")
        seen[prof.profile_id] = f
        out.append(prof)
    if not out:
        raise ProfileError(f"{root}: no profile files (*.yaml)")
    return sorted(out, key=_sort_key)


__all__ = ["ProfileError", "load_profile", "load_profiles"]
