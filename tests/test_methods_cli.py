"""`filegram methods`: one line per registered method whose description is a whole sentence or visibly cut."""

from __future__ import annotations

from filegram_ray.methods.cli import first_sentence


def test_first_sentence_cuts_at_a_word_with_an_ellipsis():
    doc = """Chunks of 20 events as narrative, embedded; per query the top-5 chunks by inner product (FAISS
    IndexFlatIP over unit vectors = cosine). More text.

    Details."""
    assert first_sentence(doc, 500) == ("Chunks of 20 events as narrative, embedded; per query the top-5 chunks by "
                                        "inner product (FAISS IndexFlatIP over unit vectors = cosine).")
    assert first_sentence(doc, 40) == "Chunks of 20 events as narrative…"  # cut at a word, the comma dropped
    assert first_sentence("Uses ``cap_chars`` (see §8.2).\n") == "Uses cap_chars (see §8.2)."


def test_methods_lines_end_with_a_sentence_or_an_ellipsis(capsys):
    from filegram_ray.cli import main

    assert main(["methods"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 16
    for line in lines:
        assert line.rstrip().endswith((".", "…", ")")), line


def test_methods_full_prints_every_description_whole(capsys):
    """Fresh-eyes finding: descriptions were cut with "…" and nothing said how to read them whole. A cut listing
    says so on its last line; --full prints every first sentence uncut."""
    from filegram_ray.cli import main

    assert main(["methods"]) == 0
    short = capsys.readouterr().out.splitlines()
    assert any(ln.endswith("…") for ln in short) and short[-1].startswith("(descriptions cut at 120 characters")
    assert main(["methods", "--full"]) == 0
    full = capsys.readouterr().out.splitlines()
    assert len(full) == len(short) - 1 and not any(ln.endswith("…") for ln in full)
    for a, b in zip(short, full):
        assert b.startswith(a.rstrip("…").rstrip())
