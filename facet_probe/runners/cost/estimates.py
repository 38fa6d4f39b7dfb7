"""What a list of calls can cost before any is made: from their input tokens alone (the floor) to every reply
at max tokens (the ceiling), per call (what the budget admits) and per model (the line shown before a run)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from facet_probe.runners.api.base import ApiRunner
from facet_probe.runners.base import Request
from facet_probe.runners.cost.prices import ModelPrice, PriceTable
from facet_probe.runners.cost.tokens import max_output_tokens, prompt_tokens


@dataclass
class Estimate:
    """What a list of calls can cost: input-only (the floor) to every reply at max tokens (the ceiling)."""

    model: str
    calls: int
    input_tokens: int
    max_output_tokens: int
    low_usd: float
    high_usd: float
    batch: bool
    price_source: str

    def line(self) -> str:
        way = "batch API" if self.batch else "interactive"
        return (f"cost estimate {self.model}: {self.calls} calls ({way}), ~{self.input_tokens:,} input tokens, "
                f"at most {self.max_output_tokens:,} output tokens: {format_usd(self.low_usd)} (input only) to "
                f"{format_usd(self.high_usd)} (every reply at max tokens); prices: {self.price_source}")


def format_usd(amount: float) -> str:
    """An amount in USD to the cent, and to a hundredth of a cent below a dollar (a small run's cost shows)."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


def panel_line(estimates: Sequence[Estimate]) -> str:
    """The whole panel's estimate: calls and cost, from input only to every reply at max tokens."""
    calls = sum(e.calls for e in estimates)
    low, high = sum(e.low_usd for e in estimates), sum(e.high_usd for e in estimates)
    return (f"cost estimate, the whole panel ({len(estimates)} paid models): {calls} calls, {format_usd(low)} "
            f"(input only) to {format_usd(high)} (every reply at max tokens)")


@dataclass
class CallCost:
    """One call's estimated tokens and its ceiling in USD."""

    input_tokens: int
    max_output_tokens: int
    ceiling_usd: float


def call_costs(requests: Sequence[Request], runner: ApiRunner, price: ModelPrice, table: PriceTable,
               batch: bool) -> list[CallCost]:
    cap = max_output_tokens(runner) or 0
    prices = price.prices(batch)
    out = []
    for req in requests:
        n_in = prompt_tokens(req.prompt, runner.provider, table.chars_per_token, runner.image_detail)
        out.append(CallCost(n_in, cap, prices.cost({"input_tokens": n_in, "output_tokens": cap})))
    return out


def estimate(model: str, costs: list[CallCost], price: ModelPrice, batch: bool) -> Estimate:
    prices = price.prices(batch)
    n_in = sum(c.input_tokens for c in costs)
    n_out = sum(c.max_output_tokens for c in costs)
    return Estimate(model, len(costs), n_in, n_out, round(prices.cost({"input_tokens": n_in}), 6),
                    round(sum(c.ceiling_usd for c in costs), 6), batch, price.source)
