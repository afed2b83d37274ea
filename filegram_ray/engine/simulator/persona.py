"""The resolved persona the simulator acts out: effective tiers (after a perturbation), attributes and knobs.

A :class:`Persona` is built from any profile object with the fields of ``filegram_ray.schema.profile.Profile``
(``profile_id``, ``name``, ``role``, ``lang`` or ``language``, ``tiers`` {A..F: L|M|R} with E = curation,
``rhythm``, ``attributes``) and an optional perturbation (``dimension``, ``from_``/``from``, ``to``).

Perturbation rule (FILEGRAM_REFERENCE §5.7, TIER_TARGETS "X" rows): the shifted dimension behaves one tier over;
the shifted tier also drives the attributes that follow it (naming under C, version strategy under D, output
structure under B), so the trajectory looks like the neighbouring tier. Nothing about the shift is written into
events; only ``meta.json`` records it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

DIMENSIONS = ("A", "B", "C", "D", "E", "F")

#: Version strategy that each D tier implies when D is perturbed (TIER_TARGETS §4: all D-L keep_history,
#: all D-M archive_old or overwrite, D-R overwrite).
_VERSION_BY_D = {"L": "keep_history", "M": "archive_old", "R": "overwrite"}
#: Naming that a perturbed C tier implies (TIER_TARGETS §2.3 X rows: M→L descriptive names, M→R short names).
_NAMING_BY_C = {"L": "long_descriptive", "M": "mixed", "R": "short_abbrev"}


def derive_seed(*parts: Any) -> int:
    """A 64-bit sub-seed from a stable hash (SHA-256) of the parts; never Python's ``hash()`` (house rule)."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


@dataclass
class Persona:
    """Effective behaviour of one profile on one trajectory.

    Attributes:
        profile_id, name, role: identity (ref §5.3).
        lang: ``"en"`` or ``"zh"`` (ref §1.1: Chinese profiles get the Chinese prompt and write Chinese).
        tiers: effective tiers A..F after the perturbation (E = curation).
        base_tiers: the profile's own tiers.
        rhythm: ``phased`` | ``steady`` | ``bursty`` (ordering texture only, TIER_TARGETS §2.5).
        attrs: the 16 behavioural attributes (ref §5.4), with D/C/B-following attributes adjusted when perturbed.
        perturbation: ``{"dimension", "from", "to"}`` or None.
    """

    profile_id: str
    name: str
    role: str
    lang: str
    tiers: dict[str, str]
    base_tiers: dict[str, str]
    rhythm: str
    attrs: dict[str, str] = field(default_factory=dict)
    perturbation: dict[str, str] | None = None

    @classmethod
    def from_profile(cls, profile: Any, perturbation: Any = None) -> Persona:
        """Build from a profile object/dict; raises ``ValueError`` naming the field when tiers are malformed."""
        pid = str(_get(profile, "profile_id", ""))
        tiers_raw = dict(_get(profile, "tiers", {}) or {})
        for d in DIMENSIONS:
            if tiers_raw.get(d) not in ("L", "M", "R"):
                raise ValueError(f"profile {pid!r}: field tiers.{d} must be L|M|R, got {tiers_raw.get(d)!r}")
        lang = _get(profile, "lang", None)
        if lang not in ("en", "zh"):
            language = str(_get(profile, "language", "English"))
            lang = "zh" if language.lower().startswith(("chinese", "zh")) else "en"
        attrs = dict(_get(profile, "attributes", {}) or {})
        rhythm = str(_get(profile, "rhythm", "") or "steady")
        base = {d: tiers_raw[d] for d in DIMENSIONS}
        tiers = dict(base)
        pert = None
        if perturbation is not None:
            dim = _get(perturbation, "dimension")
            frm = _get(perturbation, "from_", None) or _get(perturbation, "from")
            to = _get(perturbation, "to")
            if dim not in DIMENSIONS or to not in ("L", "M", "R"):
                raise ValueError(f"profile {pid!r}: malformed perturbation {perturbation!r}")
            tiers[dim] = to
            pert = {"dimension": dim, "from": frm or base[dim], "to": to}
            attrs = _shift_attributes(attrs, dim, to)
        return cls(profile_id=pid, name=str(_get(profile, "name", pid)), role=str(_get(profile, "role", "")),
                   lang=lang, tiers=tiers, base_tiers=base, rhythm=rhythm, attrs=attrs, perturbation=pert)

    # ---- convenience accessors -------------------------------------------------------------------------
    def a(self, key: str, default: str = "") -> str:
        return str(self.attrs.get(key, default) or default)

    @property
    def tone(self) -> str:
        return self.a("tone", "professional")

    @property
    def structure(self) -> str:
        return self.a("output_structure", "hierarchical")

    @property
    def naming(self) -> str:
        return self.a("naming", "short_abbrev")

    @property
    def version(self) -> str:
        return self.a("version_strategy", "overwrite")

    @property
    def thoroughness(self) -> str:
        return self.a("thoroughness", "balanced")

    @property
    def error_handling(self) -> str:
        return self.a("error_handling", "balanced")

    @property
    def working_style(self) -> str:
        return self.a("working_style", "methodical")


def _shift_attributes(attrs: dict[str, str], dim: str, to: str) -> dict[str, str]:
    """Attributes that follow a shifted tier (module docstring)."""
    out = dict(attrs)
    if dim == "C":
        if not (to == "L" and out.get("naming") == "date_prefix"):
            out["naming"] = _NAMING_BY_C[to]
    elif dim == "D":
        out["version_strategy"] = _VERSION_BY_D[to]
    elif dim == "B":
        if to == "R":
            out["output_structure"] = "flat_list"
        elif out.get("output_structure") == "flat_list":
            out["output_structure"] = "hierarchical"
    return out
