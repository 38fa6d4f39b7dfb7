"""What a paid run costs: an estimate before the first call, a budget that stops before it is exceeded, and
the cost actually spent (per call in each trial's provenance, per model in the run folder's `cost.json`).

A panel's estimate is printed once, every paid model and the total, before its first call; a panel whose
input tokens alone would cost more than the budget has left is refused before any call. The judge's calls go
through the same ledger and budget (`budget_usd` of the audit, or of the judge app: docs/judge.md).

Tokens per call come from the rendered prompt (text at `chars_per_token`, images by the provider's formula)
and the model's `max_tokens` setting (the most a reply can cost); prices come from the price table
(`facet_probe/assets/prices.yaml`, data with its date and source). `budget_usd=` admits calls only while
the spend so far plus the most the admitted calls can cost stays within it, so it is never exceeded.
"""

from __future__ import annotations

import copy
import io
import json
import logging
import math
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from PIL import Image

from facet_probe.core.console import say
from facet_probe.core.errors import ConfigError
from facet_probe.core.prompts import ImagePart, Prompt
from facet_probe.core.untrusted import markdown_text
from facet_probe.runners.api.base import ApiRunner, Prices
from facet_probe.runners.base import Request, Response
from facet_probe.store.atomic import atomic_write_text

log = logging.getLogger(__name__)

PRICE_TABLE = Path(__file__).parents[1] / "assets" / "prices.yaml"
COST_FILE = "cost.json"
#: The generation setting that caps a reply's tokens, per API (thinking included where the API counts it).
MAX_TOKENS_KEYS = {"responses.create": ("max_output_tokens",), "messages.create": ("max_tokens",),
                   "models.generate_content": ("max_output_tokens",),
                   "chat.completions.create": ("max_completion_tokens", "max_tokens")}


@dataclass(frozen=True)
class ModelPrice:
    """One model's prices (USD per million tokens) and where they come from."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None
    batch_factor: float = 1.0  # a batch API bills this fraction of the interactive price
    provider: str = ""
    source: str = ""

    def prices(self, batch: bool) -> Prices:
        """The per-token prices of an interactive call, or of a call made through the batch API."""
        f = self.batch_factor if batch else 1.0
        cached = None if self.cached_input_per_mtok is None else self.cached_input_per_mtok * f
        return Prices(self.input_per_mtok * f, self.output_per_mtok * f, cached)


@dataclass(frozen=True)
class PriceTable:
    date: str
    source: str
    chars_per_token: float
    models: dict[str, ModelPrice]


def load_price_table(path: Path = PRICE_TABLE) -> PriceTable:
    """The price table file: {date, source, chars_per_token, models: {model_id: prices}}."""
    data = yaml.safe_load(Path(path).read_text())
    where = f"price table {path} ({data['date']})"
    try:
        models = {mid: ModelPrice(**entry, source=where) for mid, entry in data["models"].items()}
    except TypeError as exc:
        raise ConfigError(f"{path}: {exc}; each model takes input_per_mtok, output_per_mtok, "
                          "cached_input_per_mtok, batch_factor, provider") from None
    return PriceTable(str(data["date"]), str(data["source"]), float(data["chars_per_token"]), models)


def price_of(runner: ApiRunner, table: PriceTable) -> ModelPrice | None:
    """The table's price for the runner's model id, else the model config's own `prices:` (if any)."""
    if runner.model_id in table.models:
        return table.models[runner.model_id]
    own = runner.prices
    if own.input_per_mtok or own.output_per_mtok:
        return ModelPrice(own.input_per_mtok, own.output_per_mtok, own.cached_input_per_mtok,
                          provider=runner.provider, source=f"model config {runner.name} (prices:)")
    return None


# ---------------------------------------------------------------- tokens of a call

def text_tokens(text: str, chars_per_token: float) -> int:
    return math.ceil(len(text) / chars_per_token)


