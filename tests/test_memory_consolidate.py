"""Stage 2 consolidation and Stage 3 retrieval on hand-built Engrams."""

from __future__ import annotations

import numpy as np
import pytest

from filegram_ray.memory.classify import classify_rules
from filegram_ray.memory.consolidate import (
    MemoryStore,
    aggregate,
    cluster_episodes,
    consolidate,
    deviation,
    locate_shifted,
    normalize_fingerprints,
)
from filegram_ray.memory.embed import HashingEmbedder
from filegram_ray.memory.engram import encode_engram
from filegram_ray.memory.retrieve import count_tokens, retrieve


def _traj(n_reads: int, deletes: int = 0, backup: bool = False, body: str = "Plain notes about rivers. " * 20):
    ev = [{"event_type": "file_read", "file_path": f"in/f{i}.md", "view_count": 1, "content_length": 500}
          for i in range(n_reads)]
    ev.append({"event_type": "file_write", "file_path": "notes.md", "file_type": "md", "operation": "create",
               "content_length": len(body), "_resolved_content": body})
    if backup:
        ev.append({"event_type": "file_copy", "source_path": "notes.md", "dest_path": "notes.md.bak",
                   "is_backup": True})
    ev += [{"event_type": "file_delete", "file_path": f"t{j}.tmp"} for j in range(deletes)]
    return ev


@pytest.fixture(scope="module")
def engrams():
    # 7 alike sessions (reads 5..11) + one with 6 deletes (curation shift)
    out = [encode_engram(_traj(5 + i, backup=(i == 0)), f"pz/T-{i:02d}", f"T-{i:02d}") for i in range(7)]
    out.append(encode_engram(_traj(8, deletes=6), "pz/T-07", "T-07"))
    return out


def test_zscores_sample_sigma_and_constant_features():
    F = np.zeros((3, 17))
    F[:, 0] = [1.0, 2.0, 3.0]   # mean 2, sample σ 1 → z = -1, 0, 1
    F[:, 1] = 5.0               # constant → 0
    Z = normalize_fingerprints(F)
    assert Z[:, 0].tolist() == [-1.0, 0.0, 1.0] and Z[:, 1].tolist() == [0.0, 0.0, 0.0]
    assert normalize_fingerprints(F[:1]).tolist() == F[:1].tolist()  # N < 2: unnormalised


def test_deviation_rule_and_labels():
    Z = np.zeros((2, 17))
    Z[0, 0] = 5
    assert not deviation(Z)[2].any()  # N < 3: nobody flagged
    Z = np.zeros((8, 17))
    Z[7, 12] = 10.0
    c, d, f = deviation(Z)
    # centroid 1.25 on feature 12: δ = 1.25 for 7 sessions, 8.75 for the last; cutoff = 2.1875 + 1.5·2.652 ≈ 6.16
    assert d[0] == 1.25 and d[7] == 8.75 and f.tolist() == [False] * 7 + [True]
    top = locate_shifted(Z[7], c)
    assert top[0] == {"feature": "version_strategy.total_deletes", "delta": 8.75, "dimension": "E (Curation)"}
    assert locate_shifted(Z[7], c, upstream_quirks=True)[0]["dimension"] == "version_strategy"


def test_aggregate_true_ratio_and_n_trajectories():
    procs = [{"v": {"flag": True, "n": 1, "types": {"md": 1}}}, {"v": {"flag": False, "n": 3, "types": {"md": 2}}}]
    weighted = [procs[0], procs[0], procs[1]]  # first non-deviant (×2), second deviant (×1)
    a = aggregate(weighted, 2)["v"]
    assert a["flag_true_ratio"] == 0.667 and a["_n_trajectories"] == 2 and a["_n_weighted"] == 3
    assert a["n_mean"] == round(5 / 3, 3) and a["n_median"] == 1.0 and a["types_merged"] == {"md": 4}
    q = aggregate(weighted, 2, upstream_quirks=True)["v"]
    assert "flag_true_ratio" not in q and q["flag_mean"] == 0.667 and q["_n_trajectories"] == 3


def _agg(**means):
    out: dict = {}
    for k, v in means.items():
        attr, key = k.split("__")
        out.setdefault(attr, {})[f"{key}_mean" if not key.endswith("_true") else key + "_ratio"] = v
    return out


