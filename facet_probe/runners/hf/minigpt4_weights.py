"""MiniGPT-4's own published weights onto transformers' `Blip2ForConditionalGeneration` (text model: Llama).

MiniGPT-4 (Vision-CAIR/MiniGPT-4, `minigpt4/models/minigpt4.py`) is BLIP-2's frozen EVA ViT-g (`visual_encoder`,
`ln_vision`) and Q-Former (`Qformer`, `query_tokens`, loaded from LAVIS's `blip2_pretrained_flant5xxl.pth`), one
linear `llama_proj` (its own checkpoint, `pretrained_minigpt4*.pth`, holds only that) and a Vicuna v0 LLM
(`llama_model`). `map_minigpt4_state` renames a state dict with those upstream names into the BLIP-2 layout;
the command assembles the pieces from their files and writes a folder `model=minigpt4_vicuna_7b` loads:

    python -m facet_probe.runners.hf.minigpt4_weights --minigpt4 pretrained_minigpt4_7b.pth \\
        --blip2 blip2_pretrained_flant5xxl.pth --vicuna <Vicuna-7B v0 HF folder> --out <folder>

What maps and what does not: docs/victims.md.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

#: upstream module prefixes -> BLIP-2 prefixes (plain renames)
_PREFIXES = (
    ("visual_encoder.cls_token", "vision_model.embeddings.class_embedding"),
    ("visual_encoder.pos_embed", "vision_model.embeddings.position_embedding"),
    ("visual_encoder.patch_embed.proj.", "vision_model.embeddings.patch_embedding."),
    ("ln_vision.", "vision_model.post_layernorm."),
    ("Qformer.bert.embeddings.LayerNorm.", "qformer.layernorm."),
    ("query_tokens", "query_tokens"),
    ("llama_proj.", "language_projection."),
    ("llama_model.", "language_model."),
)
#: inside an EVA ViT block (`visual_encoder.blocks.{i}.`): upstream -> BLIP-2 (`vision_model.encoder.layers.{i}.`)
_VIT_BLOCK = (("norm1.", "layer_norm1."), ("norm2.", "layer_norm2."), ("attn.qkv.weight", "self_attn.qkv.weight"),
              ("attn.proj.", "self_attn.projection."), ("mlp.fc1.", "mlp.fc1."), ("mlp.fc2.", "mlp.fc2."))
#: MiniGPT-4 deletes the Q-Former's text parts (`init_Qformer`: cls, word/position embeddings, each layer's
#: text FFN `intermediate` / `output`); BLIP-2's Q-Former in transformers has none of them either
_DROPPED = re.compile(r"^Qformer\.(cls\.|bert\.embeddings\.(word_embeddings|position_embeddings|position_ids)"
                      r"|bert\.encoder\.layer\.\d+\.(intermediate|output)\.)")
_BLOCK = re.compile(r"^visual_encoder\.blocks\.(\d+)\.(.+)$")
_QLAYER = re.compile(r"^Qformer\.bert\.encoder\.layer\.(\d+)\.(.+)$")


class MappingError(ValueError):
    """A checkpoint key that has no place in the BLIP-2 layout (or a place left empty)."""


def _qformer_key(layer: str, rest: str) -> str:
    """LAVIS BERT names -> transformers' Blip2QFormer names: `{attention,crossattention}.self.` -> `.attention.`."""
    rest = re.sub(r"^(attention|crossattention)\.self\.", r"\1.attention.", rest)
    return f"qformer.encoder.layer.{layer}.{rest}"


def _rename(key: str) -> str | None:
    """The BLIP-2 name of one upstream key; None for the q/v biases (fused separately); MappingError if unknown."""
    if m := _BLOCK.match(key):
        i, rest = m.groups()
        if rest in ("attn.q_bias", "attn.v_bias"):
            return None
        for old, new in _VIT_BLOCK:
            if rest.startswith(old):
                return f"vision_model.encoder.layers.{i}.{new}{rest[len(old):]}"
        raise MappingError(f"EVA ViT block key {key!r} has no BLIP-2 counterpart (gamma/rel-pos variants do not map)")
    if m := _QLAYER.match(key):
        return _qformer_key(*m.groups())
    for old, new in _PREFIXES:
        if key == old or (old.endswith(".") and key.startswith(old)):
            return new + key[len(old):]
    raise MappingError(f"{key!r} is not part of MiniGPT-4's BLIP-2 structure (ViT, Q-Former, llama_proj, LLM)")