def image_tokens(provider: str, width: int, height: int, detail: str = "auto") -> int:
    """Input tokens of one image as each provider documents it (OpenAI 512-px tiles after fitting 2048 and
    768; Anthropic w*h/750 after fitting 1568, at most ~1600; Gemini 258 per 768-px tile, 258 when small)."""
    if provider.startswith("openai"):
        if detail == "low":
            return 85
        scale = min(1.0, 2048 / max(width, height))
        w, h = width * scale, height * scale
        scale = min(1.0, 768 / min(w, h))
        return 85 + 170 * math.ceil(w * scale / 512) * math.ceil(h * scale / 512)
    if provider == "anthropic":
        scale = min(1.0, 1568 / max(width, height))
        return min(1600, math.ceil(width * height * scale * scale / 750))
    if width <= 384 and height <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


def prompt_tokens(prompt: Prompt, provider: str, chars_per_token: float, detail: str = "auto") -> int:
    """Estimated input tokens of a rendered prompt (system, text parts, images, ~4 per message of framing)."""
    tokens = text_tokens(prompt.system or "", chars_per_token)
    for msg in prompt.messages:
        tokens += 4
        for part in msg.parts:
            if isinstance(part, ImagePart):
                with Image.open(io.BytesIO(part.image.read_bytes())) as img:
                    tokens += image_tokens(provider, *img.size, detail=detail)
            else:
                tokens += text_tokens(part.text, chars_per_token)
    return tokens


def max_output_tokens(runner: ApiRunner) -> int | None:
    """The most tokens one reply can bill: the API's max-tokens setting (plus Gemini's thinking budget)."""
    sent = runner.settings_sent
    cap = next((sent[k] for k in MAX_TOKENS_KEYS.get(runner.api, ()) if isinstance(sent.get(k), int)), None)
    if cap is not None and runner.api == "models.generate_content":
        cap += int((sent.get("thinking_config") or {}).get("thinking_budget") or 0)
    return cap


# ---------------------------------------------------------------- the estimate

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
    calls, low, high = (sum(getattr(e, f) for e in estimates) for f in ("calls", "low_usd", "high_usd"))
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
    detail = getattr(runner, "image_detail", "auto")
    out = []
    for req in requests:
        n_in = prompt_tokens(req.prompt, runner.provider, table.chars_per_token, detail)
        out.append(CallCost(n_in, cap, prices.cost({"input_tokens": n_in, "output_tokens": cap})))
    return out


def estimate(model: str, costs: list[CallCost], price: ModelPrice, batch: bool) -> Estimate:
    prices = price.prices(batch)
    n_in = sum(c.input_tokens for c in costs)
    n_out = sum(c.max_output_tokens for c in costs)
    return Estimate(model, len(costs), n_in, n_out, round(prices.cost({"input_tokens": n_in}), 6),
                    round(sum(c.ceiling_usd for c in costs), 6), batch, price.source)


# ---------------------------------------------------------------- the run's ledger

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


# ---------------------------------------------------------------- the paid runner

class PaidRunner:
    """An API runner behind the estimate, the budget and the ledger (every other attribute is the runner's).

    `batch` says whether `inner` sends its calls through a batch API (priced at the table's batch factor)."""

    def __init__(self, name: str, inner: Any, api: ApiRunner, price: ModelPrice, ledger: CostLedger,
                 batch: bool = False) -> None:
        self._name, self._inner, self._api, self._price = name, inner, api, price
        self._ledger, self._batch = ledger, batch
        self._announced: tuple[list[str], list[CallCost]] | None = None  # the calls the panel's estimate showed

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._inner, attr)

    @property
    def ledger(self) -> CostLedger:
        return self._ledger

    def estimate(self, requests: Sequence[Request]) -> Estimate:
        """What these calls can cost, recorded in the ledger; `generate` of the same calls shows it no more."""
        costs = call_costs(requests, self._api, self._price, self._ledger.table, self._batch)
        self._announced = ([r.key for r in requests], costs)
        est = estimate(self._name, costs, self._price, self._batch)
        self._ledger.planned(est)
        return est

    def generate(self, requests: Sequence[Request]) -> Iterator[tuple[Request, Response]]:
        if not requests:
            return
        if self._announced is not None and self._announced[0] == [r.key for r in requests]:
            costs = self._announced[1]  # shown with the panel's estimate before the run's first call
        else:
            say(log, logging.INFO, self.estimate(requests).line())
            costs = self._announced[1]
        self._announced = None
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
                for req, resp in self._inner.generate([r for r, _ in chunk.values()]):
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


