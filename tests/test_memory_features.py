"""Stage 1 features pinned on hand-built event lists; expected values computed by hand (comments show how)."""

from __future__ import annotations

import json

import pytest

from filegram_ray.memory.constants import FINGERPRINT_NAMES
from filegram_ray.memory.engram import Engram, encode_engram
from filegram_ray.memory.episodes import segments_from_boundaries
from filegram_ray.memory.normalize import anonymize_path, normalize_events
from filegram_ray.memory.semantic import parse_content

CONTENT = "# T\n\n## S\n\n| a | b |\n|---|---|\n- x\nThis is a long prose line here. Yes it is.\n"
EVENTS = [
    {"event_type": "file_browse", "directory_path": "/sandbox/p1_x_T-01/", "files_listed": 5, "depth": 0},
    {"event_type": "file_search", "search_type": "grep", "query": "x", "files_matched": 2},
    {"event_type": "file_read", "file_path": "a.md", "view_count": 1, "content_length": 100},
    {"event_type": "context_switch", "from_file": "a.md", "to_file": "b.md"},
    {"event_type": "file_read", "file_path": "b.md", "view_count": 1, "content_length": 300},
    {"event_type": "file_read", "file_path": "a.md", "view_count": 2, "content_length": 200},
    {"event_type": "file_write", "file_path": "out/2024-01-02_report.md", "file_type": "md", "operation": "create",
     "content_length": 50, "_resolved_content": CONTENT},
    {"event_type": "file_edit", "file_path": "out/2024-01-02_report.md", "lines_added": 3, "lines_deleted": 2,
     "_resolved_diff": "@@ -1 +1 @@\n-a\n+b\n"},
    {"event_type": "dir_create", "dir_path": "out", "depth": 1},
    {"event_type": "file_delete", "file_path": "tmp.txt"},
    {"event_type": "tool_call", "tool_name": "read"},          # stripped type: dropped by the normaliser
    {"event_type": "fs_snapshot", "max_depth": 3},              # consumer type, not behavioural
    {"event_type": "iteration_end", "tools_called": 4, "has_tool_error": True},
]


@pytest.fixture(scope="module")
def eng() -> Engram:
    return encode_engram(EVENTS, "T-01", "T-01")


def test_reading_strategy(eng):
    # 3 reads, 1 browse, 1 search → explore = 5; one read with view_count 2; 1 context switch per 3 reads
    assert eng.procedural["reading_strategy"] == {
        "total_reads": 3, "total_browses": 1, "total_searches": 1, "browse_ratio": 0.2, "search_ratio": 0.2,
        "read_ratio": 0.6, "revisit_ratio": 0.333, "avg_content_length": 200.0, "unique_files_read": 2,
        "context_switch_rate": 0.333}


def test_output_structure_naming_tone(eng):
    p = eng.procedural
    assert p["output_detail"] == {"files_created": 1, "total_output_chars": 50, "avg_output_length": 50.0,
                                  "max_output_length": 50, "output_length_std": 0.0}
    assert p["output_structure"] == {"file_types_created": {"md": 1}, "has_markdown": True,
                                     "markdown_table_rows": 2, "has_markdown_tables": True,
                                     "has_structured_data": True, "distinct_file_types": 1}
    # stem "2024-01-02_report": 17 chars, date prefix, not a 1–3-digit numeric prefix, words 2024/01/02/report
    assert p["naming"] == {"avg_filename_length": 17.0, "has_date_prefix": True, "has_numeric_prefix": False,
                           "has_underscores": True, "has_hyphens": True, "avg_word_count": 4.0, "total_renames": 0}
    # 22 whitespace words; sentence pieces "…here", "Yes it is" and the empty piece after the final ".\n" (every
    # piece counts, §7.2, FID tone_sentence_split) → 22 / 3 = 7.3; prose 1 line ÷ (1 list + 2 table)
    assert p["tone"] == {"heading_count": 2, "heading_max_depth": 2, "table_row_count": 2, "list_item_count": 1,
                         "avg_sentence_length_words": 7.3, "total_words": 22, "prose_to_structure_ratio": 0.333,
                         "has_content_analysis": True}


