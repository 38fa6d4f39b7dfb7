"""Mitigation policies P1-P6 (the paper's Table 4), the K ablation and K=2/3 disagreement as a flip detector,
computed from the stored K=6 trials of a cell, with each policy's cost in calls and tokens.

Per item, one answer per ordering (repeat 0), orderings 0..K-1 of the manifest (ordering 0 is the source
order). P2 and P3 vote over 2 / 3 of them; which ones `mitigation.subsets` says (`Subsets`, docs/paper.md):
the paper's rule (`all`, the default) averages each item over every pair / triple of its K orderings, a vote
without a strict majority abstaining (the release's P2 / P3 "disagree" rates); ours (`first`) reads orderings
0-1 / 0-2 and gives P3's tie to the earliest ordering.

- P1 single pass: the expected accuracy of one call (the mean over the K orderings);
- P2 two orderings, abstain on disagreement; P3 majority of 3: per item the share of its subsets whose vote
  answers (`<id>_covered`) and whose answer is right (`<id>`); a cell's `accuracy` is the mean over the items
  it answers of right / answered (the paper's number), `coverage` the mean answered share, all-items accuracy
  their product (an abstention counts as wrong, as the paper's);
- P4 majority of all K (a tie: the earliest ordering's answer, as `metrics.flips.item_metrics`' modal answer);
- P5 worst-ordering oracle: right only if right under every ordering; P6 best-ordering oracle: right under
  at least one. Both read the gold answer (`Policy.oracle`): bounds, never on the cost front.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from itertools import combinations

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from facet_probe.core.errors import parse_enum
from facet_probe.core.trials import PARSE_ERROR
from facet_probe.metrics.flips import CELL_KEYS, nanmean, one_answer_per_ordering, prepare_trials


class Subsets(StrEnum):
    """Which orderings P2, P3 and the K'-disagreement detector read (`mitigation.subsets`, conf/paper_app.yaml)."""

    all = "all"  # the paper's: every pair / triple of the K orderings, averaged per item
    first = "first"  # ours: orderings 0-1 (P2) and 0-2 (P3) of the manifest

    @property
    def abstains_without_majority(self) -> bool:
        """Whether a vote of 3 without a strict majority abstains (the paper's P3 "disagree") rather than take
        the earliest ordering's answer (ours)."""
        return self is Subsets.all


def parse_subsets(value) -> Subsets:
    """`mitigation.subsets` as a Subsets; an unknown name is one ConfigError naming the choices."""
    return parse_enum(Subsets, value, "mitigation.subsets")


#: What a table's caption says each setting reads.
SUBSETS_READ = {
    Subsets.all: ("P2 and P3 averaged over every pair / triple of the K orderings, a vote without a strict "
                  "majority abstaining (the paper's rule, mitigation.subsets=all)"),
    Subsets.first: ("P2 on orderings 0-1 and P3 on orderings 0-2 of the manifest, P3's tie to the earliest "
                    "ordering (mitigation.subsets=first; the paper averages over every pair / triple, so its P2 "
                    "and P3 values are not printed beside these)"),
}


@dataclass(frozen=True)
class Policy:
    """A mitigation policy: its id, label and cost in calls per item, and what it may use."""

    id: str
    label: str
    calls: int
    #: it picks among the orderings' answers by the gold answer, which no deployed policy knows: a reference
    #: bound (drawn off the cost front, never on it), not a policy one could run
    oracle: bool = False
    #: it votes over `calls` of the K orderings (the subsets `Subsets` names); a vote of 3 without a strict
    #: majority abstains as `Subsets.abstains_without_majority` says
    votes: bool = False
    #: it abstains wherever its vote has no strict majority, under either setting (P2: two answers that differ)
    abstains: bool = False


POLICIES = (
    Policy("P1", "P1 single pass", 1),
    Policy("P2", "P2 two orderings, abstain on disagreement", 2, votes=True, abstains=True),
    Policy("P3", "P3 majority of 3", 3, votes=True),
    Policy("P4", "P4 majority of 6", 6),
    Policy("P5", "P5 worst-ordering oracle", 6, oracle=True),
    Policy("P6", "P6 best-ordering oracle", 6, oracle=True),
)
#: P3 is a majority of 3 orderings: a cell of fewer has no P1-P6 row (and no K' < K detector)
MIN_POLICY_K = 3
#: The K' of the disagreement detector (the paper's K=2 and K=3)
DETECTOR_KS = (2, 3)
#: The detector flags an item when at least this share of its K'-subsets disagree: the only threshold the
#: release's recalls allow for K'=2 (any in (1/3, 8/15]), one they allow for K'=3 (any in (0.3, 0.6]); docs/paper.md
FLAG_SHARE = 0.5
#: What table4_detector's caption says each setting's detector is.
DETECTOR_READ = {
    Subsets.all: ("K' disagreement as a detector of a flip among the cell's K orderings, the paper's rule "
                  "(mitigation.subsets=all): an item's score is the share of its K'-subsets of orderings without a "
                  "strict majority (K'=2: the pairs P2 abstains on; K'=3: the triples P3 does); precision, recall "
                  f"and F1 of flagging a score of at least {FLAG_SHARE:g}; auc: the ROC AUC of the score (ties half)."),
    Subsets.first: ("Disagreement among the first K' orderings (any two answers differ) as a detector of a flip "
                    "among the cell's K (mitigation.subsets=first, ours; not the paper's detector); auc of this 0/1 "
                    "score = (TPR + TNR) / 2."),
}
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


