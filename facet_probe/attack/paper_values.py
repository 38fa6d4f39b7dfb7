"""The published "Stop Reasoning!" values (facet_probe/assets/stop_reasoning_paper/, with their source),
matched to our runs by victim: `victims.csv` names, for each of our model configs, the paper's model it
stands for and how (`paper`: the paper's own model and weights; `relative`: a faithful relative, e.g. the
same architecture with other weights; `none`: not a paper victim).

A victim's rows are the paper's rows of its `paper_model` (Table 1 and 2 give MiniGPT4-7B and -13B apart);
a file without that model (Figure 7 has one bar group per family) and a model not in `victims.csv` fall back
to the family: the paper's `paper_family`, or for an unlisted config the module of its runner
(`facet_probe.runners.hf.llava.LlavaRunner` -> ``llava``, read from the run's recorded model config).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources

FOLDER = "stop_reasoning_paper"
RELATIONS = ("paper", "relative", "none")


def read_values(name: str) -> list[dict]:
    """Rows of one of the paper's value files (`table1.csv`, `figure7.csv`, `victims.csv`, `table2.csv` once
    added)."""
    path = resources.files("facet_probe.assets").joinpath(FOLDER, name)
    if not path.is_file():
        return []
    with resources.as_file(path) as real, real.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def family_of(model_config: dict | None) -> str | None:
    """``llava`` for a config whose `_target_` is `facet_probe.runners.hf.llava.LlavaRunner`, else None."""
    target = str((model_config or {}).get("_target_") or "")
    parts = target.split(".")
    return parts[-2] if len(parts) >= 2 and target.startswith("facet_probe.runners.") else None


@dataclass(frozen=True)
class Victim:
    """Our model config and the paper's model it stands for (a `victims.csv` row, or `unlisted`)."""

    model: str
    paper_model: str
    paper_family: str
    relation: str  # paper | relative | none | unlisted
    note: str = ""

    def describe(self) -> str:
        """How the tables name it: ``the paper's MiniGPT4-7B``, ``relative of LLaVA``, ``not a paper model``."""
        if self.relation == "paper":
            return f"the paper's {self.paper_model}"
        if self.relation == "relative":
            return f"relative of {self.paper_model}, not the paper's model"
        return "not a paper model" + ("" if self.relation == "none" else " (not in victims.csv)")


def victim_of(model: str, model_config: dict | None = None) -> Victim:
    """The `victims.csv` row of config `model`, else an unlisted victim of its runner's family."""
    for row in read_values("victims.csv"):
        if row["model"] == model:
            return Victim(row["model"], row["paper_model"], row["paper_family"], row["relation"], row["note"])
    return Victim(model, "", family_of(model_config) or "", "unlisted")


def matching(name: str, victim: Victim, dataset: str | None = None) -> tuple[list[dict], str]:
    """The paper's rows of file `name` for `victim` (and dataset, when the file has one), and how they were
    matched: ``victim`` (its paper model) or ``family`` (the file has no row of that model)."""
    rows = [r for r in read_values(name) if dataset is None or "dataset" not in r or r["dataset"] == dataset]
    if victim.paper_model and any(r.get("paper_model") == victim.paper_model for r in read_values(name)):
        return [r for r in rows if r["paper_model"] == victim.paper_model], "victim"
    family = victim.paper_family
    return [r for r in rows if family and r["family"] == family], "family"


def caption(victim: Victim, how: str) -> str:
    """One line saying whom our row stands for and how the paper's rows were chosen."""
    line = f"Victim: {victim.model} is {victim.describe()}"
    line += f" ({victim.note})." if victim.note else "."
    if how == "family":
        line += f" The paper's rows shown are those of its architecture family ({victim.paper_family or '?'})."
    return line
