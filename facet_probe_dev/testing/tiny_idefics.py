"""A tiny random IDEFICS (Flamingo-style) checkpoint built offline, laid out like idefics-9b-instruct.

Same recipe as tiny_models.py: a byte-level BPE tokenizer trained on the spot (LLaMA's `<s>` / `</s>` / `<unk>`
plus `<end_of_utterance>`; `<fake_token_around_image>` and `<image>` added last, as the checkpoint's two
"additional" embeddings), two LLaMA-style text layers (hidden 64) each preceded by a gated cross-attention
block, a one-layer CLIP-style tower on 32 px images (patch 8) and a one-block Perceiver with 4 latents.
The gates start at tanh(1) instead of IDEFICS's zeros, so images reach the text (and pixel gradients flow).
"""

from __future__ import annotations

from pathlib import Path

from facet_probe.runners.hf.idefics import END_OF_UTTERANCE, FAKE_TOKEN, IDEFICS_TEMPLATE, IMAGE_TOKEN


def build_idefics(out: Path) -> Path:
    """IDEFICS: ViT (32 px, patch 8 -> 17 tokens) -> Perceiver (4 latents) -> gated x-attn before each layer."""
    from transformers import IdeficsConfig, IdeficsForVisionText2Text, IdeficsProcessor
    from transformers.models.idefics import IdeficsImageProcessorPil

    from facet_probe_dev.testing.tiny_models import _save, _tokenizer  # here: tiny_models lists this builder

    tok = _tokenizer(["<unk>", "<s>", "</s>", END_OF_UTTERANCE], eos="</s>", pad="<unk>", bos="<s>",
                     template=IDEFICS_TEMPLATE)
    base_vocab = len(tok)
    tok.add_special_tokens({"additional_special_tokens": [FAKE_TOKEN, IMAGE_TOKEN]})  # ids base_vocab, +1
    cfg = IdeficsConfig(
        vocab_size=base_vocab, additional_vocab_size=2, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=2, cross_layer_interval=1, max_position_embeddings=1024,
        alpha_initializer="ones", alpha_type="float", use_resampler=True, tie_word_embeddings=False,
        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        vision_config=dict(embed_dim=32, image_size=32, patch_size=8, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=64),
        perceiver_config=dict(use_resampler=True, resampler_n_latents=4, resampler_depth=1, resampler_n_heads=2,
                              resampler_head_dim=16))
    model = IdeficsForVisionText2Text(cfg).eval()
    improc = IdeficsImageProcessorPil(image_size=32)
    proc = IdeficsProcessor(image_processor=improc, tokenizer=tok)
    proc.chat_template = IDEFICS_TEMPLATE
    return _save(model, tok, out, processor=proc,
                 eos_ids=[tok.eos_token_id, tok.convert_tokens_to_ids(END_OF_UTTERANCE)])
