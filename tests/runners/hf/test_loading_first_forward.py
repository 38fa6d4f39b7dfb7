"""Issue 41 (7): an attention implementation that loads but fails on its first forward (flash-attn on a GPU or
dtype it does not support) is replaced once by the next one that runs (FlashAttention-2 -> sdpa -> eager), the
log and the provenance say so, and the trials are keyed by the attention that ran.

On this CPU machine `auto` loads sdpa first (eager next); the failing kernel is a real attention function
registered with transformers' `AttentionInterface` under that name, raising flash-attn's unsupported-GPU error.
"""

from __future__ import annotations

import json
import logging

import pytest
from hf_test_helpers import image_ref, prompt_of

from facet_probe import api
from facet_probe.runners.base import Request, generate_all

UNSUPPORTED = "FlashAttention only supports Ampere GPUs or newer."


@pytest.fixture
def sdpa_fails_on_first_forward():
    """sdpa, as the model calls it, raises flash-attn's error (the kernel loads; its first call fails)."""
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    original = ALL_ATTENTION_FUNCTIONS["sdpa"]

    def unsupported_kernel(module, query, key, value, attention_mask, **kwargs):
        raise RuntimeError(UNSUPPORTED)

    AttentionInterface.register("sdpa", unsupported_kernel)
    try:
        yield
    finally:
        AttentionInterface.register("sdpa", original)


def _requests() -> list[Request]:
    return [Request(key=f"k{i}", prompt=prompt_of(f"question {i}", image_ref(40, 36, i), "A or B?")) for i in range(3)]


def test_a_kernel_failing_on_the_first_forward_falls_back_once_and_keys_the_attention_used(
        make_runner, sdpa_fails_on_first_forward, caplog):
    reference = generate_all(make_runner("llava", attn_implementation="eager"), _requests())
    with caplog.at_level(logging.INFO, logger="facet_probe.runners.hf"):
        runner = make_runner("llava", fresh=True, attn_implementation="auto")
    assert runner.fingerprint()["attn_implementation"] == "eager"  # what runs, so never keyed as sdpa trials
    assert runner.provenance["attn_implementation"] == "eager"
    said = [r.getMessage() for r in caplog.records if "failed on the first forward" in r.getMessage()]
    assert len(said) == 1 and UNSUPPORTED in said[0] and "using eager" in said[0]
    assert any("sdpa failed on the first forward" in n for n in runner.provenance["notes"])
    out = generate_all(runner, _requests())
    assert all(r.error is None for r in out.values())  # before: every trial an error
    assert {k: r.text for k, r in out.items()} == {k: r.text for k, r in reference.items()}


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_the_audit_keys_its_trials_by_the_attention_that_ran(tmp_path, sdpa_fails_on_first_forward):
    run = tmp_path / "run"
    api.audit([f"hydra.run.dir={run}", "model=tiny_vlm", "model.attn_implementation=auto", "facet=option_order",
               "dataset=synthetic_mcq", "limit=1", "k=2", "progress=false", "bootstrap=10"])
    model = json.loads((run / "run_status.json").read_text())["models"]["tiny_vlm"]
    assert model["fingerprint"]["attn_implementation"] == "eager"
    trials = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines() if line]
    assert trials and all(t["error"] is None and t["provenance"]["attn_implementation"] == "eager" for t in trials)
