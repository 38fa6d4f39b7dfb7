"""An API model as a paid run makes its calls: behind the estimate, the budget and the ledger (`PaidRunner`),
through its provider's batch API where `batch.enabled`, with the whole panel's estimate shown before the first
call."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from facet_probe.core.console import say
from facet_probe.core.errors import ConfigError
from facet_probe.runners.api.base import ApiRunner
from facet_probe.runners.base import CostReporting, Request, Response, Runner, RunnerWrapper
from facet_probe.runners.cost.estimates import CallCost, Estimate, call_costs, estimate, panel_line
from facet_probe.runners.cost.ledger import CostLedger
from facet_probe.runners.cost.prices import PRICE_TABLE, ModelPrice, price_of
from facet_probe.runners.cost.tokens import MAX_TOKENS_KEYS, max_output_tokens

log = logging.getLogger("facet_probe.runners.cost")


class PaidRunner(RunnerWrapper, CostReporting):
    """An API runner behind the estimate, the budget and the ledger: a `Runner` whose contract methods are the
    wrapped runner's (`inner`: the API runner itself or its batch API), reporting `api`'s cost.

    `batch` says whether `inner` sends its calls through a batch API (priced at the table's batch factor)."""

    def __init__(self, name: str, inner: Runner, api: ApiRunner, price: ModelPrice, ledger: CostLedger,
                 batch: bool = False) -> None:
        super().__init__(inner)
        self._name, self._api, self._price = name, api, price
        self._ledger, self._batch = ledger, batch
        self._announced: tuple[list[str], list[CallCost]] | None = None  # the calls the panel's estimate showed

    def cost_summary(self) -> dict[str, Any]:
        return self._api.cost_summary()

    @property
    def ledger(self) -> CostLedger:
        return self._ledger

    def estimate(self, requests: Sequence[Request]) -> Estimate:
        """What these calls can cost, recorded in the ledger; `generate` of the same calls shows it no more."""
        costs = call_costs(requests, self._api, self._price, self._ledger.table, self._batch)
        self._announced = ([r.key for r in requests], costs)
        return self._planned(costs)

    def _planned(self, costs: list[CallCost]) -> Estimate:
        est = estimate(self._name, costs, self._price, self._batch)
        self._ledger.planned(est)
        return est

    def _shown_costs(self, requests: Sequence[Request]) -> list[CallCost]:
        """The calls' costs as the panel's estimate showed them before the run's first call; else estimated and
        shown now."""
        announced, self._announced = self._announced, None
        if announced is not None and announced[0] == [r.key for r in requests]:
            return announced[1]
        costs = call_costs(requests, self._api, self._price, self._ledger.table, self._batch)
        say(log, logging.INFO, self._planned(costs).line())
        return costs

    def generate(self, requests: Sequence[Request]) -> Iterator[tuple[Request, Response]]:
        if not requests:
            return
        costs = self._shown_costs(requests)
        pending, done = list(zip(requests, costs, strict=True)), 0
        reserved = 0.0  # ceilings of calls sent but not answered (an open batch, a failed call): kept aside
        try:
            while pending:
                chunk, room = {}, self._ledger.remaining_usd() - reserved
                while pending and pending[0][1].ceiling_usd <= room:
                    room -= pending[0][1].ceiling_usd
                    req, cost = pending.pop(0)
                    chunk[req.key] = (req, cost)
                if not chunk:
                    message = self._ledger.stop(self._name, done, len(requests), pending[0][1].ceiling_usd)
                    say(log, logging.WARNING, message, "budget: ")
                    return
                reserved += sum(c.ceiling_usd for _, c in chunk.values())
                for req, resp in self._wrapped.generate([r for r, _ in chunk.values()]):
                    self._charge(resp)
                    done += 1
                    if resp.error is None:
                        reserved -= chunk[req.key][1].ceiling_usd
                    yield req, resp
        finally:
            self._ledger.write()

    def _charge(self, resp: Response) -> None:
        """Price the reply from the table (the batch price for a batch result) into its provenance and the
        ledger."""
        batch = "batch_id" in resp.provenance
        usd = self._price.prices(batch).cost(resp.usage)
        resp.provenance["cost_usd"] = round(usd, 8)
        resp.provenance["price"] = {**asdict(replace(self._price, source="")), "batch": batch,
                                    "source": self._price.source}
        self._ledger.charge(self._name, resp.usage, usd)


def paid_runner(name: str, runner: Runner, api: ApiRunner, ledger: CostLedger, batch: bool) -> PaidRunner:
    """Put an API model behind the estimate and the ledger; with a budget, a model without a price is refused
    before any call (no estimate could keep the budget)."""
    price = price_of(api, ledger.table)
    if price is None:
        if ledger.budget_usd is not None:
            raise ConfigError(f"budget_usd={ledger.budget_usd:g}: no price for model {name} "
                              f"(model_id {api.model_id}); add it to {PRICE_TABLE} or set model.prices")
        price = ModelPrice(0.0, 0.0, source="no price known (free or self-hosted)")
    if ledger.budget_usd is not None and max_output_tokens(api) is None:
        raise ConfigError(f"budget_usd={ledger.budget_usd:g}: model {name} sets no reply cap "
                          f"({' or '.join(MAX_TOKENS_KEYS.get(api.api, ('max_tokens',)))} in model.generation), "
                          "so no call has a bounded cost; set one")
    return PaidRunner(name, runner, api, price, ledger, batch)


def with_paid_runner(holder: Any, ledger: CostLedger) -> Any:
    """A copy of `holder` (a judge: anything with a `runner`) whose API runner is behind the estimate, the
    budget and the ledger; `holder` itself where its runner is not an API model (nothing to pay)."""
    if not isinstance(holder.runner, ApiRunner):
        return holder
    paid = copy.copy(holder)
    paid.runner = paid_runner(holder.runner.name, holder.runner, holder.runner, ledger, batch=False)
    return paid


def announce_panel(calls: Sequence[tuple[Any, Sequence[Request]]]) -> list[Estimate]:
    """Before a run's first call: every paid model's estimate and the panel's total, once. With `budget_usd`,
    a panel whose input tokens alone cost more than the budget has left is refused here, before any call (it
    could not finish; within that, calls are admitted while they fit, as `PaidRunner.generate` does)."""
    paid = [(runner, requests) for runner, requests in calls if isinstance(runner, PaidRunner) and requests]
    estimates = [runner.estimate(requests) for runner, requests in paid]
    for est in estimates:
        say(log, logging.INFO, est.line())
    if len(estimates) > 1:
        say(log, logging.INFO, panel_line(estimates))
    if not paid:
        return estimates
    budget = paid[0][0].ledger.budget
    floor = sum(e.low_usd for e in estimates)
    if budget.limit is not None and floor > budget.remaining():
        raise ConfigError(
            f"budget_usd={budget.limit:g}: the {sum(e.calls for e in estimates)} planned calls cost at least "
            f"${floor:.4f} (their input tokens alone), more than the ${max(budget.remaining(), 0):.4f} left "
            f"{budget.scope}; no call was made. Raise budget_usd= (the estimate above says what the run can "
            "cost) or narrow the run (limit=, fewer models)")
    return estimates


def paid_model(name: str, runner: Runner, cfg: Any, ledger: CostLedger) -> Runner:
    """An API model as the audit runs it: through its batch API when `batch.enabled` (where the provider has
    one), behind the estimate, the budget and the ledger; any other runner as it is."""
    if not isinstance(runner, ApiRunner):
        return runner
    inner: Runner = runner
    batch = False
    if cfg.batch.enabled:
        # imported here: it imports every provider's SDK (about 2 s of a loaded machine's start-up), which a run
        # of one provider's model without the batch API never needs
        from facet_probe.runners.api.batch import BatchRunner, batch_log_path

        if BatchRunner.supports(runner):
            folder = ledger.path.parent if ledger.path is not None else Path(".")
            inner = BatchRunner(runner, batch_log_path(folder, name, cfg.store.shard), poll_s=cfg.batch.poll_s,
                                max_requests=cfg.batch.max_requests, max_rounds=cfg.batch.max_rounds,
                                wait=cfg.batch.wait)
            batch = True
        else:
            log.warning("%s: %s has no batch API; its calls are made one request each", name,
                        type(runner).__name__)
    return paid_runner(name, inner, runner, ledger, batch)
