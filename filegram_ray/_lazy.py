"""Lazy package attributes (PEP 562), so that importing a package's ``cli`` module does not import the package's
whole public API: ``filegram <area> --help`` stays under 0.5 s while ``from filegram_ray.engine import
EngineSession`` keeps working."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` whose attribute ``name`` lives in module ``exports[name]``; the
    module is imported on first access and the value cached in the package namespace.

    Raises (from the returned ``__getattr__``):
        AttributeError: ``name`` is not one of ``exports``.
    """
    import sys

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
