"""The docs are a product: no path of the machine that measured a figure, every dated measurement page listed in
the index, every relative link resolving to a file. Fast: reads markdown only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MEASUREMENTS = DOCS / "measurements"
INDEX = MEASUREMENTS / "README.md"
#: An absolute path of a machine: /work/, /tmp/, /root/ or /home/ at the start of a path (not inside a URL's path
#: or a relative path such as ``runs/tmp/``).
MACHINE_PATH = re.compile(r"(?<![\w.~<>-])/(?:work|tmp|root|home)/")
#: A markdown link or image target: ``[text](target)`` / ``![alt](target "title")``.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
DATED = re.compile(r"^\d{4}-\d{2}-\d{2}-.+\.md$")


def _pages() -> list[Path]:
    return sorted(DOCS.glob("*.md")) + sorted(MEASUREMENTS.glob("*.md"))


def _strip_code_blocks(text: str) -> str:
    """Fenced code blocks hold commands and logs, not links: blank them (keeping line numbers)."""
    return re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def machine_paths(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of each line holding an absolute machine path."""
    return [(i, ln.strip()) for i, ln in enumerate(text.splitlines(), 1) if MACHINE_PATH.search(ln)]


def broken_links(page: Path) -> list[str]:
    """Relative link targets of ``page`` that name no file or folder (URLs, anchors and mail links are skipped)."""
    out = []
    for target in LINK.findall(_strip_code_blocks(page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0].split("?", 1)[0]
        if path and not (page.parent / path).exists():
            out.append(target)
    return out


def test_machine_path_pattern():
    """The pattern finds the paths a measuring machine leaves and nothing a reader's own setup or a URL holds."""
    assert machine_paths("run `/tmp/h53/run-5301`") and machine_paths("pip install -e /work/main")
    assert machine_paths("model='/root/.cache/x'") and machine_paths("e.g. /home/you/.store")
    assert machine_paths("--out=/tmp/site")
    assert not machine_paths("the model wrote /workspace/… paths")
    assert not machine_paths("see https://example.org/home/page and runs/tmp/x, <home>/.store, ~/site")


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(DOCS)))
def test_no_machine_paths(page: Path):
    hits = machine_paths(page.read_text(encoding="utf-8"))
    assert not hits, f"{page.relative_to(ROOT)}: absolute machine path(s), use a repo-relative path or a " \
                     f"placeholder such as <run dir>: {hits[:5]}"


def test_every_dated_page_is_in_the_index():
    index = INDEX.read_text(encoding="utf-8")
    linked = {t.split("#", 1)[0] for t in LINK.findall(index)}
    dated = sorted(p.name for p in MEASUREMENTS.glob("*.md") if DATED.match(p.name))
    assert dated, "no dated measurement pages found"
    missing = [n for n in dated if n not in linked]
    assert not missing, f"{INDEX.relative_to(ROOT)} does not list: {missing}"
    assert not [t for t in linked if DATED.match(t) and not (MEASUREMENTS / t).exists()]


@pytest.mark.parametrize("page", [ROOT / "README.md", *_pages()], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path):
    bad = broken_links(page)
    assert not bad, f"{page.relative_to(ROOT)}: links to files that do not exist: {bad}"


def test_broken_link_is_found(tmp_path: Path):
    """The link check itself fails on a missing file and passes an existing one, an anchor and a URL."""
    (tmp_path / "there.md").write_text("x")
    page = tmp_path / "page.md"
    page.write_text("[a](there.md) [b](there.md#sec) [c](#top) [d](https://x.org/y.md) [e](gone.md) ![f](img/no.png)"
                    "\n```\n[g](in-code.md)\n```\n")
    assert broken_links(page) == ["gone.md", "img/no.png"]
