"""Hand-made run directory for the methods/evaluate tests: two users × three tasks, a small bench.

User ``p1_methodical`` reads sequentially, nests folders, writes long documents with tables and edits in small
steps; user ``p2_minimal`` searches first, keeps everything flat and writes short notes. Each trajectory has
events.json + media/ (blobs and a diff, reference §2.2) and a meta.json holding ground truth plus the marker
:data:`META_MARKER`, which must never reach a method.
"""

from __future__ import annotations

import hashlib
import json
import random

import polars as pl

from filegram_ray.storage import RunDir

PROFILES = ("p1_methodical", "p2_minimal")
TASKS = ("T-01", "T-02", "T-03")
META_MARKER = "GROUND-TRUTH-MARKER-7f3a"


def _h(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _events_p1(task: str, t0: float) -> tuple[list[dict], dict[str, str]]:
    media: dict[str, str] = {}
    doc = (f"# Quarterly review {task}\n\nThis report summarises the sources in detail. Every figure was checked "
           "against the original spreadsheet before inclusion.\n\n| metric | value |\n|---|---|\n| revenue | 12 |\n"
           "| cost | 7 |\n\n## Method\nSources were read in order, section by section.\n")
    blob = _h(doc)
    media[f"blobs/{blob}.blob"] = doc
    diff = "--- a/reports/2024/q1/review.md\n+++ b/reports/2024/q1/review.md\n@@ -1 +1 @@\n-cost | 7\n+cost | 8\n"
    dh = _h(diff)
    media[f"diffs/{dh}.diff"] = diff
    evs = []
    t = t0
    for i, src in enumerate(["sources/a.csv", "sources/b.md", "sources/c.pdf", "sources/a.csv"]):
        t += 1000
        evs.append({"event_type": "file_read", "event_id": f"r{i}", "timestamp": t, "file_path": src,
                    "file_type": src.rsplit(".", 1)[1], "directory_depth": 1, "view_count": 2 if i == 3 else 1,
                    "view_range": [1, 40], "content_length": 900})
    for d, depth in (("reports", 1), ("reports/2024", 2), ("reports/2024/q1", 3)):
        t += 500
        evs.append({"event_type": "dir_create", "timestamp": t, "dir_path": d, "depth": depth, "sibling_count": 0})
    t += 800
    evs.append({"event_type": "file_write", "timestamp": t, "file_path": "reports/2024/q1/review.md",
                "file_type": "md", "directory_depth": 3, "operation": "create", "content_length": len(doc),
                "media_ref": {"type": "blob", "hash": blob, "path": f"blobs/{blob}.blob"}})
    for k in range(3):
        t += 700
        evs.append({"event_type": "file_edit", "timestamp": t, "file_path": "reports/2024/q1/review.md",
                    "file_type": "md", "edit_tool": "edit", "lines_added": 1, "lines_deleted": 1,
                    "media_ref_diff": {"type": "diff", "hash": dh, "path": f"diffs/{dh}.diff"}})
    t += 300
    evs.append({"event_type": "file_copy", "timestamp": t, "source_path": "reports/2024/q1/review.md",
                "dest_path": "reports/2024/q1/review.md.bak", "is_backup": True})
    # envelope leakage fields that the loader must drop even if a filter forgot them
    for e in evs:
        e["profile_id"] = "p1_methodical"
        e["model_name"] = "generator-model"
    return evs, media


def _events_p2(task: str, t0: float) -> tuple[list[dict], dict[str, str]]:
    media: dict[str, str] = {}
    note = f"notes {task}: revenue up. done.\n"
    blob = _h(note)
    media[f"blobs/{blob}.blob"] = note
    t = t0 + 250
    evs = [{"event_type": "file_search", "timestamp": t, "search_type": "grep", "query": "revenue",
            "files_matched": 3},
           {"event_type": "file_read", "timestamp": t + 900, "file_path": "sources/a.csv", "file_type": "csv",
            "directory_depth": 1, "view_count": 1, "view_range": [10, 20], "content_length": 200},
           {"event_type": "file_write", "timestamp": t + 1900, "file_path": "summary.txt", "file_type": "txt",
            "directory_depth": 0, "operation": "create", "content_length": len(note),
            "media_ref": {"type": "blob", "hash": blob, "path": f"blobs/{blob}.blob"}},
           {"event_type": "file_write", "timestamp": t + 2900, "file_path": "summary.txt", "file_type": "txt",
            "directory_depth": 0, "operation": "overwrite", "content_length": len(note),
            "media_ref": {"type": "blob", "hash": blob, "path": f"blobs/{blob}.blob"}},
           {"event_type": "file_delete", "timestamp": t + 3500, "file_path": "scratch.tmp", "was_temporary": True}]
    return evs, media


def write_trajectories(run: RunDir) -> None:
    for p in PROFILES:
        for i, task in enumerate(TASKS):
            evs, media = (_events_p1 if p == PROFILES[0] else _events_p2)(task, 1_000_000.0 * (i + 1))
            base = f"trajectories/{p}/{task}"
            run.write_json(f"{base}/events.json", evs)
            for rel, text in media.items():
                run.write_text(f"{base}/media/{rel}", text)
            run.write_json(f"{base}/meta.json", {"trajectory_id": f"{p}/{task}", "profile_id": p, "task_id": task,
                                                 "marker": META_MARKER, "perturbation": None})


def _item(qid, sub, channel, question, choices, context, setting="text", metadata=None, profile_id=""):
    return {"question_id": qid, "track": "T1_understanding", "sub_track": sub, "sub_class": "", "channel": channel,
            "setting": setting, "profile_id": profile_id, "input_trajectories": json.dumps(context["trajectories"]),
            "question": question, "choices": json.dumps(choices), "n_choices": len(choices), "correct": "",
            "context": json.dumps(context, sort_keys=True), "metadata": json.dumps(metadata or {})}


def _ctx(kind, trajs, labels=None, held_out=None):
    return {"kind": kind, "trajectories": list(trajs), "labels": labels or [f"Session {t.split('/')[1]}"
                                                                              for t in trajs], "held_out": held_out}


def write_bench(run: RunDir, n_filler: int = 0, seed: int = 3) -> None:
    """Items of every context kind + ``n_filler`` extra multiple-choice items sharing one context (cheap)."""
    p1 = [f"{PROFILES[0]}/{t}" for t in TASKS]
    p2 = [f"{PROFILES[1]}/{t}" for t in TASKS]
    items, key = [], []

    def add(item, correct, correct_text=""):
        items.append(item)
        key.append({"question_id": item["question_id"], "correct": correct, "correct_text": correct_text,
                    "facts": "{}", "distractor_profiles": "[]"})

    add(_item("AttrRec-00001", "AttrRec", "procedural", "How does this user organise the folders they create?",
              ["deeply nested folders, three levels or more", "flat, everything in the root",
               "adaptive, one or two levels"], _ctx("all_trajectories", p1), profile_id=PROFILES[0]), "A")
    add(_item("BehavFP-00001", "BehavFP", "procedural", "Which description fits the user behind this session?",
              ["searches first, writes short notes, keeps a flat folder", ("reads every source in order, nests "
               "folders deeply, writes long reports with tables"), "browses widely and writes mid-length notes",
               "edits in bulk rewrites"], _ctx("single_trajectory", [p2[0]], ["Session X"])), "A")
    add(_item("TraceDis-00001", "TraceDis", "procedural", "What mainly distinguishes User 1 from User 2?",
              ["User 1 nests folders deeply and keeps backups; User 2 stays flat",
               "User 2 nests folders deeply; User 1 stays flat"],
              _ctx("interleaved_pair", [p1[0], p2[0]], ["User 1", "User 2"])), "A")
    add(_item("AnomDet-00001", "AnomDet", "episodic", "Which session was not produced by the same user?",
              ["Session T-01", "Session T-02", "Session T-03b"],
              _ctx("sessions_with_impostor", [p1[0], p1[1], p2[2]], ["Session T-01", "Session T-02",
                                                                     "Session T-03b"])), "C")
    add(_item("BehavInf-00001", "BehavInf", "procedural", "On the held-out task, how will this user save output?",
              ["in nested folders with a backup copy", "in one flat text file"],
              _ctx("held_out", p1[:2], held_out="T-03")), "A")
    add(_item("ProfRec-00001", "ProfRec", "semantic", "Infer this user's output_detail.", [],
              _ctx("all_trajectories", p1), metadata={"attribute": "output_detail"}), "detailed", "detailed")
    add(_item("FileGrd-00001", "FileGrd", "semantic", "Does this user put tables in their documents?",
              ["yes, tables with figures", "no, plain text only"], _ctx("all_trajectories", p1),
              setting="multimodal"), "A")
    rng = random.Random(seed)
    for i in range(n_filler):
        n = rng.choice([3, 4])
        add(_item(f"AttrRec-1{i:04d}", "AttrRec", rng.choice(["procedural", "semantic"]),
                  f"Filler question {i} about this user.", [f"option {j} {i}" for j in range(n)],
                  _ctx("all_trajectories", p2)), "ABCD"[rng.randrange(n)])
    run.write_table("bench/items.parquet", pl.DataFrame(items))
    run.write_table("bench/answers_key.parquet", pl.DataFrame(key))


def make_run(root, n_filler: int = 0) -> RunDir:
    run = RunDir(str(root))
    write_trajectories(run)
    write_bench(run, n_filler=n_filler)
    return run
