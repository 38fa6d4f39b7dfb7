"""The trainer: learning-rate schedule, and whole (tiny) runs of a curriculum that save a loadable model."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from transformers import LlavaForConditionalGeneration, LlavaProcessor

from facet_probe_dev.testing import tiny_vlm_pool
from facet_probe_dev.tiny_vlm import echo
from facet_probe_dev.tiny_vlm.architecture import TinyVLMSpec, build_model
from facet_probe_dev.tiny_vlm.card import write_card
from facet_probe_dev.tiny_vlm.curriculum import Stage
from facet_probe_dev.tiny_vlm.train import (
    TrainConfig,
    compile_language_model,
    length_batches,
    lr_at,
    restore_training,
    run_attempts,
    shrink_and_perturb,
    snapshot_training,
    train,
)

pytestmark = pytest.mark.usefixtures("cached_items")  # the items of every tiny run generated once (conftest)

TINY = TinyVLMSpec(vision_hidden=32, vision_layers=1, vision_heads=2, text_hidden=32, text_layers=1,
                   text_heads=2, text_kv_heads=2, text_intermediate=64)


def test_lr_warms_up_linearly_then_decays_by_cosine_to_the_floor():
    cfg = TrainConfig(warmup=10, min_lr_ratio=0.1)
    assert lr_at(0, 100, cfg, 2e-3) == pytest.approx(2e-4)
    assert lr_at(9, 100, cfg, 2e-3) == pytest.approx(2e-3)
    assert lr_at(10, 100, cfg, 2e-3) == pytest.approx(2e-3)
    assert lr_at(55, 100, cfg, 2e-3) == pytest.approx(2e-3 * (0.1 + 0.9 * 0.5))  # half-way down the cosine
    assert lr_at(100, 100, cfg, 2e-3) == pytest.approx(2e-4)
    assert lr_at(500, 100, cfg, 2e-3) == pytest.approx(2e-4)
    assert lr_at(55, 100, cfg, 1e-3) == pytest.approx(lr_at(55, 100, cfg, 2e-3) / 2)  # a stage's own peak
    values = [lr_at(s, 100, cfg, 2e-3) for s in range(10, 101)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))


def test_a_constant_stage_keeps_its_peak_after_the_warm_up():
    cfg = TrainConfig(warmup=10)
    assert lr_at(4, 100, cfg, 2e-3, decay=False) == pytest.approx(1e-3)
    assert [lr_at(s, 100, cfg, 2e-3, decay=False) for s in (9, 50, 99, 200)] == [pytest.approx(2e-3)] * 4


def test_length_batches_group_similar_lengths_and_shuffle_the_batches_not_their_order_of_lengths():
    import random

    lengths = [5, 1, 9, 3, 7, 2, 8, 4]
    groups = length_batches(lengths, 2, random.Random(0))
    assert sorted([lengths[i] for i in g] for g in groups) == [[1, 2], [3, 4], [5, 7], [8, 9]]
    assert groups == length_batches(lengths, 2, random.Random(0))  # seeded
    assert length_batches([3, 3, 3], 2, random.Random(1)) in ([[0, 1], [2]], [[2], [0, 1]])  # stable, last short


EVERY_KIND = [
    Stage("induction", 2, 2e-3, decay=False),
    Stage("captions", 2, 1e-3, patterns={"caption": 1.0}),
    Stage("letters", 2, 2e-3, sets={echo.NAME: 1.0}, until=0.99, shrink=0.5, perturb=0.5),
    Stage("all", 3, 1.5e-3, sets={"synthetic_mcq": 1.0, "synthetic_visual_mcq": 1.0, echo.NAME: 0.5},
          evaluate=True),
]


@pytest.mark.slow
def test_a_tiny_run_of_every_kind_of_stage_saves_a_model_the_processor_the_log_and_a_card(tmp_path):
    """On the fast path (`fast`: the language model compiled): the copy patterns, the tasks, the quick
    generated evaluation (eager) and the saved weights all go through it."""
    cfg = TrainConfig(fast=True, procs=1, threads=1, stages=EVERY_KIND, pretrain_batch=4, batch_size=4, max_branches=2,
                      n_per_set=6, vocab_size=600, eval_n=1, warmup=2, spec=TINY)
    summary = train(cfg, tmp_path)
    log = json.loads((tmp_path / "training_log.json").read_text())
    assert [st["name"] for st in log["stages"]] == ["induction", "captions", "letters", "all"]
    assert [st["steps_done"] for st in log["stages"]] == [2, 2, 2, 3]
    assert {st["stopped_by"] for st in log["stages"]} == {"steps"} and log["stopped_by"] == "curriculum"
    assert log["steps"] == 9 and log["task_steps"] == 5 and log["examples_seen"] == 5 * 4
    assert set(log["stages"][0]["accuracy"]) == {"induction", "lookup", "caption"}
    assert "quick_eval" in log["stages"][3] and "quick_eval" not in log["stages"][2]
    assert log["config"]["stages"][2]["sets"] == {echo.NAME: 1.0}
    assert log["generator_version"] == summary["generator_version"] and len(log["sets"]) == 9
    assert log["replies_seen"] >= 5 * 4 and log["tokens_seen"] > log["answer_tokens_seen"] > 0
    model = LlavaForConditionalGeneration.from_pretrained(tmp_path, dtype=torch.float32)
    processor = LlavaProcessor.from_pretrained(tmp_path)
    assert model.config.text_config.hidden_size == 32
    assert processor.tokenizer.convert_tokens_to_ids("\nA.") != processor.tokenizer.unk_token_id
    ids = processor.tokenizer.apply_chat_template([{"role": "user", "content": "Which option says kite?"}],
                                                  add_generation_prompt=True, return_tensors="pt")
    ids = ids["input_ids"] if not torch.is_tensor(ids) else ids
    out = model.generate(input_ids=ids, max_new_tokens=3, do_sample=False)
    assert out.shape[1] > ids.shape[1] and all(torch.isfinite(p).all() for p in model.parameters())

    write_card(tmp_path, {**summary, "total_wall_s": 1.0, "cpu_s": 1.0}, n=1, k=1)
    card = (tmp_path / "MODEL_CARD.md").read_text()
    assert "| letters | tiny_vlm_echo 1 | 0.002 | 2 (2) | its steps |" in card
    assert "| captions | copy patterns, caption 1 | 0.001 | 2 (2) | its steps |" in card
    assert card.count("s (fast path) |") == 4  # `fast`: every stage on it


def _language_model_io(model) -> tuple[torch.Tensor, torch.Tensor]:
    """The language model's output on fixed inputs, and the gradient it sends back to them."""
    embeds = torch.linspace(-1, 1, 2 * 12 * 32).reshape(2, 12, 32).requires_grad_(True)
    out = model.model.language_model(inputs_embeds=embeds, use_cache=False)[0]
    out.square().sum().backward()
    model.zero_grad(set_to_none=True)
    return out.detach(), embeds.grad


