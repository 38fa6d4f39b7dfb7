"""Stored trials re-scored from what the model said: a parser or normaliser change reaches old runs
without a single call.

A trial records the `SCORER_VERSION` (core.trials) it was scored with. At report time every successful trial
scored by another version (or by none: older stores) is scored again from its `raw_output`: its item
(from the run's items.jsonl) and ordering are rendered again, and the prompt is used only when its hash
equals the stored `prompt_hash`, so a trial is never re-read against a prompt the model did not see.
"""

from __future__ import annotations

import logging
from functools import cache

import pandas as pd
from hydra.utils import instantiate

from facet_probe.config.loading import available, load_option
from facet_probe.core.items import Item
from facet_probe.core.prompts import PromptMode, with_instruction
from facet_probe.core.trials import SCORER_VERSION
from facet_probe.facets.base import Facet
from facet_probe.scoring import score as scoring
from facet_probe.scoring.parsing import LetterParser
from facet_probe.store.reading import ItemKey, item_keys_in

log = logging.getLogger(__name__)
SCORE_FIELDS = ("answer_raw", "answer_normalized", "gold_normalized", "correct", "score_kind", "parse_status")


@cache
def _facet(name: str) -> Facet | None:
    """The facet of that name, or None when no facet config has it (trials from elsewhere: kept as stored)."""
    return instantiate(load_option("facet", name)) if name in available("facet") else None


def stale(trials: pd.DataFrame) -> pd.Series:
    """Successful trials scored by another scorer version (or none recorded)."""
    version = trials["scorer_version"] if "scorer_version" in trials else pd.Series(pd.NA, index=trials.index)
    ok = trials["error"].isna() if "error" in trials else pd.Series(True, index=trials.index)
    return ok & version.ne(SCORER_VERSION).fillna(True) & trials.get(
        "score_kind", pd.Series("", index=trials.index)).ne(str(scoring.ScoreKind.JUDGE))


def rescore(trials: pd.DataFrame, items: dict[ItemKey, dict],
            letter_parser: LetterParser = LetterParser.OURS) -> pd.DataFrame:
    """`trials` with every stale trial whose item and prompt can be rebuilt scored again (a copy); with
    FACET-PROBE v0.0.1's `letter_parser`, every successful multiple-choice trial is read again by its rule."""
    if trials.empty or not items or not {"mode", "permutation", "prompt_hash", "raw_output"} <= set(trials):
        return trials  # e.g. FACET-PROBE v0.0.1 files: nothing to rebuild the prompt from
    redo = stale(trials)
    if letter_parser != LetterParser.OURS:
        mcq = {str(scoring.ScoreKind.LETTER), str(scoring.ScoreKind.INVERSE_PERMUTATION)}
        redo |= stale(trials.assign(scorer_version=None)) & trials.get(
            "score_kind", pd.Series("", index=trials.index)).isin(mcq)
    todo = redo & item_keys_in(trials, items.keys())
    if not todo.any():
        return trials
    out = trials.copy()
    for name in (*SCORE_FIELDS, "scorer_version"):
        if name not in out:
            out[name] = None
    out["scorer_version"] = out["scorer_version"].astype(object)
    built: dict[ItemKey, Item] = {}
    redone = mismatched = 0
    for idx in out.index[todo]:
        row = out.loc[idx]
        key = (str(row["dataset"]), str(row["item_id"]))
        item = built.get(key) or built.setdefault(key, Item.model_validate(items[key]))
        facet = _facet(row["facet"])
        if facet is None:
            mismatched += 1
            continue
        perm = tuple(int(x) for x in row["permutation"])
        try:
            prompt = with_instruction(facet.render(item, perm, PromptMode(row["mode"])), row.get("instruction"))
        except ValueError:  # the stored ordering does not fit the item: nothing to re-read it against
            prompt = None
        if prompt is None or prompt.hash != row["prompt_hash"]:
            mismatched += 1
            continue
        score = scoring.score(item, facet, perm, prompt, row["raw_output"] or "", letter_parser)
        for name in SCORE_FIELDS:
            out.at[idx, name] = getattr(score, name)
        out.at[idx, "scorer_version"] = SCORER_VERSION
        redone += 1
    log.info("re-scored %d stored trials from their replies (scorer version %d)%s", redone,
             SCORER_VERSION, f"; {mismatched} kept as stored (their facet or prompt no longer renders the same)"
             if mismatched else "")
    return out
