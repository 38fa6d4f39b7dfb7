"""The prompt prefix a batch's requests share is prefilled once, and the replies are the same as when each prompt
is prefilled whole (prefix_reuse.py)."""

from __future__ import annotations

import pytest
import torch
from hf_test_helpers import image_ref, prompt_of

from facet_probe.runners.base import Request, generate_all

A, B = image_ref(50, 40, 21), image_ref(64, 30, 22)
SHARING = ["llava", "internvl"]


def option_orderings() -> list[Request]:
    """Two items of three orderings each: a stem and a figure shared by an item's orderings, the options moved;
    and one ordering of an image-set item (its first image differs) and a text-only prompt."""
    prompts = []
    for figure, stem in ((A, "Which shape is shown in the figure above, and what colour is it?"),
                         (B, "How many animals can you count in this picture, in all?")):
        for options in (("A. cat", "B. dog", "C. bird"), ("A. dog", "B. bird", "C. cat"),
                        ("A. bird", "B. cat", "C. dog")):
            prompts.append(prompt_of("Figure:", figure, stem, *options, "Reply with the letter."))
    prompts.append(prompt_of("Image 1:", B, "Image 2:", A, "Which image shows a dog?"))
    prompts.append(prompt_of("No image here: is the sky green? Reply yes or no."))
    return [Request(key=f"r{i}", prompt=p) for i, p in enumerate(prompts)]


@pytest.mark.parametrize("family", SHARING)
def test_shared_prefixes_are_prefilled_once_and_the_replies_are_the_same(make_runner, family, monkeypatch):
    runner = make_runner(family, batch_size=8)  # one batch: three prefixes (two items' stems and figures, text)
    runner.forget_images()
    seen: list[int] = []
    handle = runner.model.get_input_embeddings().register_forward_hook(
        lambda m, args, out: seen.append(args[0].numel()) if args[0].shape[-1] > 1 else None)
    try:
        shared = generate_all(runner, option_orderings())
        with_reuse = sum(seen)
        seen.clear()
        monkeypatch.setattr(runner, "prefix_reuse", False)  # the switch: every prompt prefilled whole
        whole = generate_all(runner, option_orderings())
        without = sum(seen)
    finally:
        handle.remove()
    assert {k: r.text for k, r in shared.items()} == {k: r.text for k, r in whole.items()}
    assert with_reuse < without  # the prefill's token positions, prefixes' own forward included
    reused = [r.provenance["shared_prefix_tokens"] for r in shared.values()]
    assert max(reused) > 0 and all(r.provenance["shared_prefix_tokens"] == 0 for r in whole.values())


@pytest.mark.parametrize("family", SHARING)
def test_the_next_token_scores_after_the_prefixes_equal_the_whole_prompts(make_runner, family):
    """The cache gathered per row and the rest after it give the scores one pass over each whole prompt gives
    (a check that does not lean on the tiny model's replies, which may not depend on the prompt)."""
    runner = make_runner(family, batch_size=8)
    runner.forget_images()
    batch = [(req, runner.encode(req.prompt)) for req in option_orderings()]
    features = runner.batch_image_features(batch)
    plan = runner.plan_shared_prefixes(batch, features)
    assert plan is not None and len(plan.sources) >= 2 and max(plan.images) >= 1
    prefilled = runner.prefill_prefixes(batch, plan, features)
    encs = [e for _, e in batch]
    with torch.no_grad():
        pixels, mm = runner.batch_image_inputs(batch, features, plan.images)
        rest = runner._collate_after_prefixes(encs, pixels, prefilled)
        mask = rest["attention_mask"]
        positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)[:, plan.width:]
        after = runner.model(**{**rest, "input_ids": rest["input_ids"][:, plan.width:]}, position_ids=positions,
                             mm_encoder_outputs={"image": mm} if mm is not None else None, logits_to_keep=1).logits
        pixels, mm = runner.batch_image_inputs(batch, features)
        whole = runner.model(**runner._collate(encs, pixels, prompt_only=True),
                             mm_encoder_outputs={"image": mm}, logits_to_keep=1).logits
    assert torch.allclose(after[:, -1], whole[:, -1], atol=1e-4)


