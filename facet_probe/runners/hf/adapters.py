"""PEFT (LoRA) adapters on top of any HF model config: `model.adapter=<folder or hub id>`.

The adapter folder (a `save_pretrained` of a `PeftModel`: adapter_config.json + adapter_model.safetensors)
is found like the base checkpoint: a local folder as given, a hub id through the local Hugging Face cache
(`snapshot_download`, never a download when HF_HUB_OFFLINE=1). It is named by `weights_digest` of its files,
which goes into the runner's fingerprint, so trials and attack results made with one adapter never mix with
the base model's or another adapter's. The LoRA layers stay unmerged (exact on quantised weights too);
the model keeps its transformers class, so every other part of the runner sees the same object.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from facet_probe.core.extras import installed, pip_install
from facet_probe.runners.base import RunnerError
from facet_probe.runners.hf.checkpoint import hub_snapshot, snapshot_commit, weights_digest

#: what a PEFT adapter snapshot is made of (enough to load it; no model card, no training logs)
ADAPTER_FILES = ["adapter_config.json", "*.safetensors", "*.bin", "*.json", "*.model"]
INSTALL = f"{pip_install('adapters')} (or pip install 'peft>=0.13')"


@dataclass(frozen=True)
class AdapterSource:
    """Where an adapter was found: its folder, the hub commit when it came from the cache, its digest."""

    folder: Path
    commit: str | None
    digest: str

    def record(self, configured: str, revision: str | None) -> dict[str, Any]:
        """The provenance entry: as configured, and what it resolved to."""
        return {"source": configured, "revision": revision, "commit": self.commit, "folder": str(self.folder),
                "digest": self.digest}


def peft_missing(name: str) -> RunnerError | None:
    """The error to raise when `peft` is not installed (None when it is)."""
    if not installed("peft"):
        return RunnerError(f"{name}: model.adapter is set but the peft package is not installed: {INSTALL}, "
                           "or unset model.adapter to run the base model")
    return None


def _is_hub_id(text: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if text.startswith(("/", ".", "~")) or text.count("/") != 1:
        return False
    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return True


def resolve_adapter(name: str, adapter: str, revision: str | None = None) -> AdapterSource:
    """The adapter's folder (local, or the hub cache's snapshot) with its digest; one `RunnerError` when
    there is none."""
    folder = Path(adapter).expanduser()
    commit = None
    if not folder.exists():
        if not _is_hub_id(adapter):
            raise RunnerError(f"{name}: model.adapter={adapter}: no such folder. Give a PEFT adapter folder (a "
                              "save_pretrained output holding adapter_config.json) or a hub id owner/name")
        folder = hub_snapshot(name, adapter, revision, ADAPTER_FILES,
                              ("model.adapter", "model.adapter_revision", "model.adapter"))
        commit = snapshot_commit(folder)
    if not (folder / "adapter_config.json").is_file():
        raise RunnerError(f"{name}: model.adapter={adapter}: {folder} has no adapter_config.json (expected the "
                          "save_pretrained folder of a PEFT adapter)")
    return AdapterSource(folder, commit, weights_digest(folder))


def apply_adapter(model: Any, source: AdapterSource) -> Any:
    """`model` with the adapter's LoRA layers injected (unmerged, inference only); the same transformers
    model object, so generation, logits_to_keep and the pixel path are unchanged."""
    from peft import PeftModel

    return PeftModel.from_pretrained(model, source.folder, is_trainable=False).get_base_model()
