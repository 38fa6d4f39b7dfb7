"""The judge's gold match and sem-flip per cell: a report over run folders judged by different judges takes each
cell's own primary judge, as that folder's report does (issue 39, point 1), and says where `correct` came from."""

from __future__ import annotations

import pandas as pd

from facet_probe.judge.tables import correct_source, item_flips, with_gold_match

CELLS = {"a": ("m1", "mixed_modality_order", "mmqa"), "b": ("m2", "mixed_modality_order", "mmqa")}


def trials() -> pd.DataFrame:
    return pd.DataFrame([{"trial_key": f"{c}{k}", "model": m, "facet": f, "dataset": d, "item_id": "mmqa::1",
                          "ordering_idx": k, "answer_normalized": "red", "gold_normalized": "red", "correct": True,
                          "score_kind": "exact", "parse_status": "ok", "answer_raw": "red"}
                         for c, (m, f, d) in CELLS.items() for k in range(2)])


def judgments() -> pd.DataFrame:
    """gpt_54_mini judged both cells, gemini_pro (the paper's primary judge) only cell a; neither matches gold."""
    rows = [("gpt_54_mini", "a"), ("gpt_54_mini", "b"), ("gemini_pro", "a")]
    return pd.DataFrame([{"judge": j, "model": CELLS[c][0], "facet": CELLS[c][1], "dataset": CELLS[c][2],
                          "item_id": "mmqa::1", "trial_key": f"{c}{k}", "gold_match": False}
                         for j, c in rows for k in range(2)])


def test_each_cell_takes_the_gold_match_of_its_own_primary_judge(tmp_path):
    judgments().to_csv(tmp_path / "judgments.csv", index=False)
    scored = with_gold_match(trials(), tmp_path / "judgments.csv")
    assert scored["correct"].tolist() == [False] * 4  # cell b: gpt_54_mini's, though gemini_pro judged cell a
    assert set(scored["score_kind"]) == {"judge"}


def test_the_source_of_correct_names_the_judges_and_exact_match():
    some = judgments()
    some = some[some["trial_key"] != "b1"]  # one trial with no gold match: exact match there
    assert correct_source(trials(), some) == "exact_match+gold_match_gemini_pro+gold_match_gpt_54_mini"
    assert correct_source(trials(), None) == "exact_match"


def test_each_cell_takes_the_sem_flip_of_its_own_primary_judge():
    items = pd.DataFrame([{"model": m, "facet": f, "dataset": d, "item_id": "mmqa::1", "any_flip": 1.0}
                          for m, f, d in CELLS.values()])
    semantic = judgments().drop_duplicates(["judge", "model"]).assign(
        repeat_idx=0, sem_flip_set=lambda f: (f["judge"] == "gpt_54_mini").astype(float))
    flips = item_flips(items, semantic).set_index("model")
    assert flips["flip"].to_dict() == {"m1": 0.0, "m2": 1.0}  # m1: gemini_pro's 0; m2: gpt_54_mini's 1
    assert flips["flip_source"].to_dict() == {"m1": "sem_flip_set_gemini_pro", "m2": "sem_flip_set_gpt_54_mini"}


def test_the_gold_match_rescores_each_judged_trial_in_its_own_row_and_leaves_parse_errors_wrong():
    """Judged rows among unjudged ones, in shuffled order (the rescoring is written back by row, not by lookup):
    each judged trial takes its own verdict, a parse error stays wrong with its score kind, the rest are kept."""
    from facet_probe.core.trials import PARSE_ERROR

    rows = trials()
    rows.loc[1, ["answer_normalized", "correct"]] = [PARSE_ERROR, False]
    rows = rows.iloc[[3, 1, 0, 2]].reset_index(drop=True)  # b1, a1 (a parse error), a0, b0
    verdicts = judgments()
    verdicts = verdicts[(verdicts["judge"] == "gpt_54_mini") & verdicts["trial_key"].isin(["a0", "a1", "b1"])]
    verdicts = verdicts.assign(gold_match=verdicts["trial_key"].map({"a0": True, "a1": True, "b1": False}))
    scored = with_gold_match(rows, verdicts).set_index("trial_key")
    assert scored["correct"].to_dict() == {"b1": False, "a1": False, "a0": True, "b0": True}
    assert scored["score_kind"].to_dict() == {"b1": "judge", "a1": "exact", "a0": "judge", "b0": "exact"}
