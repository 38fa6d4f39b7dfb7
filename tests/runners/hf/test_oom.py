"""The one out-of-memory halving (runners/hf/oom.py): batches halve on OOM, nothing is lost or reordered."""

from __future__ import annotations

import pytest
import torch

from facet_probe.runners.hf.base import HFRunner
from facet_probe.runners.hf.oom import BatchLimit, is_oom, run_halving


def _oom() -> torch.OutOfMemoryError:
    return torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (simulated)")


def _runs_up_to(width: int, calls: list[list[int]], bad: int | None = None, error=_oom):
    def run(batch: list[int]) -> list[int]:
        calls.append(list(batch))
        if len(batch) > width or bad in batch:
            raise error()
        return [10 * x for x in batch]
    return run


def test_is_oom_knows_the_error_type_and_the_message():
    assert is_oom(_oom()) and is_oom(RuntimeError("CUDA error: out of memory"))
    assert not is_oom(ValueError("shapes do not match"))


def test_an_oom_batch_is_halved_and_every_item_answered_in_order():
    calls: list[list[int]] = []
    limit = BatchLimit(4)
    out = list(run_halving(list(range(7)), limit, _runs_up_to(1, calls)))
    assert [b for b, _ in out] == [[i] for i in range(7)]
    assert [r for _, r in out] == [[10 * i] for i in range(7)]
    assert calls[:3] == [[0, 1, 2, 3], [0, 1], [0]] and limit.size == 1  # 4 -> 2 -> 1, then stays at 1
    again: list[list[int]] = []
    list(run_halving([0, 1, 2], limit, _runs_up_to(1, again)))
    assert again == [[0], [1], [2]]  # the lowered limit holds for the next call


def test_one_item_out_of_memory_alone_goes_to_alone_or_raises():
    out = list(run_halving([1, 2, 3, 4], BatchLimit(2), _runs_up_to(2, [], bad=3), alone=lambda b, e: ["failed"]))
    assert out == [([1, 2], [10, 20]), ([3], ["failed"]), ([4], [40])]
    with pytest.raises(torch.OutOfMemoryError):
        list(run_halving([1, 2, 3], BatchLimit(2), _runs_up_to(2, [], bad=3)))


def test_other_errors_propagate_unless_isolated():
    run = _runs_up_to(8, [], bad=2, error=lambda: ValueError("bad item"))
    with pytest.raises(ValueError, match="bad item"):
        list(run_halving([1, 2, 3], BatchLimit(3), run, alone=lambda b, e: ["failed"]))
    out = list(run_halving([1, 2, 3], BatchLimit(3), run, alone=lambda b, e: [str(e)], isolate_errors=True))
    assert out == [([1], [10]), ([2], ["bad item"]), ([3], [30])]


def test_attack_config_errors_default_to_none():
    assert HFRunner.attack_config_errors({"name": "x"}) == []


def test_a_lowered_limit_grows_back_after_batches_that_fit_never_above_the_configured_size(caplog):
    """Issue 41 (7): one long item ran out of memory; the short ones after it run at the configured size again."""
    import logging

    calls: list[list[int]] = []

    def run(batch: list[int]) -> list[int]:
        calls.append(list(batch))
        if 0 in batch and len(batch) > 1:  # item 0 is the long prompt: it fits only alone
            raise _oom()
        return batch

    limit = BatchLimit(4, grow_after=2)
    with caplog.at_level(logging.INFO, logger="facet_probe.runners.hf"):
        out = list(run_halving(list(range(16)), limit, run, label="m"))
    assert [x for b, _ in out for x in b] == list(range(16))  # nothing lost or reordered
    assert calls == [[0, 1, 2, 3], [0, 1], [0], [1], [2, 3], [4, 5], [6, 7, 8, 9], [10, 11, 12, 13], [14, 15]]
    assert limit.size == 4  # doubled back twice, and no further than the configured 4
    grown = [r.getMessage() for r in caplog.records if "back up to" in r.getMessage()]
    assert grown == ["m: 2 batches in a row fitted in memory; batch size back up to 2 (configured 4)",
                     "m: 2 batches in a row fitted in memory; batch size back up to 4 (configured 4)"]
