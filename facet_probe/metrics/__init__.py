"""Numbers from scored trials: flip rates and their intervals, and the same-order control (the
decoder-noise floor a flip rate is read against)."""

from facet_probe._moved import forward_old_names

__getattr__ = forward_old_names(__name__)  # facet_probe.metrics was a module in 0.1
