"""Behavioural vocabulary of FileGramBench: how tiers and attribute values are said in plain words.

Everything an answering model reads about behaviour is phrased here, in our own words, from the tier definitions of
FILEGRAM_REFERENCE §5.1 (paper Table 2), the judge value spaces of §9.4 and the observable bands of TIER_TARGETS §2
and §4. Dimension names ("Consumption Pattern" …), tier letters, attribute keys and value tokens never appear in
these phrases; :data:`FORBIDDEN_TERMS` lists what the validity check (:func:`filegram_ray.bench.validate.
validate_items`) rejects in public text.

Tier convention: the matrix tiers, with E = curation (selective / pragmatic / preservative), reference §5.1 and
TIER_TARGETS "Conventions".
"""

from __future__ import annotations

#: The six behavioural dimensions, reference §5.1.
DIMENSIONS: tuple[str, ...] = ("A", "B", "C", "D", "E", "F")
#: Tier letters, reference §5.1.
TIERS: tuple[str, ...] = ("L", "M", "R")

#: Dimension names as the paper gives them (reference §5.1). Used only to *forbid* them in public text.
DIMENSION_NAMES: dict[str, str] = {
    "A": "Consumption Pattern",
    "B": "Production Style",
    "C": "Organization Preference",
    "D": "Iteration Strategy",
    "E": "Curation",
    "F": "Cross-Modal Behavior",
}

#: Full behavioural description of each tier (used in AttrRec options, profile descriptions, BehavInf options).
#: Sources: reference §5.1 tier meanings; TIER_TARGETS §2.1–2.6 "Rules" (observable behaviour).
TIER_BEHAVIOUR: dict[str, dict[str, str]] = {
    "A": {
        "L": "opens the input files one after another and reads each from start to end, coming back to key files",
        "M": "runs keyword and file-pattern searches first, then opens only the matching passages",
        "R": "lists the folders and skims the first lines of many files without going deep into any",
    },
    "B": {
        "L": "writes long, heavily sectioned deliverables spread over several files with supporting notes",
        "M": "writes one or two medium-length documents with a couple of heading levels",
        "R": "writes a single short file of bullet points",
    },
    "C": {
        "L": "builds folder trees three or more levels deep and moves files into them",
        "M": "makes a subfolder or two only once several files of one kind pile up",
        "R": "keeps every file loose in the top-level folder and never makes subfolders",
    },
    "D": {
        "L": "refines files through many small edits of a few lines, keeping a backup copy first",
        "M": "revises in a few mid-sized edits of a section at a time",
        "R": "replaces whole files in one pass instead of editing them",
    },
    "E": {
        "L": "deletes temporary, intermediate and redundant files as the work goes on",
        "M": "removes only obvious junk files now and then and keeps drafts",
        "R": "never deletes anything and lets every draft and scratch file accumulate",
    },
    "F": {
        "L": "adds charts, image files and separate data files next to the text",
        "M": "uses markdown tables inside the text but no image or data files",
        "R": "writes plain prose and bullets with no tables, images or data files",
    },
}

#: Short phrases for shift options ("from → to"), ShiftAna; same sources as :data:`TIER_BEHAVIOUR`.
TIER_SHORT: dict[str, dict[str, str]] = {
    "A": {"L": "full sequential reading", "M": "search-then-read", "R": "quick skimming of many files"},
    "B": {"L": "long multi-file output", "M": "medium single-document output", "R": "short bullet output"},
    "C": {"L": "deep folder trees", "M": "one or two folder levels", "R": "everything in the top folder"},
    "D": {"L": "many small edits", "M": "section-sized edits", "R": "whole-file rewrites"},
    "E": {"L": "active cleanup of files", "M": "occasional cleanup", "R": "keeping every file"},
    "F": {"L": "charts and data files", "M": "inline tables", "R": "plain text only"},
}

#: What a question about a dimension asks about, in plain words (AttrRec, BehavInf, ProfRec questions).
DIMENSION_TOPIC: dict[str, str] = {
    "A": "how this user takes in the files of a workspace",
    "B": "how much this user writes and how the written output is laid out",
    "C": "how this user arranges files into folders",
    "D": "how this user changes files that already exist",
    "E": "what happens to leftover and no-longer-needed files during this user's work",
    "F": "which non-text elements, if any, accompany this user's written output",
}

