"""How tightly the sampler's other coordinates pin each facet's hierarchical scale in the ODI model.

For a per-facet coordinate c (tau_log_sigma_signed; sigma_delta_signed too in the paper variant), the
curvature of the log density in c with every other coordinate held, times c's posterior variance, is about 1
when c can cross its posterior on its own and grows with the ridge that pins it: NUTS with a diagonal mass
matrix then mixes c slowly (docs/odi.md, "What pinned tau, measured"). The curvature is also split by the
terms of `model.logp()`, which shows which prior or likelihood holds c. Same simulated data as bench_odi.py.

    python benchmarks/odi_pinning.py [--items-per-facet 720] [--variant positional] [--scales conditional] \
        [--tune 300] [--draws 200] [--points 4]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pytensor
import pytensor.tensor as pt

from facet_probe.odi.data import build_odi_data
from facet_probe.odi.fit import FitSettings, fit
from facet_probe.odi.model import build_model, parse_scales
from facet_probe.odi.simulate import SimSpec, simulate

SCALE_COORDINATES = ("tau_log_sigma_signed", "tau_log_sigma_log__", "sigma_delta_signed", "sigma_delta_log__")


def curvature_fn(model, coordinate):
    """A function of the value variables: the diagonal of each logp term's Hessian in `coordinate` (per facet)."""
    terms = model.logp(sum=False)
    names = [rv.name for rv in model.basic_RVs] + [pot.name for pot in model.potentials]
    n = coordinate.type.shape[0] or len(model.coords["facet"])

    def diagonal(term):
        grad = pt.grad(term.sum(), coordinate, disconnected_inputs="ignore")
        return pt.stack([pt.grad(grad[f], coordinate, disconnected_inputs="ignore")[f] for f in range(n)])

    fn = pytensor.function(model.value_vars, [diagonal(t) for t in terms], on_unused_input="ignore")
    return fn, names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items-per-facet", type=int, default=720)
    ap.add_argument("--variant", default="positional", choices=["paper", "positional"])
    ap.add_argument("--scales", default="conditional", help="conditional | noncentred | centred")
    ap.add_argument("--tune", type=int, default=300)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--points", type=int, default=4, help="posterior draws at which the curvature is taken")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    sim = simulate(SimSpec(items_per_facet=args.items_per_facet, position_bias=((0.3, 0.0, -0.3),) * 5,
                           ordering_bias_sd=0.0, seed=args.seed))
    data = build_odi_data(sim.trials, "correct", sim.facts, positional=args.variant == "positional")
    model = build_model(data, args.variant, scales=parse_scales(args.scales))
    t0 = time.perf_counter()
    idata, wall = fit(model, FitSettings(tune=args.tune, draws=args.draws, chains=args.chains, seed=args.seed,
                                         progress=False))
    print(f"{data.n_trials} trials, {args.variant}, scales={args.scales}: {args.chains} x ({args.tune} + "
          f"{args.draws}) in {wall:.1f} s sampling ({time.perf_counter() - t0:.1f} s with compilation)")
    post = idata.posterior
    rng = np.random.default_rng(args.seed)
    picks = [(int(c), int(d)) for c, d in zip(rng.integers(0, post.sizes["chain"], args.points),
                                              rng.integers(0, post.sizes["draw"], args.points), strict=True)]
    facets = list(model.coords["facet"])
    for coordinate in (v for v in model.value_vars if v.name in SCALE_COORDINATES):
        fn, names = curvature_fn(model, coordinate)
        variance = post[coordinate.name].values.reshape(-1, len(facets)).var(axis=0)
        per_point = [fn(*(post[v.name].values[c, d].astype(v.dtype) for v in model.value_vars)) for c, d in picks]
        by_term = -np.mean(per_point, axis=0)  # (terms, facets): curvature = minus the second derivative
        pinning = by_term.sum(axis=0) * variance
        print(f"\n{coordinate.name}: curvature with the rest held x posterior variance (1 = free), mean of "
              f"{len(picks)} draws")
        for f, facet in enumerate(facets):
            held = ", ".join(f"{name} {by_term[t, f]:+.0f}" for t, name in enumerate(names) if abs(by_term[t, f]) >= 1)
            print(f"  {facet:24s} {pinning[f]:6.1f}  (posterior sd {np.sqrt(variance[f]):.3f}; by term: {held})")


if __name__ == "__main__":
    main()