def test_directory_edit_version_crossmodal(eng):
    p = eng.procedural
    assert p["directory_style"] == {"dirs_created": 1, "max_dir_depth": 1, "avg_dir_depth": 1.0,
                                    "final_fs_max_depth": 3, "files_moved": 0}
    assert p["edit_strategy"] == {"total_edits": 1, "avg_lines_changed": 5.0, "max_lines_changed": 5,
                                  "edits_per_file": 1.0, "small_edit_ratio": 1.0}
    assert p["version_strategy"] == {"total_copies": 0, "backup_copies": 0, "total_deletes": 1,
                                     "total_overwrites": 0, "has_backup_behavior": False,
                                     "delete_to_create_ratio": 1.0}
    assert p["cross_modal_behavior"] == {"structured_files_created": 0, "primary_files_created": 1,
                                         "image_files_created": 0, "supplementary_ratio": 0.0,
                                         "total_files_created": 1, "markdown_table_rows": 2,
                                         "has_tables_or_data": True, "has_images": False}
    assert eng.auxiliary["work_rhythm"] == {"total_iterations": 1, "avg_tools_per_iteration": 4.0,
                                            "iteration_error_rate": 1.0, "total_context_switches": 1}


def test_fingerprint_order_counts_importance(eng):
    assert FINGERPRINT_NAMES[0] == "reading_strategy.search_ratio" and len(FINGERPRINT_NAMES) == 17
    assert eng.fingerprint == [0.2, 0.2, 0.333, 50.0, 1.0, 50.0, 1.0, 1.0, 0.0, 1.0, 5.0, 1.0, 1.0, 1.0, 0.0, 2.0,
                               0.0]
    assert (eng.event_count, eng.behavioral_event_count) == (12, 10)
    # density 10/12, all 9 attributes active → 10/12 × (1 + 9/9)
    assert eng.importance_score == round(10 / 12 * 2, 4)


def test_sequence_features(eng):
    sf = eng.sequence_features
    # windows [browse search read cs read] → exploration; [read write edit dir delete] → production
    # (production 2 and organization 2 tie: first seen wins)
    assert [(p["phase"], p["start_idx"], p["end_idx"]) for p in sf["phases"]] == [("exploration", 0, 4),
                                                                                   ("production", 5, 9)]
    assert sf["phase_pattern"] == "exploration -> production"
    assert sf["dominant_transition"] == "file_browse -> file_search (1)"
    assert sf["file_access_graph"]["a.md"] == ["b.md", "out/2024-01-02_report.md"]


def test_episodes_follow_phases(eng):
    assert [(e["start_idx"], e["end_idx"], e["event_count"]) for e in eng.episodes] == [(0, 4, 5), (5, 9, 5)]
    ep = eng.episodes[1]
    assert "2024-01-02_report.md" in ep["content"] and "Deleted tmp.txt" in ep["content"]
    assert set(ep) >= {"episode_id", "title", "content", "summary", "dominant_actions", "files_involved"}
    assert encode_engram(EVENTS, "T-01", "T-01").episodes == eng.episodes  # deterministic ids and text


def test_segment_merge_rule():
    # boundaries 2 and 9 in 10 events: [0,2) is the first (kept), [2,9), and [9,10) < 3 → merged into previous
    assert segments_from_boundaries(10, [2, 9]) == [(0, 1), (2, 9)]
    assert segments_from_boundaries(2, []) == [(0, 1)]


def test_semantic_unit_and_quirk(eng):
    sem = eng.semantic
    assert sem["created_filenames"] == ["2024-01-02_report.md"]
    assert sem["created_files"][0]["content_preview"] == CONTENT
    assert sem["edit_chains"][0]["full_diff"].startswith("@@")
    quirky = encode_engram(EVENTS, "T-01", "T-01", upstream_quirks=True)
    assert quirky.semantic["edit_chains"][0]["full_diff"] == ""  # §7.7 quirk reproduced
    assert sem["llm_encoding"]["source"] == "rules"


def test_multimodal_parser_is_honest():
    assert parse_content("hello", "md") == "hello"
    note = parse_content("x" * 10, "pptx")
    assert "PPTX" in note and "not parsed" in note