@pytest.mark.slow
def test_the_compiled_language_model_computes_what_the_eager_one_does_and_saves_the_same_keys(processor):
    torch._dynamo.reset()
    model = build_model(TINY, processor.tokenizer, seed=0).train()
    keys, (out, grad) = list(model.state_dict()), _language_model_io(model)
    assert compile_language_model(model) is None
    compiled_out, compiled_grad = _language_model_io(model)
    # float32 sums in another order (inductor fuses them): errors scale with the values, about 1e-5 of the
    # largest gradient on some CPUs, where a wrong compiled graph differs by the values themselves
    for eager, compiled in ((out, compiled_out), (grad, compiled_grad)):
        torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-4 * eager.abs().max().item())
    assert list(model.state_dict()) == keys  # compiled in place: the checkpoint is a plain LLaVA one


@pytest.mark.slow
def test_where_it_cannot_compile_the_model_stays_eager_and_the_reason_is_given(processor, monkeypatch):
    torch._dynamo.reset()
    monkeypatch.setattr(torch._inductor.config.cpp, "cxx", ("/nonexistent/c++",))
    model = build_model(TINY, processor.tokenizer, seed=0).train()
    out, grad = _language_model_io(model)
    why_not = compile_language_model(model)
    assert why_not and "Error" in why_not.split(":")[0]
    assert model.model.language_model._compiled_call_impl is None
    again, again_grad = _language_model_io(model)
    assert torch.equal(out, again) and torch.equal(grad, again_grad)


