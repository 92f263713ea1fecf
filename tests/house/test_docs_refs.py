"""The repository explains itself: what the code cites is in the repository.

"SPEC §N" in the code means the heading §N of docs/spec.md, and a choice is cited as
(docs/decisions.md, "Title"), a heading of that page. The issue tracker is not in the
repository, so the product's code never cites an issue by number.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "docs" / "spec.md"
DECISIONS = ROOT / "docs" / "decisions.md"
SCANNED = ("flowdrop_tui", "tests", "bench", "docs", "README.md")
SUFFIXES = {".py", ".md", ".toml", ".tcss", ".txt", ".html"}

SPEC_REF = re.compile(r"SPEC §(\d+(?:\.\d+)?)")  # "§16." ends a sentence: 16
SPEC_HEADING = re.compile(r"^#{2,3} §(\d+(?:\.\d+)?)\s", re.MULTILINE)
# (docs/decisions.md, "Title") — the title may start on the next line, also in a
# comment; one reference may name more headings: "A" and "B".
DECISION_REF = re.compile(
    r'docs/decisions\.md,\s*(?:#\s*)?("[^"\n]+"(?:\s+and\s+(?:#\s*)?"[^"\n]+")*)'
)
TITLE = re.compile(r'"([^"\n]+)"')
ISSUE_REF = re.compile(r"\bissues? \d+", re.IGNORECASE)


def _files(*tops: str) -> list[Path]:
    found: list[Path] = []
    for top in tops:
        path = ROOT / top
        if path.is_file():
            found.append(path)
            continue
        found += sorted(
            p
            for p in path.rglob("*")
            if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts
        )
    return [p for p in found if p != Path(__file__).resolve()]  # its own examples


def _where(path: Path, text: str, offset: int) -> str:
    return f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, offset) + 1}"


def test_every_spec_reference_has_a_heading_in_docs_spec() -> None:
    """Guards against a "SPEC §N" that points nowhere: the contract the code cites is
    docs/spec.md, numbered as the code cites it."""
    headings = set(SPEC_HEADING.findall(SPEC.read_text(encoding="utf-8")))
    assert {str(n) for n in range(1, 23)} <= headings, "docs/spec.md keeps §1–§22"
    missing = [
        f"{_where(path, text, m.start())}: SPEC §{m.group(1)}"
        for path in _files(*SCANNED)
        for text in [path.read_text(encoding="utf-8", errors="replace")]
        for m in SPEC_REF.finditer(text)
        if m.group(1) not in headings
    ]
    assert not missing, "no heading in docs/spec.md for:\n" + "\n".join(missing)


def test_the_spec_reference_scan_finds_what_the_code_cites() -> None:
    """Guards the scan itself: a pattern that matched nothing would pass the test above
    whatever the code cites."""
    cited = {
        m.group(1)
        for path in _files("flowdrop_tui", "tests")
        for m in SPEC_REF.finditer(path.read_text(encoding="utf-8", errors="replace"))
    }
    assert {"5.3", "7", "18"} <= cited
    assert SPEC_REF.findall("see SPEC §16. Then SPEC §5.3, and SPEC §7:") == ["16", "5.3", "7"]


def test_every_decisions_reference_names_a_heading() -> None:
    """Guards against a (docs/decisions.md, "Title") whose heading was renamed or never
    written."""
    titles = {
        line.lstrip("#").strip()
        for line in DECISIONS.read_text(encoding="utf-8").splitlines()
        if line.startswith("## ")
    }
    refs = [
        (path, text, m)
        for path in _files(*SCANNED)
        for text in [path.read_text(encoding="utf-8", errors="replace")]
        for m in DECISION_REF.finditer(text)
    ]
    assert len(refs) > 10, "the scan found the code's references"
    missing = [
        f"{_where(path, text, m.start())}: {title!r}"
        for path, text, m in refs
        for title in TITLE.findall(m.group(1))
        if title not in titles
    ]
    assert not missing, "no such heading in docs/decisions.md:\n" + "\n".join(missing)


def test_the_product_code_cites_no_issue_by_number() -> None:
    """Guards against "(issue 17)" in the product's code: the tracker is not in the
    repository; the choice it led to is a heading of docs/decisions.md."""
    found = [
        f"{_where(path, text, m.start())}: {m.group(0)}"
        for path in _files("flowdrop_tui")
        for text in [path.read_text(encoding="utf-8", errors="replace")]
        for m in ISSUE_REF.finditer(text)
    ]
    assert not found, "cite docs/decisions.md instead:\n" + "\n".join(found)
