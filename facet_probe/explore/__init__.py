"""`python -m facet_probe.explore input=<run folder(s)>`: the flip explorer app, one page over several runs; the
page itself is built by `facet_probe.report.explorer` (the report step writes one per run folder)."""