def _votes(answers: np.ndarray) -> np.ndarray:
    """Per row and ordering, how many of the row's orderings gave the same parsed answer (0 for a parse error)."""
    valid = answers >= 0
    same = (answers[..., :, None] == answers[..., None, :]) & valid[..., :, None] & valid[..., None, :]
    return same.sum(axis=-1)


def majority(answers: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """Correctness of the modal answer per row (ties to the earliest ordering; parse errors never win)."""
    votes = _votes(answers)
    best = np.argmax(votes, axis=1)  # argmax returns the first (earliest) ordering among ties
    out = correct[np.arange(len(answers)), best]
    return np.where(votes.any(axis=1), out, 0.0)


def has_majority(answers: np.ndarray) -> np.ndarray:
    """Per row, whether one parsed answer holds a strict majority of the row's orderings."""
    return 2 * _votes(answers).max(axis=1) > answers.shape[1]


def ordering_subsets(k: int, size: int, subsets: Subsets) -> list[tuple[int, ...]]:
    """The subsets of `size` of K orderings a vote reads: every one (the paper's), or the first `size`."""
    return list(combinations(range(k), size)) if subsets is Subsets.all else [tuple(range(size))]


def vote_shares(answers: np.ndarray, correct: np.ndarray, size: int, subsets: Subsets,
                abstain: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per item, over its `size`-subsets of orderings (`ordering_subsets`): the share whose vote answers and the
    share whose answer is right (an abstention is not). With `abstain`, a vote without a strict majority
    abstains; without, it takes the earliest ordering's answer among the tied."""
    n, idx = len(answers), np.asarray(ordering_subsets(answers.shape[1], size, subsets))
    a, c = answers[:, idx].reshape(-1, size), correct[:, idx].reshape(-1, size)  # one row per (item, subset)
    answered = has_majority(a) if abstain else np.ones(len(a), dtype=bool)
    right = majority(a, c) * answered
    return answered.reshape(n, len(idx)).mean(axis=1), right.reshape(n, len(idx)).mean(axis=1)


def flips_among_first(answers: np.ndarray, j: int) -> np.ndarray:
    """Per item, 1 where the first j orderings' answers differ (a parse error counted as an answer), else 0."""
    return (answers[:, :j] != answers[:, :1]).any(axis=1).astype(float)


def detector_scores(answers: np.ndarray, j: int, subsets: Subsets) -> np.ndarray:
    """Per item, the K'=j detector's score: the share of its j-subsets without a strict majority (the paper's:
    for j=2 the pairs P2 abstains on, for j=3 the triples P3 does), or ours, 1 where the first j orderings' answers
    differ (the K ablation's `flip_k<j>`)."""
    if subsets is Subsets.all:
        answered, _ = vote_shares(answers, np.zeros(answers.shape), j, subsets, abstain=True)
        return 1.0 - answered
    return flips_among_first(answers, j)


def item_policies(grid: CellGrid, subsets: Subsets) -> pd.DataFrame:
    """Per item: each policy's share of right answers (`<id>`) and of answered votes (`<id>_covered`; 1 for a
    policy that always answers), the K ablation's flips, the detector's scores and the tokens per call."""
    a, c, tok = grid.answers, grid.correct, grid.tokens
    k = a.shape[1]
    out = grid.keys.copy()
    out["k"] = k  # the cell's K: its flip_k<j> columns stop there
    out["subsets"] = subsets.value
    whole = {"P1": c.mean(axis=1), "P4": majority(a, c), "P5": c.min(axis=1), "P6": c.max(axis=1)}
    for policy in POLICIES:
        if policy.votes and k >= policy.calls:  # a cell of fewer orderings is left out of P1-P6 (`MIN_POLICY_K`)
            abstain = policy.abstains or subsets.abstains_without_majority
            out[f"{policy.id}_covered"], out[policy.id] = vote_shares(a, c, policy.calls, subsets, abstain)
        elif policy.votes:
            out[f"{policy.id}_covered"], out[policy.id] = 0.0, 0.0
        else:
            out[f"{policy.id}_covered"], out[policy.id] = 1.0, whole[policy.id]
    for j in range(2, k + 1):
        out[f"flip_k{j}"] = flips_among_first(a, j)
    for j in (j for j in DETECTOR_KS if j < k):
        out[f"detector_k{j}"] = detector_scores(a, j, subsets)
    out["tokens_per_call"] = nanmean(tok.T) if tok.size else np.nan  # NaN: no usage recorded
    return out


def policy_table(items: pd.DataFrame) -> pd.DataFrame:
    """Per cell and policy: accuracy over the items it answers (per item right / answered, then the mean over
    items: the paper's), coverage (the mean answered share) and all-items accuracy (their product: an abstention
    counted wrong; equal to accuracy and 1 for a policy that always answers), whether it is an oracle, the
    subsets it read, calls and tokens per item, the change against P1; `items` from `item_policies`."""
    rows = []
    for cell, g in items.groupby(CELL_KEYS, sort=True, observed=True):
        p1 = g["P1"].mean()
        tokens = g["tokens_per_call"].mean()
        for policy in POLICIES:
            covered = g[f"{policy.id}_covered"].to_numpy(dtype=float)
            answered = covered > 0
            acc = (g[policy.id].to_numpy(dtype=float)[answered] / covered[answered]).mean() if answered.any() \
                else np.nan
            coverage = covered.mean()
            rows.append(dict(zip(CELL_KEYS, cell, strict=True), policy=policy.id, label=policy.label,
                             oracle=policy.oracle, subsets=g["subsets"].iloc[0], n_items=len(g), accuracy=acc,
                             delta_vs_p1=acc - p1, calls_per_item=policy.calls,
                             tokens_per_item=policy.calls * tokens if not np.isnan(tokens) else np.nan,
                             coverage=coverage, all_items_accuracy=acc * coverage if answered.any() else 0.0))
    return pd.DataFrame(rows)


def policy_means(table: pd.DataFrame) -> pd.DataFrame:
    """Per policy, the unweighted mean over cells (the paper's Table 4 rows)."""
    cols = ["accuracy", "delta_vs_p1", "coverage", "all_items_accuracy", "calls_per_item", "tokens_per_item"]
    means = table.groupby(["policy", "label", "oracle", "subsets"], sort=True)[cols].mean().reset_index()
    return means.assign(n_cells=table.groupby("policy", sort=True).size().to_numpy())


def papers_quantity(policy: str, subsets: Subsets | str) -> bool:
    """Whether a policy's numbers are the paper's quantity under `subsets`: a voting policy (P2, P3) only under
    the paper's rule, every other policy under either."""
    return Subsets(subsets) is Subsets.all or not next(p for p in POLICIES if p.id == policy).votes


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


def roc_auc(score: np.ndarray, truth: np.ndarray) -> float:
    """The ROC AUC of a score: the chance a flipped item scores above an unflipped one, ties counted half (for a
    0/1 score, (TPR + TNR) / 2); NaN where a class is absent."""
    truth = truth.astype(bool)
    n1, n0 = int(truth.sum()), int((~truth).sum())
    if not n1 or not n0:
        return np.nan
    return float((rankdata(score)[truth].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def detector_metrics(score: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Precision, recall and F1 of flagging the items whose score reaches `FLAG_SHARE`, and the ROC AUC of the
    score itself; NaN where a class is absent (precision: where nothing is flagged)."""
    flag, truth = score >= FLAG_SHARE, truth.astype(bool)
    tp, fp, fn = (flag & truth).sum(), (flag & ~truth).sum(), (~flag & truth).sum()
    precision = tp / (tp + fp) if tp + fp else np.nan
    recall = tp / (tp + fn) if tp + fn else np.nan
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else np.nan
    return {"precision": precision, "recall": recall, "f1": f1, "auc": roc_auc(score, truth)}


def detector_table(items: pd.DataFrame, ks: tuple[int, ...] = DETECTOR_KS) -> pd.DataFrame:
    """Per cell: the K' detector's scores (`detector_scores`) as a detector of a flip among the cell's K, with the
    number of flipped items; only K' < K (a cell of K=2 has no detector row)."""
    rows = []
    for cell, g in items.groupby(CELL_KEYS, sort=True, observed=True):
        k_max = int(g["k"].iloc[0])
        if k_max < 2:  # one ordering: no flip to detect
            continue
        truth = g[f"flip_k{k_max}"].to_numpy() > 0
        for j in (j for j in ks if j < k_max):
            rows.append(dict(zip(CELL_KEYS, cell, strict=True), subsets=g["subsets"].iloc[0], detector_k=j,
                             target_k=k_max, n_items=len(g), n_flipped=int(truth.sum()),
                             **detector_metrics(g[f"detector_k{j}"].to_numpy(dtype=float), truth)))
    return pd.DataFrame(rows)
