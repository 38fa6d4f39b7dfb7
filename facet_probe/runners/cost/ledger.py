"""The cost ledger: a run folder's `cost.json` (spend per model over every session, the budget and where it
stopped), the `budget_usd` it keeps, and what earlier sessions spent, read back."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from facet_probe.core.errors import ConfigError
from facet_probe.runners.cost.estimates import Estimate
from facet_probe.runners.cost.prices import PriceTable, load_price_table
from facet_probe.store.atomic import atomic_write_text
from facet_probe.store.run_folder import COST_FILE


@dataclass
class Budget:
    """`budget_usd` and the spend it counts: what earlier sessions spent within its scope (the audit: its run
    folder's whole spend; the judge app: that judge's spend on its input folders) plus this session's."""

    limit: float | None
    spent_before: float = 0.0
    spent_now: float = 0.0
    scope: str = "in this run folder"

    @property
    def spent(self) -> float:
        return self.spent_before + self.spent_now

    def remaining(self) -> float:
        return math.inf if self.limit is None else self.limit - self.spent


@dataclass
class ModelSpend:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    spent_usd: float = 0.0
    estimate: dict[str, Any] = field(default_factory=dict)  # the latest session's estimate


class CostLedger:
    """The run folder's `cost.json`: spend per model over every session, the budget and where it stopped.

    `budget` is `budget_usd` over this folder's whole spend, or a `Budget` several ledgers share (the judge
    app's, over its input folders). Spend is counted when a reply arrives (before it is stored), so a kill never
    hides a paid call; the file is rewritten at most every `flush_s` seconds and at the end of each model."""

    def __init__(self, path: Path | None, budget: float | Budget | None, table: PriceTable,
                 flush_s: float = 2.0) -> None:
        self.path, self.table, self.flush_s = path, table, flush_s
        old = read_cost_file(path) if path is not None else {}
        self.models = {m: ModelSpend(**v) for m, v in old.get("models", {}).items()}
        self.budget = budget if isinstance(budget, Budget) else Budget(budget, spent_before=self.spent_usd)
        self.sessions = old.get("sessions", 0) + 1
        self.stopped: dict[str, Any] | None = None
        self._written = 0.0

    @property
    def budget_usd(self) -> float | None:
        return self.budget.limit

    @property
    def spent_usd(self) -> float:
        return sum(m.spent_usd for m in self.models.values())

    def remaining_usd(self) -> float:
        return self.budget.remaining()

    def planned(self, est: Estimate) -> None:
        self.models.setdefault(est.model, ModelSpend()).estimate = asdict(est)
        self.write()

    def charge(self, model: str, usage: dict[str, int], usd: float) -> None:
        spend = self.models.setdefault(model, ModelSpend())
        spend.calls += 1
        spend.input_tokens += usage.get("input_tokens", 0)
        spend.output_tokens += usage.get("output_tokens", 0)
        spend.spent_usd += usd
        self.budget.spent_now += usd
        if time.monotonic() - self._written >= self.flush_s:
            self.write()

    def stop(self, model: str, done: int, planned: int, next_ceiling: float) -> str:
        """Record that the budget stopped `model` after `done` of `planned` calls; the line to show."""
        self.stopped = {"model": model, "calls_done": done, "calls_planned": planned,
                        "spent_usd": round(self.budget.spent, 6), "next_call_up_to_usd": round(next_ceiling, 6)}
        self.write()
        return (f"budget_usd={self.budget_usd:g} reached: {model} made {done} of {planned} planned calls this "
                f"session; ${self.budget.spent:.4f} spent {self.budget.scope} so far, the next call could cost up "
                f"to ${next_ceiling:.4f}. Raise budget_usd= and re-run the same command to continue (stored "
                "trials and judgments are kept)")

    def write(self) -> None:
        self._written = time.monotonic()
        if self.path is None:
            return
        data = {"budget_usd": self.budget_usd, "spent_usd": round(self.spent_usd, 6), "sessions": self.sessions,
                "stopped_by_budget": self.stopped,
                "price_table": {"date": self.table.date, "source": self.table.source},
                "models": {m: {**asdict(s), "spent_usd": round(s.spent_usd, 6)} for m, s in self.models.items()}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, json.dumps(data, indent=2, sort_keys=True))


def read_cost_file(path: Path) -> dict[str, Any]:
    """A `cost.json` ({} where there is none)."""
    return json.loads(path.read_text()) if path.is_file() else {}


def model_spend(folder: Path) -> dict[str, float]:
    """Per model (the judges' runners too), the USD a run folder's calls cost over every session."""
    return {m: float(v.get("spent_usd", 0.0)) for m, v in read_cost_file(folder / COST_FILE).get("models", {}).items()}


def budget_setting(cfg: Mapping[str, Any]) -> float | None:
    """The config's `budget_usd` (None: no limit), refused unless a positive number of USD."""
    budget = cfg.get("budget_usd")
    if budget is not None and not budget > 0:
        raise ConfigError(f"budget_usd={budget}: need a positive number of USD (or budget_usd=null: no limit)")
    return budget


def run_ledger(run_dir: Path | None, budget_usd: float | None) -> CostLedger:
    """The ledger of the run folder `run_dir` (its `cost.json`, written only once a paid model is asked; None:
    kept in memory only), with `budget_usd` (as `budget_setting` read it) over the folder's whole spend."""
    return CostLedger(run_dir / COST_FILE if run_dir is not None else None, budget_usd, load_price_table())


def model_budget(cfg: Mapping[str, Any], model: str, folders: Sequence[Path]) -> Budget:
    """`budget_usd` over one model's spend in these folders, every session (the judge app: what the judge has
    cost on its input folders, whatever else their calls cost)."""
    where = "this run folder" if len(folders) == 1 else f"its {len(folders)} input folders"
    return Budget(budget_setting(cfg), spent_before=sum(model_spend(f).get(model, 0.0) for f in folders),
                  scope=f"by {model} on {where}")
