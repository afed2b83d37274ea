"""Privacy controls of the watcher: what is never recorded (:class:`PathPolicy`) and how captured text is
redacted (:class:`Redactor`).

Path policy, checked for every file-system event before anything is read:

* only the folders named on the command line are watched (recursively); nothing outside them;
* the store itself is never recorded, even when it lies inside a watched folder;
* hidden names (reference §12), the gitignore-style patterns of :meth:`WatchConfig.patterns` — secrets such as
  ``.ssh/``, ``.gnupg/``, ``*.pem``, ``.env`` always, reference §12 defaults and editor temporaries unless turned
  off, plus the user's own — matched with ``pathspec`` (git's own rules: ``dir/`` matches a folder anywhere and
  everything inside it);
* a folder holding the opt-out marker file (``.nofilegram``) and everything below it.

Redaction (content mode ``redacted``) replaces, in this order: PEM private-key blocks → ``[PRIVATE KEY]``;
secrets → ``[KEY]``: the current token formats of :mod:`filegram_ray.watch.secret_rules` (each row citing its
source), assignments to secret-named settings quoted or not (``password = …``, ``aws_secret_access_key: …``), then
``detect-secrets``' detectors (its regex detectors, its keyword detector, its Base64/hex high-entropy detectors
on quoted strings, default limits 4.5/3.0); e-mail addresses → ``[EMAIL]``; card-like numbers (13–19 digits,
optionally grouped by spaces or dashes) that pass the Luhn check (``python-stdnum``) → ``[CARD]``; phone numbers
written as digit groups on one line (optionally ``+CC``/``00CC``/``011CC`` and ``(area)``) that Google's
libphonenumber (``phonenumbers``) validates → ``[PHONE]``. Cheap pre-checks decide which lines detect-secrets'
detectors see (see the regexes); they only skip lines that none of them could match.

Names (:meth:`Redactor.redact_name`, used for every recorded file and folder name unless content mode is
``full``) go through the same detectors but get a consistent placeholder, ``[EMAIL-<keyed hash>]``, so the events
of one file still join. docs/security.md ("What the watcher redacts") lists what is and is not caught.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import pathspec

from filegram_ray.watch.config import WatchConfig
from filegram_ray.watch.secret_rules import ASSIGNMENT, NOT_SECRET_VALUES, compiled

__all__ = ["PLACEHOLDERS", "PathPolicy", "Redactor", "Root", "make_label"]


@dataclass(frozen=True)
class Root:
    """A watched folder: its real absolute path and the label that stands for it in events
    (``/sandbox/<label>/<path inside the folder>``)."""

    path: str
    label: str


def make_label(path: str, taken: set[str]) -> str:
    """A label for a watched folder: its base name reduced to ``[A-Za-z0-9._-]``, made unique with ``-2``, ``-3`` …"""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.basename(os.path.normpath(path))).strip("._") or "root"
    label, n = base, 2
    while label in taken:
        label, n = f"{base}-{n}", n + 1
    return label


class PathPolicy:
    """Decides, for an absolute path, whether the watcher may record it.

    Args:
        roots: the watched folders.
        config: the watcher settings (patterns, hidden names, marker name).
        store_dir: the store folder (never recorded).
    """

    def __init__(self, roots: list[Root], config: WatchConfig, store_dir: str):
        self.roots = sorted(roots, key=lambda r: -len(r.path))  # longest prefix first
        self.config = config
        self.store_dir = os.path.realpath(store_dir)
        self.spec = pathspec.GitIgnoreSpec.from_lines(config.patterns())
        self.marker = config.opt_out_marker
        self._optout: dict[str, bool] = {}
        self._reasons: dict[tuple[str, str, bool], str | None] = {}  # a burst touches each path several times

    def locate(self, path: str) -> tuple[Root, str] | None:
        """``(root, relative POSIX path)`` of an absolute path inside a watched folder (``""`` for the folder
        itself), or None outside every watched folder."""
        for r in self.roots:
            if path == r.path:
                return r, ""
            if path.startswith(r.path + os.sep):
                return r, path[len(r.path) + 1:].replace(os.sep, "/")
        return None

    def is_marker(self, path: str) -> bool:
        return os.path.basename(path) == self.marker

    def invalidate(self) -> None:
        """Forget cached decisions (a marker file appeared, vanished or a folder moved)."""
        self._optout.clear()
        self._reasons.clear()

    def _opted_out(self, root: Root, rel_dir: str) -> bool:
        key = f"{root.path}\0{rel_dir}"
        hit = self._optout.get(key)
        if hit is None:
            here = os.path.join(root.path, rel_dir) if rel_dir else root.path
            hit = os.path.exists(os.path.join(here, self.marker))
            if not hit and rel_dir:
                hit = self._opted_out(root, rel_dir.rpartition("/")[0])
            self._optout[key] = hit
        return hit

    def reason(self, root: Root, rel: str, is_dir: bool = False) -> str | None:
        """Why ``rel`` (inside ``root``) is not recorded, or None if it is: ``store``, ``hidden``, ``pattern``,
        ``opt-out``, ``internal``, ``undecodable-name`` (a file name that is not UTF-8 cannot be written into the
        UTF-8 event log; such files are skipped, never the whole batch)."""
        key = (root.path, rel, is_dir)
        if key in self._reasons:
            return self._reasons[key]
        if len(self._reasons) > 200_000:
            self._reasons.clear()
        out = self._reasons[key] = self._reason(root, rel, is_dir)
        return out

    def _reason(self, root: Root, rel: str, is_dir: bool) -> str | None:
        full = os.path.join(root.path, rel) if rel else root.path
        if full == self.store_dir or full.startswith(self.store_dir + os.sep):
            return "store"
        if not rel:
            return "opt-out" if self._opted_out(root, "") else None
        if rel.startswith(".filegram-sync-"):
            return "internal"
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:  # a name that is not UTF-8 (os.fsdecode kept its bytes as surrogates)
            return "undecodable-name"
        if self.config.ignore_hidden and any(part.startswith(".") for part in rel.split("/")):
            return "hidden"
        if self.spec.match_file(rel + "/" if is_dir else rel):
            return "pattern"
        if self._opted_out(root, rel if is_dir else rel.rpartition("/")[0]):
            return "opt-out"
        return None

    def check(self, path: str, is_dir: bool = False) -> tuple[Root, str] | None:
        """``(root, rel)`` if ``path`` may be recorded, else None."""
        loc = self.locate(path)
        if loc is None or self.reason(loc[0], loc[1], is_dir) is not None:
            return None
        return loc


# ------------------------------------------------------------------------------------------------- redaction
_PEM = re.compile(r"-----BEGIN [A-Z0-9 _-]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 _-]*PRIVATE KEY"
                  r"(?: BLOCK)?-----|\Z)", re.S)
_EMAIL = re.compile(r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
# Cheap pre-checks (ours, for speed: detect-secrets runs ~25 regexes per line): every token its regex detectors
# look for is a run of >= 16 token characters, or a credential inside a URL; its keyword detector needs an
# assignment to a secret-ish name; its entropy detectors look only at quoted strings of >= 20 characters.
_TOKEN_LINE = re.compile(r"[A-Za-z0-9_+/=\-]{16,}|://")
_ASSIGN_LINE = re.compile(r"(?i:pass|secret|token|key|pwd|auth|cred|bearer|api)[\w.\-]*[\"'\]]?\s*(?::=|=>|=|:)\s*\S")
_QUOTED_LINE = re.compile(r"([\"'])[^\"'\s]{20,}\1")
# our token formats (secret_rules.RULES), each tried only on texts holding one of its keywords
_RULES = compiled()
_ASSIGN_HINT = re.compile(r"(?i)passw|passphrase|pwd|secret|token|key|credential|authorization|bearer")
# phone-number candidates (7-15 digits in groups on one line, optional +country code or 00/011 international prefix and
# (area) code), each then parsed and validated by libphonenumber
_PHONE_CANDIDATE = re.compile(r"(?<![\w.+-])(?:\+\d{1,3}[ \t.-]?)?(?:\(\d{1,4}\)[ \t.-]?)?\d{1,5}(?:[ \t.-]?\d{1,5}){1,6}"
                              r"(?![\w-]|\.\d)")
_LEAD = " \t=:\"'"
#: placeholder per kind of redaction (counts use the dict keys)
PLACEHOLDERS = {"private_key": "[PRIVATE KEY]", "key": "[KEY]", "email": "[EMAIL]", "card": "[CARD]",
                "phone": "[PHONE]"}
#: letters of the keyed hash in a name placeholder (``[EMAIL-<9 letters a-z>]``): 9 × log2(26) ≈ 42 bits, so two
#: different values in one store share a placeholder with probability ~n²/2⁴³ (n = distinct redacted values in
#: names). Letters only: a placeholder never looks like a phone or card number, so redacting it again changes nothing.
NAME_TAG_LETTERS = 9


@lru_cache(maxsize=1)
def _detectors():
    """detect-secrets' detectors: (regex detectors, keyword detector, entropy detectors), built once."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString, HexHighEntropyString
    from detect_secrets.plugins.keyword import KeywordDetector

    regex = [cls() for cls in get_mapping_from_secret_type_to_class().values()
             if issubclass(cls, RegexBasedDetector)
             and cls.__name__ not in ("IPPublicDetector", "PrivateKeyDetector")]  # IPs are not keys; PEM above
    return regex, KeywordDetector(), [Base64HighEntropyString(), HexHighEntropyString()]


