"""The image-set position-reference screen: documented rules on a table of example questions."""

from __future__ import annotations

import csv
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import upstream_fixtures as fx

from facet_probe.core.errors import ConfigError
from facet_probe.datasets import mantis_eval, screen, screen_cli
from facet_probe.datasets.screen import ScreenRules, Verdict, screen_text

OURS = ScreenRules.OURS

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
def test_our_rules_classify_example_questions(question, verdict):
    assert screen_text(question, rules=OURS).verdict == verdict


def test_options_that_name_positions_exclude_the_item_and_the_reason_says_where():
    result = screen_text("Which image is different?", ["the first image", "the second image"], rules=OURS)
    assert result.verdict == Verdict.EXCLUDE and result.reasons == (
        "ordinal_image (option A: 'first image')",
    )


def test_exclusion_outranks_borderline_and_every_fired_rule_is_reported():
    result = screen_text("On the left, Image 1 shows a sequence.", rules=OURS)
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
    undecided = screen_text("What is on the left?", judge=lambda q, o: None, rules=OURS)
    assert undecided.verdict == Verdict.BORDERLINE and undecided.judge is None


def test_the_stored_metadata_round_trips_and_counts_include_empty_verdicts():
    meta = screen_text("In the first image?", rules=OURS).to_metadata()
    assert meta["verdict"] == "exclude" and meta["rules"] == screen.RULES_VERSION
    assert screen_text("In the first image?").to_metadata()["rules"] == screen.REFERENCE_RULES_VERSION
    counts = screen.screen_counts([screen_text("a?"), screen_text("b?"), screen_text("Image 2?")])
    assert dict(counts) == {"keep": 2, "borderline": 0, "exclude": 1}


def test_the_cli_prints_the_screen_counts_beside_the_papers(tmp_path, offline, capsys):
    root = fx.mantis_eval(tmp_path / "m")
    assert screen_cli.main(["--dataset", "mantis_eval", "--path", str(root), "--all", "--show", "exclude"]) == 0
    out = capsys.readouterr().out
    assert "mantis_eval: all eligible items" in out and "paper: excluded 52 of 70" in out
    # the 10 eligible fixture items: 6 position-free, 3 "which image" with content options, 1 ordinal
    assert "keep           6" in out and "borderline     3" in out and "exclude        1" in out
    assert "mantis_eval::mantis-3: q_image_ordinal" in out
    assert screen_cli.main(["--dataset", "mantis_eval", "--path", str(root), "--all", "--rules", "ours",
                        "--show", "exclude"]) == 0
    out = capsys.readouterr().out  # position-screen-v1 also reads the "Image 1:" slot labels
    assert "keep           6" in out and "exclude        4" in out and "mantis_eval::mantis-1:" in out


