"""Tiny random BLIP-2 and InstructBLIP models (Llama text model), built offline and saved like hub checkpoints.

The shape of MiniGPT-4 / InstructBLIP-Vicuna at toy size: a BLIP-2 vision tower (32 px, 8 px patches, q/v
biases as in EVA ViT-g), a Q-Former with cross-attention every other layer and 4 query tokens, one linear
projection and a two-layer Llama. InstructBLIP adds the Q-Former's own BERT word-piece tokenizer (saved in
`qformer_tokenizer/`, as on the hub). `build_minigpt4` is MiniGPT-4's own folder layout (`minigpt4_weights`):
Vicuna's `<unk>` in each query slot, and a tokenizer that pads with `<unk>` as well. No chat template is saved
(the hub checkpoints have none), so the adapter's own conversation format is used. Random weights: gibberish
outputs, real code paths.
"""

from __future__ import annotations

from pathlib import Path

NUM_QUERY_TOKENS = 4
_LLAMA_SPECIALS = ["<unk>", "<s>", "</s>", "<pad>", "<image>"]


def _parts(specials: list[str] = _LLAMA_SPECIALS, pad: str = "<pad>"):
    """(tokenizer, vision, Q-Former and text config dicts) shared by the builders."""
    from facet_probe_dev.testing.tiny_models import _tokenizer  # lazily: tiny_models imports this module

    tok = _tokenizer(specials, eos="</s>", pad=pad, bos="<s>", template="", plain=("###",))
    # "<image>" is an ordinary special token, not a named `image_token` attribute: as on the hub, where
    # Blip2Processor looks the attribute up and otherwise uses (and adds) "<image>" itself
    tok.chat_template = None  # like Salesforce/instructblip-vicuna-7b: no chat template
    tok.unk_token = "<unk>"  # as Vicuna's (MiniGPT-4's folder uses it as the image token)
    vision = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2, image_size=32,
                  patch_size=8, qkv_bias=True)
    qformer = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                   encoder_hidden_size=64, cross_attention_frequency=2, max_position_embeddings=512)
    text = dict(model_type="llama", vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    return tok, vision, qformer, text


def _image_processor():
    from transformers.models.blip import BlipImageProcessorPil

    return BlipImageProcessorPil(size={"height": 32, "width": 32})  # bicubic, OpenAI CLIP mean/std (as BLIP-2)


def qformer_tokenizer():
    """A BERT word-piece tokenizer over the tiny corpus's words ([CLS] ... [SEP], lower-cased)."""
    from transformers import BertTokenizer

    from facet_probe_dev.testing.tiny_models import _WORDS

    words = sorted({w.lower() for w in _WORDS} | set(".,:()?!"))
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])}
    return BertTokenizer(vocab=vocab)


def build_blip2(out: Path) -> Path:
    """BLIP-2 with a Llama text model (MiniGPT-4's shape): ViT + Q-Former + linear projection + Llama."""
    from transformers import Blip2Config, Blip2ForConditionalGeneration

    from facet_probe_dev.testing.tiny_models import _save

    tok, vision, qformer, text = _parts()
    cfg = Blip2Config(vision_config=vision, qformer_config=qformer, text_config=text,
                      num_query_tokens=NUM_QUERY_TOKENS, image_token_index=tok.convert_tokens_to_ids("<image>"))
    model = Blip2ForConditionalGeneration(cfg).eval()
    return _save(model, tok, Path(out), image_processor=_image_processor(), eos_ids=[tok.eos_token_id])


def build_minigpt4(out: Path) -> Path:
    """MiniGPT-4 as `minigpt4_weights.build_folder` writes it: BLIP-2 + Llama whose query slots are Vicuna's own
    `<unk>` (no token added) and whose tokenizer pads with `<unk>` too, as Vicuna folders do (Vision-CAIR/vicuna's
    generation_config.json pads with id 0, `<unk>`; lmsys/vicuna-7b-v1.5's tokenizer pads with `<unk>`)."""
    from transformers import Blip2Config, Blip2ForConditionalGeneration

    from facet_probe_dev.testing.tiny_models import _save

    tok, vision, qformer, text = _parts(["<unk>", "<s>", "</s>"], pad="<unk>")
    cfg = Blip2Config(vision_config=vision, qformer_config=qformer, text_config=text,
                      num_query_tokens=NUM_QUERY_TOKENS, image_token_index=tok.unk_token_id)
    model = Blip2ForConditionalGeneration(cfg).eval()
    return _save(model, tok, Path(out), image_processor=_image_processor(), eos_ids=[tok.eos_token_id])


def build_instructblip(out: Path) -> Path:
    """InstructBLIP (Vicuna-style): BLIP-2 whose Q-Former also reads the instruction, with its BERT tokenizer."""
    from transformers import InstructBlipConfig, InstructBlipForConditionalGeneration

    from facet_probe_dev.testing.tiny_models import _save

    tok, vision, qformer, text = _parts()
    qtok = qformer_tokenizer()
    cfg = InstructBlipConfig(vision_config=vision, qformer_config={**qformer, "vocab_size": len(qtok),
                                                                   "pad_token_id": qtok.pad_token_id},
                             text_config=text, num_query_tokens=NUM_QUERY_TOKENS,
                             image_token_index=tok.convert_tokens_to_ids("<image>"))
    model = InstructBlipForConditionalGeneration(cfg).eval()
    folder = _save(model, tok, Path(out), image_processor=_image_processor(), eos_ids=[tok.eos_token_id])
    qtok.save_pretrained(folder / "qformer_tokenizer")
    return folder
