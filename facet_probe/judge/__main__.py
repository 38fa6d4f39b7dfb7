"""Hydra entry: python -m facet_probe.judge input=<run folder> judge=<name> (config `conf/judge_app.yaml`)."""

from __future__ import annotations

from facet_probe.judge.run import judge_run_folder


def main() -> None:
    import hydra
    from hydra.utils import instantiate
    from omegaconf import DictConfig

    @hydra.main(config_path="../conf", config_name="judge_app", version_base=None)
    def _run(cfg: DictConfig) -> None:
        if not cfg.get("judge"):
            raise SystemExit("judge=none: choose a judge, e.g. judge=gemini_pro or judge=gpt_54_mini")
        judge = instantiate(cfg.judge)
        out = judge_run_folder(cfg.input, judge)
        spent = judge.runner.cost_summary() if hasattr(judge.runner, "cost_summary") else {}
        if spent:
            print(
                f"judge calls this run: {spent.get('calls', 0)} ({spent.get('errors', 0)} failed), "
                f"estimated cost ${spent.get('cost_usd', 0):.4f}"
            )
        flips = out["semantic_flip"]
        for (judge, model), group in flips.groupby(["judge", "model"]):
            mean = group["semantic_flip"].mean()
            print(f"{judge} on {model}: {len(group)} items, mean semantic flip {mean:.3f}")
        for row in out["judge_agreement"].itertuples():
            print(f"kappa({row.judge_1}, {row.judge_2}) = {row.kappa:.3f} on {row.n} answers")
        print(f"wrote judgments.csv, semantic_flip.csv, judge_agreement.csv in {cfg.input}")

    _run()


if __name__ == "__main__":
    main()
