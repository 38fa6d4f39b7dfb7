"""The user docs say what is true now: no page under docs/ nor the README speaks of issues, work sessions or
dated runs (dated measurements live in benchmarks/RESULTS.md, the one log), and every relative link resolves.
Code (fenced blocks, inline spans) is left out: a log line's date or a `session` parameter is not prose."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]

WORK_LOG = {
    "an issue number": re.compile(r"\bissues? #?\d+(?:\.\d+)*", re.IGNORECASE),
    "a work session (pytest's session fixtures excepted)": re.compile(
        r"\bsessions?\b(?!(?:-| )(?:scoped|scope|fixtures?)\b)", re.IGNORECASE),
    "a date (a dated run belongs in benchmarks/RESULTS.md)": re.compile(r"\b20\d\d-\d\d-\d\d\b"),
    "a review or an attempt of the past": re.compile(r"\b(?:a review found|the last attempt)\b", re.IGNORECASE),
}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"(`+).+?\1")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of a Markdown text outside fenced code blocks, its inline code spans blanked."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            lines.append((number, CODE_SPAN.sub("``", line)))
    return lines


def work_log_mentions(text: str) -> list[str]:
    """Each place a page reads as a lab notebook: 'line N: what (the words)'."""
    return [f"line {number}: {what} ({match.group(0)!r})" for number, line in prose_lines(text)
            for what, rule in WORK_LOG.items() for match in rule.finditer(line)]


def broken_links(page: Path) -> list[str]:
    """The relative links of a page whose file or folder does not exist (anchors are not checked)."""
    targets = [m.group(1) for _, line in prose_lines(page.read_text()) for m in LINK.finditer(line)]
    local = [t.split("#")[0] for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]
    return [t for t in local if t and not (page.parent / t).exists()]


def test_no_user_page_reads_as_a_lab_notebook() -> None:
    found = {page.relative_to(ROOT).as_posix(): work_log_mentions(page.read_text()) for page in PAGES}
    assert {page: hits for page, hits in found.items() if hits} == {}, (
        "say what is true now; move dated runs to benchmarks/RESULTS.md")


def test_every_relative_link_of_the_docs_resolves() -> None:
    found = {page.relative_to(ROOT).as_posix(): broken_links(page) for page in [*PAGES, RESULTS]}
    assert {page: links for page, links in found.items() if links} == {}


def test_the_rule_fires_on_a_work_log_and_not_on_legitimate_words() -> None:
    log = ("# Session of 2026-12-04\nAs issue 43 measured, in session 9 (issues 40 and 61).\n"
           "Load 7 from other sessions; a review found it; the last attempt failed.\n")
    assert [hit.split(":")[0] for hit in work_log_mentions(log)] == ["line 1"] * 2 + ["line 2"] * 3 + ["line 3"] * 3
    fine = ("mcq's possession questions; `tests/conftest.py`'s session fixture; a session-scoped fixture's time;\n"
            "the error (`Session is closed`) and the `session` query key; an issue with the tokenizer;\n"
            "```\n[2026-12-06 06:57:14][facet_probe][INFO] - prepared 720 manifest rows\n```\n")
    assert work_log_mentions(fine) == []
