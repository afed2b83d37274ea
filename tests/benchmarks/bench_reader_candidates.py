"""Which CPU reader reads? Candidate readers scored on contexts of known quality and on the methods' own contexts.

PRINTS, per candidate reader and per multiple-choice sub-task, the accuracy (%) with

* ``none``      — an empty context (the floor);
* ``gold``      — the gold evidence of the item (:func:`filegram_ray.evaluate.reader_validity.gold_evidence`);
* ``wrong``     — a method's context retrieved for another item of the same sub-task whose profiles are disjoint
  from the item's (seeded pick), asked with the item's own question and options;
* ``<method>``  — each method's context for the item, read back from an evaluate run's ``results/contexts/``;
* ``masked``    — FileGramOS's context with the tier words of its procedural channel masked
  (:func:`filegram_ray.evaluate.reader_validity.mask_tier_words`);

and the seconds per item × context. Asserts nothing.

Usage:
    python tests/benchmarks/bench_reader_candidates.py --run-dir RUN [--contexts-tag lexical] [--per-sub-task 40]
        [--readers lexical encoder-attend encoder-max] [--head PATH]

RUN must hold ``bench/``; the methods' contexts come from ``results/contexts/<tag>/`` of an evaluate run on it
(any backbone: the contexts do not depend on the reader). Without them only none / gold are measured.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from filegram_ray.llm.reader_train import load_contexts  # noqa: E402,F401 - also used by the sibling scripts

MCQ = ["AttrRec", "BehavFP", "BehavInf", "TraceDis", "AnomDet", "ShiftAna", "FileGrd"]


def make_readers(names: list[str], seed: int, head: str | None):
    from filegram_ray.llm import make_backbone
    from filegram_ray.llm.encoder_reader import EncoderBackbone

    out = {}
    for n in names:
        if n == "lexical":
            out[n] = make_backbone("lexical", seed=seed)
        elif n.startswith("encoder-"):  # encoder-<pool>[-lex<weight>][@<embedder kind>]
            name, _, emb = n.partition("@")
            parts = name.split("-")
            lex = next((float(x[3:]) for x in parts[2:] if x.startswith("lex")), 0.0)
            pre = next((int(x[3:]) for x in parts[2:] if x.startswith("pre")), None)
            if emb:
                from bench_embedders import register_truncated

                register_truncated(emb)  # a minilm-l<N> kind; any other kind is left as it is
            out[n] = EncoderBackbone(seed=seed, pool=parts[1], lexical=lex, embedder=emb or "minilm",
                                    preselect=pre)
        else:
            raise SystemExit(f"unknown reader {n!r}")
    if head:
        out["encoder-head"] = EncoderBackbone(seed=seed, head=head, preselect=None)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--contexts-tag", default="lexical")
    ap.add_argument("--per-sub-task", type=int, default=40)
    ap.add_argument("--readers", nargs="+", default=["lexical", "encoder-attend", "encoder-max"],
                    help="lexical, encoder-<pool>[-lex<weight>][-pre<k>][@<embedder>] (pool: attend | max; pre<k>: "
                         "read only the k passages per option clause nearest under the static model, without it "
                         "every passage; embedder: the "
                         "passage encoder's kind, minilm by default, e.g. minilm-static, or minilm-l<N> for MiniLM's "
                         "first N layers)")
    ap.add_argument("--head", default=None)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--train-split", action="store_true",
                    help="train a head on the items of half the profiles (gold + every method's contexts) and "
                         "measure every reader on the other half")
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--write", default=None, help="also write what is printed to this Markdown file")
    a = ap.parse_args(argv)
    out_lines: list[str] = []

    def print(*args, **_kw):  # noqa: A001 - everything printed is also kept for --write
        line = " ".join(map(str, args))
        out_lines.append(line)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    from filegram_ray.evaluate.items import load_answer_key, load_items, public_view, sample_items
    from filegram_ray.evaluate.reader_validity import gold_evidence, item_profiles, mask_tier_words
    from filegram_ray.storage import RunDir

    run = RunDir(a.run_dir)
    items = [it for it in load_items(run) if it["choices"] and it["sub_track"] in MCQ
             and it.get("setting", "text") == "text"]
    key = load_answer_key(run)
    ctxs = load_contexts(run, a.contexts_tag)
    if ctxs:  # only items every method answered
        have = set.intersection(*(set(v) for v in ctxs.values()))
        items = [it for it in items if it["question_id"] in have]
    items = sample_items(items, a.per_sub_task, a.seed)
    print(f"run {Path(a.run_dir).name}: {len(items)} multiple-choice text items; contexts of {sorted(ctxs) or 'no method'}; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    rows: dict[str, list[tuple[dict, str]]] = {"none": [], "gold": []}
    by_sub: dict[str, list[dict]] = {}
    for it in items:
        by_sub.setdefault(it["sub_track"], []).append(it)
    mm = "filegramos" if "filegramos" in ctxs else (sorted(ctxs)[0] if ctxs else None)
    for it in items:
        rows["none"].append((it, ""))
        rows["gold"].append((it, gold_evidence(it, key.get(it["question_id"], {}))))
        for m, c in ctxs.items():
            rows.setdefault(m, []).append((it, c[it["question_id"]]))
        if mm:
            mine = item_profiles(it)
            cands = sorted(x["question_id"] for x in by_sub[it["sub_track"]] if not (mine & item_profiles(x)))
            if cands:
                other = random.Random(f"{a.seed}:wrong:{it['question_id']}").choice(cands)
                rows.setdefault("wrong", []).append((it, ctxs[mm][other]))
            if mm == "filegramos":
                rows.setdefault("masked", []).append((it, mask_tier_words(ctxs[mm][it["question_id"]])))
    readers = make_readers(a.readers, a.seed, a.head)
    if a.train_split:
        from filegram_ray.evaluate.items import item_profile
        from filegram_ray.llm.encoder_reader import EncoderBackbone
        from filegram_ray.llm.reader_head import train_head

        profs = sorted({item_profile(it) for it in items})
        train_p = set(random.Random(f"{a.seed}:split").sample(profs, len(profs) // 2))
        is_train = {it["question_id"]: item_profile(it) in train_p for it in items}
        enc = EncoderBackbone(seed=a.seed)
        t0 = time.perf_counter()
        trows = []
        for cname, pairs in rows.items():
            if cname in ("none", "wrong", "masked"):
                continue
            for it, ctx in pairs:
                if is_train[it["question_id"]]:
                    lab = "ABCDEFGH".index(str(key[it["question_id"]]["correct"]).strip().upper())
                    trows.append(enc.train_row(public_view(it), ctx, lab))
        t1 = time.perf_counter()
        head = train_head(trows, seed=a.seed, rank=a.rank, epochs=a.epochs)
        print(f"head: {len(trows)} training rows from {len(train_p)} profiles; features {t1 - t0:.1f} s, "
              f"training {time.perf_counter() - t1:.1f} s; {head.card['training']}", flush=True)
        hr = EncoderBackbone(seed=a.seed)
        hr._head = head
        readers["encoder-head(split)"] = hr
        rows = {c: [(it, x) for it, x in pairs if not is_train[it["question_id"]]] for c, pairs in rows.items()}
        print(f"measured on the {len(profs) - len(train_p)} held-out profiles' items", flush=True)
    subs = [s for s in MCQ if s in by_sub]
    picks: dict[str, dict[tuple[str, str], str | None]] = {}  # reader → (context, question id) → option chosen
    for rname, reader in readers.items():
        if hasattr(reader, "_embedder"):  # each reader starts cold: no vectors cached by the reader before it
            from filegram_ray.llm import encoder_reader

            encoder_reader._shared_embedder.cache_clear()
            reader._embedder = None
        print(f"\n## reader {rname}\n")
        print("| context | " + " | ".join(subs) + " | Avg | s/item |")
        print("|---|" + "---|" * (len(subs) + 2))
        for cname, pairs in rows.items():
            t0 = time.perf_counter()
            hit: dict[str, list[int]] = {}
            for it, ctx in pairs:
                ans = reader.answer(public_view(it), ctx)
                picks.setdefault(rname, {})[(cname, it["question_id"])] = ans.choice
                ok = int(ans.choice == str(key[it["question_id"]]["correct"]).strip().upper())
                hit.setdefault(it["sub_track"], []).append(ok)
            dt = (time.perf_counter() - t0) / max(1, len(pairs))
            cells = [f"{100 * sum(hit[s]) / len(hit[s]):.0f} (n={len(hit[s])})" if s in hit else "–" for s in subs]
            allv = [v for s in hit for v in hit[s]]
            print(f"| {cname} | " + " | ".join(cells) + f" | {100 * sum(allv) / max(1, len(allv)):.1f} | {dt:.3f} |",
                  flush=True)
    if len(picks) > 1:  # does a candidate pick what the first reader picks, item by item?
        first, *others = list(picks)
        cnames = list(rows)
        print(f"\n## same option as {first} (% of items, per context)\n")
        print("| reader | " + " | ".join(cnames) + " | all |")
        print("|---|" + "---|" * (len(cnames) + 1))
        for rname in others:
            same = {c: [picks[rname][k] == picks[first][k] for k in picks[first] if k[0] == c] for c in cnames}
            allv = [v for c in cnames for v in same[c]]
            print(f"| {rname} | " + " | ".join(f"{100 * sum(same[c]) / max(1, len(same[c])):.0f}" for c in cnames)
                  + f" | {100 * sum(allv) / max(1, len(allv)):.1f} |")
    if a.write:
        import datetime

        args = [Path(x).name if x == a.run_dir else x for x in (argv or sys.argv[1:])]  # no machine paths on a page
        head = [f"# Candidate readers on {Path(a.run_dir).name} ({datetime.date.today().isoformat()})", "",
                "Written by `python tests/benchmarks/bench_reader_candidates.py " + " ".join(args)
                + "`. Accuracy % per multiple-choice sub-task (text setting); contexts: none = empty, gold = gold "
                "evidence, wrong = FileGramOS's context of another item of the sub-task with disjoint profiles, "
                "masked = FileGramOS's context with its procedural tier words masked, else the method's own context. "
                "s/item: seconds per answer on a shared 2-core machine (load average in the first line).", ""]
        Path(a.write).write_text("\n".join(head + out_lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
