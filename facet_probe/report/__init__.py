"""A run's report: run folders -> summary tables, figures, provenance, report.md and the flip explorer page
(`python -m facet_probe.report`); also Table 1's flip rates, which ODI and the paper read."""
