"""Letters read side by side with FACET-PROBE v0.0.1's own parser (`scoring.parse_answer_letter`, from a `git archive`
of its mirror, run by a plain python3 that imports nothing of ours): our rule for each reply the two read
differently (docs/compatibility.md, "letter parser"), and `LetterParser.REFERENCE` (the report app's
`letter_parser=reference`) reading exactly as the reference does."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from facet_probe import api
from facet_probe.core.prompts import PromptMode
from facet_probe.scoring.parsing import LetterParser, ParseStatus, parse_letter
from facet_probe.scoring.run_trials import read_run

MIRROR = Path("/work/.mirror/yahskapar+facet-probe/repo")
FIXTURES = Path(__file__).parents[1] / "fixtures"
ABCD = ("A", "B", "C", "D")
# Prints the reference's reading of each [reply, number of options] of the JSON file argv[1], one per line.
DRIVER = ("import json, sys\nfrom facet_probe.scoring import parse_answer_letter\n"
          "for text, n in json.load(open(sys.argv[1])):\n    print(json.dumps(parse_answer_letter(text, n)))\n")

# (reply, our reading by default: the letter or None for a parse error, and why)
CASES = [
    # a label in LaTeX inside the instructed span: the stated answer, only wrapped (lenient: it cannot be wrong)
    ("Answer: $\\boxed{D}$", "D"),
    ("Answer: \\boxed{D}", "D"),
    ("Answer: $D$", "D"),
    ("Reasoning first.\n**Answer:** $\\boxed{(C)}$", "C"),
    ("Answer: $a = 3$", None),  # a formula, not a label: a parse error (the reference reads A)
    # a line naming its answer or choice with a qualifier that cannot negate it (lenient)
    ("My answer: B", "B"),
    ("Choice: B", "B"),
    ("My final choice: (C).", "C"),
    ("Correct option: d", "D"),
    ("Wrong answer: B", None),  # strict: a qualifier that negates (the reference reads B)
    ("Incorrect option: A\nMaybe later.", None),
    # a whole last line stating the label (lenient: nothing else on the line)
    ("It is B.", "B"),
    ("So it is (C).", "C"),
    ("It is not B.", None),  # strict: a negation is not the whole-line form (the reference reads B)
    ("It is B or C.", None),  # strict: two labels
    # a lone lower-case label line (lenient: a line holding one letter has no other reading)
    ("a", "A"),
    ("(b)", "B"),
    ("Having checked both:\nc.", "C"),
]


@pytest.fixture(scope="module")
def reference_reads(tmp_path_factory):
    """reference_reads(list of (reply, n options)) -> the reference's readings (its own code, one process)."""
    if not MIRROR.is_dir() or shutil.which("git") is None:
        pytest.skip("the reference mirror is not on this machine")
    root = tmp_path_factory.mktemp("reference")
    archive = subprocess.run(["git", "-C", str(MIRROR), "archive", "HEAD", "src"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable

    def reads(replies: list[tuple[str, int]]) -> list[str | None]:
        spec = root / "replies.json"
        spec.write_text(json.dumps(replies))
        # a real process: the reference's own code under a plain python3, without our package or its imports
        proc = subprocess.run([python, "-c", DRIVER, str(spec)], capture_output=True, text=True, cwd=root,
                              env={"PYTHONPATH": str(root / "src"), "PATH": "/usr/bin:/bin"}, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return [json.loads(line) for line in proc.stdout.splitlines()]

    return reads


def test_each_reply_the_reference_reads_otherwise_has_a_rule_and_the_switch_reads_it_as_the_reference(reference_reads):
    reference = reference_reads([(text, 4) for text, _ in CASES])
    assert all(letter is not None for letter in reference)  # every case is one the reference reads
    for (text, ours), theirs in zip(CASES, reference, strict=True):
        parsed = parse_letter(text, ABCD, PromptMode.DIRECT)
        assert parsed.answer == ours, f"{text!r}: {parsed.rule}"
        assert parsed.status == (ParseStatus.PARSE_ERROR if ours is None else ParseStatus.FALLBACK), text
        switched = parse_letter(text, ABCD, PromptMode.DIRECT, parser=LetterParser.REFERENCE)
        assert switched.answer == theirs, text


def test_the_reference_switch_reads_every_corpus_reply_as_the_reference_does(reference_reads):
    """Our copy of its rule against its own code on the 64-reply corpus and the parsing tests' replies,
    words read as letters included ("Answer: Carbon dioxide" is C, "I think..." is I)."""
    from test_parsing import LETTER_CASES
    from test_parsing_corpus import CORPUS

    replies = [(reply, labels) for reply, _, labels, _, _ in LETTER_CASES] + [(reply, ABCD) for _, reply, *_ in CORPUS]
    replies += [(text, ABCD) for text, _ in CASES]
    reference = reference_reads([(reply, len(labels)) for reply, labels in replies])
    ours = [parse_letter(reply, labels, parser=LetterParser.REFERENCE).answer for reply, labels in replies]
    assert ours == reference
    assert sum(a != b.answer for a, b in zip(ours, (parse_letter(r, lab) for r, lab in replies), strict=True)) >= 10


def test_report_letter_parser_reference_reads_a_stored_run_as_the_reference(tmp_path):
    """The switch in the report app: every MCQ trial read again from its reply, no call."""
    run = shutil.copytree(FIXTURES / "store_shared_orderings", tmp_path / "run")
    lines = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]
    for rec in lines:
        rec["raw_output"] = "It is not B."  # ours: a parse error; the reference: B
    (run / "trials.jsonl").write_text("".join(json.dumps(rec) + "\n" for rec in lines))
    stored = read_run(run).trials  # read as ours: every trial a parse error
    assert set(stored["parse_status"]) == {"parse_error"} and len(stored) == len(lines)
    api.report({"input": str(run), "bootstrap": 10, "letter_parser": "reference"})
    trials = pd.read_parquet(run / "trials.parquet")
    assert set(trials["answer_raw"]) == {"B"} and len(trials) == len(lines)
    assert trials["parse_status"].eq("fallback").all()
