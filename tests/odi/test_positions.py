"""The display position of the gold / supporting component, per facet."""

import numpy as np
import pytest

from facet_probe.core.items import make_item
from facet_probe.odi.positions import (
    ItemFacts,
    facts_from_items,
    gold_index_from_letter,
    located_slots,
    position_weights,
    slot_position,
)


@pytest.mark.parametrize(("slot", "n", "position"), [(0, 4, 0), (1, 4, 1), (2, 4, 1), (3, 4, 2), (0, 2, 0), (1, 2, 2)])
def test_slot_position_is_first_middle_or_last(slot, n, position):
    assert slot_position(slot, n) == position


def test_slot_position_rejects_a_single_slot_and_out_of_range_slots():
    with pytest.raises(ValueError, match="at least 2"):
        slot_position(0, 1)
    with pytest.raises(ValueError, match="outside"):
        slot_position(4, 4)


def test_option_order_locates_the_gold_choice_through_the_permutation():
    # display slot j shows source choice perm[j]; gold is source choice 2, shown in slot 0
    assert located_slots("option_order", [2, 0, 1, 3], None, ItemFacts(gold_index=2)) == [0]


def test_option_order_falls_back_to_the_gold_letter_without_items():
    assert located_slots("option_order", [1, 3, 0, 2], None, None, gold_letter="C") == [3]
    assert gold_index_from_letter("c", 4) == 2
    assert gold_index_from_letter("E", 4) is None
    assert gold_index_from_letter("Paris", 4) is None


def test_other_facets_locate_supporting_components_from_component_ids():
    facts = ItemFacts(supporting=frozenset({"p2", "p0"}), component_ids=("p0", "p1", "p2"))
    assert located_slots("evidence_chunk_order", [2, 1, 0], ["p2", "p1", "p0"], facts) == [0, 2]


def test_a_bare_permutation_is_mapped_through_the_items_component_order():
    facts = ItemFacts(supporting=frozenset({"b"}), component_ids=("a", "b", "c"))
    assert located_slots("document_rank_order", [1, 2, 0], None, facts) == [0]
    assert located_slots("document_rank_order", [1, 0], None, facts) == []  # lengths differ: cannot map


def test_without_supporting_components_nothing_is_located():
    assert located_slots("image_set_order", [0, 1], ["x", "y"], None) == []
    assert located_slots("image_set_order", [0, 1], ["x", "y"], ItemFacts(component_ids=("x", "y"))) == []


def test_several_supporting_components_share_the_weight():
    np.testing.assert_allclose(position_weights([0, 2], 3), [0.5, 0.0, 0.5])
    np.testing.assert_allclose(position_weights([1], 5), [0.0, 1.0, 0.0])
    np.testing.assert_allclose(position_weights([], 5), [0.0, 0.0, 0.0])


def test_facts_come_from_canonical_items_and_their_json():
    item = make_item(item_id="d::1", dataset="d", question="q?", answer_type="free", gold_answer="x",
                     components=[{"id": "a", "kind": "text_chunk", "text": "A", "metadata": {"supporting": True}},
                                 {"id": "b", "kind": "text_chunk", "text": "B"}])
    from_obj = facts_from_items([item])
    from_json = facts_from_items([item.model_dump(mode="json")])
    assert from_obj == from_json == {"d::1": ItemFacts(None, frozenset({"a"}), ("a", "b"))}
