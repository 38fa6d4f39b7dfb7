"""StopReasoning's data layout (`<data_root>/scienceqa`, `A-OKVQA` + `coco/test2017`, `ImageNet`) with edge rows,
and its own dataset classes (`utils/datasets.py` from a `git archive` of its mirror) run on them in-process.

Edge rows: an empty choice, unicode, leading spaces, an empty hint, a repeated id, a category the reference
leaves out, rows outside the split or the task; each image is a tiny distinct PNG/JPEG written here.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image
from upstream_fixtures import image_bytes

MIRROR = Path("/work/.mirror/aiPenguin+StopReasoning/repo")


def reference_datasets(out: Path) -> types.ModuleType:
    """The reference's `utils/datasets.py` (from a `git archive`, never vendored), imported under its own name.
    torch is a stand-in: the module only subclasses `torch.utils.data.Dataset`, which the compared code never
    calls; PIL is the real one (it opens and converts every image)."""
    if not MIRROR.is_dir() or shutil.which("git") is None:
        pytest.skip("the StopReasoning mirror is not on this machine")
    archive = subprocess.run(["git", f"--git-dir={MIRROR}", "archive", "HEAD", "utils/datasets.py"],
                             capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    data = types.ModuleType("torch.utils.data")
    data.Dataset = type("Dataset", (), {})
    stand_ins = {"torch": types.ModuleType("torch"), "torch.utils": types.ModuleType("torch.utils"),
                 "torch.utils.data": data}
    saved = {name: sys.modules.get(name) for name in stand_ins}
    sys.modules.update(stand_ins)
    try:
        spec = importlib.util.spec_from_file_location("stop_reasoning_datasets", out / "utils" / "datasets.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    return module


def reference_samples(dataset) -> list[dict]:
    """Each sample the reference's dataset gives, in its order: its id, prompt text, gold letter and the RGB
    pixels its PIL image holds."""
    out = []
    for index in range(len(dataset)):
        inputs, label = dataset[index]
        out.append({"qid": inputs["qid"], "text": inputs["text"], "label": label,
                    "pixels": (inputs["image"].size, inputs["image"].tobytes())})
    return out


def pixels(path: str) -> tuple:
    """An image file's RGB pixels, as the reference reads it (`Image.open(...).convert("RGB")`)."""
    with Image.open(path) as img:
        rgb = img.convert("RGB")
        return rgb.size, rgb.tobytes()


def args(root: Path, **extra) -> SimpleNamespace:
    """The reference's command-line arguments its datasets read."""
    return SimpleNamespace(data_root=str(root), prompt=extra.pop("prompt", ""), cls=extra.pop("cls", []), **extra)


def _png(file: Path, seed: int, fmt: str = "PNG") -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(image_bytes(seed, fmt))


# --------------------------------------------------------------------------- ScienceQA
def _problem(question, choices, answer, *, category="Weather and climate", hint="", image="image.png"):
    return {"question": question, "choices": choices, "answer": answer, "hint": hint, "image": image,
            "task": "closed choice", "grade": "grade4", "subject": "natural science", "topic": "science",
            "category": category, "skill": "skill", "lecture": "", "solution": "", "split": "test"}


SCIENCEQA = {
    "7": _problem("Which animal's feet are also adapted for swimming?", ["duck", "cat"], 0, hint="Look at the feet."),
    "12": _problem("Which is the warmest? — 25 °C ✓", ["24 °C", " 25 °C", "🙂 22 °C"], 1),  # unicode, leading space
    "15": _problem("What is the capital of Utah?", ["Salt Lake City", "Provo"], 0, category="State capitals"),
    "21": _problem(" Which word is a noun?", ["run", "", "table"], 2),  # leading space; an empty choice
    "30": _problem("Which is a solid?", ["milk", "rock"], 1, hint=""),
    "33": _problem("Not in the image split", ["a", "b"], 0, image=None),
    "40": _problem("Which object has more thermal energy?", ["a hot cup", "a cold cup"], 0, hint="  "),
    "41": _problem("What is the capital of Ohio?", ["Columbus", "Dayton"], 0, category="State capitals"),
    "52": _problem("Select the bird.", ["robin", "frog", "trout", "bat"], 0),
    "60": _problem("Train question", ["x", "y"], 1),
}
SCIENCEQA_SPLITS = {"test": ["12", "7", "15", "21", "30", "40", "21", "41", "52"], "train": ["60"]}


