"""MiniGPT-4's checkpoint layout (upstream key names) mapped onto transformers' BLIP-2, checked on tiny copies."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hf_test_helpers import image_ref, prompt_of

from facet_probe.runners.hf.blip2 import MiniGPT4Runner
from facet_probe.runners.hf.minigpt4_weights import MappingError, build_folder, main, map_minigpt4_state
from facet_probe_dev.testing.tiny_blip2 import NUM_QUERY_TOKENS, _parts

ROOT = Path(__file__).resolve().parents[2]


def _upstream(hf: dict[str, torch.Tensor], n_vision: int, n_qformer: int) -> dict[str, torch.Tensor]:
    """The ViT + Q-Former of `hf` under MiniGPT-4's own names (minigpt4/models/eva_vit.py, Qformer.py, as LAVIS's
    blip2_pretrained_flant5xxl.pth holds them), plus the parts MiniGPT-4 deletes and the T5 it ignores."""
    v, d = "vision_model.", hf["vision_model.embeddings.class_embedding"].shape[-1]
    up = {"visual_encoder.cls_token": hf[v + "embeddings.class_embedding"],
          "visual_encoder.pos_embed": hf[v + "embeddings.position_embedding"],
          "visual_encoder.patch_embed.proj.weight": hf[v + "embeddings.patch_embedding.weight"],
          "visual_encoder.patch_embed.proj.bias": hf[v + "embeddings.patch_embedding.bias"],
          "ln_vision.weight": hf[v + "post_layernorm.weight"], "ln_vision.bias": hf[v + "post_layernorm.bias"],
          "query_tokens": hf["query_tokens"],
          "Qformer.bert.embeddings.LayerNorm.weight": hf["qformer.layernorm.weight"],
          "Qformer.bert.embeddings.LayerNorm.bias": hf["qformer.layernorm.bias"],
          "Qformer.bert.embeddings.word_embeddings.weight": torch.randn(30523, 32),
          "Qformer.bert.embeddings.position_embeddings.weight": torch.randn(512, 32),
          "Qformer.bert.embeddings.position_ids": torch.arange(512)[None],
          "Qformer.cls.predictions.bias": torch.randn(30523), "t5_proj.weight": torch.randn(8, 32),
          "t5_model.shared.weight": torch.randn(8, 8)}
    for i in range(n_vision):
        src, dst = f"{v}encoder.layers.{i}.", f"visual_encoder.blocks.{i}."
        for ours, theirs in (("layer_norm1", "norm1"), ("layer_norm2", "norm2"), ("mlp.fc1", "mlp.fc1"),
                             ("mlp.fc2", "mlp.fc2"), ("self_attn.projection", "attn.proj")):
            up[f"{dst}{theirs}.weight"], up[f"{dst}{theirs}.bias"] = hf[f"{src}{ours}.weight"], hf[f"{src}{ours}.bias"]
        up[dst + "attn.qkv.weight"] = hf[src + "self_attn.qkv.weight"]
        bias = hf[src + "self_attn.qkv.bias"]
        up[dst + "attn.q_bias"], up[dst + "attn.v_bias"] = bias[:d], bias[2 * d:]
    for i in range(n_qformer):
        src, dst = f"qformer.encoder.layer.{i}.", f"Qformer.bert.encoder.layer.{i}."
        for k, t in hf.items():
            if k.startswith(src):
                rest = k[len(src):].replace("attention.attention.", "attention.self.")
                up[dst + rest] = t  # also crossattention.attention. -> crossattention.self.
        up[dst + "intermediate.dense.weight"] = torch.randn(64, 32)  # the text FFN MiniGPT-4 deletes
        up[dst + "output.dense.weight"] = torch.randn(32, 64)
    return up


@pytest.fixture(scope="module")
def minigpt4_files(tmp_path_factory):
    """A tiny BLIP-2 (Llama LM, `<unk>` as image token) and MiniGPT-4's three files made from it."""
    from transformers import Blip2Config, Blip2ForConditionalGeneration

    root = tmp_path_factory.mktemp("minigpt4")
    torch.manual_seed(0)
    tok, vision, qformer, text = _parts()
    direct = Blip2ForConditionalGeneration(Blip2Config(
        vision_config=vision, qformer_config=qformer, text_config=text, num_query_tokens=NUM_QUERY_TOKENS,
        image_token_index=tok.unk_token_id)).eval()
    with torch.no_grad():  # EVA's q / v biases are learned, its k bias is zero
        for layer in direct.vision_model.encoder.layers:
            d = layer.self_attn.embed_dim
            layer.self_attn.qkv.bias.copy_(torch.cat([torch.randn(d), torch.zeros(d), torch.randn(d)]))
    hf = {k: v.clone() for k, v in direct.state_dict().items()}
    (vicuna := root / "vicuna").mkdir()
    direct.language_model.save_pretrained(vicuna)
    tok.save_pretrained(vicuna)
    torch.save({"model": _upstream(hf, vision["num_hidden_layers"], qformer["num_hidden_layers"])},
               root / "blip2_pretrained_flant5xxl.pth")
    torch.save({"model": {"llama_proj.weight": hf["language_projection.weight"],
                          "llama_proj.bias": hf["language_projection.bias"]}, "optimizer": None, "epoch": 4},
               root / "pretrained_minigpt4_7b.pth")
    return root, direct, vision, qformer


