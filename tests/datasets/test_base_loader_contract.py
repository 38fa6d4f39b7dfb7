"""Every upstream loader honours the same contract on a local copy in the upstream layout:
ids `<dataset>::<upstream id>`, unique and stable; the filter keeps exactly the eligible rows; the
sample is deterministic, drawn from the whole split and prefix-stable; missing data is a clear error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import upstream_fixtures as fx

from facet_probe.datasets.aokvqa import AOKVQA
from facet_probe.datasets.base import DatasetUnavailable, stable_sample
from facet_probe.datasets.commonsense_qa import CommonsenseQA
from facet_probe.datasets.hotpotqa import HotpotQA, HotpotQADocs
from facet_probe.datasets.imagenet import SYNSETS, TASKS, ImageNetTask
from facet_probe.datasets.mantis_eval import MantisEval
from facet_probe.datasets.mathvision import MathVision
from facet_probe.datasets.medframeqa import MedFrameQA
from facet_probe.datasets.medxpertqa import MedXpertQA
from facet_probe.datasets.mmdocrag import MMDocRAG
from facet_probe.datasets.mmlu_pro import MMLUPro
from facet_probe.datasets.mmqa import MMQA
from facet_probe.datasets.mramg import MRAMG
from facet_probe.datasets.multihop_rag import MultiHopRAG
from facet_probe.datasets.musique import MuSiQue
from facet_probe.datasets.scienceqa import ScienceQA


@dataclass(frozen=True)
class Case:
    cls: type
    write: Callable[[Path], Path]
    eligible: int  # rows of the fixture that pass the dataset's filter
    required: str  # an upstream file the missing-data error must name
    extra: dict | None = None


CASES = {
    "mmlu_pro": Case(MMLUPro, fx.mmlu_pro, 27, "data/test-*.parquet"),
    "commonsense_qa": Case(CommonsenseQA, fx.commonsense_qa, 19, "data/validation-*.parquet"),
    "mathvision": Case(MathVision, fx.mathvision, 3, "data/testmini-*.parquet"),
    "hotpotqa": Case(HotpotQA, fx.hotpotqa, 11, "distractor/validation-*.parquet"),
    "hotpotqa_docs": Case(HotpotQADocs, fx.hotpotqa, 11, "distractor/validation-*.parquet"),
    "musique": Case(MuSiQue, fx.musique, 11, "musique_ans_v1.0_dev.jsonl"),
    "medxpertqa": Case(MedXpertQA, fx.medxpertqa, 7, "MM/test.jsonl"),
    "multihop_rag": Case(MultiHopRAG, fx.multihop_rag, 6, "MultiHopRAG.json"),
    "mantis_eval": Case(MantisEval, fx.mantis_eval, 10, "mantis_eval/test-*.parquet"),
    "medframeqa": Case(MedFrameQA, fx.medframeqa, 9, "data/test-*.parquet"),
    "mramg": Case(MRAMG, fx.mramg, 9, "recipe_mqa.jsonl"),
    "mmdocrag": Case(MMDocRAG, fx.mmdocrag, 9, "dev_15.jsonl"),
    "mmqa": Case(MMQA, fx.mmqa, 9, "MMQA_dev.jsonl.gz"),
    "scienceqa": Case(ScienceQA, fx.scienceqa, 8, "data/test-*.parquet"),
    "aokvqa": Case(AOKVQA, fx.aokvqa, 8, "data/validation-*.parquet"),
    "imagenet4": Case(
        ImageNetTask,
        lambda root: fx.imagenet_val(root, [SYNSETS[c] for c in TASKS[4]]),
        12,
        f"{SYNSETS['English setter']}/*",
        {"classes": 4, "per_class": 3},
    ),
}


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> dict[str, Path]:
    """One local copy per dataset, written once for the module."""
    base = tmp_path_factory.mktemp("upstream")
    return {name: case.write(base / name) for name, case in CASES.items()}


def loader(name: str, root: Path | None, **kw):
    case = CASES[name]
    return case.cls(name=name, path=str(root) if root else None, **{**(case.extra or {}), **kw})


@pytest.mark.parametrize("name", CASES)
def test_the_filter_keeps_exactly_the_eligible_rows_with_dataset_prefixed_unique_ids(name, copies, offline):
    items = loader(name, copies[name]).load_all()
    assert len(items) == CASES[name].eligible
    ids = [it.item_id for it in items]
    assert len(set(ids)) == len(ids)
    assert all(i.startswith(f"{name}::") and it.dataset == name for i, it in zip(ids, items, strict=True))


@pytest.mark.parametrize("name", CASES)
def test_the_sample_is_the_seeded_hash_order_of_the_whole_split_and_prefix_stable(name, copies, offline):
    everything = loader(name, copies[name], cache=False).load_all()
    small = loader(name, copies[name], n=3, cache=False).load()
    large = loader(name, copies[name], n=6, cache=False).load()
    assert [it.item_id for it in small] == [it.item_id for it in large[:3]]
    assert [it.item_id for it in large] == [it.item_id for it in stable_sample(everything, 6, 42)]
    assert large == loader(name, copies[name], n=6, cache=False).load()  # deterministic, content included
    reseeded = loader(name, copies[name], n=6, seed=7, cache=False)
    assert [it.item_id for it in reseeded.load()] == [
        it.item_id for it in stable_sample(reseeded.load_all(), 6, 7)
    ]


@pytest.mark.parametrize("name", CASES)
def test_missing_local_files_name_the_upstream_files_and_the_folder(name, tmp_path, offline):
    empty = tmp_path / "nothing-here"
    with pytest.raises(DatasetUnavailable) as err:
        loader(name, empty).load()
    message = str(err.value)
    assert CASES[name].required in message and str(empty) in message and name in message


@pytest.mark.parametrize("name", ["mmlu_pro", "mantis_eval", "mramg"])
def test_without_a_path_and_offline_the_error_says_what_to_fetch_from_the_hub(name, offline):
    with pytest.raises(DatasetUnavailable) as err:
        loader(name, None).load()
    message = str(err.value)
    source = CASES[name].cls.source
    assert f"https://huggingface.co/datasets/{source}" in message
    assert "`hf download " in message and "dataset.path=" in message
    assert CASES[name].required in message