def map_minigpt4_state(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A MiniGPT-4 state dict (upstream names) -> a `Blip2ForConditionalGeneration` state dict. The EVA ViT's
    separate q/v biases become the fused qkv bias (k's is zero, as in EVA); the text parts MiniGPT-4 deletes
    from its Q-Former are dropped; any other unknown key is a `MappingError`."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if _DROPPED.match(key):
            continue
        new = _rename(key)
        if new is not None:
            out[new] = value
    for key in state:
        if (m := _BLOCK.match(key)) and m.group(2) == "attn.q_bias":
            i = m.group(1)
            q, v = state[key], state.get(f"visual_encoder.blocks.{i}.attn.v_bias")
            if v is None:
                raise MappingError(f"visual_encoder.blocks.{i} has a q_bias but no v_bias")
            out[f"vision_model.encoder.layers.{i}.self_attn.qkv.bias"] = torch.cat([q, torch.zeros_like(v), v])
    return out


def check_complete(mapped: Mapping[str, torch.Tensor], expected: Iterable[str]) -> None:
    """Every parameter of the target model is filled and nothing is left over (one message listing both)."""
    expected = set(expected)
    missing, extra = sorted(expected - set(mapped)), sorted(set(mapped) - expected)
    if missing or extra:
        raise MappingError(f"the mapped checkpoint does not fit the BLIP-2 model: {len(missing)} missing "
                           f"({', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}), {len(extra)} unexpected "
                           f"({', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''})")


# --- the command: upstream files -> one state dict -> a save_pretrained folder ----------------------------------

#: EVA ViT-g as MiniGPT-4 builds it (`create_eva_vit_g`: 224 px, patch 14, width 1408, 39 blocks, 16 heads,
#: mlp_ratio 4.3637, LayerNorm eps 1e-6) and BERT-base Q-Former (cross-attention every 2nd layer, 32 queries)
EVA_VIT_G: dict[str, Any] = dict(hidden_size=1408, intermediate_size=6144, num_hidden_layers=39, num_attention_heads=16,
                 image_size=224, patch_size=14, layer_norm_eps=1e-6, qkv_bias=True, hidden_act="gelu")
QFORMER_BERT_BASE: dict[str, Any] = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                         cross_attention_frequency=2, encoder_hidden_size=1408, layer_norm_eps=1e-12)

#: the tensors of one block of MiniGPT-4's `VisionTransformer` (minigpt4/models/eva_vit.py: `Block` with
#: `qkv_bias=True`, no layer scale, no relative positions) and of its stem
EVA_BLOCK_KEYS = ("norm1.weight", "norm1.bias", "attn.q_bias", "attn.v_bias", "attn.qkv.weight", "attn.proj.weight",
                  "attn.proj.bias", "norm2.weight", "norm2.bias", "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight",
                  "mlp.fc2.bias")
EVA_STEM_KEYS = ("cls_token", "pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias")
#: EVA-CLIP-g's final LayerNorm and projection head, which MiniGPT-4's ViT leaves out (commented out in eva_vit.py)
EVA_HEAD_KEYS = ("norm.weight", "norm.bias", "head.weight", "head.bias")


def eva_vit_keys(depth: int) -> tuple[set[str], set[str]]:
    """(the keys MiniGPT-4's `depth`-block EVA ViT loads from `eva_vit_g.pth`, the keys of that file it ignores
    under `load_state_dict(strict=False)`: the block after its last, i.e. the file's 40th of EVA-CLIP-g's 40, as
    BLIP-2 reads the second-last layer's features, and the final norm and head)."""
    loaded = {*EVA_STEM_KEYS, *(f"blocks.{i}.{k}" for i in range(depth) for k in EVA_BLOCK_KEYS)}
    return loaded, {*(f"blocks.{depth}.{k}" for k in EVA_BLOCK_KEYS), *EVA_HEAD_KEYS}


def _listed(keys: list[str]) -> str:
    return ", ".join(keys[:5]) + (f" ... ({len(keys)} in all)" if len(keys) > 5 else "")


def eva_vit_state(state: Mapping[str, torch.Tensor], depth: int, source: object = "eva_vit_g.pth"
                  ) -> dict[str, torch.Tensor]:
    """`state` (EVA-CLIP-g's vision tower, as `eva_vit_g.pth` holds it) without exactly the keys MiniGPT-4 ignores
    (`eva_vit_keys`); any other key it would not load, or one it needs and `state` lacks, is a `MappingError`."""
    loaded, ignored = eva_vit_keys(depth)
    unexpected, missing = sorted(set(state) - loaded - ignored), sorted(loaded - set(state))
    if unexpected or missing:
        found = ([f"unexpected {_listed(unexpected)}"] if unexpected else []) + (
            [f"missing {_listed(missing)}"] if missing else [])
        raise MappingError(f"{source} does not fit MiniGPT-4's {depth}-block EVA ViT ({'; '.join(found)}); only "
                           f"blocks.{depth}.* and {', '.join(EVA_HEAD_KEYS)} may be left over (MiniGPT-4 ignores them)")
    return {k: v for k, v in state.items() if k in loaded}


def _torch_state(path: Path) -> dict[str, torch.Tensor]:
    """A LAVIS / MiniGPT-4 `.pth` (its tensors under "model" when saved with the optimiser) or a safetensors file."""
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(path)
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    return ckpt.get("model", ckpt) if isinstance(ckpt, dict) else ckpt


def _folder_state(folder: Path) -> dict[str, torch.Tensor]:
    """All tensors of a save_pretrained folder (safetensors shards)."""
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise MappingError(f"{folder} has no .safetensors weights")
    return {k: v for f in files for k, v in load_file(f).items()}


def upstream_state(minigpt4: Path, blip2: Path, vicuna: Path, eva_vit: Path | None = None,
                   vit_depth: int = EVA_VIT_G["num_hidden_layers"]) -> dict[str, torch.Tensor]:
    """MiniGPT-4's model as its own module holds it: ViT (eva_vit_g.pth less the keys MiniGPT-4's `vit_depth`-block
    ViT ignores, then the BLIP-2 checkpoint over it, as MiniGPT-4 loads them), Q-Former + query tokens (BLIP-2
    checkpoint), `llama_proj` (MiniGPT-4's checkpoint), `llama_model.*` (the Vicuna folder). A BLIP-2 checkpoint
    in transformers' layout (a folder) is taken as is."""
    state: dict[str, torch.Tensor] = {}
    if eva_vit is not None:
        vit = eva_vit_state(_torch_state(eva_vit), vit_depth, eva_vit)
        state |= {f"visual_encoder.{k}": v for k, v in vit.items()}
    if not blip2.is_dir():
        keep = ("visual_encoder.", "ln_vision.", "Qformer.", "query_tokens")  # not its t5_proj / t5_model
        state |= {k: v for k, v in _torch_state(blip2).items() if k.startswith(keep)}
    proj = {k: v for k, v in _torch_state(minigpt4).items() if k.startswith("llama_proj.")}
    if set(proj) != {"llama_proj.weight", "llama_proj.bias"}:
        raise MappingError(f"{minigpt4} holds no llama_proj.weight / llama_proj.bias (is it MiniGPT-4's checkpoint?)")
    state |= proj
    state |= {f"llama_model.{k}": v for k, v in _folder_state(vicuna).items()}
    return state


def build_folder(minigpt4: Path, blip2: Path, vicuna: Path, out: Path, eva_vit: Path | None = None, *,
                 vision_config: Mapping | None = None, qformer_config: Mapping | None = None,
                 image_size: int = 224) -> Path:
    """Write a `Blip2ForConditionalGeneration` folder (weights, config, Vicuna's tokenizer, BLIP's image processor
    at `image_size`) holding MiniGPT-4's weights; the ViT and Q-Former shapes are MiniGPT-4's unless given (tiny
    copies). The image token is Vicuna's `<unk>`: the vocabulary and embeddings stay exactly Vicuna's."""
    from transformers import (
        AutoConfig,
        AutoTokenizer,
        Blip2Config,
        Blip2ForConditionalGeneration,
        GenerationConfig,
    )
    from transformers.models.blip import BlipImageProcessorPil

    text = AutoConfig.from_pretrained(vicuna)
    tokenizer = AutoTokenizer.from_pretrained(vicuna)
    if tokenizer.unk_token_id is None:
        raise MappingError(f"the tokenizer in {vicuna} has no <unk> token (Vicuna's is the image token here)")
    vision = dict(vision_config or EVA_VIT_G)
    mapped = map_minigpt4_state(upstream_state(minigpt4, blip2, vicuna, eva_vit, int(vision["num_hidden_layers"])))
    if blip2.is_dir():  # transformers' BLIP-2 layout already (e.g. Salesforce/blip2-flan-t5-xxl)
        keep = ("vision_model.", "qformer.", "query_tokens")
        mapped |= {k: v for k, v in _folder_state(blip2).items() if k.startswith(keep)}
    cfg = Blip2Config(vision_config=vision, qformer_config=dict(qformer_config or
                      QFORMER_BERT_BASE), text_config=text.to_dict(),
                      num_query_tokens=int(mapped["query_tokens"].shape[1]), image_token_index=tokenizer.unk_token_id)
    with torch.device("meta"):
        model = Blip2ForConditionalGeneration(cfg)
    check_complete(mapped, model.state_dict())
    model.load_state_dict(mapped, strict=True, assign=True)
    model.generation_config = GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # MiniGPT-4's blip2_image_eval: bicubic resize to a square, OpenAI CLIP mean / std
    BlipImageProcessorPil(size={"height": image_size, "width": image_size}).save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m facet_probe.runners.hf.minigpt4_weights",
                                     description="Write MiniGPT-4's published weights as a transformers BLIP-2 "
                                                 "folder (model=minigpt4_vicuna_7b model.local_path=<out>).")
    parser.add_argument("--minigpt4", type=Path, required=True,
                        help="MiniGPT-4's checkpoint, e.g. pretrained_minigpt4_7b.pth (holds llama_proj)")
    parser.add_argument("--blip2", type=Path, required=True,
                        help="the ViT + Q-Former MiniGPT-4 loads: LAVIS's blip2_pretrained_flant5xxl.pth, or a "
                             "transformers BLIP-2 folder converted from it (Salesforce/blip2-flan-t5-xxl)")
    parser.add_argument("--eva-vit", type=Path, default=None,
                        help="LAVIS's eva_vit_g.pth, loaded before --blip2 as MiniGPT-4 does (only needed when the "
                             "BLIP-2 .pth lacks visual_encoder.*); its 40th block and final norm / head are left "
                             "out, as MiniGPT-4's 39-block ViT leaves them")
    parser.add_argument("--vicuna", type=Path, required=True, help="Vicuna v0 in transformers' Llama layout "
                                                                   "(e.g. Vision-CAIR/vicuna-7b)")
    parser.add_argument("--out", type=Path, required=True, help="the folder to write")
    args = parser.parse_args(argv)
    for name in ("minigpt4", "blip2", "vicuna", "eva_vit"):
        if getattr(args, name) is not None and not getattr(args, name).exists():
            print(f"error: --{name.replace('_', '-')} {getattr(args, name)} does not exist", file=sys.stderr)
            return 2
    try:
        out = build_folder(args.minigpt4, args.blip2, args.vicuna, args.out, args.eva_vit)
    except MappingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out}: use model=minigpt4_vicuna_7b model.local_path={out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
