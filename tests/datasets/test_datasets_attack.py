"""Attack datasets: ScienceQA image questions, A-OKVQA, and the ImageNet 4/8/16-class tasks."""

from __future__ import annotations

import hashlib
import io

import attack_reference_fixtures as arf
import pytest
import upstream_fixtures as fx
from omegaconf import OmegaConf

from facet_probe.attack.preset import REFERENCE_COT_INSTRUCTION, Selection, reference_prompt
from facet_probe.attack.run import load_items
from facet_probe.config.loading import load_option
from facet_probe.core.items import ItemError
from facet_probe.core.prompts import PromptMode
from facet_probe.datasets import aokvqa, imagenet, scienceqa
from facet_probe.datasets.base import DatasetUnavailable


def test_scienceqa_keeps_image_questions_with_the_hint_as_fixed_context(tmp_path, offline):
    items = {it.raw_id: it for it in scienceqa.ScienceQA(path=str(fx.scienceqa(tmp_path / "sq"))).load_all()}
    assert sorted(items, key=lambda r: int(r.split("-")[1])) == [f"test-{i}" for i in range(12) if i % 3]
    item = items["test-1"]
    assert [c.id for c in item.fixed] == ["image", "context"] and item.fixed[1].text == "Look at the scale."
    assert item.fixed[0].image.sha256 == hashlib.sha256(fx.image_bytes(1)).hexdigest()
    assert item.choices == ("a rock", "a feather") and item.gold == "a feather"
    assert [c.id for c in items["test-2"].fixed] == ["image"]  # empty hint: no context


def test_aokvqa_from_the_hub_parquet_uses_the_shipped_images(tmp_path, offline):
    items = aokvqa.AOKVQA(path=str(fx.aokvqa(tmp_path / "ok"))).load_all()
    item = next(it for it in items if it.raw_id.endswith("B2"))
    assert item.gold == "bike" and item.metadata["rationales"] == ["It has wheels."]
    assert item.fixed[0].image.sha256 == hashlib.sha256(fx.image_bytes(2)).hexdigest()


def test_aokvqa_from_the_release_json_finds_coco_images_by_id(tmp_path, offline):
    root, coco = fx.aokvqa_release(tmp_path / "rel", tmp_path / "coco")
    items = aokvqa.AOKVQA(path=str(root), coco_dir=str(coco)).load_all()
    assert [it.raw_id for it in items] == ["q0", "q1", "q2", "q3"]
    assert items[1].fixed[0].image.path.endswith("val2017/000000397134.jpg")
    (coco / "val2017" / "000000397135.jpg").unlink()
    with pytest.raises(ItemError, match=r"item aokvqa::q2: COCO image 000000397135.jpg not found"):
        aokvqa.AOKVQA(path=str(root), coco_dir=str(coco)).load_all()


def test_every_imagenet_task_class_has_a_distinct_synset_id():
    names = [c for task in imagenet.TASKS.values() for c in task]
    assert len(names) == 28 and set(names) == set(imagenet.SYNSETS)
    assert len(set(imagenet.SYNSETS.values())) == 28
    assert imagenet.SYNSETS["parachute"] == "n03888257" and imagenet.SYNSETS["bib"] == "n02834397"


def test_imagenet_items_ask_for_the_class_among_the_task_classes(tmp_path, offline):
    root = fx.imagenet_val(tmp_path / "val", [imagenet.SYNSETS[c] for c in imagenet.TASKS[4]])
    items = imagenet.ImageNetTask(name="imagenet4", classes=4, per_class=2, path=str(root)).load_all()
    assert len(items) == 8
    item = next(it for it in items if it.metadata["synset"] == imagenet.SYNSETS["school bus"])
    assert item.question == "What is the class of the image?"
    assert (
        item.choices == ("English setter", "Persian cat", "school bus", "pineapple")
        and item.gold == "school bus"
    )


