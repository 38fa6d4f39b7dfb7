"""Table 1: per model x facet the K=6 flip rate (the report's item flips: screened image set, the primary
judge's sem-flip where judged), per-dataset cells averaged unweighted as the paper does, the mean of the five
main facets, and the panel mean row; each with an item-bootstrap interval (the project's one rule,
`metrics.flips.item_interval`) whose replicates are averaged level by level like the point values."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from facet_probe.facets import MAIN_FACETS
from facet_probe.judge.tables import combined_source
from facet_probe.metrics.flips import INTERVAL_SEED, bootstrap_means, cell_rng, item_interval, nested_weights

MEAN5 = "mean5"
PANEL = "panel mean"


def _cell_parts(items: pd.DataFrame, n_boot: int, seed: int) -> dict[tuple, tuple[list, list]]:
    """(model, facet) -> (item flips per dataset, (n_boot,) bootstrap means per dataset), each cell seeded by
    its own key so a cell's interval does not depend on the other cells."""
    parts: dict[tuple, tuple[list, list]] = {}
    for key, g in items.groupby(["model", "facet", "dataset"], sort=True):
        values = g["flip"].to_numpy(dtype=float)
        got = parts.setdefault(key[:2], ([], []))
        got[0].append(values)
        got[1].append(bootstrap_means(values, n_boot, cell_rng(seed, key))[:, 0])
    return parts


def _nested(parts: dict, groups: list[list[tuple]], level: float) -> dict:
    """The mean over groups of the mean over each group's (model, facet) members of their dataset means, for the
    point and for every bootstrap replicate alike; the interval from those replicates (where they are all equal,
    Wilson around that same nested mean: `item_interval` with the items' `nested_weights`)."""
    def member(key):
        values, boots = parts[key]
        return np.nanmean([np.nanmean(v) for v in values]), np.nanmean(np.vstack(boots), axis=0)
    points: list[float] = []
    reps: list[np.ndarray] = []
    flat: list[np.ndarray] = []  # each item's values
    codes: list[np.ndarray] = []
    for g, group in enumerate(groups):
        got = [member(key) for key in group]
        points.append(np.nanmean([p for p, _ in got]))
        reps.append(np.nanmean(np.vstack([r for _, r in got]), axis=0))
        for m, key in enumerate(group):
            for v in parts[key][0]:  # each item's (group, member, dataset cell): its weight in the point
                codes.append(np.tile([g, m, len(flat)], (len(v), 1)))
                flat.append(v)
    values = np.concatenate(flat)[:, None]
    weights = nested_weights(~np.isnan(values), list(np.concatenate(codes).T))
    lo, hi = item_interval(values, np.nanmean(np.vstack(reps), axis=0)[:, None], level, weights=weights)
    return {"flip": float(np.nanmean(points)), "flip_lo": float(lo[0]), "flip_hi": float(hi[0]),
            "n_items": int(sum(len(v) for v in flat)), "n_cells": sum(len(parts[k][0]) for g in groups for k in g)}


def table1(items: pd.DataFrame, n_boot: int = 1000, seed: int = INTERVAL_SEED, level: float = 0.95,
           main_facets: tuple[str, ...] = tuple(MAIN_FACETS)) -> pd.DataFrame:
    """Long table (model, facet, flip, flip_lo, flip_hi, n_items, n_cells, flip_source); `facet` is a facet, or
    `mean5` (the main facets present); `model` is a model, or `panel mean` (over the models)."""
    parts = _cell_parts(items, n_boot, seed)
    sources = _sources(items)
    models = sorted({m for m, _ in parts})
    facets = sorted({f for _, f in parts})
    rows = [{"model": m, "facet": f, **_nested(parts, [[(m, f)]], level), "flip_source": sources[(m, f)]}
            for m, f in sorted(parts)]
    main = _main_cells(parts, main_facets)
    rows += _mean5_rows(parts, main, sources, level)
    rows += [{"model": PANEL, "facet": f, **_nested(parts, [[(m, f)] for m in models if (m, f) in parts], level)}
             for f in facets]
    if main:
        rows.append({"model": PANEL, "facet": MEAN5, **_nested(parts, list(main.values()), level)})
    return pd.DataFrame(rows).fillna({"flip_source": ""})


def model_flips(items: pd.DataFrame, n_boot: int = 1000, seed: int = INTERVAL_SEED, level: float = 0.95,
                main_facets: tuple[str, ...] = tuple(MAIN_FACETS)) -> pd.DataFrame:
    """Per model, the mean5 value Table 1 prints (model, flip, flip_lo, flip_hi, n_items, n_cells,
    flip_source): ODI's capability vs flip reads this, so theta is set against Table 1's own number."""
    parts = _cell_parts(items, n_boot, seed)
    rows = _mean5_rows(parts, _main_cells(parts, main_facets), _sources(items), level)
    columns = ["model", "facet", "flip", "flip_lo", "flip_hi", "n_items", "n_cells", "flip_source"]
    return pd.DataFrame(rows, columns=columns).drop(columns="facet")


