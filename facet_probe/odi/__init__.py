"""ODI: a Bayesian 2PL model that splits order sensitivity into per-item noise and per-facet bias.

Flow: trials -> `outcome` (y per trial) -> `positions` (display slot of the gold / supporting
component) -> `data` (indexed, aggregated arrays) -> `model` (PyMC) -> `fit` (sampler) ->
`tables` / `figures`. `simulate` and `recover` check the whole chain on data with a known truth.
"""
