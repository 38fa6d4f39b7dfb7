"""The committed tiny VLM: its model card's reproduction slice re-evaluates to the same replies and numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from facet_probe.config.schema import asset_path
from facet_probe_dev.tiny_vlm.card import SLICE, evaluate_folder

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)

WEIGHTS = Path(asset_path("tiny_vlm"))


@pytest.fixture(scope="module")
def card() -> dict:
    assert (WEIGHTS / "model.safetensors").is_file(), f"the tiny VLM weights are missing from {WEIGHTS}"
    return json.loads((WEIGHTS / "card_results.json").read_text())


@pytest.fixture(scope="module")
def rerun(card):
    replies: dict[str, list[str]] = {}
    sl = card["slice"]
    results = evaluate_folder(WEIGHTS, sl["n"], sl["k"], backend=sl["backend"], replies=replies)
    return results, replies


def test_the_card_slice_is_the_one_the_test_evaluates(card):
    assert (card["slice"]["n"], card["slice"]["k"]) == (SLICE["n"], SLICE["k"])
    assert card["slice"]["backend"] == "runner"  # the audit's own path: LlavaRunner on the saved folder


def test_replies_reproduce(card, rerun):
    """Greedy decoding on the committed weights: the same replies (allowing a rare float tie on another CPU)."""
    _, replies = rerun
    for mode, expected in card["slice"]["replies"].items():
        got = replies[mode]
        assert len(got) == len(expected)
        same = sum(a == b for a, b in zip(got, expected, strict=True))
        assert same >= 0.95 * len(expected), (mode, [(a, b) for a, b in zip(got, expected, strict=True) if a != b][:5])


def test_card_numbers_reproduce(card, rerun):
    results, _ = rerun
    expected = {(r["dataset"], r["mode"]): r for r in card["slice"]["results"]}
    assert {(r.dataset, r.mode) for r in results} == set(expected)
    for r in results:
        e = expected[(r.dataset, r.mode)]
        one_trial = 1 / e["n_trials"]
        assert r.n_trials == e["n_trials"]
        assert abs(r.accuracy - e["accuracy"]) <= one_trial + 1e-9, (r, e)
        assert abs(r.parse_rate - e["parse_rate"]) <= one_trial + 1e-9, (r, e)


def test_the_card_states_what_the_model_was_trained_on(card):
    text = (WEIGHTS / "MODEL_CARD.md").read_text()
    from facet_probe.datasets.synthetic.base import GENERATOR_VERSION

    assert card["generator_version"] == GENERATOR_VERSION  # retrain when the generators change
    assert f"generator version **{GENERATOR_VERSION}**" in text
    for name in ("synthetic_mcq", "synthetic_visual_mcq", "synthetic_evidence", "synthetic_docs",
                 "synthetic_image_set", "synthetic_mixed", "synthetic_dialog", "synthetic_few_shot", "synthetic_tools"):
        assert f"| {name} |" in text