def _quick(**overrides) -> TrainConfig:
    """A tiny run of one task stage, on the default (eager) path: the fast path's compiling costs more
    than these runs (the tests that need it ask for it)."""
    one_stage = [Stage("tasks", 2, 1e-3, sets={"synthetic_mcq": 1.0, echo.NAME: 1.0})]
    base = dict(procs=1, threads=1, stages=one_stage, fast=False,
                batch_size=4, max_branches=2, n_per_set=6, vocab_size=600, warmup=2, side_batch=0, spec=TINY)
    return TrainConfig(**{**base, **overrides})


@pytest.mark.slow
def test_a_run_from_init_starts_from_the_saved_weights_and_their_tokenizer(tmp_path, monkeypatch):
    monkeypatch.setenv("FP_TINY_VLM_DTYPE", "float32")
    before = train(_quick(), tmp_path / "first")
    no_steps = [Stage("tasks", 0, 1e-3, sets={"synthetic_mcq": 1.0})]
    log = train(_quick(init=str(tmp_path / "first"), stages=no_steps, vocab_size=500), tmp_path / "resumed")
    # the log (and so the card) describes the model: the first run's stages, then this one's, totals added up
    assert [st["name"] for st in log["stages"]] == [*(st["name"] for st in before["stages"]), "tasks"]
    assert log["steps"] == before["steps"] and log["replies_seen"] == before["replies_seen"]
    assert log["total_wall_s"] > before["total_wall_s"] and len(log["runs"]) == 2
    assert json.loads((tmp_path / "resumed" / "training_log.json").read_text())["runs"] == log["runs"]
    first, resumed = (LlavaForConditionalGeneration.from_pretrained(tmp_path / name, dtype=torch.float32)
                      .state_dict() for name in ("first", "resumed"))
    assert first.keys() == resumed.keys() and all(torch.equal(first[k], resumed[k]) for k in first)
    assert (LlavaProcessor.from_pretrained(tmp_path / "resumed").tokenizer.get_vocab()
            == LlavaProcessor.from_pretrained(tmp_path / "first").tokenizer.get_vocab())


@pytest.mark.slow  # over 2 s (measured in make test-fast, 2026-12-05)
def test_a_stage_with_its_own_data_seed_and_a_fresh_optimiser_trains_the_same_from_the_checkpoint_before(
        tmp_path, monkeypatch):
    """What lets a stage appended to a long curriculum be measured from the previous stage's checkpoint
    (`--init`) and still be what the whole run trains."""
    monkeypatch.setenv("FP_TINY_VLM_DTYPE", "float32")
    first = Stage("first", 2, 1e-3, sets={"synthetic_mcq": 1.0})
    last = Stage("last", 2, 1e-3, sets={"synthetic_mcq": 1.0, echo.NAME: 1.0}, data_seed=7, fresh_optimizer=True)
    train(_quick(stages=[first, last], stage_checkpoints=str(tmp_path / "stages")), tmp_path / "whole")
    train(_quick(stages=[last], init=str(tmp_path / "stages/0-first")), tmp_path / "continued")
    # without them, the continued stage draws other data (its seed follows its position) and no momentum
    train(_quick(stages=[replace(last, data_seed=None, fresh_optimizer=False)], init=str(tmp_path / "stages/0-first")),
          tmp_path / "positional")
    whole, continued, positional = (
        LlavaForConditionalGeneration.from_pretrained(tmp_path / name, dtype=torch.float32).state_dict()
        for name in ("whole", "continued", "positional"))
    assert all(torch.equal(whole[k], continued[k]) for k in whole)
    assert not all(torch.equal(whole[k], positional[k]) for k in whole)