def test_imagenet_per_class_draws_are_prefix_stable(tmp_path, offline):
    root = fx.imagenet_val(tmp_path / "val", [imagenet.SYNSETS[c] for c in imagenet.TASKS[4]])

    def ids(k):
        return {it.item_id for it in imagenet.ImageNetTask(classes=4, per_class=k, path=str(root)).load_all()}

    assert ids(2) < ids(4)


def test_imagenet_says_which_synset_folder_is_short(tmp_path, offline):
    root = fx.imagenet_val(tmp_path / "val", [imagenet.SYNSETS[c] for c in imagenet.TASKS[4]], per_synset=2)
    with pytest.raises(DatasetUnavailable, match=r"n02100735 \(English setter\) has 2 images, 5 needed"):
        imagenet.ImageNetTask(classes=4, per_class=5, path=str(root)).load()


def test_imagenet_tasks_take_every_validation_image_of_their_classes_by_default(tmp_path, offline):
    from facet_probe.config.loading import load_option

    root = fx.imagenet_val(tmp_path / "val", [imagenet.SYNSETS[c] for c in imagenet.TASKS[4]])
    per_folder = len(list((root / imagenet.SYNSETS[imagenet.TASKS[4][0]]).iterdir()))
    assert load_option("dataset", "imagenet4").per_class is None  # the paper: all 50 per class
    items = imagenet.ImageNetTask(name="imagenet4", classes=4, path=str(root)).load_all()
    assert len(items) == 4 * per_folder
    assert len(imagenet.ImageNetTask(name="imagenet4", classes=4, per_class=1, path=str(root)).load_all()) == 4


# --------------------------------------------------------------------------- against StopReasoning's own loaders
@pytest.fixture(scope="module")
def stop_reasoning(tmp_path_factory):
    """StopReasoning's `utils/datasets.py`, from a `git archive` of its mirror."""
    return arf.reference_datasets(tmp_path_factory.mktemp("stop_reasoning"))


def attack_items(name: str, selection: Selection = Selection.PROJECT, **dataset) -> list:
    """The items the attack app takes (`attack.run.load_items`) with these dataset settings."""
    node = OmegaConf.merge(load_option("dataset", name), dataset)
    return load_items(OmegaConf.create({"dataset": node, "data_root": None, "limit": None}), selection)


def shown(item) -> str:
    """The user text of the reference's prompt (`prompt.preset=reference`, CoT) for an item."""
    return reference_prompt(item, PromptMode.COT).messages[0].parts[-1].text


def our_pixels(ref) -> tuple:
    return arf.pixels(ref.path if ref.path else io.BytesIO(ref.data))


def first_of_each(samples: list[dict]) -> list[dict]:
    seen: set = set()
    return [s for s in samples if not (s["qid"] in seen or seen.add(s["qid"]))]


def test_scienceqa_reference_layout_gives_stop_reasonings_samples(stop_reasoning, tmp_path, offline):
    """layout=reference + sampling=reference + selection=reference: StopReasoning's ScienceQADataset sample for
    sample (ids, order, question and option bytes, gold, pixels, prompt text). Its split file lists pid 21 twice:
    the reference shows it twice and, counting distinct pids as its length, never reaches the last pid (52);
    here it is kept once (ids key trials) and 52 is taken (docs/attacks.md)."""
    folder = arf.scienceqa(tmp_path / "data")
    theirs = stop_reasoning.ScienceQADataset(arf.args(tmp_path / "data", prompt=REFERENCE_COT_INSTRUCTION))
    samples = arf.reference_samples(theirs)
    assert [s["qid"] for s in samples] == ["12", "7", "21", "30", "40", "21"]
    samples = first_of_each(samples)
    items = attack_items("scienceqa", Selection.REFERENCE, path=str(folder), layout="reference", sampling="reference")
    assert items[-1].item_id == "scienceqa::52"
    items = items[:-1]
    assert [it.item_id for it in items] == [f"scienceqa::{s['qid']}" for s in samples] == [
        "scienceqa::12", "scienceqa::7", "scienceqa::21", "scienceqa::30", "scienceqa::40"]
    assert [(it.question, list(it.choices)) for it in items] == [
        (theirs.data[s["qid"]]["question"], theirs.data[s["qid"]]["choices"]) for s in samples]
    assert [shown(it) for it in items] == [s["text"] for s in samples]
    assert [chr(65 + it.gold_index) for it in items] == [s["label"] for s in samples]
    assert [our_pixels(it.fixed[0].image) for it in items] == [s["pixels"] for s in samples]
    # our default draw on the same files: the same problems bar the empty choice, skipped and counted
    loader = scienceqa.ScienceQA(path=str(folder), layout="reference")
    assert {it.raw_id for it in loader.load()} == {"12", "7", "15", "30", "40", "41", "52"}
    assert sum(loader.skipped.values()) == 2  # pid 21: an empty choice, and its repeat