@pytest.mark.parametrize("family", SHARING)
def test_a_figure_inside_the_shared_prefix_is_prefilled_once(make_runner, family):
    """With the features reused, the orderings' shared figure lies inside their prefix; without (the features
    cache off), the prefix stops before it and the replies are the same."""
    runner = make_runner(family, batch_size=8)
    runner.forget_images()
    reqs = option_orderings()
    with_figure = generate_all(runner, reqs)
    runner_pixels = make_runner(family, batch_size=8, image_features_cache=0)
    before_figure = generate_all(runner_pixels, reqs)
    ids = runner.encode(reqs[0].prompt).input_ids.tolist()
    figure_at = ids.index(runner.image_token_id())  # the figure's first token
    item = [f"r{i}" for i in range(3)]
    assert min(with_figure[k].provenance["shared_prefix_tokens"] for k in item) > figure_at
    assert 0 < max(before_figure[k].provenance["shared_prefix_tokens"] for k in item) <= figure_at
    assert {k: r.text for k, r in with_figure.items()} == {k: r.text for k, r in before_figure.items()}


def test_sampled_replies_are_the_same_with_and_without(make_runner, monkeypatch):
    runner = make_runner("llava", batch_size=8, generation={"max_new_tokens": 6, "temperature": 0.9, "top_p": 0.95})
    reqs = [Request(key=r.key, prompt=r.prompt, seed=7 + i) for i, r in enumerate(option_orderings())]
    shared = {k: r.text for k, r in generate_all(runner, reqs).items()}
    monkeypatch.setattr(runner, "prefix_reuse", False)
    assert shared == {k: r.text for k, r in generate_all(runner, reqs).items()}


def test_a_family_that_does_not_declare_it_prefills_each_prompt_whole(make_runner):
    runner = make_runner("qwen3_5")
    assert not runner.prefills_shared_prefixes
    replies = generate_all(runner, option_orderings()[:3])
    assert all(r.provenance["shared_prefix_tokens"] == 0 for r in replies.values())


def test_prefix_reuse_must_be_true_or_false(tiny_root):
    from facet_probe.runners.hf.llava import LlavaRunner

    with pytest.raises(ValueError, match="prefix_reuse is true .* or false; got 'yes'"):
        LlavaRunner(name="m", model_id="tiny/llava", prefix_reuse="yes")


def _failing_when(runner, monkeypatch, condition) -> list[int]:
    """Make the model's forward raise a TypeError (not out of memory) when `condition(kwargs)` holds; the list
    counts the failures."""
    import functools

    real, failures = runner.model.forward, []

    @functools.wraps(real)  # keeps the signature generate() validates its kwargs against
    def forward(*args, **kwargs):
        if condition(kwargs):
            failures.append(1)
            raise TypeError("this model's forward takes no such input (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(runner.model, "forward", forward)
    return failures


def _prefixes_forward(kwargs) -> bool:
    return bool(kwargs.get("use_cache")) and kwargs.get("logits_to_keep") == 1 and "cache" not in kwargs


def _generate_from_prefixes(kwargs) -> bool:
    cache, ids = kwargs.get("cache"), kwargs.get("input_ids")
    return cache is not None and ids is not None and ids.shape[1] > 1 and cache.get_seq_length() > 0


@pytest.mark.parametrize("fails", [_prefixes_forward, _generate_from_prefixes])
def test_a_model_that_fails_with_prefixes_is_prefilled_whole_said_once(make_runner, monkeypatch, caplog, fails):
    """A failure that is not out of memory, in the prefixes' forward or in `generate` going on from them: the batch
    runs with whole prompts, every trial gets the reply it gets without reuse, and the reuse is off from then on
    with one warning (not every batch split down to single trials)."""
    reference = generate_all(make_runner("llava", batch_size=8, prefix_reuse=False), option_orderings())
    runner = make_runner("llava", fresh=True, batch_size=8)
    failures = _failing_when(runner, monkeypatch, fails)
    with caplog.at_level("WARNING", logger="facet_probe.runners.hf"):
        out = generate_all(runner, option_orderings())
        again = generate_all(runner, option_orderings())
    assert {k: r.text for k, r in out.items()} == {k: r.text for k, r in reference.items()} == {
        k: r.text for k, r in again.items()}
    assert all(r.error is None and r.provenance["batch_size"] == 8 for r in [*out.values(), *again.values()])
    assert failures == [1] and all(r.provenance["shared_prefix_tokens"] == 0 for r in out.values())
    warned = [r.getMessage() for r in caplog.records if "prefilled whole from now on" in r.getMessage()]
    assert len(warned) == 1 and "TypeError" in warned[0]