def scienceqa(root: Path) -> Path:
    """`<root>/scienceqa/`: problems.json, pid_splits_w_img.json (test order 12, 7, ...; 21 listed twice),
    images/<pid>/image.png."""
    folder = root / "scienceqa"
    folder.mkdir(parents=True)
    (folder / "problems.json").write_text(json.dumps(SCIENCEQA, ensure_ascii=False), encoding="utf-8")
    (folder / "pid_splits_w_img.json").write_text(json.dumps(SCIENCEQA_SPLITS))
    for pid, problem in SCIENCEQA.items():
        if problem["image"]:
            _png(folder / "images" / pid / "image.png", int(pid))
    return folder


# --------------------------------------------------------------------------- A-OKVQA
AOKVQA = [
    {"question_id": "22MexNkBPpdZGX6sxbxVBH", "image_id": 299207, "question": "What is the man by the bags awaiting?",
     "choices": ["skateboarder", "train", "delivery", "cab"], "correct_choice_idx": 3,
     "direct_answers": ["ride"] * 10, "rationales": ["He has bags."], "difficult_direct_answer": False},
    {"question_id": "2BQEvR4ceUKkxu9uuSWfSf", "image_id": 397134, "question": "Qué hay en la mesa? ☕",
     "choices": [" café", "té", "agua", "leche"], "correct_choice_idx": 0,  # unicode, a leading space
     "direct_answers": [], "rationales": [], "difficult_direct_answer": False},
    {"question_id": "3Y4Twgi8FcPgdY8QsFo3Nm", "image_id": 397135, "question": " Which season is it?",
     "choices": ["winter", "", "summer", "fall"], "correct_choice_idx": 2,  # an empty choice
     "direct_answers": [], "rationales": [], "difficult_direct_answer": True},
    {"question_id": "2BQEvR4ceUKkxu9uuSWfSf", "image_id": 397136, "question": "The same question id again?",
     "choices": ["yes", "no", "maybe", "never"], "correct_choice_idx": 1,  # a repeated question_id
     "direct_answers": [], "rationales": [], "difficult_direct_answer": False},
    {"question_id": "4ZmvxH8dnv7vcsgjx3mtF7", "image_id": 299207, "question": "What colour is the bus?",
     "choices": ["red", "blue", "green", "white"], "correct_choice_idx": 0,  # an image shared with row 0
     "direct_answers": [], "rationales": [], "difficult_direct_answer": False},
]


def aokvqa(root: Path) -> tuple[Path, Path]:
    """`<root>/A-OKVQA/aokvqa_v1p0_val.json` and the images where the reference opens them,
    `<root>/coco/test2017/<image_id:012d>.jpg`. Returns (the JSON's folder, the image folder)."""
    folder, coco = root / "A-OKVQA", root / "coco" / "test2017"
    folder.mkdir(parents=True)
    (folder / "aokvqa_v1p0_val.json").write_text(json.dumps(AOKVQA, ensure_ascii=False), encoding="utf-8")
    for row in AOKVQA:
        _png(coco / f"{row['image_id']:012d}.jpg", row["image_id"] % 97, fmt="JPEG")
    return folder, coco


# --------------------------------------------------------------------------- ImageNet
#: (wnid, class id, devkit name); the 4-class task's synsets, two others, and a name the task does not use
CLASS_MAP = [("n02119789", 1, "kit_fox"), ("n02100735", 2, "English_setter"), ("n02123394", 3, "Persian_cat"),
             ("n04146614", 4, "school_bus"), ("n07753275", 5, "pineapple"), ("n01440764", 6, "tench")]
#: the class id of validation images 1..12 (line n: image n), written with stray spaces as a file may hold them
GROUND_TRUTH = [4, 1, 2, 5, 3, 6, 2, 3, 4, 5, 1, 2]


def imagenet(root: Path) -> Path:
    """`<root>/ImageNet/`: ILSVRC/devkit/data/{map_clsloc.txt, ILSVRC2015_clsloc_validation_ground_truth.txt} and
    the flat val_2012/ILSVRC2012_val_<n:08d>.JPEG."""
    folder = root / "ImageNet"
    devkit = folder / "ILSVRC" / "devkit" / "data"
    devkit.mkdir(parents=True)
    (devkit / "map_clsloc.txt").write_text("".join(f"{w} {i} {n}\n" for w, i, n in CLASS_MAP))
    (devkit / "ILSVRC2015_clsloc_validation_ground_truth.txt").write_text(
        "".join(f" {label}\n" if n % 3 == 0 else f"{label}\n" for n, label in enumerate(GROUND_TRUTH)))
    for number in range(1, len(GROUND_TRUTH) + 1):
        _png(folder / "val_2012" / f"ILSVRC2012_val_{number:08d}.JPEG", number, fmt="JPEG")
    return folder

