"""The order audit from config to stored trials: the cells (facet x dataset) and their items, the manifest of
K orderings, the planned trials, and the run loop that sends them through a runner into the store."""

from facet_probe._moved import forward_old_names

__getattr__ = forward_old_names(__name__, "facet_probe.audit.plan", "facet_probe.audit.execute")  # a module in 0.1