@pytest.mark.slow
def test_a_stage_marked_fast_trains_as_a_fast_run_from_the_checkpoint_before_it(tmp_path, monkeypatch):
    """`Stage.fast` puts one stage of a curriculum on the fast path (`TrainConfig.fast` puts them all):
    the stages before it train on the default path, and it trains as a `--fast` run from their checkpoint."""
    monkeypatch.setenv("FP_TINY_VLM_DTYPE", "float32")
    first = Stage("first", 2, 1e-3, sets={"synthetic_mcq": 1.0})
    last = Stage("last", 2, 1e-3, sets={"synthetic_mcq": 1.0, echo.NAME: 1.0}, data_seed=7, fresh_optimizer=True)
    log = train(_quick(stages=[first, replace(last, fast=True)], stage_checkpoints=str(tmp_path / "stages")),
                tmp_path / "mixed")
    assert [st["fast"] for st in log["stages"]] == [False, True]
    train(_quick(stages=[first]), tmp_path / "default")
    train(_quick(stages=[last], fast=True, init=str(tmp_path / "stages/0-first")), tmp_path / "continued")
    train(_quick(stages=[last], init=str(tmp_path / "stages/0-first")), tmp_path / "eager")
    mixed, default, continued, eager, before = (
        LlavaForConditionalGeneration.from_pretrained(path, dtype=torch.float32).state_dict()
        for path in (tmp_path / "mixed", tmp_path / "default", tmp_path / "continued", tmp_path / "eager",
                     tmp_path / "stages/0-first"))
    assert all(torch.equal(before[k], default[k]) for k in default)
    assert all(torch.equal(mixed[k], continued[k]) for k in mixed)
    # not vacuous: the default path from the same checkpoint rounds differently
    assert not all(torch.equal(mixed[k], eager[k]) for k in mixed)
    assert max(float((mixed[k] - eager[k]).abs().max()) for k in mixed) < 1e-3


@pytest.mark.slow
def test_two_processes_take_the_same_steps_as_one(tmp_path, monkeypatch):
    """Each process renders its share of the examples, the batches are cut as one process would cut them,
    and each process's loss is weighted by its share of the batch's replies; with Muon each process
    orthogonalises half the matrices and shares them: the same examples, and the same weights up to
    float rounding. Muon's run holds AdamW's too (it steps the embeddings, norms and biases, whose gradients are
    all-reduced with the matrices'), so AdamW alone, whose run was the same code less the sharing, has no run of
    its own (8 s of two processes)."""
    monkeypatch.setenv("FP_TINY_VLM_DTYPE", "float32")
    one = train(_quick(optimizer="muon"), tmp_path / "one")
    tiny_vlm_pool.share_with_workers(tmp_path, monkeypatch)  # the items `one` loaded, for both processes
    two = train(replace(_quick(optimizer="muon"), procs=2), tmp_path / "two")
    for key in ("steps", "replies_seen", "tokens_seen", "answer_tokens_seen"):
        assert one[key] == two[key] > 0, key
    first, second = (LlavaForConditionalGeneration.from_pretrained(tmp_path / name, dtype=torch.float32)
                     .state_dict() for name in ("one", "two"))
    worst = max(float((first[k] - second[k]).abs().max()) for k in first)
    assert worst < 1e-4, f"largest weight difference {worst}"  # an unweighted mean of means: ~2e-3


