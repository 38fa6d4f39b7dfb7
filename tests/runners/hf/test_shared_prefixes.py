"""Which prompt prefix a batch's rows share, never across two different images, and the inputs that keep every
token at the position it has in the whole prompt (shared_prefixes.py)."""

from __future__ import annotations

import torch

from facet_probe.runners.hf.encoded import Encoded
from facet_probe.runners.hf.shared_prefixes import (
    ImageNames,
    PrefixPlan,
    collate_after_prefixes,
    content_ids,
    plan_prefixes,
    prefix_limits,
)

IMG = 99  # the image token id


def test_image_tokens_are_named_after_their_image_so_different_images_never_match():
    names = ImageNames()
    one = content_ids([1, IMG, IMG, 2], IMG, [("a", 2)], names)
    same = content_ids([1, IMG, IMG, 3], IMG, [("a", 2)], names)
    other = content_ids([1, IMG, IMG, 2], IMG, [("b", 2)], names)
    assert one[:3] == same[:3] and one[1:3] != other[1:3]
    assert one[0] == 1 and one[3] == 2 and all(t < 0 for t in one[1:3] + other[1:3])
    assert one[2] == one[1] - 1  # consecutive within an image


def test_a_prefix_never_ends_inside_an_image_and_stops_before_one_without_features():
    names = ImageNames()
    row = content_ids([5, 6, IMG, IMG, IMG, 7, 8], IMG, [("a", 3)], names)
    assert prefix_limits([row], images_allowed=True) == [6]  # one token left to prefill
    assert prefix_limits([row], images_allowed=False) == [2]  # before the image
    ends_in_image = content_ids([5, IMG, IMG, IMG], IMG, [("a", 3)], names)
    assert prefix_limits([ends_in_image], images_allowed=True) == [1]  # back to the image's first token


def test_an_items_orderings_share_their_stem_and_the_batch_shares_the_system_prompt():
    system = list(range(100, 110))
    item1 = [system + [1, 2, 3, 4, 5, 6] + opts for opts in ([7, 8], [8, 7], [7, 9])]
    item2 = [system + [11, 12, 13, 14, 15, 16] + opts for opts in ([7, 8], [8, 7])]
    rows = item1 + item2
    plan = plan_prefixes(rows, prefix_limits(rows, images_allowed=True))
    assert isinstance(plan, PrefixPlan)
    assert [plan.lengths[i] for i in range(5)] == [16, 16, 16, 16, 16]
    assert plan.prefix_of[:3] == [0, 0, 0] and plan.prefix_of[3:] == [1, 1]
    assert plan.tokens_saved([len(r) for r in rows]) == 5 * 18 - (2 * 16 + 5 * 2)


def test_no_plan_where_no_two_rows_share_a_prefix():
    assert plan_prefixes([[1, 2, 3], [4, 5, 6]], [2, 2]) is None


def test_rows_after_their_prefixes_keep_the_positions_of_the_whole_prompt():
    rows = [Encoded(torch.tensor(ids), []) for ids in ([1, 2, 3, 4, 5], [1, 2, 9], [1, 2, 3, 7])]
    plan = PrefixPlan(lengths=[3, 2, 3], prefix_of=[0, 1, 0], sources=[0, 1], images=[0, 0, 0])
    batch = collate_after_prefixes(rows, plan, pad_id=0)
    assert batch["input_ids"].tolist() == [[1, 2, 3, 4, 5], [1, 2, 0, 0, 9], [1, 2, 3, 0, 7]]
    mask = batch["attention_mask"]
    assert mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 1], [1, 1, 1, 0, 1]]
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)  # how generate numbers the tokens
    assert [p[m.bool()].tolist() for p, m in zip(positions, mask, strict=True)] == [[0, 1, 2, 3, 4], [0, 1, 2],
                                                                                   [0, 1, 2, 3]]
