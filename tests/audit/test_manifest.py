"""Manifests: K orderings x R repeats per item, drawn once, saved, and replayed exactly."""

from __future__ import annotations

import pandas as pd
import pytest

from facet_probe.audit.manifest import (
    MAX_MANIFEST_ROWS,
    ManifestRow,
    build_manifest,
    check_manifest_size,
    load_manifest,
    manifest_frame,
    save_manifest,
)
from facet_probe.core.errors import ConfigError
from facet_probe.core.items import make_item
from facet_probe.core.permutations import sample_permutations
from facet_probe.facets import FACETS, UnsupportedItem
from facet_probe.facets.examples import example_item
from facet_probe_dev.testing.time_limit import time_limit


@pytest.fixture
def option_items():
    first = example_item("option_order")
    second = first.model_copy(update={"item_id": "example::option2"})
    return [first, second]


def test_k_orderings_per_item_identity_first_in_display_order(option_items):
    facet = FACETS["option_order"]()
    rows = build_manifest(option_items, facet, k=6, seed=42)
    assert len(rows) == 2 * 6
    for item in option_items:
        mine = [r for r in rows if r.item_id == item.item_id]
        assert [r.ordering_idx for r in mine] == list(range(6))
        assert [r.permutation for r in mine] == sample_permutations(4, k=6, seed=42, item_id=item.item_id)
        for r in mine:
            assert r.component_ids == tuple(f"choice{i}" for i in r.permutation)  # display order
            assert (r.facet, r.dataset, r.repeat_idx, r.seed, r.k) == ("option_order", "example", 0, 42, 6)


def test_repeats_repeat_every_ordering(option_items):
    rows = build_manifest(option_items[:1], FACETS["option_order"](), k=3, repeats=2)
    assert [(r.ordering_idx, r.repeat_idx) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert rows[0].permutation == rows[1].permutation
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        build_manifest(option_items, FACETS["option_order"](), repeats=0)


def test_save_load_round_trip(tmp_path, option_items):
    rows = build_manifest(option_items, FACETS["option_order"](), k=6, seed=7, repeats=2)
    path = tmp_path / "manifest.parquet"
    save_manifest(rows, path)
    assert load_manifest(path) == rows
    assert not path.with_suffix(".tmp").exists()


@pytest.mark.parametrize("facet_name", sorted(FACETS))
def test_a_saved_manifest_replays_the_same_prompts(tmp_path, facet_name):
    """Another model (another process) loading the manifest renders exactly the same prompts."""
    facet, item = FACETS[facet_name](), example_item(facet_name)
    rows = build_manifest([item], facet, k=6, seed=42)
    save_manifest(rows, tmp_path / "m.parquet")
    replayed = load_manifest(tmp_path / "m.parquet")
    first = [facet.render(item, r.permutation).hash for r in rows]
    again = [facet.render(item, r.permutation).hash for r in replayed]
    assert first == again
    assert len(set(first)) > 1  # the orderings do change what the model sees


def test_unsupported_items_are_refused(option_items):
    free = example_item("evidence_chunk_order")
    with pytest.raises(UnsupportedItem, match="option_order"):
        build_manifest([free], FACETS["option_order"]())


def test_a_corrupt_manifest_is_a_clear_error(tmp_path, option_items):
    rows = build_manifest(option_items[:1], FACETS["option_order"](), k=2)
    frame = manifest_frame(rows)
    frame["permutation"] = [[0, 0, 1, 2], [0, 1, 2, 3]]
    frame["component_ids"] = frame["component_ids"].map(list)
    frame.to_parquet(tmp_path / "bad.parquet", index=False)
    with pytest.raises(ValueError, match=r"bad.parquet: row for example::option has an invalid permutation"):
        load_manifest(tmp_path / "bad.parquet")


def test_an_empty_manifest_has_the_row_columns():
    frame = manifest_frame([])
    assert list(frame.columns) == list(ManifestRow.__dataclass_fields__)
    assert isinstance(frame, pd.DataFrame) and frame.empty


# ---------------------------------------------------------------- K within what the items and a run folder allow

def options(n: int, i: int = 0):
    return make_item(item_id=f"mine::q{i}", dataset="mine", question="Which?", choices=[f"o{j}" for j in range(n)],
                     gold_index=0)


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_more_distinct_orderings_than_an_item_has_is_refused_not_drawn_forever():
    """Above 7 components the grammar draws K distinct orderings: K > n! looped for ever (k=10**12 ran for minutes)."""
    assert len(set(sample_permutations(8, k=40320, seed=1, item_id="x"))) == 40320  # every ordering there is
    with time_limit(10, "K > n! still drawing"), \
            pytest.raises(ValueError, match=r"K=40321 distinct orderings of 8 components asked; there are 40320"):
        sample_permutations(8, k=40321, seed=1, item_id="x")
    assert len(sample_permutations(3, k=50, item_id="x")) == 50  # up to 7: the 6 orderings repeat (v0.0.1)


def test_k_is_bounded_by_an_item_of_many_components_before_any_ordering_is_drawn():
    cells = [("option_order/mine", FACETS["option_order"](), [options(4, 0), options(8, 1)])]
    check_manifest_size(cells, k=40320)
    with pytest.raises(ConfigError) as refused:
        check_manifest_size(cells, k=40321)
    assert str(refused.value).startswith(
        "k=40,321: these items allow at most k=40,320 (item mine::q1 has 8 components, so 40,320 distinct "
        "orderings); distinct orderings per item: option_order/mine 24 to 40,320 (4-8 components).")
    assert "leave out the items of 8 or more components" in str(refused.value)


def test_k_is_bounded_by_the_manifest_size_cap_naming_the_largest_k():
    items = [options(3, i) for i in range(4)]
    cells = [("option_order/mine", FACETS["option_order"](), items[:3]), ("option_order/more", FACETS["option_order"](),
                                                                          items[3:])]
    largest = MAX_MANIFEST_ROWS // (2 * 4)
    check_manifest_size(cells, k=largest, repeats=2)
    with pytest.raises(ConfigError, match=rf"k={largest + 1:,}: these items allow at most k={largest:,} \(a run "
                                          r"folder's manifest holds at most 1,000,000 rows: K x repeats=2 x 4 items\); "
                                          r"distinct orderings per item: option_order/mine 6 \(3 components\); "
                                          r"option_order/more 6 \(3 components\)\..*audit fewer items \(limit=\)"):
        check_manifest_size(cells, k=largest + 1, repeats=2)
