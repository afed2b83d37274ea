"""FileGramBench items as the evaluate stage reads them: ``bench/items.parquet`` (public fields + context spec),
the answer key (``bench/answers_key.parquet``, for scoring only), what a backbone may see of an item
(:func:`public_view`), the query a method retrieves with, and the seeded item sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from filegram_ray.errors import UserError
from filegram_ray.limits import load_json
from filegram_ray.storage import RunDir

__all__ = ["LETTERS", "is_letter", "load_answer_key", "load_items", "public_view", "retrieval_query",
           "sample_items"]

LETTERS = "ABCDEFGH"


def _json_field(value: Any, default: Any, qid: str, name: str) -> Any:
    if value is None or value == "":
        return default
    if isinstance(value, (list, dict)):
        return value
    if not isinstance(value, (str, bytes)):
        raise UserError(f"bench/items.parquet: item {qid}: field {name!r} is not valid JSON: a {type(value).__name__}")
    return load_json(value, f"bench/items.parquet: item {qid}: field {name!r}")


def load_items(run: RunDir) -> list[dict[str, Any]]:
    """The items of ``bench/items.parquet`` as dicts with parsed ``choices`` (list), ``context`` and ``metadata``.

    Raises:
        StorageError: the table is missing.
        ValueError: a required column is missing or a JSON field does not parse (names the item and field).
    """
    df = run.read_table("bench/items.parquet")
    need = {"question_id", "sub_track", "channel", "question", "choices", "context"}
    missing = need - set(df.columns)
    if missing:
        raise UserError(f"bench/items.parquet: missing columns {sorted(missing)}")
    items = []
    for row in df.iter_rows(named=True):
        qid = str(row["question_id"])
        item = dict(row)
        item["choices"] = [str(c) for c in _json_field(row.get("choices"), [], qid, "choices")]
        item["context"] = _json_field(row.get("context"), {}, qid, "context")
        item["metadata"] = _json_field(row.get("metadata"), {}, qid, "metadata")
        item["setting"] = row.get("setting") or "text"
        items.append(item)
    return sorted(items, key=lambda it: it["question_id"])


def load_answer_key(run: RunDir) -> dict[str, dict[str, Any]]:
    """``question_id -> {correct, correct_text, …}`` from ``bench/answers_key.parquet``."""
    df = run.read_table("bench/answers_key.parquet")
    if "question_id" not in df.columns or "correct" not in df.columns:
        raise UserError("bench/answers_key.parquet: needs columns question_id and correct")
    return {str(r["question_id"]): r for r in df.iter_rows(named=True)}


def public_view(item: Mapping[str, Any]) -> dict[str, Any]:
    """What a backbone may see: the same shape as ``bench.schema.Item.public_view`` (no profile or trajectory ids,
    no answer, no evaluator metadata)."""
    ctx = item.get("context") or {}
    return {
        "question_id": item["question_id"],
        "track": item.get("track", ""),
        "sub_track": item.get("sub_track", ""),
        "channel": item.get("channel", ""),
        "setting": item.get("setting", "text"),
        "question": item.get("question", ""),
        "choices": {LETTERS[i]: c for i, c in enumerate(item.get("choices") or [])},
        "context": {"kind": ctx.get("kind"), "labels": list(ctx.get("labels") or []),
                    "held_out": str(ctx["held_out"]).rsplit("/", 1)[-1] if ctx.get("held_out") else None},
    }


def retrieval_query(item: Mapping[str, Any]) -> str:
    """The query a method retrieves with: the question followed by the option texts."""
    return " ".join([str(item.get("question", "")), *[str(c) for c in item.get("choices") or []]]).strip()


def sample_items(items: list[dict[str, Any]], per_sub_task: int, seed: int) -> list[dict[str, Any]]:
    """A seeded sample of at most ``per_sub_task`` items per (sub-task, setting), in question-id order, plus the
    text twins of sampled multimodal items. Same seed and bank → the same sample."""
    import hashlib
    import random

    from filegram_ray.evaluate.multimodal import text_twins

    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for it in items:
        groups.setdefault((str(it.get("sub_track", "")), str(it.get("setting", "text"))), []).append(it)
    keep: set[str] = set()
    for (sub, setting), grp in sorted(groups.items()):
        ids = sorted(it["question_id"] for it in grp)
        sub_seed = int(hashlib.sha256(f"{seed}:evaluate-sample:{sub}:{setting}".encode()).hexdigest()[:16], 16)
        keep.update(random.Random(sub_seed).sample(ids, min(per_sub_task, len(ids))))
    twins = text_twins(items)
    keep.update(twins[q] for q in list(keep) if q in twins)
    return [it for it in items if it["question_id"] in keep]


def is_letter(x: Any) -> bool:
    """A one-letter option answer (A–H, any case, spaces around)."""
    return isinstance(x, str) and len(x.strip()) == 1 and x.strip().upper() in LETTERS


def item_profile(item: dict[str, Any]) -> str:
    """The user an item is about, for resampling: the item's ``profile_id``, else the profile of its first context
    trajectory (``"<profile>/<task>"``; BehavFP and TraceDis items leave ``profile_id`` empty because naming it
    would give the answer away), else the question id (the item is its own cluster). Evaluator-side only."""
    pid = str(item.get("profile_id") or "")
    if pid:
        return pid
    trajs = (item.get("context") or {}).get("trajectories") or []
    if trajs:
        return str(trajs[0]).split("/", 1)[0]
    return str(item.get("question_id", ""))
