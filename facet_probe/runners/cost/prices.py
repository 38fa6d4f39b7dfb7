"""The price table: USD per million tokens for each model, as data with its date and source
(`facet_probe/assets/prices.yaml`), and a model config's own `prices:` where the table has no entry."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from facet_probe.core.errors import ConfigError
from facet_probe.runners.api.base import ApiRunner, Prices

PRICE_TABLE = Path(__file__).parents[2] / "assets" / "prices.yaml"


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