def paid_runner(name: str, runner: Any, api: ApiRunner, ledger: CostLedger, batch: bool) -> PaidRunner:
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


# ---------------------------------------------------------------- the audit's hook

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


def read_cost_file(path: Path) -> dict[str, Any]:
    """A `cost.json` ({} where there is none)."""
    return json.loads(path.read_text()) if path.is_file() else {}


def model_spend(folder: Path) -> dict[str, float]:
    """Per model (the judges' runners too), the USD a run folder's calls cost over every session."""
    return {m: float(v.get("spent_usd", 0.0)) for m, v in read_cost_file(folder / COST_FILE).get("models", {}).items()}


def spend_line(folders: Iterable[Path]) -> str | None:
    """The report's line on what the runs' calls cost (their `cost.json`, summed per model over the folders), in
    Markdown (model and folder names shown as written: `core.untrusted`); None where no folder recorded a paid call."""
    folders = list(dict.fromkeys(folders))
    per_model: dict[str, float] = {}
    stopped = []
    for folder in folders:
        for model, usd in model_spend(folder).items():
            per_model[model] = per_model.get(model, 0.0) + usd
        if (stop := read_cost_file(folder / COST_FILE).get("stopped_by_budget")) is not None:
            stopped.append(markdown_text(f"{stop['model']} in {folder.name}"))
    if not per_model:
        return None
    models = ", ".join(f"{markdown_text(m)} ${usd:.4f}" for m, usd in sorted(per_model.items()))
    where = f" over {len(folders)} run folders" if len(folders) > 1 else ""
    return (f"**API spend** (`cost.json`: every paid call of every session, failed calls and the judge's "
            f"included): ${sum(per_model.values()):.4f}{where}; per model: {models}."
            + (f" The budget stopped {', '.join(stopped)} in its latest session." if stopped else ""))


def budget_setting(cfg: Any) -> float | None:
    """The config's `budget_usd` (None: no limit), refused unless a positive number of USD."""
    budget = cfg.get("budget_usd")
    if budget is not None and not budget > 0:
        raise ConfigError(f"budget_usd={budget}: need a positive number of USD (or budget_usd=null: no limit)")
    return budget


def run_ledger(cfg: Any) -> CostLedger:
    """The run folder's ledger (`cost.json`, written only once a paid model is asked), with `budget_usd`."""
    from hydra.core.hydra_config import HydraConfig

    budget = budget_setting(cfg)
    run_dir = Path(HydraConfig.get().runtime.output_dir) if HydraConfig.initialized() else None
    return CostLedger(run_dir / COST_FILE if run_dir else None, budget, load_price_table())


def model_budget(cfg: Any, model: str, folders: Sequence[Path]) -> Budget:
    """`budget_usd` over one model's spend in these folders, every session (the judge app: what the judge has
    cost on its input folders, whatever else their calls cost)."""
    where = "this run folder" if len(folders) == 1 else f"its {len(folders)} input folders"
    return Budget(budget_setting(cfg), spent_before=sum(model_spend(f).get(model, 0.0) for f in folders),
                  scope=f"by {model} on {where}")


def paid_model(name: str, runner: Any, cfg: Any, ledger: CostLedger) -> Any:
    """An API model as the audit runs it: through its batch API when `batch.enabled` (where the provider has
    one), behind the estimate, the budget and the ledger; any other runner as it is."""
    if not isinstance(runner, ApiRunner):
        return runner
    inner, batch = runner, False
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
