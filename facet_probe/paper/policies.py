"""Mitigation policies P1-P6 (the paper's Table 4), the K ablation and K=2/3 disagreement as a flip detector,
computed from the stored K=6 trials of a cell, with each policy's cost in calls and tokens.

Per item, one answer per ordering (repeat 0), orderings 0..K-1 of the manifest (ordering 0 is the source
order). The reference does not record which orderings its P2/P3 used; these use the first two / three of
the manifest, so a policy's number is a property of the stored run, not of a fresh draw.

- P1 single pass: the expected accuracy of one call (the mean over the K orderings);
- P2 two orderings, abstain on disagreement: coverage (the two agree on a parsed answer), accuracy where
  covered (selective: the paper's P2 number) and all-items accuracy (an abstention counts as wrong);
- P3 / P4 majority of the first 3 / all K answers (ties: the answer of the earliest ordering, as
  `metrics.flips.item_metrics`' modal answer);
- P5 worst-ordering oracle: right only if right under every ordering; P6 best-ordering oracle: right under
  at least one. Both read the gold answer (`Policy.oracle`): bounds, never on the cost front.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from facet_probe.core.trials import PARSE_ERROR
from facet_probe.metrics.flips import CELL_KEYS, nanmean, one_answer_per_ordering, prepare_trials


@dataclass(frozen=True)
class Policy:
    """A mitigation policy: its id, label and cost in calls per item, and what it may use."""

    id: str
    label: str
    calls: int
    #: it picks among the orderings' answers by the gold answer, which no deployed policy knows: a reference
    #: bound (drawn off the cost front, never on it), not a policy one could run
    oracle: bool = False
    #: it answers only some items (its `accuracy` is over those, `coverage` the share answered)
    abstains: bool = False


POLICIES = (
    Policy("P1", "P1 single pass", 1),
    Policy("P2", "P2 two orderings, abstain on disagreement", 2, abstains=True),
    Policy("P3", "P3 majority of 3", 3),
    Policy("P4", "P4 majority of 6", 6),
    Policy("P5", "P5 worst-ordering oracle", 6, oracle=True),
    Policy("P6", "P6 best-ordering oracle", 6, oracle=True),
)
#: P3 is a majority of the first 3 orderings: a cell of fewer has no P1-P6 row (and no K' < K detector)
MIN_POLICY_K = 3
_IN = ("input_tokens", "prompt_tokens")
_OUT = ("output_tokens", "completion_tokens")


@dataclass(frozen=True)
class CellGrid:
    """One cell's items x orderings: answer codes (-1: parse error), correctness (0/1) and tokens per call."""

    keys: pd.DataFrame  # ITEM_KEYS per row
    answers: np.ndarray  # (items, K) int
    correct: np.ndarray  # (items, K) float
    tokens: np.ndarray  # (items, K) float, NaN where the trial recorded no usage


def trial_tokens(usage: pd.Series) -> pd.Series:
    """Tokens of each call (prompt + reply, whichever names the runner used), NaN where none was recorded."""
    def total(u) -> float:
        if not isinstance(u, dict) or not u:
            return np.nan
        return float(sum(u.get(k, 0) or 0 for k in _IN) + sum(u.get(k, 0) or 0 for k in _OUT))
    return usage.map(total) if len(usage) else pd.Series(dtype=float)


def cell_grids(trials: pd.DataFrame) -> dict[tuple, CellGrid]:
    """Per cell, its complete items as an (items x K) grid; items lacking an ordering are left out."""
    prepared = prepare_trials(trials)
    prepared["tokens"] = trial_tokens(trials["usage"]).to_numpy() if "usage" in trials else np.nan
    one = one_answer_per_ordering(prepared)
    grids = {}
    for cell, group in one.groupby(CELL_KEYS, sort=True, observed=True):
        k = int(group["ordering_idx"].max()) + 1
        code = np.where(group["answer"].eq(PARSE_ERROR), -1, pd.factorize(group["answer"])[0])
        wide = (group.assign(code=code, item_id=group["item_id"].astype(str))
                .pivot(index="item_id", columns="ordering_idx", values=["code", "correct", "tokens"]))
        part = {v: wide[v].reindex(columns=range(k)) for v in ("code", "correct", "tokens")}
        complete = part["code"].notna().all(axis=1).to_numpy()
        keys = pd.DataFrame({**dict(zip(CELL_KEYS, cell, strict=True)), "item_id": wide.index[complete]})
        grids[cell] = CellGrid(keys, part["code"][complete].to_numpy(dtype=int),
                               part["correct"][complete].to_numpy(dtype=float),
                               part["tokens"][complete].to_numpy(dtype=float))
    return grids


