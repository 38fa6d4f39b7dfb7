"""Kimi-VL adapter (`moonshotai/Kimi-VL-A3B-Instruct`): remote code, UNTESTED OFFLINE.

transformers 5.x has no native Kimi-VL class, so model and processor come from the checkpoint's own
Python files (`trust_remote_code`). Those files must already be in the local folder or HF cache; when they
are not, loading stops with one message saying how to fetch them. No tiny offline model exists for this
code path, so it has never run in this project's tests: treat its first real run as a check. Before any
weights load, the remote code is read (remote_code.py): an import or cache method that this transformers
lacks (the published code calls `get_usable_length`, gone in transformers 5) stops the run naming the
version it needs and how to run it (a separate venv serving it with vLLM). The code read is the model's,
the tokenizer's and the processor's (every `auto_map`) and every helper they import relatively. Its image
processor is remote code too, so there is no differentiable pixel path (no attacks on Kimi-VL).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch

from facet_probe.runners.base import RunnerError
from facet_probe.runners.hf.base import Encoded, HFRunner
from facet_probe.runners.hf.checkpoint import download_command
from facet_probe.runners.hf.remote_code import declared_transformers, missing_modules, remote_code_problems


class KimiVLRunner(HFRunner):
    """Kimi-VL through `AutoModelForCausalLM` / `AutoProcessor` with `trust_remote_code=True`."""

    family = "kimi_vl"
    model_types = ("kimi_vl",)
    image_placeholder = "<|media_pad|>"
    think_tags = ("◁think▷", "◁/think▷")  # Kimi-VL-Thinking; the Instruct model emits none
    end_of_turn = "<|im_end|>"  # "<|im_assistant|>assistant<|im_middle|>reply<|im_end|>"
    trust_remote_code = True
    untested_offline = True

    def _model_loader(self):
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM

    def _resolve_folder(self) -> tuple[Path, str | None]:
        folder, commit = super()._resolve_folder()
        auto_map = json.loads((folder / "config.json").read_text()).get("auto_map", {})
        missing = missing_modules(folder)  # model, tokenizer and processor code, and what it imports
        if not auto_map or missing:
            what = ", ".join(missing) if missing else "auto_map in config.json"
            raise RunnerError(f"{self.name}: Kimi-VL needs its remote code ({what}), which is not in {folder}. "
                              f"On a machine with network run `{download_command(self.model_id, self.revision)}` "
                              "(code and weights) "
                              "and point model.local_path at it.")
        self._check_remote_code(folder)
        return folder, commit

    def _check_remote_code(self, folder: Path) -> None:
        """Before any weights load (and before the tokenizer check runs the tokenizer's code): the imports and
        cache calls of the remote code (model, tokenizer and processor modules and the helpers they import,
        `remote_code.remote_code_problems`) exist in this transformers; if not, say which version it needs and
        how to run it."""
        import transformers

        problems = remote_code_problems(folder)
        if not problems:
            return
        declared = declared_transformers(folder) or "4.x"
        listed = "; ".join(map(str, problems[:4])) + (f"; and {len(problems) - 4} more" if len(problems) > 4 else "")
        raise RunnerError(
            f"{self.name}: the checkpoint's remote code cannot run on transformers {transformers.__version__}: "
            f"{listed}. It was written for transformers=={declared} (config.json transformers_version), which this "
            "project (transformers>=5) cannot install beside itself. Run it in a separate venv and audit it through "
            f"its server: `python3 -m venv /opt/kimi && /opt/kimi/bin/pip install vllm` (vLLM serves Kimi-VL "
            f"natively), then `/opt/kimi/bin/vllm serve {self.model_id} --trust-remote-code` and "
            f"`python -m facet_probe model=vllm_server model.model_id={self.model_id} "
            "model.base_url=http://127.0.0.1:8000/v1` (docs/hf_models.md); or, for transformers itself, "
            f"`/opt/kimi/bin/pip install transformers=={declared} torch accelerate` there.")

    def _load_processor(self, folder: Path) -> None:
        from transformers import AutoProcessor

        self.processor = AutoProcessor.from_pretrained(folder, trust_remote_code=True)
        self.tokenizer = self.processor.tokenizer

    def chat_messages(self, prompt) -> list[dict]:
        """Kimi-VL's template wants a system turn with list content like the others."""
        msgs = super().chat_messages(prompt)
        return [{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]} if m["role"] == "system"
                else m for m in msgs]

    def _tokenize(self, text: str, images: list):
        enc = self.processor(images=images or None, text=text, return_tensors="pt")
        pixels = {k: enc[k] for k in ("pixel_values", "image_grid_hws") if k in enc}
        return enc["input_ids"][0], {}, [], pixels

    def _model_pixels(self, encoded: Encoded) -> dict[str, torch.Tensor]:
        return {k: (self.to_model(v) if v.is_floating_point() else v.to(self.input_device))
                for k, v in encoded.extras.items()}

    def pixel_inputs(self, images01: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        raise NotImplementedError("Kimi-VL's image processor is remote code: no differentiable pixel path. "
                                  "Attacks support the llava, qwen, internvl and gemma3 families.")

    def forward_logits(self, encoded: Encoded, pixel_inputs, positions) -> torch.Tensor:
        return super().forward_logits(encoded, pixel_inputs or self._model_pixels(encoded), positions)
