"""What names an HF runner's calls (the fingerprint that keys stored trials) and what is recorded beside
them (the provenance of every response).

`ProvenanceMixin` is one role of `HFRunner` (base.py).
"""

from __future__ import annotations

import hashlib
import platform
from pathlib import Path
from typing import Any

import torch

from facet_probe.runners.hf.checkpoint import snapshot_commit
from facet_probe.runners.hf.fast_paths import library_versions
from facet_probe.runners.hf.parts import HFParts


class ProvenanceMixin(HFParts):
    """The fingerprint (identity of the calls) and the provenance record (see the module docstring)."""

    def fingerprint(self) -> dict[str, Any]:
        fp = {"runner": f"hf/{self.family}", "model_id": self.model_id, "revision": self.revision,
              "dtype": self.dtype, "quantization": self.quantization_used,
              "attn_implementation": self.attn_used or self.attn_implementation,
              "generation": self.effective_generation(),
              "chat_template_options": self.chat_template_options(),
              "image_processor_kwargs": self.image_processor_kwargs, **self._family_settings()}
        if self.weights is not None:  # known once loaded (`check_ready`), which the audit does first
            fp["weights"] = self.weights
        if self.adapter is not None:  # its digest once loaded; absent without one, so base stores stay valid
            fp["adapter"] = self.adapter_source.digest if self.adapter_source else f"unloaded:{self.adapter}"
        if self.chat_template is not None:
            fp["chat_template_sha256"] = hashlib.sha256(self.chat_template.encode()).hexdigest()[:16]
        return fp

    @property
    def attn_used(self) -> str | None:
        """The attention implementation the loaded model runs (`config._attn_implementation`); None before load."""
        return self.provenance.get("attn_implementation") if self.model is not None else None

    def legacy_fingerprints(self) -> list[dict[str, Any]]:
        """Fingerprints older stores hold for these same calls, each with the provenance a stored record must
        show to count as one: before issue 28 the fingerprint named the configured attention ("auto"), so a
        record made under it is this run's call only if its provenance names the implementation used now."""
        used = self.attn_used
        if used is None or used == self.attn_implementation:
            return []
        return [{"fingerprint": {**self.fingerprint(), "attn_implementation": self.attn_implementation},
                 "provenance": {"attn_implementation": used}}]

    def _provenance_record(self, folder: Path, commit: str | None, used: str | None, notes: list[str]
                           ) -> dict[str, Any]:
        """What every response of the loaded model records: checkpoint, weights, config digest, dtype,
        quantisation, attention, device, template, notes, library versions, placement."""
        model = self.model
        config_file = folder / "config.json"
        return {
            "model_id": self.model_id, "revision": self.revision, "commit": commit or snapshot_commit(
                folder.resolve()) or getattr(model.config, "_commit_hash", None), "local_path": self.local_path,
            "weights": self.weights,
            "config_sha256": hashlib.sha256(config_file.read_bytes()).hexdigest()[:16],
            "dtype": str(model.dtype).removeprefix("torch."), "quantization": self.quantization_used,
            "attn_implementation": getattr(model.config, "_attn_implementation", used) or used,
            "device": str(self.input_device), "device_name": (torch.cuda.get_device_name(self.input_device)
                                                              if self.input_device.type == "cuda" else platform.machine()),
            "chat_template": self._template_label, "notes": notes, "versions": library_versions(),
            "placement": self.placement,
            **({"adapter": self.adapter_source.record(self.adapter, self.adapter_revision)}
               if self.adapter_source and self.adapter else {}),
        }
