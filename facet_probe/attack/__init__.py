"""Adversarial chain-of-thought attacks on local HF VLMs (answer, rationale, stop-reasoning PGD).

`python -m facet_probe.attack` (a thin Hydra shell, __main__.py) over `run.run_attack(cfg, out_dir=None)`
(docs/attacks.md). Modules: config (settings, run names), pixels (the attack variable), spans (answer /
rationale / template by tokenisation), objectives/ (`_target_` plug-ins: loss and success rule each),
batching (model calls over several samples), pgd (the driver), criteria (reading a reply), selection
(which samples are attacked), outputs (run folder), tables and report (summaries and the paper's tables,
victims beside the paper's values: paper_values).
"""
