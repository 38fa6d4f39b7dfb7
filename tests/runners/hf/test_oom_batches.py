"""Out of memory halves the batch and retries; a trial that fails even alone is an error response, never lost."""

from __future__ import annotations

import functools
import logging

import torch
from hf_test_helpers import image_ref, prompt_of

from facet_probe.runners.base import Request, generate_all


def _requests(n: int = 7) -> list[Request]:
    return [Request(key=f"k{i}", prompt=prompt_of("question " * (i + 1), image_ref(40, 36, i), "A or B?"))
            for i in range(n)]


def _oom_above(runner, rows: int, monkeypatch, also_when=None) -> list[int]:
    """Make the model's forward raise CUDA-style OOM for batches wider than `rows` (records batch widths)."""
    real, widths = runner.model.forward, []

    @functools.wraps(real)  # keeps the signature generate() validates its kwargs against
    def forward(*args, **kwargs):
        ids = kwargs.get("input_ids")
        if ids is not None and ids.shape[1] > 1:  # the prefill step (decode steps see one new token)
            widths.append(ids.shape[0])
            if ids.shape[0] > rows or (also_when is not None and also_when(ids)):
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(runner.model, "forward", forward)
    return widths


def test_oom_halves_the_batch_and_every_trial_still_gets_its_answer(make_runner, monkeypatch, caplog):
    reference = generate_all(make_runner("llava", batch_size=1), _requests())
    runner = make_runner("llava", fresh=True, batch_size=4, prefix_reuse=False)
    widths = _oom_above(runner, 1, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="facet_probe.runners.hf"):
        out = generate_all(runner, _requests())
    assert {k: r.text for k, r in out.items()} == {k: r.text for k, r in reference.items()}
    assert all(r.error is None and r.provenance["batch_size"] == 1 for r in out.values())
    assert widths[:3] == [4, 2, 1] and runner.batch_limit.size == 1  # 4 -> 2 -> 1, then stays at 1
    assert sum("out of memory at batch size" in r.getMessage() for r in caplog.records) == 2


def test_a_trial_too_big_even_alone_becomes_an_error_and_the_others_complete(make_runner, monkeypatch):
    runner = make_runner("llava", fresh=True, batch_size=4, prefix_reuse=False)
    reqs = _requests()
    longest = max(len(runner.encode(r.prompt)) for r in reqs)
    _oom_above(runner, 2, monkeypatch, also_when=lambda ids: ids.shape[1] == longest)
    out = generate_all(runner, reqs)
    assert len(out) == len(reqs)
    failed = [k for k, r in out.items() if r.error]
    assert failed == ["k6"] and "out of memory even at batch size 1" in out["k6"].error and out["k6"].text == ""
    assert all(r.text is not None and r.error is None for k, r in out.items() if k != "k6")


def test_after_an_oom_halving_the_batch_grows_back_and_says_so(make_runner, monkeypatch, caplog):
    """Issue 41 (7): the longest prompt runs out of memory unless alone; the shorter ones after it are batched at
    the configured size again instead of one at a time for the rest of the run."""
    reference = generate_all(make_runner("llava", batch_size=1), _requests())
    runner = make_runner("llava", fresh=True, batch_size=4, prefix_reuse=False)
    runner.batch_limit.grow_after = 2  # the run's limit (kept across calls); 16 batches by default
    reqs = _requests()
    longest = max(len(runner.encode(r.prompt)) for r in reqs)
    widths = _oom_above(runner, 4, monkeypatch, also_when=lambda ids: ids.shape[0] > 1 and ids.shape[1] == longest)
    with caplog.at_level(logging.INFO, logger="facet_probe.runners.hf"):
        out = generate_all(runner, reqs)
    assert {k: r.text for k, r in out.items()} == {k: r.text for k, r in reference.items()}
    assert widths == [4, 2, 1, 1, 2, 2, 1]  # halved to 1 for the long one, then back up to 2 and to 4
    assert runner.batch_limit.size == 4
    assert [r.provenance["batch_size"] for r in out.values()].count(2) == 4
    grown = [r.getMessage() for r in caplog.records if "batch size back up to" in r.getMessage()]
    assert len(grown) == 2 and grown[-1].endswith("back up to 4 (configured 4)")


def test_out_of_memory_in_the_shared_prefixes_forward_halves_the_batch_too(make_runner, monkeypatch):
    """The prefixes' own forward (prefix_reuse.py) is part of the batch: its out of memory halves the batch like
    `generate`'s, and every trial still gets the reply it gets with each prompt prefilled whole."""
    reqs = [Request(key=f"p{i}", prompt=prompt_of("The same long question stem for every ordering " * 3,
                                                  image_ref(40, 36, 1), f"option order {i}")) for i in range(4)]
    reference = generate_all(make_runner("llava", batch_size=1), reqs)
    runner = make_runner("llava", fresh=True, batch_size=4)
    prefill_rows: list[int] = []
    real = runner.model.forward

    @functools.wraps(real)
    def forward(*args, **kwargs):
        if kwargs.get("use_cache") and kwargs.get("logits_to_keep") == 1 and "cache" not in kwargs:
            prefill_rows.append(kwargs["input_ids"].shape[0])  # the prefixes' forward: first call of a batch
            if len(prefill_rows) == 1:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(runner.model, "forward", forward)
    out = generate_all(runner, reqs)
    assert {k: r.text for k, r in out.items()} == {k: r.text for k, r in reference.items()}
    assert all(r.error is None for r in out.values()) and runner.batch_limit.size == 2
    assert prefill_rows[0] == 1 and max(r.provenance["shared_prefix_tokens"] for r in out.values()) > 0
