"""Item records are keyed by (dataset, item id): two datasets of one run may share an id (the reference's
hotpotqa and hotpotqa_docs views of one question), and each trial must meet its own dataset's item."""

from __future__ import annotations

import pandas as pd

from facet_probe.core.items import make_item
from facet_probe.core.prompts import PromptMode
from facet_probe.core.trials import SCORER_VERSION
from facet_probe.scoring.rescore import _facet, rescore
from facet_probe.store.reading import read_items


def _item(dataset: str, choices: tuple[str, ...], gold_index: int):
    return make_item(item_id="hotpot::1", dataset=dataset, question="Which one?", choices=choices,
                     gold_index=gold_index, metadata={"stable_item_id": f"{dataset}::1"})


def _write(path, *items) -> None:
    path.write_text("".join(item.model_dump_json() + "\n" for item in items), encoding="utf-8")


def test_two_datasets_sharing_an_id_keep_both_records(tmp_path):
    a, b = _item("hotpotqa", ("red", "green"), 0), _item("hotpotqa_docs", ("blue", "pink", "gray"), 2)
    _write(tmp_path / "one.jsonl", a)
    _write(tmp_path / "two.jsonl", b)
    items = read_items([tmp_path / "one.jsonl", tmp_path / "two.jsonl"])
    assert items[("hotpotqa", "hotpot::1")]["choices"] == ["red", "green"]
    assert items[("hotpotqa_docs", "hotpot::1")]["choices"] == ["blue", "pink", "gray"]


def test_stale_trials_of_both_datasets_are_rescored_against_their_own_item(tmp_path):
    facet = _facet("option_order")
    a, b = _item("hotpotqa", ("red", "green"), 0), _item("hotpotqa_docs", ("blue", "pink", "gray"), 2)
    _write(tmp_path / "items.jsonl", a, b)
    rows = []
    for item, reply in ((a, "Answer: A"), (b, "Answer: C")):
        perm = tuple(range(len(item.choices)))
        prompt = facet.render(item, perm, PromptMode.DIRECT)
        rows.append({"model": "m", "facet": "option_order", "dataset": item.dataset, "item_id": item.item_id,
                     "ordering_idx": 0, "mode": "direct", "permutation": list(perm), "prompt_hash": prompt.hash,
                     "raw_output": reply, "error": None, "scorer_version": 0, "correct": None})
    out = rescore(pd.DataFrame(rows), read_items([tmp_path / "items.jsonl"]))
    assert out["scorer_version"].tolist() == [SCORER_VERSION, SCORER_VERSION]
    assert out["correct"].tolist() == [True, True]  # each reply is its own item's gold