def _sources(items: pd.DataFrame) -> pd.Series:
    """(model, facet) -> where its item flips come from (`judge.tables.combined_source`)."""
    return items.groupby(["model", "facet"])["flip_source"].agg(combined_source)


def _main_cells(parts: dict, main_facets: tuple[str, ...]) -> dict[str, list[tuple]]:
    """model -> its (model, facet) cells of the main facets (models with none left out)."""
    models = sorted({m for m, _ in parts})
    main = {m: [(m, f) for f in main_facets if (m, f) in parts] for m in models}
    return {m: cells for m, cells in main.items() if cells}


def _mean5_rows(parts: dict, main: dict[str, list[tuple]], sources: pd.Series, level: float) -> list[dict]:
    """Table 1's mean5 row per model: the unweighted mean over its main facets, with its interval and sources."""
    return [{"model": m, "facet": MEAN5, **_nested(parts, [cells], level),
             "flip_source": combined_source(sources[c] for c in cells)} for m, cells in main.items()]


def same_population(table: pd.DataFrame, items: pd.DataFrame, paper: pd.DataFrame,
                    paper_datasets: Mapping[str, Iterable[str]]) -> pd.DataFrame:
    """`table` with the paper's value and our difference (`paper_flip`, `paper_difference`) only where the two
    measure one population: the same model and facet over the paper's datasets for that facet
    (`paper_datasets`), and for mean5 every main facet so; `paper_population` says, per row, whether they match
    and over which datasets each side averaged."""
    ours = items.groupby(["model", "facet"])["dataset"].agg(lambda d: tuple(sorted(set(map(str, d)))))
    theirs = {f: tuple(sorted(d)) for f, d in paper_datasets.items()}
    matched = {key: theirs.get(key[1]) == datasets for key, datasets in ours.items()}

    def population(row) -> str:
        if row.facet == MEAN5:
            facets = [f for m, f in matched if m == row.model and f in MAIN_FACETS]
            ok = len(facets) == len(MAIN_FACETS) and all(matched[(row.model, f)] for f in facets)
            return "same (every main facet over the paper's datasets)" if ok else \
                "differs (mean5 over other facets or datasets than the paper's)"
        got = ours.get((row.model, row.facet))
        if got is None:
            return ""
        if matched[(row.model, row.facet)]:
            return f"same datasets ({', '.join(got)})"
        return f"differs: ours {', '.join(got)}; the paper's {', '.join(theirs.get(row.facet, ())) or 'none'}"

    long = table.merge(paper, on=["model", "facet"], how="left")
    long["paper_population"] = [population(r) if pd.notna(r.paper_flip) else "" for r in long.itertuples()]
    same = long["paper_population"].str.startswith("same")
    long.loc[~same, "paper_flip"] = np.nan
    long["paper_difference"] = long["flip"] - long["paper_flip"]
    return long


def wide(table: pd.DataFrame, published: pd.DataFrame | None = None, digits: int = 3) -> pd.DataFrame:
    """Models as rows, facets (then mean5) as columns, each cell 'flip [lo, hi]'; where `published` (model, facet,
    paper_flip: only the rows `same_population` kept) has the row, a 'paper' column beside it with the difference."""
    text = table.assign(text=[f"{r.flip:.{digits}f} [{r.flip_lo:.{digits}f}, {r.flip_hi:.{digits}f}]"
                              for r in table.itertuples()])
    present = set(text["facet"])
    facets = [f for f in [*MAIN_FACETS, *sorted(present - set(MAIN_FACETS) - {MEAN5}), MEAN5] if f in present]
    out = text.pivot(index="model", columns="facet", values="text").reindex(columns=facets)
    if published is not None:
        joined = text.merge(published.dropna(subset=["paper_flip"]), on=["model", "facet"], how="inner")
        if len(joined):
            joined["paper"] = [f"{r.paper_flip:.{digits}f} ({r.flip - r.paper_flip:+.{digits}f})"
                               for r in joined.itertuples()]
            paper = joined.pivot(index="model", columns="facet", values="paper")
            out = out.join(paper.reindex(columns=[f for f in facets if f in paper]).add_suffix(" | paper (diff)"))
    order = [m for m in out.index if m != PANEL] + ([PANEL] if PANEL in out.index else [])
    return out.reindex(order).fillna("")
