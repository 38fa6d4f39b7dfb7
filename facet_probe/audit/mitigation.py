"""Prompt mitigations (`prompt.mitigation=<name>`): an order-invariance instruction appended to every
prompt's system text, one config per instruction in `conf/prompt_mitigation/`.

The FACET-PROBE paper's CTA instruction text is not released; the shipped instructions are our own
(each config says so in `source`). The instruction changes the calls, so it is part of the run's settings
and every trial records it (`Trial.instruction`), which re-scoring and the explorer add back when they
re-render a prompt."""

from __future__ import annotations

from dataclasses import dataclass

from hydra.utils import instantiate

from facet_probe.config.loading import ConfigError, load_option

GROUP = "prompt_mitigation"


@dataclass(frozen=True)
class PromptMitigation:
    """One instruction added to the system text, where it comes from, and what it asks."""

    name: str
    instruction: str
    source: str = "ours"  # who wrote the text (the paper's own is unreleased)

    def __post_init__(self) -> None:
        if not self.instruction.strip():
            raise ConfigError(f"prompt mitigation {self.name!r} has an empty instruction; write one in "
                              f"conf/{GROUP}/{self.name}.yaml")


def load_mitigation(name: str | None) -> PromptMitigation | None:
    """The mitigation `conf/prompt_mitigation/<name>.yaml` (None: no mitigation); an unknown name is one
    message listing the valid ones."""
    if name is None or str(name).lower() in ("", "none", "null"):
        return None
    mitigation = instantiate(load_option(GROUP, str(name)))
    if not isinstance(mitigation, PromptMitigation):
        raise ConfigError(f"conf/{GROUP}/{name}.yaml must instantiate facet_probe.audit.mitigation.PromptMitigation")
    return mitigation


def instruction_of(name: str | None) -> str:
    """The instruction text `prompt.mitigation=<name>` adds ('' for none)."""
    mitigation = load_mitigation(name)
    return mitigation.instruction if mitigation else ""