def test_the_screen_rules_load_no_loader_and_keep_no_unused_helper():
    """The rules module is imported by the image-set loaders, so it may not load them (the CLI that does lives
    in screen_cli.py): no dataset config loading, no instantiation, and no `verdict_of` nobody calls."""
    import ast

    tree = ast.parse(Path(screen.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert not imported & {"load_option", "instantiate"} and not defined & {"main", "verdict_of"}


def test_the_cli_says_what_to_fetch_when_the_data_is_missing(tmp_path, offline, capsys):
    assert screen_cli.main(["--dataset", "medframeqa", "--path", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "data/test-*.parquet" in err and "SuhaoYu1020/MedFrameQA" in err


# The reference's classification (its released screen's summary): options enumerating image positions, a
# "which image" question with image-index options, options mapping positions to labels, an answer that is
# a sequence of positions. Eight such questions; position-screen-v1 excluded only four of them.
REFERENCE_EXCLUDES = [
    ("Which image shows a cat?", ["Image 1", "Image 2", "Image 3"]),
    ("Which picture best depicts a storm?", ["(A) the first image", "(B) the second image", "(C) the third image"]),
    ("Which of the images was taken at night?", ["1", "2", "3"]),
    ("What is the correct order of the images?", ["1-3-2", "2-1-3", "3-2-1"]),
    ("Arrange the photos chronologically.", ["2, 1, 3", "3, 1, 2", "1, 2, 3"]),
    ("Which frame shows the lesion?", ["the second one", "the first one", "the last one"]),
    ("In the first image, what is the dog doing?", ["running", "sleeping"]),
    ("Match each image to its season.", ["Image 1: winter, Image 2: summer", "Image 1: summer, Image 2: winter"]),
]


@pytest.mark.parametrize("question, options", REFERENCE_EXCLUDES)
def test_the_reference_rules_exclude_what_the_reference_excludes(question, options):
    result = screen_text(question, options)
    assert result.verdict == Verdict.EXCLUDE, result.reasons
    assert all(r.split(" ")[0] in screen.REFERENCE_FLAGS for r in result.reasons)


def test_position_screen_v1_missed_half_of_them():
    missed = [q for q, o in REFERENCE_EXCLUDES if screen_text(q, o, rules=OURS).verdict != Verdict.EXCLUDE]
    assert len(missed) == 4, missed


def test_spatial_words_and_which_image_with_content_options_are_borderline():
    assert screen_text("Which image shows a cat?", ["a bird", "a cat"]).verdict == Verdict.BORDERLINE
    assert screen_text("What is on the left of the liver?", ["cyst", "tumor"]).verdict == Verdict.BORDERLINE
    assert screen_text("Which of these animals can fly?", ["a bird", "a fish"]).verdict == Verdict.KEEP


MIRROR = Path("/work/.mirror/yahskapar+facet-probe/repo")
RELEASED = "artifacts/screens/imageset_position_reference_screen.csv"


@pytest.fixture
def released_screen(tmp_path) -> Path:
    """The reference's released per-item verdict list, read from its mirror (never vendored)."""
    if not MIRROR.is_dir():
        pytest.skip("the reference mirror is not on this machine")
    out = tmp_path / "screen.csv"
    out.write_bytes(subprocess.run(["git", "-C", str(MIRROR), "show", f"HEAD:{RELEASED}"], capture_output=True,
                                   check=True).stdout)
    return out


def test_our_flags_are_the_released_screens_vocabulary(released_screen):
    with released_screen.open() as fh:
        flags = {f for row in csv.DictReader(fh) for f in row["regex_flags"].split(";") if f}
    assert flags == screen.REFERENCE_FLAGS


def test_the_released_verdicts_map_onto_our_ids(released_screen):
    verdicts = screen.read_verdicts(released_screen)
    assert len(verdicts) == 270 and verdicts["mantis_eval::dj_2"] == Verdict.BORDERLINE
    assert verdicts["medframeqa::aorta_aortic_aneurysm_CT_PcOh7Zx8UxE_30"] == Verdict.KEEP
    counts = Counter((k.split("::")[0], v.value) for k, v in verdicts.items())
    assert counts[("mantis_eval", "exclude")] == 52 and counts[("medframeqa", "exclude")] == 5  # the paper's


def test_screen_csv_overrides_the_rules_for_the_items_it_lists(tmp_path, offline):
    root = fx.mantis_eval(tmp_path / "m")
    verdicts = tmp_path / "verdicts.csv"
    verdicts.write_text("dataset,item_id,hf_id,classification\n"
                        "mantis_eval,mantis::mantis-0::0003,mantis-0,exclude\n"
                        "mantis_eval,mantis::mantis-3::0000,mantis-3,keep\n")
    loader = mantis_eval.MantisEval(path=str(root), screen_csv=str(verdicts), cache=False)
    items = {it.raw_id: it.metadata[screen.METADATA_KEY] for it in loader.load()}
    assert items["mantis-0"]["verdict"] == "exclude" and items["mantis-0"]["rules_verdict"] == "keep"
    assert items["mantis-3"]["verdict"] == "keep" and items["mantis-3"]["rules"] == screen.CSV_VERSION
    assert items["mantis-1"]["verdict"] == "borderline" and items["mantis-1"]["source"].startswith("rules")


def test_a_bad_verdict_list_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        screen.read_verdicts(tmp_path / "none.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("dataset,item_id,classification\nmantis_eval,mantis::a::0001,drop\n")
    with pytest.raises(ConfigError, match="line 2: classification 'drop' is not one of keep, borderline, exclude"):
        screen.read_verdicts(bad)
    with pytest.raises(ConfigError, match="screen_rules='strict'; valid: reference, ours"):
        mantis_eval.MantisEval(screen_rules="strict")
