"""The flip explorer page: one static HTML page over a run's trials showing each item's K orderings side
by side; built by the report step and by `python -m facet_probe.explore`."""
