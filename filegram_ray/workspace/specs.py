"""Built-in workspace specifications of the 32 FileGram tasks (used when a task carries no WorkspaceSpec).

Source: FILEGRAM_REFERENCE.md §6.3 ("Workspace inputs" column) and §6.2 (the inferred 16-task multimodal set:
T-02, 07, 12, 16, 18, 19, 22, 23, 24, 25, 26, 27, 28, 30, 31, 32). Counts are our choice where the reference gives
only a rough size ("~25 files", "~40 photos"); they add up to 607 files (ref headline: a corpus of about 615 input
files). Empty workspaces: T-03, T-04, T-20 (ref §6.3).
"""

from __future__ import annotations

from typing import Any

#: task_id -> (scenario, inputs {kind: count}, subdirs, plants, language)
DEFAULT_SPECS: dict[str, dict[str, Any]] = {
    "T-01": {"scenario": "investment_analyst", "inputs": {"md": 5, "pdf": 4, "txt": 4, "eml": 4, "docx": 3, "csv": 3, "png": 2}},
    "T-02": {"scenario": "legal_practice", "inputs": {"docx": 5, "eml": 4, "ics": 2, "txt": 4, "pdf": 3, "mp3": 3, "png": 3}},
    "T-03": {"scenario": "empty", "empty": True, "inputs": {}},
    "T-04": {"scenario": "empty", "empty": True, "inputs": {}},
    "T-05": {"scenario": "personal_mixed", "inputs": {"txt": 5, "docx": 4, "md": 5, "eml": 4, "ics": 3, "csv": 3, "png": 3, "jpg": 3},
                 "language": "mixed"},
    "T-06": {"scenario": "tech_company_research", "inputs": {"pdf": 10, "md": 4, "eml": 3, "txt": 2, "json": 1, "png": 1}},
    "T-07": {"scenario": "personal_records", "inputs": {"txt": 6, "eml": 4, "ics": 2, "docx": 2, "pdf": 2, "mp3": 2, "png": 2, "xlsx": 2}},
    "T-08": {"scenario": "quarterly_work", "inputs": {"md": 6, "txt": 3, "eml": 4, "docx": 2, "csv": 2, "png": 2, "json": 1}},
    "T-09": {"scenario": "long_report", "inputs": {"md": 1}, "plants": ["long_report"]},
    "T-10": {"scenario": "methodology_kb", "inputs": {"md": 8}, "plants": ["prebuilt_kb"],
                 "subdirs": ["fundamentals", "metrics", "industry"]},
    "T-11": {"scenario": "business_docs", "inputs": {"md": 7}, "plants": ["inconsistencies"]},
    "T-12": {"scenario": "team_workspace", "inputs": {"md": 16, "pdf": 3, "png": 2, "jpg": 1, "eml": 2}, "plants": ["md_styles"],
                 "subdirs": ["meeting_notes", "personal", "work", "reference"], "language": "mixed"},
    "T-13": {"scenario": "reviewed_report", "inputs": {"md": 4}, "plants": ["reviewer_feedback"]},
    "T-14": {"scenario": "report_versions", "inputs": {"md": 7, "csv": 2, "xlsx": 1}, "plants": ["report_versions"]},
    "T-15": {"scenario": "bull_bear", "inputs": {"md": 2, "csv": 3, "xlsx": 1}, "plants": ["bull_bear"],
                 "subdirs": ["raw_data"]},
    "T-16": {"scenario": "investment_analyst", "inputs": {"md": 6, "pdf": 4, "mp3": 3, "eml": 4, "png": 3, "csv": 4},
                 "subdirs": ["TSMC", "SeaLtd", "Intel", "research", "communications", "data", "personal"]},
    "T-17": {"scenario": "legal_practice", "inputs": {"docx": 7, "pdf": 5, "md": 5, "eml": 3, "txt": 2, "tmp": 2, "bak": 2},
                 "plants": ["junk_files"], "subdirs": ["cases", "clients", "templates", "archive"]},
    "T-18": {"scenario": "legal_kb", "inputs": {"md": 10, "pdf": 3, "mp3": 3, "docx": 3, "eml": 2, "png": 1}, "plants": ["update_batches"],
                 "subdirs": ["case_law", "criminal_law", "court_procedures", "client_matters", "updates"]},
    "T-19": {"scenario": "legal_practice", "inputs": {"docx": 4, "pdf": 4, "mp3": 3, "eml": 4, "md": 3},
                 "subdirs": ["case_reports", "legal_reference", "audio_memos", "client_communications", "context"]},
    "T-20": {"scenario": "empty", "empty": True, "inputs": {}},
    "T-21": {"scenario": "messy_project", "inputs": {"md": 8, "txt": 6, "docx": 4, "csv": 3, "py": 3, "json": 2, "tmp": 3, "bak": 3,
                                                       "png": 2}, "plants": ["junk_files"],
                 "subdirs": ["src", "docs", "old", "misc"]},
    "T-22": {"scenario": "film_collection", "inputs": {"mp4": 6, "gif": 4, "docx": 4, "pptx": 2, "md": 3, "jpg": 3}},
    "T-23": {"scenario": "travel_photos", "inputs": {"jpg": 40}},
    "T-24": {"scenario": "earnings_calls", "inputs": {"mp3": 4, "pdf": 4, "md": 5, "xlsx": 1, "png": 2}},
    "T-25": {"scenario": "legal_evidence", "inputs": {"mp4": 5, "mp3": 3, "docx": 3, "pdf": 3, "png": 4, "eml": 2}},
    "T-26": {"scenario": "personal_assets", "inputs": {"jpg": 12, "mp4": 3, "mp3": 4, "wav": 3, "txt": 4, "md": 3, "csv": 3, "json": 2,
                                                         "png": 3}},
    "T-27": {"scenario": "graduate_student", "inputs": {"mp4": 3, "pdf": 5, "docx": 3, "jpg": 6, "png": 2, "eml": 3, "pptx": 1, "md": 3}},
    "T-28": {"scenario": "pet_cat", "inputs": {"jpg": 8, "wav": 2, "mp3": 1, "pdf": 3, "eml": 3, "docx": 1}},
    "T-29": {"scenario": "company_registry", "inputs": {"pdf": 30, "xlsx": 2}},
    "T-30": {"scenario": "audio_archive", "inputs": {"mp3": 7, "wav": 6, "md": 3, "txt": 2}},
    "T-31": {"scenario": "farm_videos", "inputs": {"mp4": 14, "jpg": 10}},
    "T-32": {"scenario": "multimodal_archive", "inputs": {"jpg": 6, "png": 3, "mp3": 3, "wav": 1, "mp4": 2, "md": 9, "docx": 2, "txt": 2},
                 "plants": ["duplicate_media", "broken_refs"], "subdirs": ["docs", "media", "audio"]},
}

#: Inferred multimodal task set (ref §6.2).
MULTIMODAL_TASKS = frozenset({"T-02", "T-07", "T-12", "T-16", "T-18", "T-19", "T-22", "T-23", "T-24", "T-25",
                              "T-26", "T-27", "T-28", "T-30", "T-31", "T-32"})


def default_workspace(task_id: str) -> dict[str, Any]:
    """The built-in WorkspaceSpec dict of ``task_id`` (keys of the Task model's WorkspaceSpec).

    Raises: KeyError naming the task id when it is not one of T-01..T-32.
    """
    if task_id not in DEFAULT_SPECS:
        raise KeyError(f"no built-in workspace spec for task {task_id!r} (known: T-01..T-32)")
    spec = dict(DEFAULT_SPECS[task_id])
    spec.setdefault("empty", False)
    spec.setdefault("subdirs", [])
    spec.setdefault("plants", [])
    spec.setdefault("language", "en")
    spec["inputs"] = dict(spec.get("inputs") or {})
    return spec
