"""The image-set position-reference screen: documented rules on a table of example questions."""

from __future__ import annotations

import pytest
import upstream_fixtures as fx

from facet_probe.datasets import screen
from facet_probe.datasets.screen import Verdict, screen_text

EXAMPLES = [
    # keep: nothing ties the text to an image position
    ("Which of these animals can fly?", Verdict.KEEP),
    ("<image> <image> <image> What do these pictures have in common?", Verdict.KEEP),
    ("What differs between these? <image> <image>", Verdict.KEEP),
    ("Which image shows a cat?", Verdict.KEEP),
    ("Which of these is needed in order to survive?", Verdict.KEEP),
    ("Is there a picture a child drew?", Verdict.KEEP),
    # exclude: explicit positional references
    ("In the first image, what is the dog doing?", Verdict.EXCLUDE),
    ("Compare the last two photos.", Verdict.EXCLUDE),
    ("What is shown in Image 2?", Verdict.EXCLUDE),
    ("Does picture #3 show a car?", Verdict.EXCLUDE),
    ("See Fig. 1 for the scan.", Verdict.EXCLUDE),
    ("Is Image B brighter?", Verdict.EXCLUDE),
    ("Is the left image taken at night?", Verdict.EXCLUDE),
    ("Is the dog in <image> the same breed as in <image>?", Verdict.EXCLUDE),
    ("The images show a lion and a tiger, respectively.", Verdict.EXCLUDE),
    ("Describe the pictures from left to right.", Verdict.EXCLUDE),
    ("Are the steps in the order shown?", Verdict.EXCLUDE),
    ("In the second frame, where is the lesion?", Verdict.EXCLUDE),
    # borderline: may or may not point at a position
    ("What is the last one holding?", Verdict.BORDERLINE),
    ("What is on the left of the man?", Verdict.BORDERLINE),
    ("Is the latter larger?", Verdict.BORDERLINE),
    ("What happens in the next image?", Verdict.BORDERLINE),
    ("What does the sequence show?", Verdict.BORDERLINE),
]


@pytest.mark.parametrize("question, verdict", EXAMPLES)
def test_the_rules_classify_example_questions(question, verdict):
    assert screen_text(question).verdict == verdict


def test_options_that_name_positions_exclude_the_item_and_the_reason_says_where():
    result = screen_text("Which image is different?", ["the first image", "the second image"])
    assert result.verdict == Verdict.EXCLUDE and result.reasons == (
        "ordinal_image (option A: 'first image')",
    )


def test_exclusion_outranks_borderline_and_every_fired_rule_is_reported():
    result = screen_text("On the left, Image 1 shows a sequence.")
    assert result.verdict == Verdict.EXCLUDE
    assert [r.split(" ")[0] for r in result.reasons] == ["numbered_image", "side_word", "sequence_words"]


def test_a_judge_settles_borderline_items_only():
    calls = []

    def judge(question, options):
        calls.append(question)
        return "keep"

    assert screen_text("What is on the left of the man?", judge=judge).verdict == Verdict.KEEP
    assert screen_text("In the first image?", judge=judge).verdict == Verdict.EXCLUDE
    assert screen_text("Which one flies?", judge=judge).verdict == Verdict.KEEP
    assert calls == ["What is on the left of the man?"]
    undecided = screen_text("What is on the left?", judge=lambda q, o: None)
    assert undecided.verdict == Verdict.BORDERLINE and undecided.judge is None


def test_the_stored_metadata_round_trips_and_counts_include_empty_verdicts():
    meta = screen_text("In the first image?").to_metadata()
    assert meta["verdict"] == "exclude" and meta["rules"] == screen.RULES_VERSION
    counts = screen.screen_counts([screen_text("a?"), screen_text("b?"), screen_text("Image 2?")])
    assert dict(counts) == {"keep": 2, "borderline": 0, "exclude": 1}


def test_the_cli_prints_the_screen_counts_beside_the_papers(tmp_path, offline, capsys):
    root = fx.mantis_eval(tmp_path / "m")
    assert screen.main(["--dataset", "mantis_eval", "--path", str(root), "--all", "--show", "exclude"]) == 0
    out = capsys.readouterr().out
    assert "mantis_eval: all eligible items" in out and "paper: excluded 52 of 70" in out
    # the 10 eligible fixture items ask 6 position-free and 4 positional questions
    assert "keep           6" in out and "exclude        4" in out and "mantis_eval::mantis-1:" in out


def test_the_cli_says_what_to_fetch_when_the_data_is_missing(tmp_path, offline, capsys):
    assert screen.main(["--dataset", "medframeqa", "--path", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "data/test-*.parquet" in err and "SuhaoYu1020/MedFrameQA" in err
