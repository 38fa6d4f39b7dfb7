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


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
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


def _eva_files(root: Path, n_vision: int, extra: dict[str, torch.Tensor], drop: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """MiniGPT-4's ViT split out of the fixture's BLIP-2 file into an `eva_vit_g.pth` shaped like LAVIS's (EVA-CLIP-g's
    tower: one block more than MiniGPT-4 builds, its final norm and head), plus `extra` keys, less `drop`."""
    blip2 = torch.load(root / "blip2_pretrained_flant5xxl.pth", weights_only=True)["model"]
    eva = {k.removeprefix("visual_encoder."): v for k, v in blip2.items() if k.startswith("visual_encoder.")}
    eva |= {f"blocks.{n_vision}.{k.split('.', 2)[2]}": torch.randn_like(v) for k, v in eva.items()
            if k.startswith("blocks.0.")}  # the 40th block of 40
    width = eva["cls_token"].shape[-1]
    eva |= {"norm.weight": torch.ones(width), "norm.bias": torch.zeros(width), "head.weight": torch.randn(16, width),
            "head.bias": torch.zeros(16), **extra}
    for key in drop:
        del eva[key]
    folder = root / f"eva-{len(extra)}-{len(drop)}"
    folder.mkdir(exist_ok=True)
    torch.save(eva, folder / "eva_vit_g.pth")
    torch.save({"model": {k: v for k, v in blip2.items() if not k.startswith("visual_encoder.")}},
               folder / "blip2_no_vit.pth")
    return folder / "eva_vit_g.pth", folder / "blip2_no_vit.pth"


def test_eva_vit_g_loads_without_the_block_norm_and_head_minigpt4_ignores(minigpt4_files, tmp_path):
    """`--eva-vit`: MiniGPT-4 builds 39 of EVA-CLIP-g's 40 blocks and loads the file with strict=False; exactly the
    file's last block and its final norm / head are left out, and the model equals the direct build."""
    root, direct, vision, qformer = minigpt4_files
    eva, blip2 = _eva_files(root, vision["num_hidden_layers"], {})
    out = build_folder(root / "pretrained_minigpt4_7b.pth", blip2, root / "vicuna", tmp_path / "out", eva,
                       vision_config=vision, qformer_config=qformer, image_size=32)
    runner = MiniGPT4Runner(name="minigpt4_vicuna_7b", model_id="Vision-CAIR/MiniGPT-4", local_path=str(out),
                            dtype="float32")
    runner.check_ready()
    loaded = runner.model.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in direct.state_dict().items())


@pytest.mark.parametrize(("extra", "drop", "named"), [
    ({"fc_norm.weight": torch.ones(64)}, (), "unexpected fc_norm.weight"),  # EVA's mean-pooling norm: not MiniGPT-4's
    ({"blocks.0.attn.relative_position_bias_table": torch.zeros(4, 2)}, (),
     "unexpected blocks.0.attn.relative_position_bias_table"),
    ({}, ("blocks.1.attn.q_bias",), "missing blocks.1.attn.q_bias"),
])
def test_any_other_eva_vit_key_is_refused_in_one_line_naming_it(minigpt4_files, tmp_path, capsys, extra, drop,
                                                                named):
    root, _, vision, qformer = minigpt4_files
    eva, blip2 = _eva_files(root, vision["num_hidden_layers"], extra, drop)
    with pytest.raises(MappingError) as info:
        build_folder(root / "pretrained_minigpt4_7b.pth", blip2, root / "vicuna", tmp_path / "out", eva,
                     vision_config=vision, qformer_config=qformer, image_size=32)
    message = str(info.value)
    assert named in message and "\n" not in message and "2-block EVA ViT" in message
    assert "blocks.2.* and norm.weight, norm.bias, head.weight, head.bias may be left over" in message
    assert not (tmp_path / "out").exists()
    # the command (MiniGPT-4's 39-block ViT, which this tiny file does not fit either): one line, exit 2
    assert main(["--minigpt4", str(root / "pretrained_minigpt4_7b.pth"), "--blip2", str(blip2), "--vicuna",
                 str(root / "vicuna"), "--eva-vit", str(eva), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {eva} does not fit MiniGPT-4's 39-block EVA ViT") and err.count("\n") == 1
    assert "Traceback" not in err and not (tmp_path / "out").exists()
    assert main(["--minigpt4", str(root / "pretrained_minigpt4_7b.pth"), "--blip2", str(blip2), "--vicuna",
                 str(root / "vicuna"), "--eva-vit", str(tmp_path / "none.pth"), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"error: --eva-vit {tmp_path / 'none.pth'} does not exist\n"
