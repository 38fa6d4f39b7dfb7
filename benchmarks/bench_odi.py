"""ODI sampling benchmark on 108k simulated trials (18 models, 200 items per facet, 5 facets, 2 datasets each,
6 orderings). Prints wall time, minimum bulk ESS per second and the extrapolation to paper scale.

    nice python benchmarks/bench_odi.py [--variant paper] [--sampler nutpie] [--tune 300] [--draws 600]

Reference (FACET-PROBE v0.0.1, numpyro, same data shape, busy 2-core machine): 2 chains x (200 tune + 200
draws) in 574 s, minimum bulk ESS 63, i.e. 0.110 ESS/s.
"""

from __future__ import annotations

import argparse
import os
import time

import arviz as az
import numpy as np

from facet_probe.odi.data import build_odi_data
from facet_probe.odi.fit import FitSettings, diagnostics, fit, resolve_backend, summary
from facet_probe.odi.model import build_model
from facet_probe.odi.simulate import SimSpec, simulate

REFERENCE_ESS_PER_S = 63 / 574
PAPER_TRIALS, PAPER_CHAINS, PAPER_DRAWS, PAPER_TUNE = 400_000, 4, 1000, 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", default="paper", choices=["paper", "positional"])
    ap.add_argument("--sampler", default="nutpie", choices=["nutpie", "numpyro", "pymc", "advi"])
    ap.add_argument("--backend", default="auto", help="nutpie backend: auto | jax | numba")
    ap.add_argument("--tune", type=int, default=300)
    ap.add_argument("--draws", type=int, default=600)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--float64", action="store_true", help="float64 likelihood terms (default float32)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    t0 = time.perf_counter()
    sim = simulate(SimSpec(position_bias=((0.3, 0.0, -0.3),) * 5, ordering_bias_sd=0.0, seed=args.seed))
    data = build_odi_data(sim.trials, "correct", sim.facts, positional=args.variant == "positional")
    t1 = time.perf_counter()
    model = build_model(data, args.variant, float32=not args.float64)
    settings = FitSettings(sampler=args.sampler, tune=args.tune, draws=args.draws, chains=args.chains,
                           nutpie_backend=args.backend, seed=args.seed, progress=False)
    idata, wall = fit(model, settings)
    total = time.perf_counter() - t1
    table = diagnostics(idata, wall)
    head = summary(idata, wall, settings)
    free = [v.name for v in model.free_RVs]
    ess_free = az.ess(idata, var_names=free, method="bulk")
    min_free = min(float(ess_free[v].min()) for v in ess_free.data_vars)

    cores = settings.n_cores
    per_chain_iter = wall * min(cores, args.chains) / (args.chains * (args.tune + args.draws))
    paper_s = per_chain_iter * PAPER_TRIALS / data.n_trials * PAPER_CHAINS * (PAPER_TUNE + PAPER_DRAWS) / cores
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"data: {data.n_trials} trials, {len(data.items)} items, {len(data.pair_item)} item-orderings, "
          f"{len(data.models)} models (simulate + index {t1 - t0:.1f} s)")
    print(f"fit: variant={args.variant} sampler={args.sampler} backend={resolve_backend(args.backend)} "
          f"float32={not args.float64} chains={args.chains} tune={args.tune} draws={args.draws}")
    print(f"wall: sampling {wall:.1f} s; build + compile + sampling {total:.1f} s")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print(f"min bulk ESS (reported parameters) {head['ess_bulk_min']:.0f} -> {head['ess_bulk_min_per_s']:.3f} ESS/s; "
          f"over all free parameters {min_free:.0f} -> {min_free / wall:.3f} ESS/s")
    print(f"R-hat max {head['rhat_max']:.3f}; divergences {head['divergences']}")
    if args.sampler == "advi":
        print("ADVI: draws are independent samples of the fitted approximation; their ESS is not comparable")
    print(f"vs reference 0.110 ESS/s: x{head['ess_bulk_min_per_s'] / REFERENCE_ESS_PER_S:.1f} "
          f"(all free parameters: x{min_free / wall / REFERENCE_ESS_PER_S:.1f})")
    print(f"extrapolated paper scale ({PAPER_TRIALS} trials, {PAPER_CHAINS} chains x ({PAPER_TUNE} tune + "
          f"{PAPER_DRAWS} draws) on {cores} cores, same tree depth, linear in trials): {paper_s / 60:.0f} min")
    theta = idata.posterior["theta"].mean(("chain", "draw")).values
    print(f"theta vs truth: r = {np.corrcoef(theta, sim.truth['theta'].loc[list(data.models)])[0, 1]:.3f}")


if __name__ == "__main__":
    main()
