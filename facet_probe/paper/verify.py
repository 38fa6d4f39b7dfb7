"""`verify`: our aggregation reproduces the paper's model and panel means from the paper's per-cell values (the
published data alone: no `input=`)."""

from __future__ import annotations

import logging
from pathlib import Path

from facet_probe.paper import published, render
from facet_probe.paper.build_inputs import Inputs, published_only

log = logging.getLogger("facet_probe.paper")


@published_only
def verify(ctx: Inputs) -> list[Path]:
    """Our aggregation reproduces the paper's model and panel means from the paper's per-cell values."""
    checks = published.verify()
    files = render.write_table(checks, ctx.out, "verify", "Published values recomputed by our aggregation.")
    if not checks["ok"].all():
        bad = checks[~checks["ok"]]
        raise VerifyFailed(f"{len(bad)} of {len(checks)} published values are not reproduced, e.g. "
                           f"{bad.iloc[0]['check']}: published {bad.iloc[0]['published']:.6f}, ours "
                           f"{bad.iloc[0]['ours']:.6f} (see {files[0]})")
    log.info("verify: %d published values reproduced within %.0e", len(checks), published.TOLERANCE)
    return files


class VerifyFailed(Exception):
    """Our aggregation does not reproduce a published value (a bug, not a user error)."""
