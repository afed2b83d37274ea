"""File kinds the persona simulator recognises by name: the extensions the read tool turns into text, media,
editable text, the file families an organize task sorts by, temporary extensions, and the workspace clutter
categories (:func:`clutter_category`). Split out of ``agent.py``; ``agent.py`` re-exports them."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

#: Extensions the read tool turns into text (extractors) — ref §1.1; media need an annotation (no event otherwise).
DOC_EXT = {".md", ".txt", ".csv", ".json", ".eml", ".ics", ".docx", ".pdf", ".xlsx", ".pptx", ".yaml", ".yml",
           ".log", ".html", ".xml", ".tsv", ".rst"}
MEDIA_EXT = {".png", ".jpg", ".jpeg", ".gif", ".svg", ".mp3", ".wav", ".m4a", ".mp4", ".mov", ".webm", ".avi"}
EDITABLE_EXT = {".md", ".txt"}
FAMILY = {
    "documents": {".pdf", ".docx", ".doc", ".pptx", ".md", ".txt", ".rst"},
    "communications": {".eml", ".ics", ".msg"},
    "data": {".csv", ".xlsx", ".json", ".tsv", ".yaml", ".yml", ".xml"},
    "images": {".png", ".jpg", ".jpeg", ".gif", ".svg"},
    "audio": {".mp3", ".wav", ".m4a"},
    "video": {".mp4", ".mov", ".webm", ".avi"},
}
FAMILY_ZH = {"documents": "文档资料", "communications": "邮件日程", "data": "数据表格", "images": "图片素材",
             "audio": "音频录音", "video": "视频文件", "misc": "其他杂项"}
TEMP_EXT = {".tmp", ".temp", ".bak", ".swp", ".swo", ".pyc", ".o", ".log"}  # ref §3.4 was_temporary
#: Workspace clutter by category, recognised by name the way a person would (TIER_TARGETS §2.5 "what
#: gets deleted"): temporary/autosave files, duplicates, superseded or worthless leftovers. Matches the clutter the
#: seed stage plants (``workspace.scenarios._plant_clutter`` / ``_plant_junk``). Checked in this order.
CLUTTER: tuple[tuple[str, re.Pattern], ...] = (
    ("temp", re.compile(r"(\.tmp$|\.temp$|\.swp$|\.swo$|\.bak$|~$|^~|^\.~lock)", re.IGNORECASE)),
    ("duplicate", re.compile(r"( \(\d+\)\.[^.]+$|[ _]copy(\s?\(\d+\))?\d*\.[^.]+$|副本|final_final)", re.IGNORECASE)),
    ("superseded", re.compile(r"(_old\.[^.]+$|\.old$|\.orig$|_superseded|_obsolete|^untitled)", re.IGNORECASE)),
)


def clutter_category(path: str) -> str | None:
    """``"temp"``, ``"duplicate"``, ``"superseded"`` or None for a workspace path (by its file name)."""
    name = PurePosixPath(path).name
    for cat, rx in CLUTTER:
        if rx.search(name):
            return cat
    return None
