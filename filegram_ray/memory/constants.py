"""Constants of FileGramOS memory, each with its source in FILEGRAM_REFERENCE.md (§ = section).

Nothing here is tuned on data: every value is the reference's (upstream ``tuning.py`` / schema constants, §7.12)
unless marked *ours*.
"""

from __future__ import annotations

#: The 12 behavioural event types kept by the post-execution filter (§4).
KEPT_TYPES: tuple[str, ...] = (
    "file_read", "file_write", "file_edit", "file_search", "file_browse", "file_rename", "file_move",
    "dir_create", "file_delete", "file_copy", "context_switch", "cross_file_reference",
)
#: Consumer types of the EventNormalizer: kept types + fs_snapshot + iteration_end (§7.1).
CONSUMER_TYPES: frozenset[str] = frozenset(KEPT_TYPES) | {"fs_snapshot", "iteration_end"}
#: Types ignored by feature extraction (simulation metadata; §7.1 last bullet).
SIMULATION_TYPES: frozenset[str] = frozenset({"fs_snapshot", "iteration_end"})

#: Text-parseable file types (§7.2, "Type sets used elsewhere").
TEXT_TYPES: frozenset[str] = frozenset({"md", "txt", "csv", "json", "yaml", "yml", "xml", "tsv", "log", "ini",
                                         "toml", "rst"})
#: Multimodal file types (§7.2).
MULTIMODAL_TYPES: frozenset[str] = frozenset({"png", "jpg", "jpeg", "gif", "svg", "pdf", "pptx", "docx", "xlsx"})
#: cross_modal_behavior type sets (§7.2, rows structured/primary/image files).
STRUCTURED_TYPES: frozenset[str] = frozenset({"csv", "json", "xlsx", "yaml", "xml", "tsv"})
PRIMARY_TYPES: frozenset[str] = frozenset({"md", "txt", "docx", "pdf"})
IMAGE_TYPES: frozenset[str] = frozenset({"png", "jpg", "jpeg", "svg", "gif"})
#: output_structure.has_structured_data types (§7.2).
STRUCTURED_DATA_TYPES: frozenset[str] = frozenset({"json", "yaml", "csv", "xml"})

#: Small edit: lines_added + lines_deleted strictly below this (§7.2 small_edit_ratio; SMALL_EDIT_LINE_THRESHOLD).
SMALL_EDIT_LINE_THRESHOLD = 10
#: Major edit: lines changed strictly above this (§7.9 sampler; MAJOR_EDIT_LINE_THRESHOLD).
MAJOR_EDIT_LINE_THRESHOLD = 10
#: Diversity normaliser of the importance score (§7.7; MAX_DIVERSITY_ATTRIBUTES).
MAX_DIVERSITY_ATTRIBUTES = 9

#: The nine primary procedural attributes (§7.2), in extraction order.
PRIMARY_ATTRIBUTES: tuple[str, ...] = (
    "reading_strategy", "output_detail", "output_structure", "directory_style", "naming", "edit_strategy",
    "version_strategy", "tone", "cross_modal_behavior",
)

#: The ordered 17-D fingerprint (§7.3): (dimension letter, attribute, feature key).
FINGERPRINT_FEATURES: tuple[tuple[str, str, str], ...] = (
    ("A", "reading_strategy", "search_ratio"),
    ("A", "reading_strategy", "browse_ratio"),
    ("A", "reading_strategy", "revisit_ratio"),
    ("B", "output_detail", "avg_output_length"),
    ("B", "output_detail", "files_created"),
    ("B", "output_detail", "total_output_chars"),
    ("C", "directory_style", "dirs_created"),
    ("C", "directory_style", "max_dir_depth"),
    ("C", "directory_style", "files_moved"),
    ("D", "edit_strategy", "total_edits"),
    ("D", "edit_strategy", "avg_lines_changed"),
    ("D", "edit_strategy", "small_edit_ratio"),
    ("E", "version_strategy", "total_deletes"),
    ("E", "version_strategy", "delete_to_create_ratio"),
    ("F", "cross_modal_behavior", "structured_files_created"),
    ("F", "cross_modal_behavior", "markdown_table_rows"),
    ("F", "cross_modal_behavior", "image_files_created"),
)
FINGERPRINT_NAMES: tuple[str, ...] = tuple(f"{a}.{k}" for _, a, k in FINGERPRINT_FEATURES)
#: Columns of each dimension in the fingerprint, in §7.3 order (A 0–2, B 3–5, C 6–8, D 9–11, E 12–13, F 14–16).
FINGERPRINT_COLUMNS: dict[str, tuple[int, ...]] = {
    d: tuple(i for i, (dim, _, _) in enumerate(FINGERPRINT_FEATURES) if dim == d)
    for d in dict.fromkeys(dim for dim, _, _ in FINGERPRINT_FEATURES)}

