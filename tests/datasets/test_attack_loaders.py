"""Attack datasets: ScienceQA image questions, A-OKVQA, and the ImageNet 4/8/16-class tasks."""

from __future__ import annotations

import hashlib

import pytest
import upstream_fixtures as fx

from facet_probe.datasets import aokvqa, imagenet, scienceqa
from facet_probe.datasets.base import DatasetUnavailable
from facet_probe.items import ItemError


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
    from facet_probe.config_loading import load_option

    root = fx.imagenet_val(tmp_path / "val", [imagenet.SYNSETS[c] for c in imagenet.TASKS[4]])
    per_folder = len(list((root / imagenet.SYNSETS[imagenet.TASKS[4][0]]).iterdir()))
    assert load_option("dataset", "imagenet4").per_class is None  # the paper: all 50 per class
    items = imagenet.ImageNetTask(name="imagenet4", classes=4, path=str(root)).load_all()
    assert len(items) == 4 * per_folder
    assert len(imagenet.ImageNetTask(name="imagenet4", classes=4, per_class=1, path=str(root)).load_all()) == 4