def test_minigpt4s_checkpoints_map_onto_blip2_and_give_the_direct_builds_outputs(minigpt4_files):
    root, direct, vision, qformer = minigpt4_files
    out = build_folder(root / "pretrained_minigpt4_7b.pth", root / "blip2_pretrained_flant5xxl.pth", root / "vicuna",
                       root / "out", vision_config=vision, qformer_config=qformer, image_size=32)
    runner = MiniGPT4Runner(name="minigpt4_vicuna_7b", model_id="Vision-CAIR/MiniGPT-4", local_path=str(out),
                            dtype="float32")
    runner.check_ready()
    loaded = runner.model.state_dict()
    assert set(loaded) == set(direct.state_dict())
    assert all(torch.equal(loaded[k], v) for k, v in direct.state_dict().items())  # every tensor in its place
    assert runner.model.config.image_token_id == runner.tokenizer.unk_token_id  # Vicuna's vocabulary untouched
    assert runner.model.vision_model.post_layernorm.eps == 1e-5  # MiniGPT-4's ln_vision
    enc = runner.encode(prompt_of("Which animal is red?", image_ref(48, 40, 1), "A cat B dog"))
    pixels = runner.pixel_inputs(enc.images01)
    with torch.no_grad():
        direct.vision_model.post_layernorm.eps = 1e-5
        expected = direct(input_ids=enc.input_ids[None], **pixels).logits[0]
        torch.testing.assert_close(runner.forward_logits(enc, pixels, list(range(len(enc)))), expected)


def test_keys_outside_minigpt4s_structure_are_refused_by_name():
    with pytest.raises(MappingError, match=r"'visual_encoder.blocks.0.gamma_1' has no BLIP-2 counterpart"):
        map_minigpt4_state({"visual_encoder.blocks.0.gamma_1": torch.ones(2)})
    with pytest.raises(MappingError, match="'llama_proj2.weight' is not part of MiniGPT-4's BLIP-2 structure"):
        map_minigpt4_state({"llama_proj2.weight": torch.ones(2)})
    with pytest.raises(MappingError, match="has a q_bias but no v_bias"):
        map_minigpt4_state({"visual_encoder.blocks.3.attn.q_bias": torch.ones(2)})


def test_the_command_explains_itself_and_refuses_missing_files(tmp_path, capsys, minigpt4_files):
    proc = subprocess.run([sys.executable, "-m", "facet_probe.runners.hf.minigpt4_weights", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "--minigpt4" in proc.stdout and "blip2_pretrained_flant5xxl.pth" in proc.stdout
    root = minigpt4_files[0]
    assert main(["--minigpt4", str(tmp_path / "nope.pth"), "--blip2", str(root / "blip2_pretrained_flant5xxl.pth"),
                 "--vicuna", str(root / "vicuna"), "--out", str(tmp_path / "o")]) == 2
    assert "--minigpt4" in capsys.readouterr().err and not (tmp_path / "o").exists()
    # the BLIP-2 file given where MiniGPT-4's belongs: one message, no traceback, nothing written
    assert main(["--minigpt4", str(root / "blip2_pretrained_flant5xxl.pth"), "--blip2",
                 str(root / "blip2_pretrained_flant5xxl.pth"), "--vicuna", str(root / "vicuna"),
                 "--out", str(tmp_path / "o")]) == 2
    assert "holds no llama_proj.weight" in capsys.readouterr().err and not (tmp_path / "o").exists()
