"""Adversarial chain-of-thought attacks on local HF VLMs (answer, rationale, stop-reasoning PGD).

`python -m facet_probe.attack` (see __main__.py and docs/attacks.md). Modules: config (settings, run
names), pixels (the attack variable), spans (answer / rationale / template by tokenisation), objectives/
(one per attack), batching (model calls over several samples), pgd (the driver), criteria (reading a
reply, success), selection (which samples are attacked), outputs (run folder), tables (summaries and the
paper's tables).
"""