def test_no_creates_gives_zero_naming_and_empty_trajectory():
    e = encode_engram([{"event_type": "file_rename", "old_path": "a_b.md", "new_path": "a-b.md"}], "t", "t")
    assert e.procedural["naming"]["total_renames"] == 1 and e.procedural["naming"]["avg_filename_length"] == 0.0
    empty = encode_engram([], "t", "t")
    assert empty.fingerprint == [0.0] * 17 and empty.importance_score == 0.0 and empty.episodes == []


def test_edit_stats_mixed_sizes():
    evs = [{"event_type": "file_edit", "file_path": "a.md", "lines_added": a, "lines_deleted": d}
           for a, d in ((1, 1), (20, 5), (4, 5))] + [
        {"event_type": "file_edit", "file_path": "b.md", "lines_added": 0, "lines_deleted": 0}]
    es = encode_engram(evs, "t", "t").procedural["edit_strategy"]
    # changed = 2, 25, 9, 0 → mean 9.0, max 25, small (<10) 3/4, 4 edits over 2 files
    assert es == {"total_edits": 4, "avg_lines_changed": 9.0, "max_lines_changed": 25, "edits_per_file": 2.0,
                  "small_edit_ratio": 0.75}


def test_media_resolution_from_folder(tmp_path):
    (tmp_path / "blobs").mkdir()
    (tmp_path / "blobs" / "abc.blob").write_text("| x | y |\n", encoding="utf-8")
    ev = [{"event_type": "file_write", "file_path": "d.csv", "file_type": "csv", "operation": "create",
           "content_length": 10, "media_ref": {"type": "blob", "hash": "abc", "path": "blobs/abc.blob"}},
          {"event_type": "file_write", "file_path": "e.png", "file_type": "png", "operation": "create",
           "content_length": 10, "media_ref": {"type": "blob", "hash": "zzz", "path": "blobs/zzz.blob"}}]
    e = encode_engram(ev, "t", "t", tmp_path)
    cm = e.procedural["cross_modal_behavior"]
    assert (cm["structured_files_created"], cm["image_files_created"], cm["markdown_table_rows"]) == (1, 1, 1)
    assert e.semantic["created_files"][1]["full_content"] == ""  # missing blob → silently empty (§7.1)


def test_anonymize_and_errors(caplog):
    assert anonymize_path("/sandbox/p1_methodical_T-01/docs/a.md") == "docs/a.md"
    assert anonymize_path("/sandbox/p1_methodical_T-01/") == "."
    assert anonymize_path("/Users/x/secret/a.md") == "a.md"
    assert anonymize_path("docs/a.md") == "docs/a.md"
    with pytest.raises(ValueError, match=r"ev.json: event #0 \(file_read\): field 'content_length'"):
        normalize_events([{"event_type": "file_read", "content_length": "lots"}], source="ev.json")
    # an event without event_type is skipped with a warning naming the file and index (FID/missing_event_type)
    with caplog.at_level("WARNING"):
        kept = normalize_events([{"file_path": "a"}, {"event_type": "file_read", "file_path": "b"}], source="ev.json")
    assert [e.file_path for e in kept] == ["b"]
    assert "ev.json: event #0: missing field 'event_type': event skipped" in caplog.text


def test_json_round_trip(eng):
    assert Engram.from_json(eng.to_json()) == eng
    json.loads(eng.to_json())


def test_llm_segmenter_and_fallback():
    evs = [{"event_type": "file_read", "file_path": f"f{i}.md", "content_length": 10} for i in range(8)]
    calls = []

    def llm(prompt, system=None):
        calls.append(prompt)
        if "boundaries" in prompt:
            return '```json\n{"boundaries": [4, 0, 99, 4,]}\n```'
        return '{"title": "Reading the notes", "content": "The user read files.", "summary": "Read."}'

    e = encode_engram(evs, "t", "t", llm_fn=llm)
    assert [(x["start_idx"], x["end_idx"]) for x in e.episodes] == [(0, 3), (4, 7)]
    assert e.episodes[0]["title"] == "Reading the notes" and e.episodes[0]["segmenter"] == "llm"

    def broken(prompt, system=None):
        raise RuntimeError("backend down")

    e2 = encode_engram(evs, "t", "t", llm_fn=broken)
    assert len(e2.episodes) == 1 and e2.episodes[0]["segmenter"] == "rules (llm fallback)"