def test_rule_classifier_tiers():
    by = {c["attribute"]: c["tier"] for c in classify_rules(_agg(
        reading_strategy__search_ratio=0.3, output_detail__total_output_chars=9000,
        directory_style__dirs_created=2.5, directory_style__max_dir_depth=2, edit_strategy__total_edits=5,
        edit_strategy__small_edit_ratio=0.8, version_strategy__total_deletes=1.0,
        cross_modal_behavior__image_files_created=1.0))}
    assert by == {"reading_strategy": "M", "output_detail": "L", "directory_style": "L", "edit_strategy": "L",
                  "working_style": "L", "cross_modal_behavior": "L"}
    by = {c["attribute"]: c["tier"] for c in classify_rules(_agg(
        reading_strategy__browse_ratio=0.2, output_detail__total_output_chars=1000, edit_strategy__total_edits=1,
        reading_strategy__total_reads=20))}
    assert by == {"reading_strategy": "R", "output_detail": "R", "directory_style": "R", "edit_strategy": "R",
                  "working_style": "R", "cross_modal_behavior": "R"}
    # E curation score 0.7·0.1 + 0.3·0.1 = 0.10 → M; A: revisit 0.2, 20 reads → L; D: 2 edits of 20 lines → M
    by = {c["attribute"]: c["tier"] for c in classify_rules(_agg(
        version_strategy__total_deletes=0.1, version_strategy__delete_to_create_ratio=0.1,
        reading_strategy__revisit_ratio=0.2, reading_strategy__total_reads=20, edit_strategy__total_edits=2,
        edit_strategy__avg_lines_changed=20, output_structure__has_markdown_tables_true=0.5))}
    assert (by["working_style"], by["reading_strategy"], by["edit_strategy"], by["cross_modal_behavior"]) == (
        "M", "L", "M", "M")


def test_consolidate_flags_and_store(engrams):
    s = consolidate(engrams, profile_id="pz")
    assert [t for t, f in s.deviation_flags.items() if f] == ["pz/T-07"]
    det = s.deviation_details["pz/T-07"]
    assert det[0]["dimension"] == "E (Curation)" and s.llm_deviation_analysis["pz/T-07"] == "genuine_perturbation"
    agg = s.procedural_aggregate["version_strategy"]
    assert agg["_n_trajectories"] == 8 and agg["_n_weighted"] == 15
    assert agg["has_backup_behavior_true_ratio"] == round(2 / 15, 3)  # the backup session counts twice
    assert "Never created directories in any of 8 trajectories" in s.absence_flags
    assert all(c["trajectory_id"] != "pz/T-07" for c in s.representative_samples)  # deviant excluded
    assert sum(c["size"] for c in s.behavioral_clusters) == 8 and len(s.behavioral_clusters) <= 3
    assert MemoryStore.from_json(s.to_json()) == s
    assert consolidate(list(reversed(engrams)), profile_id="pz").to_json() == s.to_json()  # order-free, deterministic
    with pytest.raises(ValueError, match="no engrams"):
        consolidate([])


def test_episode_clustering_threshold():
    eps = [{"episode_id": str(i), "trajectory_id": f"t{i}", "task_id": f"T{i}", "event_count": i + 1,
            "title": f"e{i}", "content": ""} for i in range(4)]
    v = np.array([[1, 0], [0.95, 0.05], [0, 1], [0.1, 1]], dtype=float)  # two tight pairs, pairs ⟂
    cl = cluster_episodes(eps, v, 0.6)
    assert sorted(sorted(c["episode_ids"]) for c in cl) == [["0", "1"], ["2", "3"]]
    assert cluster_episodes(eps, v, 0.0)[0]["size"] == 4  # threshold 0: everything merges
    assert cl[0]["theme"] in {"e1", "e3"}  # theme = the largest episode's title


def test_retrieve_sections_ablations_and_quirks(engrams):
    s = consolidate(engrams, profile_id="pz")
    full = retrieve(s).text
    order = ["## Behavioral Memory Profile (8 sessions, 1 anomalous)", "### Channel 1", "### Channel 2",
             "### Channel 3", "### Session Evidence"]
    pos = [full.index(h) for h in order]
    assert pos == sorted(pos) and "pz" not in full
    assert "backups in 13% of sessions" in full and "T-07: shifted in E (Curation)" in full
    proc_only = retrieve(s, channels=("procedural",)).text
    assert "### Channel 2" not in proc_only and "anomalous" not in proc_only and "Session Evidence" not in proc_only
    assert "— selective" not in proc_only  # no tier labels without the semantic channel
    no_epi = retrieve(s, channels=("procedural", "semantic")).text
    assert "### Channel 3" not in no_epi and "Session Evidence" not in no_epi
    q = consolidate(engrams, profile_id="pz", config={"upstream_quirks": True})
    assert "no backup behavior" in retrieve(q).text  # always-zero ratio quirk reproduced
    ctx = retrieve(s, "rivers notes", embedder=HashingEmbedder())
    assert "Relevant content:" in ctx.text and "Relevant episodes:" in ctx.text
    assert ctx.tokens_context == count_tokens(ctx.text) and ctx.tokens_memory > ctx.tokens_context
    with pytest.raises(ValueError, match="unknown channel"):
        retrieve(s, channels=("vibes",))


def test_filter_by_tasks_keeps_profile_aggregates(engrams):
    s = consolidate(engrams, profile_id="pz")
    f = s.filter_by_tasks({"T-00", "T-01"})
    assert f.n_sessions == 2 and f.procedural_aggregate == s.procedural_aggregate
