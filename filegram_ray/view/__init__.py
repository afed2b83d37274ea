"""The static run viewer (``filegram view``): :func:`~filegram_ray.view.build.build_view` writes ``RUN/view/``."""

from __future__ import annotations

__all__ = ["build_view"]


def __getattr__(name: str):  # lazy: `import filegram_ray.view` loads no polars/Jinja2
    if name == "build_view":
        from filegram_ray.view.build import build_view

        return build_view
    raise AttributeError(name)
