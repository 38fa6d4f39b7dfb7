"""Hydra entry: python -m facet_probe.judge input=<run folder | folder of run folders> judge=<name>
(config `conf/judge_app.yaml`). A folder of run folders (e.g. outputs/<model>) judges each run folder in it."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from facet_probe.judge.protocol import UNREADABLE
from facet_probe.judge.run import judge_run_folder

log = logging.getLogger("facet_probe.judge")


def judge_folders(cfg) -> Path:
    """Check the judge's key, then judge every run folder of the input and print what each got; each folder's
    judge calls are priced into its cost.json, and `budget_usd` caps what the judge costs on them (all sessions)."""
    from hydra.utils import instantiate

    from facet_probe.app.boundary import RunIncomplete
    from facet_probe.config.schema import first_path
    from facet_probe.core.errors import ConfigError
    from facet_probe.runners.base import declared
    from facet_probe.runners.cost.ledger import CostLedger, model_budget
    from facet_probe.runners.cost.paid import with_paid_runner
    from facet_probe.runners.cost.prices import load_price_table
    from facet_probe.store.run_folder import RunFolder, run_inputs

    if not cfg.get("judge"):
        raise ConfigError("judge=none: choose a judge, e.g. judge=gemini_pro or judge=gpt_54_mini")
    folders = run_inputs(cfg.input)
    not_folders = [str(p) for p in folders if not p.is_dir()]
    if not_folders:
        raise ConfigError(f"input {', '.join(not_folders)}: the judge needs run folders (with items.jsonl), "
                          "not trials files")
    judge = instantiate(cfg.judge)
    judge.runner.check_ready()  # a missing key fails before any work
    budget, table = model_budget(cfg, judge.runner.name, folders), load_price_table()
    for i, folder in enumerate(folders):
        ledger = CostLedger(RunFolder(folder).cost_file, budget, table)
        report(folder, judge_run_folder(folder, with_paid_runner(judge, ledger)))
        if ledger.stopped is not None:
            left = f"; {len(folders) - i - 1} more input folder(s) not judged" if i + 1 < len(folders) else ""
            raise RunIncomplete(folder, f"the judge stopped at budget_usd={budget.limit:g} in {folder}{left}. "
                                        "Raise budget_usd= and re-run the same command to judge the rest "
                                        "(judgments made are kept)")
    paid = declared(judge.runner).cost
    spent = paid.cost_summary() if paid is not None else {}
    if spent:
        print(f"judge calls this run: {spent.get('calls', 0)} ({spent.get('errors', 0)} failed), "
              f"estimated cost ${spent.get('cost_usd', 0):.4f}")
    return Path(first_path(cfg.input))  # a list's first folder


def report(folder: Path, out: dict) -> None:
    """One line per (judge, model) and per judge pair of a judged folder."""
    for (judge, model), group in out["semantic_flip"].groupby(["judge", "model"]):
        per_answer = group["sem_flip_answers"].mean()
        unreadable, cut = int(group["unreadable"].sum()), int(group["n_answers_cut"].sum())
        counted = int(group["set_verdict"].eq(UNREADABLE).sum())
        print(f"{folder}: {judge} ({group['protocol'].iloc[0]}) on {model}: {len(group)} cases, "
              f"mean semantic flip (set, (B+C)/n) {group['sem_flip_set'].mean():.3f}"
              + ("" if pd.isna(per_answer) else f", per answer {per_answer:.3f}")
              + f"; {unreadable} unreadable judge replies ({counted} counted in n as \"?\", "
                f"{unreadable - counted} left out and asked again next run), {cut} answers sent cut to their tail")
    for row in out["judge_agreement"].itertuples():
        print(f"{folder}: kappa({row.judge_1}, {row.judge_2}) = {row.kappa:.3f} on {row.n} cases")
    print(f"wrote judgments.csv, semantic_flip.csv, judge_agreement.csv in {folder}")


def main() -> None:
    """The command line (`python -m facet_probe.judge`, the `facet-probe-judge` script)."""
    import hydra
    from omegaconf import DictConfig

    from facet_probe.app.boundary import main_entry, run_app, stored_line
    from facet_probe.config.schema import register
    from facet_probe.store.run_folder import RunFolder, run_inputs

    register()  # the resolvers judge_app.yaml reads (fp_first_path in hydra.run.dir)

    @hydra.main(config_path="../conf", config_name="judge_app", version_base=None)
    def _run(cfg: DictConfig) -> None:
        run_app(lambda: judge_folders(cfg), log,
                stored=lambda: stored_line([RunFolder(f).judgments_file for f in run_inputs(cfg.input)],
                                          "judgments"))

    main_entry(_run)


if __name__ == "__main__":
    main()
