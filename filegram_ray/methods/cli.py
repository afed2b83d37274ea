"""``filegram methods`` (list the registered memory methods) and ``filegram evaluate`` (the evaluate stage).

``jobs/evaluate.py`` (``filegram run evaluate``) takes the same options (:func:`add_evaluate_options`, through the
stage's ``add_arguments``).
"""

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


def add_evaluate_options(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The evaluate stage's own options, on top of :func:`filegram_ray.jobargs.common_parser`'s."""
    p.add_argument("--methods", nargs="+", default=None, help="method names (default: evaluate.methods); "
                   "`filegram methods` lists them")
    p.add_argument("--backbone", default=None, choices=("lexical", "random"),
                   help="a non-LLM backbone (default: evaluate.backbone); a language model: --backbone-url, or "
                   "evaluate.backbone in the config ({kind: openai, base_url, model} or {kind: vllm_engine, …})")
    p.add_argument("--backbone-url", default=None, help="OpenAI-compatible base URL, e.g. a vLLM or llama.cpp "
                   "server (an OpenAI-compatible backbone: kind openai)")
    p.add_argument("--backbone-model", default=None, help="model name served at --backbone-url")
    return p


def evaluate_from_args(args: argparse.Namespace) -> int:
    """Run the evaluate stage from parsed options (``filegram evaluate``): the stage's own options
    (:meth:`~filegram_ray.evaluate.stage.EvaluateStage.from_arguments`), its summary line and the report's path."""
    from filegram_ray.evaluate.stage import EvaluateStage
    from filegram_ray.jobargs import config_from_args
    from filegram_ray.stages.runner import run_stage

    cfg = config_from_args(args, section="evaluate")
    record = run_stage(EvaluateStage, cfg, overrides=EvaluateStage.from_arguments(args)[1] or None)
    EvaluateStage.after_run(record, cfg)
    return EvaluateStage.exit_code(record)


def register(sub) -> None:
    from filegram_ray.jobargs import add_common_options

    p = sub.add_parser("methods", help="list the registered memory methods")
    p.add_argument("--config", default=None, help="pipeline YAML whose evaluate.method_options name the rows "
                   "(default: conf/default.yaml)")
    p.add_argument("--full", action="store_true", help="print each description whole (default: cut at 120 chars)")
    p.set_defaults(func=_list)
    e = sub.add_parser("evaluate", help="answer FileGramBench items with memory methods; write results/")
    add_evaluate_options(add_common_options(e))
    e.set_defaults(func=evaluate_from_args)
