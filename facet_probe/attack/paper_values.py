"""The published "Stop Reasoning!" values (facet_probe/assets/stop_reasoning_paper/, with their source),
matched to our runs by model family x dataset.

Our family is the module of the model's runner (`facet_probe.runners.hf.llava.LlavaRunner` -> ``llava``),
read from the run's recorded model config; the files' `family` column uses the same names.
"""

from __future__ import annotations

import csv
from importlib import resources

FOLDER = "stop_reasoning_paper"


def read_values(name: str) -> list[dict]:
    """Rows of one of the paper's value files (`table1.csv`, `figure7.csv`, `table2.csv` once added)."""
    path = resources.files("facet_probe.assets").joinpath(FOLDER, name)
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def family_of(model_config: dict | None) -> str | None:
    """``llava`` for a config whose `_target_` is `facet_probe.runners.hf.llava.LlavaRunner`, else None."""
    target = str((model_config or {}).get("_target_") or "")
    parts = target.split(".")
    return parts[-2] if len(parts) >= 2 and target.startswith("facet_probe.runners.") else None


def matching(name: str, family: str | None, dataset: str | None = None) -> list[dict]:
    """The paper's rows of file `name` for this family (and dataset, when the file has one)."""
    return [r for r in read_values(name) if family and r["family"] == family
            and (dataset is None or "dataset" not in r or r["dataset"] == dataset)]
