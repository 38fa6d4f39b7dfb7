"""Local HuggingFace VLM runners, one adapter per family over a thin shared base (see base.py).

qwen.QwenRunner (Qwen3.5 / Qwen3-VL / Qwen2.5-VL), internvl.InternVLRunner (InternVL3.5 `-HF`),
gemma3.Gemma3Runner (MedGemma), llava.LlavaRunner (LLaVA-1.5 and the project's tiny VLM),
kimi_vl.KimiVLRunner (remote code, untested offline). The base is made of one part per role (loading,
provenance, encoding, batched, generation; oom halves batches, adapters adds PEFT adapters); teacher_forcing
scores target continuations; processors, fast_paths and decoding hold the shared pieces; families picks the
adapter of a checkpoint from its config.json (`model=hf`).
"""