def test_stage_checkpoints_keep_the_model_after_each_stage_and_the_last_is_the_saved_model(tmp_path,
                                                                                             monkeypatch):
    monkeypatch.setenv("FP_TINY_VLM_DTYPE", "float32")
    two = [Stage("first", 1, 1e-3, sets={"synthetic_mcq": 1.0}),
           Stage("second", 1, 1e-3, patterns={"caption": 1.0})]
    train(_quick(stages=two, stage_checkpoints=str(tmp_path / "stages")), tmp_path / "model")
    assert sorted(p.name for p in (tmp_path / "stages").iterdir()) == ["0-first", "1-second"]
    paths = (tmp_path / "stages/0-first", tmp_path / "stages/1-second", tmp_path / "model")
    first, second, final = (LlavaForConditionalGeneration.from_pretrained(path, dtype=torch.float32).state_dict()
                            for path in paths)
    assert all(torch.equal(second[k], final[k]) for k in final)
    assert not all(torch.equal(first[k], final[k]) for k in final)  # the second stage trained on
    assert LlavaProcessor.from_pretrained(tmp_path / "stages/0-first").tokenizer.get_vocab()


def test_shrink_and_perturb_mixes_in_a_fresh_model_on_the_language_model_layers_only(tmp_path):
    train(_quick(stages=[Stage("t", 0, 1e-3, sets={"synthetic_mcq": 1.0})]), tmp_path)
    tokenizer = LlavaProcessor.from_pretrained(tmp_path).tokenizer
    model, fresh = build_model(TINY, tokenizer, seed=1), build_model(TINY, tokenizer, seed=2)
    before = {k: v.clone() for k, v in model.named_parameters()}
    changed = shrink_and_perturb(model, fresh, 0.5, 0.25)
    after, new = dict(model.named_parameters()), dict(fresh.named_parameters())
    mixed = [k for k in after if "language_model.layers." in k and after[k].ndim >= 2]
    assert changed == len(mixed) > 0
    for k in after:
        expected = 0.5 * before[k] + 0.25 * new[k] if k in mixed else before[k]
        assert torch.allclose(after[k], expected), k
    assert any("vision_tower" in k for k in after) and any("embed_tokens" in k for k in after)


class Attempts:
    """A stage whose attempts reach the given levels: the 'model' is the list of attempts trained into it."""

    def __init__(self, levels, stop_at=None, gave_up=()):
        self.levels, self.stop_at, self.gave_up, self.model = levels, stop_at, gave_up, []

    def attempt(self, number):
        self.model = [*self.model, number]
        stopped = "until" if number == self.stop_at else "gave up" if number in self.gave_up else "steps"
        return {"stopped_by": stopped, "level": self.levels[number]}

    def run(self, retries):
        return run_attempts(retries, self.attempt, lambda: list(self.model), self.restore)

    def restore(self, state):
        self.model = list(state)


def test_each_attempt_starts_from_the_stage_start_and_the_first_to_stop_early_is_kept():
    stage = Attempts([0.3, 0.9, 0.5], stop_at=2)
    result = stage.run(retries=2)
    assert stage.model == [2]  # not [0, 1, 2]: restored before each attempt
    assert (result["attempts"], result["kept_attempt"], result["attempt_levels"]) == (3, 2, [0.3, 0.9, 0.5])


def test_when_no_attempt_stops_early_the_best_one_is_kept_not_the_last():
    stage = Attempts([0.3, 0.9, 0.5])
    result = stage.run(retries=2)
    assert stage.model == [1] and result["kept_attempt"] == 1 and result["level"] == 0.9
    rising = Attempts([0.3, 0.5, 0.9])
    assert rising.run(retries=2)["kept_attempt"] == 2 and rising.model == [2]
    tie = Attempts([0.5, 0.5])  # an equal later attempt does not replace the earlier one
    assert tie.run(retries=1)["kept_attempt"] == 0 and tie.model == [0]


def test_an_attempt_that_gives_up_is_retried_like_one_that_ran_out_of_steps():
    stage = Attempts([0.2, 0.9, 0.3], gave_up=(0, 2))
    result = stage.run(retries=2)
    assert result["attempts"] == 3 and result["kept_attempt"] == 1 and stage.model == [1]
    learnt = Attempts([0.2, 0.96], stop_at=1, gave_up=(0,))
    assert learnt.run(retries=3)["attempts"] == 2 and learnt.model == [1]


