"""ODI sampling benchmark on simulated trials (default 108k: 18 models, 200 items per facet, 5 facets, 2 datasets
each, 6 orderings), ours and, given a local checkout of the reference (FACET-PROBE v0.0.1), the reference's own
`irt.py` on the same data in the same run, so every ratio printed is of two fits measured side by side.

    git -C /work/.mirror/yahskapar+facet-probe/repo archive HEAD src | tar -x -C /tmp/refsrc
    nice python benchmarks/bench_odi.py [--reference /tmp/refsrc] [--variant paper] [--sampler nutpie] \
        [--tune 300] [--draws 600] [--items-per-facet 200] [--kernel blocked graph] [--time-gradient 100] \
        [--variant paper positional] [--scales conditional noncentred centred] [--mass-matrix diag low_rank]

Every combination of the listed --variant, --kernel, --scales and --mass-matrix values is fitted in this run,
one after the other on the same data; the reference (paper model) once.

The reference is imported from `<checkout>/src` in a subprocess of its own (its package is also called
`facet_probe`); nothing of it is copied here. Without `--reference` only ours runs and no ratio is printed.
Min ESS is taken over the parameters the reference's own diagnostics read (mu_beta, sigma_beta, mu_log_sigma,
tau_log_sigma, sigma_delta, theta) where a fit has them, and for ours also over every reported parameter.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import arviz as az
import numpy as np

from facet_probe.odi.data import build_odi_data
from facet_probe.odi.fit import (
    FitSettings,
    MassMatrix,
    diagnostics,
    fit,
    parse_mass_matrix,
    prepare_xla,
    resolve_backend,
    summary,
)
from facet_probe.odi.kernel import LoglikKernel, parse_kernel
from facet_probe.odi.model import ScaleParam, build_model, parse_scales
from facet_probe.odi.simulate import SimSpec, simulate

#: The reference's `_diagnostics` var_names (irt.py): the common ground for min ESS.
REFERENCE_VARS = ("mu_beta", "sigma_beta", "mu_log_sigma", "tau_log_sigma", "sigma_delta", "theta")

REFERENCE_SCRIPT = r"""
import json, sys, time
import arviz as az
from facet_probe import irt  # the reference's package, from the checkout on sys.path
rows_path, out_path, chains, tune, draws, seed, var_names = sys.argv[1:8]
rows = json.load(open(rows_path))
enc = irt._encode_fit_rows(irt._prepare_fit_rows(rows, outcome="correct", limit_items_per_facet=None),
                           require_numpy=True)
stack = irt._load_pymc_stack()
t0 = time.perf_counter()
idata = irt._sample_pymc_model(enc, n_chains=int(chains), n_draws=int(draws), n_tune=int(tune), target_accept=0.95,
                               nuts_sampler="numpyro", chain_method="parallel", seed=int(seed), progressbar=False,
                               stack=stack)
wall = time.perf_counter() - t0
names = [v for v in var_names.split(",") if v in idata.posterior]
ess = az.ess(idata, var_names=names, method="bulk")
rhat = az.rhat(idata, var_names=names)
json.dump({"wall_s": wall, "ess_bulk_min": min(float(ess[v].min()) for v in names),
           "rhat_max": max(float(rhat[v].max()) for v in names),
           "theta": [float(x) for x in idata.posterior["theta"].mean(("chain", "draw")).values]}, open(out_path, "w"))
"""


def reference_rows(trials) -> list[dict]:
    """Our simulated trials as the reference's IRT input rows (its `_irt_row` fields that its fit reads)."""
    return [{"outcome": "correct", "outcome_value": int(c), "facet": f, "dataset": d, "model": m, "item_id": i,
             "ordering_idx": int(o)} for f, d, m, i, o, c in zip(
        trials["facet"], trials["dataset"], trials["model"], trials["item_id"], trials["ordering_idx"],
        trials["correct"], strict=True)]