class Redactor:
    """Replace personal data and secrets in text (see the module docstring for what and how).

    Args:
        phone_region: ISO region used for phone numbers written in national format (``"US"``: ``(415) 555-2671``);
            numbers in international form (``+CC``, ``00CC``, ``011CC``) are found whatever the region.
        name_key: secret key of the keyed hash in name placeholders (:meth:`redact_name`); the store keeps one
            (``state/name.key``) so a name gets the same placeholder in every session. None → a random key
            (consistent only within this object).
    """

    def __init__(self, phone_region: str = "US", name_key: bytes | None = None):
        self.phone_region = phone_region
        self.name_key = name_key if name_key is not None else os.urandom(32)
        self._names: dict[str, str] = {}

    def redact(self, text: str) -> tuple[str, Counter]:
        """Redacted copy of ``text`` and the number of replacements per kind (``key``, ``email``, ``card``,
        ``phone``, ``private_key``); every replacement is the kind's fixed placeholder (:data:`PLACEHOLDERS`)."""
        return self._redact(text, lambda kind, _original: PLACEHOLDERS[kind])

    def redact_name(self, name: str) -> str:
        """A file or folder name with what :meth:`redact` finds replaced by ``[KIND-<hash>]`` (``[EMAIL-qhzmtwkbe]``,
        ``[PHONE-…]``, ``[KEY-…]``): a keyed hash (HMAC-SHA256 with :attr:`name_key`, written
        as :data:`NAME_TAG_LETTERS` base-26 letters) of the replaced text, so the same name always gets the same placeholder
        (events of one file still join) and different names almost surely different ones. ``/`` never occurs
        in the result; a name without anything to redact is returned unchanged."""
        out = self._names.get(name)
        if out is None:
            if len(self._names) > 100_000:
                self._names.clear()
            out = self._names[name] = self._redact(name, self._name_mark)[0]
        return out

    def _name_mark(self, kind: str, original: str) -> str:
        n = int.from_bytes(hmac.new(self.name_key, original.encode("utf-8", "surrogatepass"), hashlib.sha256).digest(),
                           "big")
        tag = ""
        for _ in range(NAME_TAG_LETTERS):
            n, d = divmod(n, 26)
            tag += chr(97 + d)
        return f"[{PLACEHOLDERS[kind][1:-1].replace(' ', '-')}-{tag}]"

    def _redact(self, text: str, mark) -> tuple[str, Counter]:
        counts: Counter = Counter()

        def sub(rx, kind, s, check=None):
            def repl(m):
                if check is not None and not check(m.group(0)):
                    return m.group(0)
                counts[kind] += 1
                return mark(kind, m.group(0))
            return rx.sub(repl, s)

        text = sub(_PEM, "private_key", text)
        text = self._redact_keys(text, counts, mark)
        text = sub(_EMAIL, "email", text)
        text = sub(_CARD, "card", text, _luhn_ok)
        text = _PHONE_CANDIDATE.sub(lambda m: self._phone(m.group(0), counts, mark), text)
        return text, counts

    @staticmethod
    def _redact_keys(text: str, counts: Counter, mark) -> str:
        # 1. our token formats and secret-named assignments (quoted or not), by position
        low = text.lower()
        spans = [m.span("v" if "v" in rx.groupindex else 0) for _, kws, rx in _RULES
                 if not kws or any(k in low for k in kws) for m in rx.finditer(text)]
        if _ASSIGN_HINT.search(text):
            for m in ASSIGNMENT.finditer(text):
                v = m.group("v")
                if v.lower() not in NOT_SECRET_VALUES and not v.startswith(("[KEY", "[EMAIL", "[PHONE")):
                    spans.append(m.span("v"))
        if spans:
            merged: list[list[int]] = []
            for a, b in sorted(spans):
                if merged and a <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], b)
                else:
                    merged.append([a, b])
            for a, b in reversed(merged):
                counts["key"] += 1
                text = text[:a] + mark("key", text[a:b]) + text[b:]
        if not _KEY_CANDIDATE.search(text):
            return text
        # 2. detect-secrets' detectors (regex formats, quoted keyword assignments, quoted high-entropy strings)
        from detect_secrets.settings import default_settings

        regex, keyword, entropy = _detectors()
        lines = text.splitlines(keepends=True)
        found: set[str] = set()
        token_lines = "".join(x for x in lines if _TOKEN_LINE.search(x))
        if token_lines:
            for det in regex:
                basic = det.__class__.__name__ == "BasicAuthDetector"
                for rx in det.denylist:
                    for m in rx.finditer(token_lines):
                        found.add(m.group(1) if basic and m.groups() else m.group(0).strip(_LEAD))
        todo = [(line, ([keyword] if _ASSIGN_LINE.search(line) else []) +
                 (entropy if _QUOTED_LINE.search(line) else [])) for line in lines]
        todo = [(line, dets) for line, dets in todo if dets]
        if todo:  # entering detect-secrets' settings costs ~3 ms: only when a line needs these detectors
            with default_settings():
                for line, dets in todo:
                    for det in dets:
                        for s in det.analyze_line(filename="captured.txt", line=line.rstrip("\r\n"),
                                                  line_number=0):
                            if s.secret_value:
                                found.add(s.secret_value)
        for secret in sorted((s for s in found if len(s) >= 4 and "[" not in s), key=len, reverse=True):
            n = text.count(secret)
            if n:
                counts["key"] += n
                text = text.replace(secret, mark("key", secret))
        return text

    def _phone(self, cand: str, counts: Counter, mark) -> str:
        if not _is_phone(cand, self.phone_region):
            return cand
        counts["phone"] += 1
        return mark("phone", cand)


