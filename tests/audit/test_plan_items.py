"""items.jsonl keeps every dataset's item, even where two datasets share an id (the reference's hotpotqa and
hotpotqa_docs views of one question under dataset.sampling=reference)."""

from __future__ import annotations

import json

from facet_probe.audit import plan as audit
from facet_probe.core.items import make_item
from facet_probe.facets.option_order import OptionOrder


def test_two_datasets_sharing_an_id_both_reach_items_jsonl(tmp_path):
    def item(dataset: str, question: str):
        return make_item(item_id="hotpotqa::5a8b", dataset=dataset, question=question, choices=("x", "y"),
                         gold_index=0, metadata={"stable_item_id": f"{dataset}::5a8b"})

    cells = [audit.Cell("option_order", OptionOrder(), "hotpotqa"), audit.Cell("option_order", OptionOrder(),
                                                                              "hotpotqa_docs")]
    cells[0].items, cells[1].items = [item("hotpotqa", "Q as chunks?")], [item("hotpotqa_docs", "Q as docs?")]
    cells.append(audit.Cell("option_order", OptionOrder(), "hotpotqa"))
    cells[2].items = cells[0].items  # the same dataset in a second cell is written once
    audit.write_items(cells, tmp_path / "items.jsonl")
    records = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert [(r["dataset"], r["question"]) for r in records] == [("hotpotqa", "Q as chunks?"),
                                                                 ("hotpotqa_docs", "Q as docs?")]