def test_every_attempt_restores_the_same_start_weights_and_optimiser_moments():
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)

    def steps(n):
        for _ in range(n):
            model(torch.ones(1, 3)).square().sum().backward()
            opt.step()
            opt.zero_grad()

    steps(2)
    start = snapshot_training(model, opt)
    moments = [opt.state_dict()["state"][0]["exp_avg"].clone()]
    for length in (5, 3):  # two attempts of different lengths, each from the start
        restore_training(model, opt, start)
        moments.append(opt.state_dict()["state"][0]["exp_avg"].clone())
        steps(length)
    restore_training(model, opt, start)  # the third attempt's start: the same, whatever came before
    assert all(torch.equal(m, moments[0]) for m in moments[1:])
    assert torch.equal(opt.state_dict()["state"][0]["exp_avg"], moments[0])
    assert torch.equal(model.weight, start[0]["weight"])


def test_a_stage_without_retries_runs_once():
    stage = Attempts([0.1])
    assert stage.run(retries=0) == {"stopped_by": "steps", "level": 0.1, "attempts": 1,
                                    "attempt_levels": [0.1], "kept_attempt": 0}
    assert stage.model == [0]


@pytest.mark.slow
def test_an_attempt_still_below_give_up_below_at_give_up_at_stops_there(tmp_path):
    hopeless = Stage("tasks", 120, 1e-3, sets={"synthetic_mcq": 1.0}, until=1.0, retries=1,
                     give_up_at=50, give_up_below=1.0)  # the answers are checked every 50 steps
    log = train(_quick(stages=[hopeless], batch_size=2), tmp_path / "gave_up")
    stage = log["stages"][0]
    assert stage["stopped_by"] == "gave up" and stage["steps_done"] == 50
    assert stage["attempts"] == 2 and log["task_steps"] == 2 * 50
    patient = train(_quick(stages=[replace(hopeless, give_up_at=0, steps=60, retries=0)], batch_size=2),
                    tmp_path / "patient")
    assert patient["stages"][0]["stopped_by"] == "steps" and patient["stages"][0]["steps_done"] == 60


def test_a_stage_that_does_not_reach_until_starts_again_from_its_start_with_new_data(tmp_path, monkeypatch):
    monkeypatch.setenv("FP_TINY_VLM_DTYPE", "float32")
    unreachable = Stage("tasks", 2, 1e-3, sets={"synthetic_mcq": 1.0}, until=1.0, retries=2)  # checked at 50
    log = train(_quick(stages=[unreachable]), tmp_path / "retried")
    assert log["stages"][0]["attempts"] == 3 and log["stages"][0]["stopped_by"] == "steps"
    assert log["task_steps"] == 3 * 2 and log["steps"] == 2  # the kept attempt's steps
    once = train(_quick(stages=[replace(unreachable, retries=0)]), tmp_path / "once")
    assert once["stages"][0]["attempts"] == 1
    train(_quick(stages=[replace(unreachable, steps=0, retries=0)]), tmp_path / "start")
    start, retried, single = (LlavaForConditionalGeneration.from_pretrained(tmp_path / name, dtype=torch.float32)
                              .state_dict() for name in ("start", "retried", "once"))

    def moved(state):
        return sum(float((state[k] - start[k]).norm()) for k in start)

    # restored before each attempt, the kept model is 2 Adam steps from the start, not 6
    assert 0 < moved(retried) < 1.5 * moved(single)
    kept = log["stages"][0]["kept_attempt"]
    assert log["stages"][0]["level"] == max(log["stages"][0]["attempt_levels"])
    # the first attempt draws the same data as `once`; a later one other data
    assert all(torch.equal(retried[k], single[k]) for k in single) == (kept == 0)
