"""``filegram methods``: list the registered memory methods (``filegram evaluate``, the evaluate stage's door, is
:mod:`filegram_ray.stages.cli`'s)."""

from __future__ import annotations

import argparse


def _list(args: argparse.Namespace) -> int:
    """Each registered method: id, the report's row name with the config's ``evaluate.method_options`` (e.g.
    VisRAG's page text), and the first sentence of its docstring."""
    from filegram_ray.config import load_config
    from filegram_ray.methods import make_method, method_names

    options = dict(load_config(getattr(args, "config", None)).section("evaluate").get("method_options") or {})
    limit = 10**6 if getattr(args, "full", False) else 120
    cut = False
    for name in method_names():
        m = make_method(name, **options.get(name, {}))
        text = first_sentence(type(m).__doc__ or "", limit)
        cut = cut or text.endswith("…")
        print(f"{name:<28} {m.row_name():<26} {text}")
    if cut:
        print("(descriptions cut at 120 characters end in …; --full prints them whole)")
    return 0


def first_sentence(doc: str, limit: int = 120) -> str:
    """The first sentence of a docstring's first paragraph on one line (RST ````code```` marks dropped); longer
    than ``limit`` characters, it is cut at a word boundary and ends with "…"."""
    import re

    para = " ".join(re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0].split()).replace("``", "")
    m = re.search(r"[.!?](?=\s+[A-Z(])", para)
    text = para[:m.end()] if m else para
    if len(text) <= limit:
        return text
    return text[:limit - 1].rsplit(" ", 1)[0].rstrip(",;:–—-(") + "…"


def register(sub) -> None:
    p = sub.add_parser("methods", help="list the registered memory methods")
    p.add_argument("--config", default=None, help="pipeline YAML whose evaluate.method_options name the rows "
                   "(default: conf/default.yaml)")
    p.add_argument("--full", action="store_true", help="print each description whole (default: cut at 120 chars)")
    p.set_defaults(func=_list)
