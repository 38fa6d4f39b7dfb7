"""The tiny VLM's optimisers: which parameters Muon takes, and the set behaving as one optimiser."""

from __future__ import annotations

import pytest
import torch

from facet_probe_dev.tiny_vlm.architecture import TinyVLMSpec, build_model
from facet_probe_dev.tiny_vlm.optim import build_optimizer, is_layer_matrix
from facet_probe_dev.tiny_vlm.train import parse_args, restore_training, snapshot_training

TINY = TinyVLMSpec(vision_hidden=32, vision_layers=1, vision_heads=2, text_hidden=32, text_layers=1,
                   text_heads=2, text_kv_heads=2, text_intermediate=64)


@pytest.fixture
def model(processor):
    return build_model(TINY, processor.tokenizer, seed=0)


def _step(model, opt, lr: float = 1e-2) -> None:
    for group in opt.param_groups:
        group["lr"] = lr
    ids = torch.arange(1, 9).unsqueeze(0)
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def test_muon_takes_the_layer_matrices_and_adamw_the_embeddings_norms_and_biases(model):
    opt = build_optimizer(model, "muon", weight_decay=0.01)
    muon, adamw = opt.optimizers
    assert isinstance(muon, torch.optim.Muon) and isinstance(adamw, torch.optim.AdamW)
    names = {id(p): n for n, p in model.named_parameters()}
    on_muon = {names[id(p)] for g in muon.param_groups for p in g["params"]}
    on_adamw = {names[id(p)] for g in adamw.param_groups for p in g["params"]}
    assert on_muon.isdisjoint(on_adamw) and on_muon | on_adamw == set(names.values())
    assert any(".self_attn.q_proj." in n for n in on_muon) and any(".mlp." in n for n in on_muon)
    assert any("multi_modal_projector" in n and n.endswith("weight") for n in on_muon)
    assert "model.language_model.embed_tokens.weight" in on_adamw  # tied to the output head
    assert any("patch_embedding" in n for n in on_adamw) and any("norm" in n for n in on_adamw)
    assert all(p.ndim == 2 for g in muon.param_groups for p in g["params"])


def test_is_layer_matrix_leaves_out_embeddings_the_head_and_vectors():
    matrix, vector = torch.nn.Parameter(torch.zeros(4, 4)), torch.nn.Parameter(torch.zeros(4))
    assert is_layer_matrix("model.language_model.layers.0.mlp.up_proj.weight", matrix)
    assert not is_layer_matrix("model.language_model.embed_tokens.weight", matrix)
    assert not is_layer_matrix("lm_head.weight", matrix)
    assert not is_layer_matrix("model.language_model.layers.0.input_layernorm.weight", vector)


def test_adamw_alone_keeps_weight_decay_off_the_embeddings_and_vectors(model):
    (adamw,) = build_optimizer(model, "adamw", weight_decay=0.05).optimizers
    decayed, plain = adamw.param_groups
    assert decayed["weight_decay"] == 0.05 and plain["weight_decay"] == 0.0
    assert all(p.ndim >= 2 for p in decayed["params"])
    assert any(p is model.model.language_model.embed_tokens.weight for p in plain["params"])


@pytest.mark.parametrize("kind", ["adamw", "muon"])
def test_each_optimizer_lowers_the_loss_and_sets_one_rate_everywhere(model, kind):
    opt = build_optimizer(model, kind, weight_decay=0.0)
    ids = torch.arange(1, 9).unsqueeze(0)
    before = model(input_ids=ids, labels=ids).loss.item()
    for _ in range(5):
        _step(model, opt, lr=3e-3)
    assert model(input_ids=ids, labels=ids).loss.item() < before
    assert {g["lr"] for g in opt.param_groups} == {3e-3}


def test_an_unknown_optimizer_is_refused_by_name(model):
    with pytest.raises(ValueError, match="unknown optimizer 'sgd'.*adamw, muon"):
        build_optimizer(model, "sgd", weight_decay=0.0)


def test_attempts_restore_both_optimizers_moments_and_reset_forgets_them(model):
    opt = build_optimizer(model, "muon", weight_decay=0.01)
    _step(model, opt)
    start = snapshot_training(model, opt)
    _step(model, opt)
    restore_training(model, opt, start)
    restored = opt.state_dict()
    assert all(torch.equal(a["state"][k][name], b["state"][k][name])
               for a, b in zip(restored, start[1], strict=True) for k in a["state"] for name in a["state"][k]
               if isinstance(a["state"][k][name], torch.Tensor))
    assert all(opt_state["state"] for opt_state in restored)
    opt.reset_state()
    assert not any(o.state for o in opt.optimizers)


def test_with_several_processes_each_runs_muon_on_its_share_and_clears_every_gradient(model):
    """Process 1 of 2 steps every other matrix; the others' gradients must not pile up between steps."""
    opt = build_optimizer(model, "muon", weight_decay=0.0, rank=1, world=2)
    mine, theirs = opt.owned[1], opt.owned[0]
    muon = opt.optimizers[0]
    assert [p for g in muon.param_groups for p in g["params"]] == mine
    assert len(mine) + len(theirs) == sum(is_layer_matrix(n, p) for n, p in model.named_parameters())
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_the_training_command_refuses_an_unknown_optimizer_before_it_starts(capsys):
    with pytest.raises(SystemExit) as stopped:
        parse_args(["--optimizer", "sgd"])
    assert stopped.value.code == 2
    assert "--optimizer 'sgd': choose one of adamw, muon" in capsys.readouterr().err
