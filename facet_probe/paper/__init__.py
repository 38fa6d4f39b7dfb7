"""The results layer: run folders -> the papers' tables and figures (`python -m facet_probe.paper`,
`make paper`; docs/paper.md). Pure computations (`policies`, `table1`, `pareto`), the published values
(`published`), reading run folders (`inputs`), writing files (`render`), and the targets (`targets`)."""
