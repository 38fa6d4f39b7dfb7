"""The decoder-noise floor across sampling settings: its computation (`noise`) and its app
(`python -m facet_probe.decoder`)."""

from facet_probe._moved import forward_old_names

__getattr__ = forward_old_names(__name__, "facet_probe.decoder.__main__", "facet_probe.decoder.noise")  # facet_probe.decoder was a module in 0.1
