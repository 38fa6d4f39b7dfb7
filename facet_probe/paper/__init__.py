"""The results layer: run folders -> the papers' tables and figures (`python -m facet_probe.paper`,
`make paper`; docs/paper.md).

Pure computations (`policies`, `pareto`; Table 1's flips: `report.table1`), the published values
(`published`), reading run folders (`inputs`), writing files (`render`), and the targets (`targets`)."""