def majority(answers: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """Correctness of the modal answer per row (ties to the earliest ordering; parse errors never win)."""
    valid = answers >= 0
    same = (answers[:, :, None] == answers[:, None, :]) & valid[:, :, None] & valid[:, None, :]
    votes = same.sum(axis=2)  # how many orderings gave each ordering's answer
    best = np.argmax(votes, axis=1)  # argmax returns the first (earliest) ordering among ties
    out = correct[np.arange(len(answers)), best]
    return np.where(valid.any(axis=1), out, 0.0)


def item_policies(grid: CellGrid) -> pd.DataFrame:
    """Per item: each policy's correctness (P2 also its coverage), the K ablation's flips and its tokens."""
    a, c, tok = grid.answers, grid.correct, grid.tokens
    k = a.shape[1]
    # P2 needs two orderings to agree: a K=1 cell covers no item (and is left out of P1-P6, `MIN_POLICY_K`)
    agree2 = (a[:, 0] == a[:, 1]) & (a[:, 0] >= 0) if k >= 2 else np.zeros(len(a), dtype=bool)
    out = grid.keys.copy()
    out["k"] = k  # the cell's K: its flip_k<j> columns stop there
    out["P1"] = c.mean(axis=1)
    out["P2_covered"] = agree2.astype(float)
    out["P2"] = np.where(agree2, c[:, 0], 0.0)  # all-items accuracy: an abstention is wrong
    out["P3"] = majority(a[:, :3], c[:, :3])
    out["P4"] = majority(a, c)
    out["P5"] = c.min(axis=1)
    out["P6"] = c.max(axis=1)
    for j in range(2, k + 1):
        out[f"flip_k{j}"] = (a[:, :j] != a[:, :1]).any(axis=1).astype(float)
    out["tokens_per_call"] = nanmean(tok.T) if tok.size else np.nan  # NaN: no usage recorded
    return out


def policy_table(items: pd.DataFrame) -> pd.DataFrame:
    """Per cell and policy: accuracy (an abstaining policy's over the items it answers, as the paper's P2), its
    coverage and all-items accuracy (an abstention counted wrong; both equal accuracy and 1 for the others),
    whether it is an oracle, calls and tokens per item, the change against P1; `items` from `item_policies`."""
    rows = []
    for cell, g in items.groupby(CELL_KEYS, sort=True, observed=True):
        p1 = g["P1"].mean()
        tokens = g["tokens_per_call"].mean()
        for policy in POLICIES:
            acc = g[policy.id].mean()  # over all items (an abstention counts as wrong)
            row = dict(zip(CELL_KEYS, cell, strict=True), policy=policy.id, label=policy.label, oracle=policy.oracle,
                       n_items=len(g), accuracy=acc, delta_vs_p1=acc - p1, calls_per_item=policy.calls,
                       tokens_per_item=policy.calls * tokens if not np.isnan(tokens) else np.nan,
                       coverage=1.0, all_items_accuracy=acc)
            if policy.abstains:  # the paper's P2 accuracy is the selective one (over the items it answers)
                covered = g[f"{policy.id}_covered"].to_numpy() > 0  # item_policies' answered items
                selective = g.loc[covered, policy.id].mean() if covered.any() else np.nan
                row.update(accuracy=selective, delta_vs_p1=selective - p1, coverage=covered.mean())
            rows.append(row)
    return pd.DataFrame(rows)


def policy_means(table: pd.DataFrame) -> pd.DataFrame:
    """Per policy, the unweighted mean over cells (the paper's Table 4 rows)."""
    cols = ["accuracy", "delta_vs_p1", "coverage", "all_items_accuracy", "calls_per_item", "tokens_per_item"]
    means = table.groupby(["policy", "label", "oracle"], sort=True)[cols].mean().reset_index()
    return means.assign(n_cells=table.groupby("policy", sort=True).size().to_numpy())


def k_ablation(items: pd.DataFrame) -> pd.DataFrame:
    """Per cell and K' = 2..K: items flagged as flipped from the first K' orderings, the rate, and the share of
    the K=K_max flips they find (recall)."""
    rows = []
    for cell, g in items.groupby(CELL_KEYS, sort=True, observed=True):
        k = int(g["k"].iloc[0])  # the cell's own K (cells of other K leave NaN in its higher flip_k columns)
        if k < 2:  # one ordering: no flip to find
            continue
        full = g[f"flip_k{k}"].to_numpy() > 0
        for j in range(2, k + 1):
            found = g[f"flip_k{j}"].to_numpy() > 0
            rows.append(dict(zip(CELL_KEYS, cell, strict=True), k=j, n_items=len(g), n_flipped=int(found.sum()),
                             flip_rate=found.mean(), recall_of_full_k=(found & full).sum() / full.sum()
                             if full.any() else np.nan))
    return pd.DataFrame(rows)


def binary_detector(score: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Precision, recall, F1 and ROC AUC of a 0/1 detector (AUC of a binary score: (TPR + TNR) / 2); NaN
    where a class is absent."""
    score, truth = score.astype(bool), truth.astype(bool)
    tp, fp = (score & truth).sum(), (score & ~truth).sum()
    fn, tn = (~score & truth).sum(), (~score & ~truth).sum()
    precision = tp / (tp + fp) if tp + fp else np.nan
    recall = tp / (tp + fn) if tp + fn else np.nan
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else np.nan
    auc = (recall + tn / (tn + fp)) / 2 if (tp + fn) and (tn + fp) else np.nan
    return {"precision": precision, "recall": recall, "f1": f1, "auc": auc}


def detector_table(items: pd.DataFrame, ks: tuple[int, ...] = (2, 3)) -> pd.DataFrame:
    """Per cell: disagreement among the first K' orderings as a detector of a flip among the cell's K; only
    K' < K (a cell of K=2 has no detector row)."""
    rows = []
    for cell, g in items.groupby(CELL_KEYS, sort=True, observed=True):
        k_max = int(g["k"].iloc[0])
        if k_max < 2:  # one ordering: no flip to detect
            continue
        truth = g[f"flip_k{k_max}"].to_numpy() > 0
        for j in (j for j in ks if j < k_max):
            rows.append(dict(zip(CELL_KEYS, cell, strict=True), detector_k=j, target_k=k_max, n_items=len(g),
                             **binary_detector(g[f"flip_k{j}"].to_numpy() > 0, truth)))
    return pd.DataFrame(rows)