# ---------------------------------------------------------------------------------------------------- attributes
#: Plain-words description of attribute values. Value spaces: reference §9.4 (judge value spaces) and §5.4
#: (observed values: nested_by_topic, by_type, descriptive_long, …). Signatures: TIER_TARGETS §4.
VALUE_BEHAVIOUR: dict[str, dict[str, str]] = {
    "tone": {
        "professional": "a formal, impersonal register with full sentences and domain terms",
        "friendly": "a warm register that addresses the reader directly, with helpful closing lines",
        "casual": "an informal register with contractions, fragments and short sentences",
    },
    "output_detail": {
        "detailed": "long outputs of several thousand characters per file",
        "balanced": "medium outputs of one to three thousand characters per file",
        "concise": "short outputs under a thousand characters per file",
    },
    "verbosity": {
        "detailed": "long, elaborate writing",
        "balanced": "moderately long writing",
        "concise": "brief, to-the-point writing",
    },
    "working_style": {
        "methodical": "handles files in a fixed order, outlining a plan before acting, the same way every time",
        "exploratory": "roams across folders and varies the order of work from one session to the next",
        "pragmatic": "takes the shortest path to the deliverable with as few actions as possible",
    },
    "thoroughness": {
        "exhaustive": "covers nearly all of the inputs and also does the optional parts of a request",
        "balanced": "covers roughly half of the inputs and skips most optional parts",
        "minimal": "touches only a small share of the inputs and skips every optional part",
    },
    "documentation": {
        "comprehensive": "adds guides, indexes and source citations around the main deliverable",
        "moderate": "adds some supporting notes when they seem useful",
        "minimal": "delivers the requested file alone, without supporting notes",
    },
    "error_handling": {
        "defensive": "lists folders before writing, reads its own output back and backs up before risky steps",
        "balanced": "checks its work now and then",
        "optimistic": "acts straight away without checks or read-backs",
    },
    "reading_strategy": {v: TIER_BEHAVIOUR["A"][t] for v, t in
                         (("sequential_deep", "L"), ("targeted_search", "M"), ("breadth_first", "R"))},
    "output_structure": {
        "hierarchical": "numbered, nested sections several heading levels deep",
        "flat_list": "a single level of bullet points",
        "narrative": "flowing paragraphs with few bullets",
    },
    "directory_style": {
        "nested_by_topic": TIER_BEHAVIOUR["C"]["L"],
        "deeply_nested": TIER_BEHAVIOUR["C"]["L"],
        "adaptive": TIER_BEHAVIOUR["C"]["M"],
        "by_type": TIER_BEHAVIOUR["C"]["M"],
        "flat": TIER_BEHAVIOUR["C"]["R"],
    },
    "organization_style": {
        "deeply_nested": TIER_BEHAVIOUR["C"]["L"],
        "by_type": "groups files into a few folders by kind",
        "flat": TIER_BEHAVIOUR["C"]["R"],
    },
    "naming": {
        "long_descriptive": "long file names of several words, often with a number or category prefix",
        "short_abbrev": "short abbreviated file names of one or two words",
        "date_prefix": "file names that start with a full date",
        "mixed": "a mix of short, descriptive and dated file names",
    },
    "naming_convention": {
        "descriptive_long": "long file names of several words",
        "short_abbreviation": "short abbreviated file names",
        "date_prefixed": "file names that start with a date",
    },
    "edit_strategy": {v: TIER_BEHAVIOUR["D"][t] for v, t in
                      (("incremental_small", "L"), ("balanced", "M"), ("bulk_rewrite", "R"))},
    "version_strategy": {
        "keep_history": "makes a backup copy of a file before changing it",
        "archive_old": "moves superseded versions into an archive folder",
        "overwrite": "writes over the old version in place without keeping a copy",
    },
    "cross_modal_behavior": {
        "visual_heavy": TIER_BEHAVIOUR["F"]["L"],
        "tables_and_references": TIER_BEHAVIOUR["F"]["M"],
        "balanced": TIER_BEHAVIOUR["F"]["M"],
        "text_only": TIER_BEHAVIOUR["F"]["R"],
    },
}

#: Question topic per attribute (AttrRec and ProfRec questions), in plain words.
ATTRIBUTE_TOPIC: dict[str, str] = {
    "tone": "the register this user writes in",
    "output_detail": "how long this user's written outputs are",
    "verbosity": "how wordy this user's writing is",
    "working_style": "the overall manner in which this user goes about a piece of work",
    "thoroughness": "how much of the available material this user covers",
    "documentation": "how much extra material this user produces beyond what was asked",
    "error_handling": "how careful this user is when acting on files",
    "reading_strategy": DIMENSION_TOPIC["A"],
    "output_structure": "how this user's documents are structured internally",
    "directory_style": DIMENSION_TOPIC["C"],
    "organization_style": "how this user groups files",
    "naming": "how this user names the files they create",
    "naming_convention": "the file-naming habit of this user",
    "edit_strategy": DIMENSION_TOPIC["D"],
    "version_strategy": "how this user treats the previous state of a file they change",
    "cross_modal_behavior": DIMENSION_TOPIC["F"],
    "role": "this user's occupation",
    "language": "the language this user works in",
    "name": "this user's name",
}


def attribute_topic(attr: str) -> str:
    """The plain-words question topic of ``attr`` (:data:`ATTRIBUTE_TOPIC`; "this user's habit of <attr words>" for
    an attribute it does not name), shared by the ProfRec and VisGrd questions."""
    return ATTRIBUTE_TOPIC.get(attr, "this user's habit of " + attr.replace("_", " "))

