"""The flip explorer: one static HTML page (no server, opened from disk) over a run's trials, showing every
item's K orderings side by side as each model saw them (`explorer.html`, written by the report step and by
`python -m facet_probe.explore input=<run folder(s)>`)."""