def test_aokvqa_release_layout_gives_stop_reasonings_samples(stop_reasoning, tmp_path, offline):
    """The release JSON and the reference's image folder (coco/test2017) under sampling=reference: its
    A_OKVQADataset sample for sample, ids its row positions (a repeated question_id kept, as it keeps it)."""
    folder, coco = arf.aokvqa(tmp_path / "data")
    theirs = stop_reasoning.A_OKVQADataset(arf.args(tmp_path / "data", prompt=REFERENCE_COT_INSTRUCTION))
    samples = arf.reference_samples(theirs)
    items = attack_items("aokvqa", path=str(folder), coco_dir=str(coco), sampling="reference")
    assert [it.item_id for it in items] == [f"aokvqa::{s['qid']}" for s in samples] == [f"aokvqa::{i}" for i in range(5)]
    assert [(it.question, list(it.choices)) for it in items] == [
        (theirs.data[str(s["qid"])]["question"], theirs.data[str(s["qid"])]["choices"]) for s in samples]
    assert [shown(it) for it in items] == [s["text"] for s in samples]
    assert [chr(65 + it.gold_index) for it in items] == [s["label"] for s in samples]
    assert [our_pixels(it.fixed[0].image) for it in items] == [s["pixels"] for s in samples]
    assert [it.metadata["stable_item_id"] for it in items][1] == "aokvqa::2BQEvR4ceUKkxu9uuSWfSf"
    # our default draw: the empty choice and the repeated question_id skipped and counted, never a crash
    loader = aokvqa.AOKVQA(path=str(folder), coco_dir=str(coco))
    assert len(loader.load()) == 3 and sum(loader.skipped.values()) == 2


def test_imagenet_reference_layout_gives_stop_reasonings_samples(stop_reasoning, tmp_path, offline):
    """The devkit class map + ground truth and the flat val_2012 folder under layout=reference and
    sampling=reference: its ImageNetDataset (`--cls` the task's devkit names) sample for sample."""
    folder = arf.imagenet(tmp_path / "data")
    cls = ["English_setter", "Persian_cat", "school_bus", "pineapple"]
    theirs = stop_reasoning.ImageNetDataset(arf.args(tmp_path / "data", cls=cls, prompt=REFERENCE_COT_INSTRUCTION
                                                     .replace("The answer is", "The class of the image is")))
    samples = arf.reference_samples(theirs)
    items = attack_items("imagenet4", path=str(folder), layout="reference", sampling="reference")
    assert [it.item_id for it in items] == [f"imagenet4::{s['qid']}" for s in samples] == [
        f"imagenet4::{n}" for n in (1, 3, 4, 5, 7, 8, 9, 10, 12)]
    assert {it.choices for it in items} == {tuple(cls)}
    assert [shown(it) for it in items] == [s["text"] for s in samples]
    assert [chr(65 + it.gold_index) for it in items] == [s["label"] for s in samples]
    assert [our_pixels(it.fixed[0].image) for it in items] == [s["pixels"] for s in samples]
    stable = imagenet.ImageNetTask(classes=4, path=str(folder), layout="reference").load()
    assert sorted(it.raw_id for it in stable) == [f"ILSVRC2012_val_{n:08d}" for n in (1, 3, 4, 5, 7, 8, 9, 10, 12)]
