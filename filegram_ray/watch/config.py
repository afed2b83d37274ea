"""Settings of the OS-level watcher (``filegram watch``) and their defaults.

Every constant names its source: a row of reference §12 (upstream ``filegramplugin`` config), §2.2 (media store),
or *ours* with the reason. The resolved settings are stored in ``<store>/store.json`` so a restart without flags
resumes with the same ones.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "CONTENT_MODES",
    "NOISE_PATTERNS",
    "OPT_OUT_MARKER",
    "SECRET_PATTERNS",
    "UPSTREAM_IGNORE_PATTERNS",
    "WatchConfig",
]

#: reference §12 ``ignore_patterns`` (upstream defaults), written as gitignore patterns (``dir/`` = a folder
#: anywhere). "Photos library" and "shell histories" are spelled out as the files macOS/Linux shells write.
UPSTREAM_IGNORE_PATTERNS: tuple[str, ...] = (
    ".git/", ".DS_Store", "node_modules/", "__pycache__/", ".shadow/", "Library/", ".Trash/", ".cache/", ".npm/",
    ".venv/", ".conda/", ".local/", ".cargo/", ".rustup/", "*.photoslibrary/",
    ".bash_history", ".zsh_history", ".python_history", ".node_repl_history", ".psql_history",
    ".sqlite_history", ".lesshst", ".viminfo",
)

#: ours: credentials and keys that must never be recorded, even with content capture off (their names alone
#: say too much, and a `cat` of them would be a recorded read).
SECRET_PATTERNS: tuple[str, ...] = (
    ".ssh/", ".gnupg/", ".aws/", ".azure/", ".kube/", ".docker/", ".password-store/", ".config/gcloud/",
    ".netrc", ".pgpass", ".git-credentials", ".npmrc", ".pypirc",
    "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.kdbx", "*.gpg", "*.asc", "*.ovpn",
    "*.tfstate", "*.tfvars", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
    ".env", ".env.*", "*.env", "secrets.*", "credentials*",
)

#: reference §12 "Ignored paths" (``.sb-`` names, names starting or ending with ``~``) plus editors' and
#: browsers' transient files (ours): vim swap files and its ``4913`` write test, emacs autosaves, partial
#: downloads, GNOME's atomic-save temporaries. Hidden names are handled by ``ignore_hidden``.
NOISE_PATTERNS: tuple[str, ...] = (
    ".sb-*", "*~", "~*", "*.swp", "*.swo", "*.swx", "4913", "#*#", "*.crdownload", "*.part",
    ".goutputstream-*",
)

#: ours: a file of this name in a folder opts that folder and everything below it out of recording.
OPT_OUT_MARKER = ".nofilegram"

#: ``off`` = no text stored (events keep counts only); ``redacted`` = text with e-mail addresses, phone
#: numbers, card-like numbers and secrets replaced (privacy.Redactor); ``full`` = text and names as written.
#: Every mode but ``full`` also redacts file and folder names (consistent placeholders per store).
CONTENT_MODES = ("off", "redacted", "full")


class WatchConfig(BaseModel):
    """Resolved watcher settings (units in the field names).

    Raises:
        pydantic.ValidationError: a field out of range or an unknown content mode.
    """

    model_config = ConfigDict(extra="forbid")
    profile_id: str = Field("real_user", description="reference §12 profile_id")
    content: Literal["off", "redacted", "full"] = Field(
        "redacted", description="content capture: privacy on by default (ours)")
    ignore: list[str] = Field(default_factory=list, description="extra gitignore-style patterns")
    default_ignores: bool = Field(True, description="apply UPSTREAM_IGNORE + NOISE patterns (SECRET patterns "
                                  "always apply)")
    ignore_hidden: bool = Field(True, description="reference §12: hidden basenames are ignored")
    opt_out_marker: str = Field(OPT_OUT_MARKER, description="per-folder opt-out file name (ours)")
    debounce_ms: int = Field(2000, ge=0, description="reference §12 dedup_window_sec 2.0: quiet time after the "
                             "last write before a change is read")
    close_settle_ms: int = Field(250, ge=0, description="ours: wait after the writer closed the file (catches "
                                 "the rename of an atomic save), instead of the full debounce")
    max_pending_ms: int = Field(10_000, gt=0, description="ours: a file written without a quiet gap is read and "
                                "recorded at least this often (later events wait for it: it bounds their lag)")
    delete_recheck_ms: int = Field(500, ge=0, description="reference §12: a deleted path is re-checked after "
                                   "0.5 s (atomic saves reappear)")
    copy_window_ms: int = Field(1000, ge=0, description="a new file whose content equals a file read within this "
                                "many ms of the new file's writing is a copy of it (ours; upstream's 10 s rule on "
                                "written files, reference §12, turns files moved in into copies)")
    read_dedup_ms: int = Field(1000, ge=0, description="ours: re-opens of the same file within this window are "
                               "one read (editors open a file several times to load it)")
    record_reads: bool = Field(True, description="record file_read from inotify IN_CLOSE_NOWRITE")
    idle_rotate_s: float = Field(1800.0, gt=0, description="ours: a session ends after this much quiet time")
    snapshot_interval_s: float = Field(300.0, ge=0, description="reference §12 snapshot_interval_sec "
                                       "(0 = only at session start and end)")
    max_blob_bytes: int = Field(1_048_576, gt=0, description="reference §2.2/§12: no content blob, shadow or "
                                "diff for files above this size")
    hash_max_bytes: int = Field(64 * 1_048_576, gt=0, description="ours: larger files are compared by size and "
                                "modification time instead of a content hash")
    checkpoint_interval_s: float = Field(30.0, gt=0, description="ours: how often the state index is "
                                         "checkpointed (the log is replayed from it after a crash)")
    phone_region: str = Field("US", description="region for national-format phone numbers in redaction")

    @field_validator("ignore")
    @classmethod
    def _strip(cls, v: list[str]) -> list[str]:
        return [p.strip() for p in v if p and p.strip()]

    def patterns(self) -> list[str]:
        """All gitignore-style patterns in force: secrets (always), the defaults, then the user's."""
        base = list(UPSTREAM_IGNORE_PATTERNS + NOISE_PATTERNS) if self.default_ignores else []
        return list(SECRET_PATTERNS) + base + list(self.ignore)