_KEY_CANDIDATE = re.compile(f"{_TOKEN_LINE.pattern}|{_ASSIGN_LINE.pattern}")
_DATE = re.compile(r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4}")
_IDD = re.compile(r"^(?:00|011)(?=[1-9])")  # international dialling prefixes (ITU-T E.164 00; NANP 011)


@lru_cache(maxsize=4096)
def _is_phone(cand: str, region: str) -> bool:
    """A candidate is a phone number if it has 7-15 digits, is not a date, and libphonenumber validates it, read
    in ``region``'s national format or, written with an international prefix (``+``, ``00``, ``011``), in the
    country it names."""
    import phonenumbers

    s = cand.strip()
    if not 7 <= sum(c.isdigit() for c in s) <= 15 or _DATE.fullmatch(s):
        return False
    tries = [(s, region)]
    if _IDD.match(s):
        tries.append((_IDD.sub("+", s), None))
    for number, reg in tries:
        try:
            if phonenumbers.is_valid_number(phonenumbers.parse(number, reg)):
                return True
        except phonenumbers.NumberParseException:
            continue
    return False


def _luhn_ok(s: str) -> bool:
    from stdnum import luhn

    digits = re.sub(r"\D", "", s)
    return 13 <= len(digits) <= 19 and luhn.is_valid(digits)