#: Dimension of each attribute, reference §5.2 table (tone and the B attributes under B, …).
ATTRIBUTE_DIMENSION: dict[str, str] = {
    "tone": "B", "verbosity": "B", "output_detail": "B", "documentation": "B", "output_structure": "B",
    "reading_strategy": "A", "thoroughness": "A", "organization_style": "C", "naming_convention": "C",
    "directory_style": "C", "naming": "C", "edit_strategy": "D", "version_strategy": "D", "error_handling": "D",
    "working_style": "E", "cross_modal_behavior": "F",
}

#: Channel of each attribute. Reference §9.5 (ProfRec split of the upstream code): procedural = working_style,
#: thoroughness, error_handling, reading_strategy, directory_style, edit_strategy, version_strategy, output_detail;
#: semantic = name, role, language, tone, output_structure, documentation. naming and cross_modal_behavior are
#: unassigned upstream; we put them (and the loader-only verbosity / organization_style / naming_convention) under
#: procedural because their evidence is operation-level (file names, created file types).
ATTRIBUTE_CHANNEL: dict[str, str] = {
    "working_style": "procedural", "thoroughness": "procedural", "error_handling": "procedural",
    "reading_strategy": "procedural", "directory_style": "procedural", "edit_strategy": "procedural",
    "version_strategy": "procedural", "output_detail": "procedural",
    "naming": "procedural", "cross_modal_behavior": "procedural", "verbosity": "procedural",
    "organization_style": "procedural", "naming_convention": "procedural",
    "name": "semantic", "role": "semantic", "language": "semantic", "tone": "semantic",
    "output_structure": "semantic", "documentation": "semantic",
}

#: Judge value spaces, reference §9.4 (attributes the judge list does not cover get the observed values).
JUDGE_VALUE_SPACE: dict[str, list[str]] = {
    "reading_strategy": ["sequential_deep", "targeted_search", "breadth_first"],
    "directory_style": ["deeply_nested", "flat", "adaptive (by_type)"],
    "edit_strategy": ["incremental_small", "bulk_rewrite", "balanced"],
    "version_strategy": ["keep_history", "overwrite", "archive_old"],
    "output_structure": ["hierarchical", "flat_list", "narrative"],
    "documentation": ["comprehensive", "moderate", "minimal"],
    "naming": ["long_descriptive", "short_abbrev", "date_prefix", "mixed"],
    "cross_modal_behavior": ["visual_heavy", "tables_and_references", "balanced", "text_only"],
    "tone": ["professional", "friendly", "casual"],
    "output_detail": ["detailed", "balanced", "concise"],
    "working_style": ["methodical", "pragmatic", "exploratory"],
    "thoroughness": ["exhaustive", "balanced", "minimal"],
    "error_handling": ["defensive", "balanced", "optimistic"],
    "language": ["Chinese", "English"],
    "verbosity": ["detailed", "balanced", "concise"],
    "organization_style": ["deeply_nested", "by_type", "flat"],
    "naming_convention": ["descriptive_long", "short_abbreviation", "date_prefixed"],
}

#: The 1–5 rubric skeleton shared by behavioural attributes, reference §9.4 (our wording).
BEHAVIOUR_RUBRIC: dict[int, str] = {
    5: "names the correct value and backs it with specific, preferably quantitative, behavioural evidence",
    4: "names the correct value with partial evidence",
    3: "generic or adjacent answer; vague answers that could describe anyone are capped here",
    2: "names a wrong value",
    1: "names the opposite value or infers nothing",
}
#: Identity rubrics, reference §9.4 (name / role / language).
IDENTITY_RUBRIC: dict[str, dict[int, str]] = {
    "name": {5: "exact name (transliterations allowed)", 4: "family or given name right",
             3: "wrong name but the right cultural background", 2: "wrong name", 1: "missing"},
    "role": {5: "exact role or a synonym", 4: "same domain", 3: "related field", 2: "different domain",
             1: "generic or missing"},
    "language": {5: "correct language", 4: "correct but hedged", 3: "listed among several guesses",
                 2: "wrong language", 1: "missing"},
}
#: Vagueness rule of the judge, reference §9.4.
VAGUENESS_RULE = ("Vague or generic answers that could describe anyone score at most 3 even if compatible; "
                  "4 and 5 require concrete distinguishing behavioural evidence.")

#: Languages offered as AttrRec language options when the profile set has fewer than three (our choice).
FILLER_LANGUAGES: tuple[str, ...] = ("English", "Chinese", "Spanish", "French", "German", "Japanese")
#: Roles offered as AttrRec role options when the profile set has fewer than three roles (our choice).
FILLER_ROLES: tuple[str, ...] = ("Logistics Coordinator", "Veterinary Nurse", "Software Tester",
                                 "Hotel Manager", "Civil Engineer")

#: Words that must never reach public text: the dimension names and the vocabulary of the ground truth. Matched
#: case-insensitively as whole words (plus an inflection: "tiers", "perturbed") by the validity check, together
#: with profile ids, names, attribute keys and any underscore-joined value token.
FORBIDDEN_TERMS: tuple[str, ...] = tuple(DIMENSION_NAMES.values()) + (
    "persona", "perturb", "perturbation", "dimension", "tier",
)