def run_reference(checkout: Path, trials, args) -> dict:
    src = checkout / "src"
    if not (src / "facet_probe" / "irt.py").is_file():
        raise SystemExit(f"--reference {checkout}: no src/facet_probe/irt.py there (extract the reference's src/ "
                         "with git archive, see the docstring)")
    with tempfile.TemporaryDirectory() as tmp:
        rows, out = Path(tmp) / "rows.json", Path(tmp) / "out.json"
        rows.write_text(json.dumps(reference_rows(trials)))
        env = {**os.environ, "PYTHONPATH": str(src),
               "XLA_FLAGS": f"--xla_force_host_platform_device_count={min(args.chains, os.cpu_count() or 1)}"}
        proc = subprocess.run([sys.executable, "-c", REFERENCE_SCRIPT, str(rows), str(out), str(args.chains),
                               str(args.tune), str(args.draws), str(args.seed), ",".join(REFERENCE_VARS)], env=env, capture_output=True,
                              text=True, cwd=tmp)
        if proc.returncode:
            raise SystemExit(f"the reference's fit failed:\n{proc.stderr[-3000:]}")
        return json.loads(out.read_text())


def run_ours(data, sim, args, variant: str, kernel: LoglikKernel, scales: ScaleParam, mass: MassMatrix) -> float:
    """Fit ours once with these settings, print its figures; returns min bulk ESS per second (common vars)."""
    label = f"variant={variant} kernel={kernel} scales={scales} mass_matrix={mass}"
    print(f"ours, {label}: load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    t1 = time.perf_counter()
    model = build_model(data, variant, float32=not args.float64, kernel=kernel, scales=scales)
    settings = FitSettings(sampler=args.sampler, tune=args.tune, draws=args.draws, chains=args.chains,
                           nutpie_backend=args.backend, seed=args.seed, progress=False, mass_matrix=mass)
    idata, wall = fit(model, settings)
    total = time.perf_counter() - t1
    table = diagnostics(idata, wall)
    head = summary(idata, wall, settings)
    common = [v for v in REFERENCE_VARS if v in idata.posterior]
    ess_common = az.ess(idata, var_names=common, method="bulk")
    ours_common = min(float(ess_common[v].min()) for v in common)
    steps = float(idata.sample_stats["n_steps"].mean()) if "n_steps" in idata.sample_stats else float("nan")
    print(f"ours: {label} sampler={args.sampler} backend={resolve_backend(args.backend)} "
          f"float32={not args.float64} chains={args.chains} tune={args.tune} draws={args.draws}")
    print(f"ours: sampling {wall:.1f} s (build + compile + sampling {total:.1f} s), {steps:.0f} leapfrog steps "
          "per draw")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    lowest = min(common, key=lambda v: float(ess_common[v].min()))
    print(f"ours: min bulk ESS over {', '.join(common)}: {ours_common:.0f} ({lowest}) -> {ours_common / wall:.3f} "
          f"ESS/s; over every reported parameter {head['ess_bulk_min']:.0f}; R-hat max {head['rhat_max']:.3f}; "
          f"divergences {head['divergences']}")
    print(f"row | {label} | {wall:.1f} s | {steps:.0f} | {ours_common:.0f} ({lowest}) | {ours_common / wall:.3f} | "
          f"{head['rhat_max']:.3f} | {head['divergences']}", flush=True)
    truth = sim.truth["theta"].loc[list(data.models)]
    theta = idata.posterior["theta"].mean(("chain", "draw")).values
    print(f"ours: theta vs truth r = {np.corrcoef(theta, truth)[0, 1]:.3f} (load average {os.getloadavg()[0]:.1f})",
          flush=True)
    return ours_common / wall


def time_gradients(data, args, rounds: int = 6) -> None:
    """Median ms per logp + gradient (nutpie's JAX function) for each kernel and pair layout, timed interleaved: on
    one thread, and as the throughput of two threads calling at once (two chains on two cores, as a fit runs)."""
    import threading

    import nutpie

    funcs = {}
    for kernel in args.kernel:
        for gather in (False, True):
            model = build_model(data, args.variant[0], float32=not args.float64, kernel=kernel, gather=gather)
            compiled = nutpie.compile_pymc_model(model, backend="jax", gradient_backend="jax")
            calls = []
            for chain in range(2):  # one callable per thread, as nutpie makes one per chain
                logp = compiled._make_logp_func()
                point = np.random.default_rng(args.seed + chain).normal(size=compiled._n_dim) * 0.1
                for _ in range(5):
                    logp(point, **compiled._shared_data)
                calls.append((logp, compiled._shared_data, point))
            funcs[f"kernel={kernel} pairs={'gather' if gather else 'repeat'}"] = calls

    def run(call) -> None:
        logp, shared, point = call
        for _ in range(args.time_gradient):
            logp(point, **shared)

    one, two = ({name: [] for name in funcs} for _ in range(2))
    for _ in range(rounds):
        for name, calls in funcs.items():
            start = time.perf_counter()
            run(calls[0])
            one[name].append(1000 * (time.perf_counter() - start) / args.time_gradient)
            threads = [threading.Thread(target=run, args=(call,)) for call in calls]
            start = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            two[name].append(1000 * (time.perf_counter() - start) / (2 * args.time_gradient))
    for name in funcs:
        print(f"gradient: {name}: median {np.median(one[name]):.3f} ms per logp + gradient on one thread, "
              f"{np.median(two[name]):.3f} ms per gradient of throughput on two threads at once ({rounds} "
              f"interleaved rounds of {args.time_gradient}; XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r})")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", type=Path, default=None, help="a local checkout of the reference (with src/)")
    ap.add_argument("--variant", default=["paper"], nargs="+", choices=["paper", "positional"])
    ap.add_argument("--sampler", default="nutpie", choices=["nutpie", "numpyro", "pymc", "advi"])
    ap.add_argument("--backend", default="auto", help="nutpie backend: auto | jax | numba")
    ap.add_argument("--tune", type=int, default=300)
    ap.add_argument("--draws", type=int, default=600)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--items-per-facet", type=int, default=200)
    ap.add_argument("--kernel", type=parse_kernel, nargs="+", default=[LoglikKernel.auto],
                    help="likelihood kernel(s) for ours, each fitted in this run: auto | blocked | graph")
    ap.add_argument("--scales", type=parse_scales, nargs="+", default=[ScaleParam.conditional],
                    help="order noise and scale parametrisation(s): conditional | noncentred | centred")
    ap.add_argument("--mass-matrix", type=parse_mass_matrix, nargs="+", default=[MassMatrix.diag],
                    help="nutpie mass matrix adaptation(s): diag | low_rank")
    ap.add_argument("--float64", action="store_true", help="float64 likelihood terms (default float32)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-gradient", type=int, default=0, metavar="N",
                    help="only time N logp + gradient evaluations per round for each --kernel and pair layout")
    args = ap.parse_args()
    prepare_xla()  # as the ODI app sets XLA for its fits (fit.py); the reference's subprocess keeps XLA's defaults

    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start (shared machine: "
          "compare only figures of this one run)")
    t0 = time.perf_counter()
    sim = simulate(SimSpec(items_per_facet=args.items_per_facet, position_bias=((0.3, 0.0, -0.3),) * 5,
                           ordering_bias_sd=0.0, seed=args.seed))
    data = build_odi_data(sim.trials, "correct", sim.facts, positional="positional" in args.variant)
    t1 = time.perf_counter()
    print(f"data: {data.n_trials} trials, {len(data.items)} items, {len(data.pair_item)} item-orderings, "
          f"{len(data.models)} models (simulate + index {t1 - t0:.1f} s)")
    if args.time_gradient:
        time_gradients(data, args)
        return
    rates = {}
    for combo in itertools.product(args.variant, args.kernel, args.scales, args.mass_matrix):
        rates[combo] = run_ours(data, sim, args, *combo)
    if args.reference is None:
        print("no reference checkout given (--reference PATH): ran ours only, no ratio to the reference")
        return
    print(f"reference: load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    ref = run_reference(args.reference, sim.trials, args)
    truth = sim.truth["theta"].loc[list(data.models)]
    ref_rate = ref["ess_bulk_min"] / ref["wall_s"]
    print(f"reference (its irt.py, numpyro, target_accept 0.95, same data and chains/tune/draws): sampling "
          f"{ref['wall_s']:.1f} s, min bulk ESS {ref['ess_bulk_min']:.0f} -> {ref_rate:.3f} ESS/s, R-hat max "
          f"{ref['rhat_max']:.3f}, theta vs truth r = {np.corrcoef(ref['theta'], truth)[0, 1]:.3f}")
    for (variant, kernel, scales, mass), rate in rates.items():
        print(f"this run: ours (variant={variant} kernel={kernel} scales={scales} mass_matrix={mass}) / reference "
              f"min-ESS per second = x{rate / ref_rate:.1f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