#: Dimension labels used by shift localisation (§7.3). E has no upstream label (quirk, §13); ours: "E (Curation)".
DIMENSION_LABELS: dict[str, str] = {
    "reading_strategy": "A (Consumption)",
    "output_detail": "B (Production)",
    "directory_style": "C (Organization)",
    "edit_strategy": "D (Iteration)",
    "version_strategy": "E (Curation)",
    "cross_modal_behavior": "F (Cross-Modal)",
}

# ---- Stage 1 (§7.7, §7.10, §7.12)
PREVIEW_FILE_CHARS = 500
PREVIEW_DIFF_CHARS = 300
LLM_ENCODE_MAX_FILES = 4
LLM_ENCODE_FILE_CHARS = 600
LLM_ENCODE_MAX_EDITS = 3
LLM_ENCODE_EDIT_CHARS = 400
PHASE_WINDOW_SIZE = 5
EPISODE_MIN_EVENTS = 3
EPISODE_MAX_PER_TRAJECTORY = 5
EPISODE_FILES_INVOLVED_MAX = 10

# ---- Stage 2 (§7.4, §7.5, §7.9, §7.10, §7.12 schema constants)
DEVIATION_THRESHOLD = 1.5
TOP_K_SHIFTED_DIMS = 3
SEMANTIC_BUDGET = 8000
MIN_TRAJECTORY_BUDGET = 200
CONTENT_CHUNK_SIZE = 800
#: ours (case BR2-18): a content chunk longer than this many tokens of the packaged MiniLM's tokenizer
#: ([CLS]/[SEP] included) is cut into pieces that fit — MiniLM's max_seq_length (its sentence_bert_config.json);
#: e5-small reads 512. Upstream embedded the first 256 tokens of an 800-char chunk and dropped the rest unseen.
CONTENT_CHUNK_TOKENS = 256
CONTENT_CHUNK_MAX = 50
CONTENT_CHUNK_MIN_CHARS = 50
EPISODE_CLUSTER_THRESHOLD = 0.6
BEHAVIORAL_CLUSTER_MAX = 3
CV_STABILITY_THRESHOLD = 0.3
CV_VARIABLE_DISPLAY_THRESHOLD = 0.5

# ---- Stage 3 (§7.11)
RETRIEVER_DISPLAY_CHARS = 800
EPISODE_TOP_K = 5
CHUNK_TOP_K = 5
LANGUAGE_RATIO_DOMINANT = 0.6
LANGUAGE_RATIO_MIXED = 0.2
NAMING_PATTERN_THRESHOLD = 0.3
NAMING_UNDERSCORE_THRESHOLD = 0.7
MAX_FILES_SHOWN = 15
FILENAME_DISPLAY_CHARS = 40
MAX_SAMPLES_SHOWN = 12

#: Friendly metric names for Stable/Variable lists (§7.12 last paragraph).
FRIENDLY_METRIC_NAMES: dict[str, str] = {
    "reading_strategy.total_reads": "read count",
    "reading_strategy.search_ratio": "search usage",
    "reading_strategy.revisit_ratio": "revisit rate",
    "reading_strategy.browse_ratio": "browse rate",
    "reading_strategy.context_switch_rate": "context switching",
    "output_detail.total_output_chars": "output volume",
    "output_detail.avg_output_length": "output length",
    "output_detail.files_created": "file count",
    "directory_style.dirs_created": "dir creation",
    "directory_style.max_dir_depth": "dir depth",
    "directory_style.files_moved": "file moves",
    "edit_strategy.total_edits": "edit count",
    "edit_strategy.avg_lines_changed": "edit size",
    "tone.heading_max_depth": "heading depth",
    "tone.heading_count": "heading count",
}

#: Keys checked for episodic consistency (§7.5).
CONSISTENCY_KEYS: dict[str, tuple[str, ...]] = {
    "reading_strategy": ("total_reads", "revisit_ratio", "search_ratio"),
    "output_detail": ("total_output_chars", "avg_output_length", "files_created"),
    "edit_strategy": ("total_edits", "avg_lines_changed", "small_edit_ratio"),
    "directory_style": ("dirs_created", "max_dir_depth"),
    "tone": ("heading_count", "heading_max_depth", "prose_to_structure_ratio"),
}
