"""What a paid run costs: an estimate before the first call, a budget that stops before it is exceeded, and
the cost actually spent (per call in each trial's provenance, per model in the run folder's `cost.json`).

A panel's estimate is printed once, every paid model and the total, before its first call; a panel whose
input tokens alone would cost more than the budget has left is refused before any call. The judge's calls go
through the same ledger and budget (`budget_usd` of the audit, or of the judge app: docs/judge.md).

Tokens per call come from the rendered prompt (text at `chars_per_token`, images by the provider's formula)
and the model's `max_tokens` setting (the most a reply can cost); prices come from the price table
(`facet_probe/assets/prices.yaml`, data with its date and source). `budget_usd=` admits calls only while
the spend so far plus the most the admitted calls can cost stays within it, so it is never exceeded.

One module per concept: `prices` (the price table), `tokens` (a call's tokens), `estimates` (what calls can
cost), `ledger` (`cost.json` and the budget), `paid` (an API model behind all of them), `spend` (the report's
line). `facet_probe.runners.cost.<name>` of the single module this was still resolves, with a warning.
"""

from facet_probe._moved import forward_old_names

#: the names of the single module `runners/cost.py` was, found in the module that holds each now
__getattr__ = forward_old_names(__name__, *(f"{__name__}.{part}" for part in
                                            ("prices", "tokens", "estimates", "ledger", "paid", "spend")))
