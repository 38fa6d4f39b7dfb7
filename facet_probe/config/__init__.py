"""The typed config schema (Hydra structured configs), loading config groups by name, and a run folder's
identity (the settings and manifest it was started with)."""

from facet_probe._moved import forward_old_names

__getattr__ = forward_old_names(__name__)  # facet_probe.config was a module in 0.1
