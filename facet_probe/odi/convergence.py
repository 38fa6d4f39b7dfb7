"""A posterior's convergence verdict: one rule and one label, carried by every table and figure built from it
(the ODI app's own and the paper's `table2-odi` and `fig-capability`). Light on purpose (numpy only): the
paper targets read it without importing PyMC."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: A posterior is shown as a result only with every reported parameter's R-hat <= RHAT_LIMIT and bulk ESS >=
#: ESS_LIMIT (Vehtari et al. 2021's thresholds); anything built from it says "not converged" otherwise.
RHAT_LIMIT = 1.01
ESS_LIMIT = 400


@dataclass(frozen=True)
class Convergence:
    """A fit's convergence verdict and the label every table and figure built from its posterior carries."""

    rhat_max: float  # NaN: unknown (one chain, ADVI, or no diagnostics found)
    ess_bulk_min: float
    sampler: str = "nutpie"
    smoke: bool = False

    @classmethod
    def of(cls, fit_summary: dict | None) -> Convergence:
        """From a `fit_summary.json` (None or missing keys: unknown diagnostics, never converged)."""
        got = fit_summary or {}
        return cls(float(got.get("rhat_max", np.nan)), float(got.get("ess_bulk_min", np.nan)),
                   str(got.get("sampler", "unknown")), bool(got.get("smoke", False)))

    @property
    def converged(self) -> bool:
        """R-hat max <= RHAT_LIMIT and min bulk ESS >= ESS_LIMIT from MCMC (NaN, or ADVI, is never converged)."""
        return self.sampler != "advi" and self.rhat_max <= RHAT_LIMIT and self.ess_bulk_min >= ESS_LIMIT

    @property
    def label(self) -> str:
        """E.g. "smoke fit, not converged (R-hat max 2.49 > 1.01, min bulk ESS 2.8 < 400)"."""
        def shown(name: str, x: float, digits: int, ok: bool, fails: str) -> str:
            return f"{name} unknown" if np.isnan(x) else f"{name} {x:.{digits}f}" + ("" if ok else f" {fails}")
        rhat = ("ADVI, no R-hat" if self.sampler == "advi" else
                shown("R-hat max", self.rhat_max, 3, self.rhat_max <= RHAT_LIMIT, f"> {RHAT_LIMIT}"))
        ess = shown("min bulk ESS", self.ess_bulk_min, 1 if self.ess_bulk_min < 10 else 0,
                    self.ess_bulk_min >= ESS_LIMIT, f"< {ESS_LIMIT}")
        verdict = "converged" if self.converged else "not converged"
        return ("smoke fit, " if self.smoke else "") + f"{verdict} ({rhat}, {ess})"

    @property
    def result(self) -> bool:
        """Whether its posterior may be shown as a result: converged, and not a smoke fit."""
        return self.converged and not self.smoke

    @property
    def colour(self) -> str:
        """The colour of a title carrying the label: red unless the posterior is a result (a reader must see it)."""
        return "black" if self.result else "firebrick"

    def columns(self) -> dict:
        """The verdict as table columns: rhat_max, ess_bulk_min, converged, fit (the label)."""
        return {"rhat_max": self.rhat_max, "ess_bulk_min": self.ess_bulk_min, "converged": self.converged,
                "fit": self.label}


def caption_note(fits: dict[str, Convergence]) -> str:
    """A caption's opening naming each fit's label, led by "NOT A RESULT" unless every fit is one."""
    labels = "; ".join(f"{name}: {fit.label}" for name, fit in fits.items())
    if all(fit.result for fit in fits.values()):
        return f"Posterior fits: {labels}. "
    return (f"NOT A RESULT (a posterior is shown as one only from a full fit with R-hat max <= {RHAT_LIMIT} and "
            f"min bulk ESS >= {ESS_LIMIT}): {labels}. ")
