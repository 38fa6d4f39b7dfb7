"""Synthetic sets are deterministic, prefix-stable, versioned, and their train split never repeats test
content."""

from __future__ import annotations

import hashlib
import json

import pytest
from synthetic_samples import SET_NAMES, sample

from facet_probe.datasets.synthetic import GENERATOR_VERSION, SYNTHETIC_SETS
from facet_probe.datasets.synthetic.base import content_signature


def make(name: str, **options):
    return SYNTHETIC_SETS[name](name=name, **options)


def text_signature(item) -> str:
    """What a model reads, order-free: question, component texts/titles/answers, choices, gold, pictures."""
    parts = sorted(json.dumps([c.kind, c.title, c.text, c.answer, c.metadata.get("shape"), c.metadata.get("colour")])
                   for c in item.components)
    scene = sorted(f"{o['shape']} {o['colour']}" for c in item.fixed for o in c.metadata.get("scene", []))
    return json.dumps([item.question, parts, scene, sorted(item.choices), item.gold])


@pytest.mark.parametrize("name", SET_NAMES)
def test_same_seed_gives_identical_items_and_another_seed_different_ones(name):
    first = make(name, n=30).load()
    again = make(name, n=30).load()
    other = make(name, n=30, seed=7).load()
    assert first == again  # images included: same PNG bytes
    assert [i.item_id for i in first] == [f"{name}::test-{k:05d}" for k in range(30)]
    assert {text_signature(i) for i in first} != {text_signature(i) for i in other}


@pytest.mark.parametrize("name", SET_NAMES)
def test_samples_are_prefix_stable(name):
    big = sample(name)
    assert list(make(name, n=50).load()) == list(big[:50])
    assert make(name, n=300).load(limit=20) == list(big[:20])
    assert make(name, n=10).load(limit=20) == list(big[:10])


@pytest.mark.parametrize("name", SET_NAMES)
def test_every_item_records_the_generator_version_and_its_split(name):
    for item in (*sample(name, 40), *make(name, n=40, split="train", holdout_n=40).load()):
        assert item.metadata["generator_version"] == GENERATOR_VERSION
        assert item.item_id.startswith(f"{name}::{item.metadata['split']}-")


@pytest.mark.parametrize("name", SET_NAMES)
def test_test_items_are_distinct_and_train_never_repeats_test_content(name):
    test = sample(name, 300, "test")
    train = make(name, n=800, split="train", holdout_n=300, image_size=16).load()
    test_texts = {text_signature(i) for i in test}
    assert len(test_texts) == len(test)
    assert not test_texts & {text_signature(i) for i in train}
    assert not {i.item_id for i in test} & {i.item_id for i in train}


def test_train_excludes_the_whole_holdout_not_just_the_audited_sample():
    loader = make("synthetic_visual_mcq", n=3000, split="train", holdout_n=3000)
    holdout = loader.holdout_signatures()
    test_drafts = list(make("synthetic_visual_mcq", n=3000).drafts(3000))
    assert holdout == {content_signature(d.content) for d in test_drafts}
    assert not holdout & {content_signature(d.content) for d in loader.drafts(3000)}


def test_loaders_of_one_set_and_seed_draw_the_holdout_once_per_process(monkeypatch):
    """Every train load excludes the first holdout_n test items; a second loader of the same set, seed and
    holdout_n (the trainer and the tests load each set many times) reuses them instead of drawing them again,
    and another seed or holdout_n draws its own."""
    cls = SYNTHETIC_SETS["synthetic_docs"]
    drawn = []
    real_draw = cls.draw
    monkeypatch.setattr(cls, "draw", lambda self, rng: drawn.append(1) or real_draw(self, rng))
    first = make("synthetic_docs", n=5, split="train", holdout_n=1234, seed=7).load()
    assert len(drawn) >= 1234
    drawn.clear()
    again = make("synthetic_docs", n=5, split="train", holdout_n=1234, seed=7).load()
    assert [i.item_id for i in again] == [i.item_id for i in first] and len(drawn) < 100
    drawn.clear()
    make("synthetic_docs", n=5, split="train", holdout_n=1234, seed=8).load()
    assert len(drawn) >= 1234


def test_content_signature_ignores_order_but_not_content():
    a = {"facts": [{"s": "Ana", "v": "Oslo"}, {"s": "Ben", "v": "Rome"}], "gold": "Oslo"}
    b = {"gold": "Oslo", "facts": [{"v": "Rome", "s": "Ben"}, {"v": "Oslo", "s": "Ana"}]}
    c = {"facts": [{"s": "Ana", "v": "Rome"}, {"s": "Ben", "v": "Oslo"}], "gold": "Oslo"}
    assert content_signature(a) == content_signature(b) != content_signature(c)


@pytest.mark.slow
def test_train_split_generates_thousands_of_items():
    items = make("synthetic_evidence", n=3000, split="train").load()
    assert len(items) == 3000 and len({i.item_id for i in items}) == 3000


@pytest.mark.parametrize(("options", "message"), [
    ({"split": "dev"}, "split must be one of"),
    ({"path": "/data/x"}, "leave dataset.path null"),
    ({"image_size": 8}, "image_size must be at least 16"),
    ({"n": -1}, "n must be a non-negative"),
    ({"colour": "red"}, "unknown option"),
])
def test_bad_options_fail_with_a_clear_message(options, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make("synthetic_visual_mcq", **options)


def test_image_size_option_sets_the_picture_size():
    item = make("synthetic_visual_mcq", n=1, image_size=96).load()[0]
    assert item.fixed[0].image.to_pil().size == (96, 96)


def _digest(items) -> str:
    """Item content with image bytes left out (PNG encoders differ across Pillow builds)."""
    dumps = []
    for item in items:
        d = item.model_dump(mode="json")
        for comp in (*d["components"], *d["fixed"]):
            if comp["image"]:
                comp["image"] = None
        dumps.append(d)
    return hashlib.sha256(json.dumps(dumps, sort_keys=True).encode()).hexdigest()[:16]


#: Digests of the first 20 test items (seed 42) per generator version. A generator change that alters
#: items must bump GENERATOR_VERSION (models trained on the sets depend on it) and add its digests here.
PINNED = {
    "1.0": {
        "synthetic_dialog": "5ca87e51b4665b97",
        "synthetic_docs": "dc971d62765dff8f",
        "synthetic_evidence": "8ce60de23efec041",
        "synthetic_few_shot": "097e9212cbf31822",
        "synthetic_image_set": "2a8828aebf064d4a",
        "synthetic_mcq": "40e35fc5cf516e8a",
        "synthetic_mixed": "ed27b299e8037ba0",
        "synthetic_tools": "b91ece44758a70fb",
        "synthetic_visual_mcq": "0b455449ba3d661a",
    },
}


@pytest.mark.parametrize("name", SET_NAMES)
def test_items_change_only_with_the_generator_version(name):
    assert GENERATOR_VERSION in PINNED, f"add the digests of generator version {GENERATOR_VERSION} to PINNED"
    assert _digest(sample(name)[:20]) == PINNED[GENERATOR_VERSION][name], (
        f"{name} items changed: bump GENERATOR_VERSION and pin the new digests")
