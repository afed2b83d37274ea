"""The exception class that means "the user's mistake" (a bad option, id, config value or input file), and its
run-directory kind, :class:`StorageError` (here so that every floor may raise it).

A job or ``filegram`` command that fails with a :class:`UserError` (or a pydantic ``ValidationError`` of the
configuration, or a missing / unreadable path the user named) prints one line and exits 2
(:func:`filegram_ray.jobargs.run_job`); any other exception is a bug of ours and keeps its traceback (exit 1).
``UserError`` subclasses ``ValueError`` so that pydantic validators turn it into a ``ValidationError`` and callers
that catch ``ValueError`` keep working.
"""

from __future__ import annotations

__all__ = ["StorageError", "UserError"]


class UserError(ValueError):
    """A mistake in what the user asked for or gave (option, id, configuration, input file); the message says
    which and what would be accepted."""


class StorageError(UserError, RuntimeError):
    """Raised when a run-directory operation fails (:class:`~filegram_ray.storage.RunDir`, which re-exports it);
    the message names the URI and the relative path."""
