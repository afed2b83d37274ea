"""Where the project's bundled configuration lives.

The repository layout is fixed (``conf/`` beside ``filegram_ray/``); with ``ray job submit --working-dir .`` the
same layout is uploaded, so these paths hold on a cluster too. ``FILEGRAM_CONF`` overrides the conf directory.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def conf_dir() -> Path:
    """The ``conf/`` directory (``FILEGRAM_CONF`` if set)."""
    env = os.environ.get("FILEGRAM_CONF")
    return Path(env) if env else REPO_ROOT / "conf"


def profiles_dir() -> Path:
    """Default profile set: ``conf/profiles/``."""
    return conf_dir() / "profiles"


def tasks_dir() -> Path:
    """Default task set: ``conf/tasks/``."""
    return conf_dir() / "tasks"
