"""The paper's released artifact ids -> our item ids (assets/reference_ids.csv)."""

from __future__ import annotations

import io
import subprocess
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from facet_probe.datasets.reference_ids import RawForm, artifact_ids, to_item_id, to_reference_id

MIRROR = Path("/work/.mirror/yahskapar+facet-probe/repo")
PER_ITEM = "artifacts/odi/irt_v4_modal_per_item_params.parquet"


def test_artifact_ids_map_to_ours_and_to_the_reference_runners():
    assert to_item_id("csqa::03f06f77", "option_order", "commonsenseqa") == "commonsense_qa::03f06f77"
    assert to_reference_id("csqa::03f06f77", "option_order", "commonsenseqa") == "commonsenseqa::03f06f77"
    assert to_item_id("hotpot_rank::5a70f39c", "document_rank_order", "hotpotqa") == "hotpotqa_docs::5a70f39c"
    assert to_reference_id("hotpot_rank::5a70f39c", "document_rank_order", "hotpotqa") == "hotpotqa::5a70f39c"
    assert to_item_id("mantis::dj_2::0064", "image_set_order", "mantis_eval") == "mantis_eval::dj_2"
    assert to_item_id("0044375cde53", "mixed_modality_order", "mmqa") == "mmqa::0044375cde53"
    # ids made of positions (or of an unconfirmed form) are not mapped
    assert to_item_id("mhrag::0001", "document_rank_order", "multihop_rag") is None
    assert to_item_id("mmdocrag::10", "mixed_modality_order", "mmdocrag") is None
    assert to_item_id("RECIPE_1015", "mixed_modality_order", "mramg") is None
    assert to_item_id("csqa::x", "option_order", "nosuch") is None


def test_every_released_per_item_id_has_a_row_and_the_mappable_ones_map():
    """The ODI per-item parameters of the release: 3,612 items over 10 (facet, dataset) pairs."""
    if not MIRROR.is_dir():
        pytest.skip("the reference mirror is not on this machine")
    raw = subprocess.run(["git", "-C", str(MIRROR), "show", f"HEAD:{PER_ITEM}"], capture_output=True, check=True)
    released = pd.read_parquet(io.BytesIO(raw.stdout))
    mapped = Counter()
    for row in released.itertuples():
        spec = next(a for a in artifact_ids() if (a.facet, a.artifact_dataset) == (row.facet, row.dataset))
        ours = to_item_id(row.item_id, row.facet, row.dataset)
        if spec.raw in (RawForm.UPSTREAM, RawForm.UPSTREAM_THEN_INDEX):
            assert ours is not None and ours.startswith(f"{spec.dataset}::"), row.item_id
        mapped[row.dataset, ours is not None] += 1
    assert mapped[("multihop_rag", False)] == 688 and mapped[("mmdocrag", False)] == 200
    assert mapped[("mramg", False)] == 197 and sum(v for (_, ok), v in mapped.items() if ok) == 3612 - 688 - 200 - 197
