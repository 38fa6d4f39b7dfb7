"""Runs the reference's own loaders (yahskapar/facet-probe `paper_loaders.py`) on our fixture rows and prints
each item as {id, question, contents (its components' texts, in order), orderings (its own K=6 draw)}, one JSON
per line. Run by system python3 with PYTHONPATH=<a `git archive` of the reference's src>;
it imports nothing of ours. Argument: a JSON file {dataset: DatasetProfile kwargs, target, rows: [...],
files: {name: path}}; rows are what `datasets.load_dataset` would yield, images as {"__image__": name}.
Rows null: `load_dataset` fails as it does for MedXpertQA, so the reference reads the files itself (its jsonl and
zip fallback); image bytes it reads stand in as a picture named by their sha256 (the driver has no PIL).
"""

import hashlib
import json
import sys
from pathlib import Path

import facet_probe.paper_loaders as pl
from facet_probe.profiles import DatasetProfile

from facet_probe.facets import sample_permutations


class Picture:
    """Stands in for a decoded PIL image (the reference keeps any object with `save` and `convert`)."""

    def __init__(self, name):
        self.name = name

    def save(self, *args, **kwargs):
        pass

    def convert(self, *args, **kwargs):
        return self


def pictures(value):
    if isinstance(value, dict):
        if "__image__" in value:
            return Picture(value["__image__"])
        return {k: pictures(v) for k, v in value.items()}
    if isinstance(value, list):
        return [pictures(v) for v in value]
    return value


def reads_files(*args, **kwargs):
    raise TypeError("cannot load as a dataclass: the reference falls back to reading the files")


def decoded(decode):
    """The reference's image decoding, with image bytes (no PIL here) as a Picture named by their sha256."""
    def decode_bytes(value):
        if isinstance(value, (bytes, bytearray)):
            return Picture(hashlib.sha256(value).hexdigest())
        return decode(value)

    return decode_bytes


def main(spec_file):
    with open(spec_file, encoding="utf-8") as fh:
        spec = json.load(fh)
    files = spec["files"]
    if spec["rows"] is None:
        pl._load_dataset = reads_files
    else:
        rows = pictures(spec["rows"])
        pl._load_dataset = lambda *args, **kwargs: iter(rows)
    pl._hf_download = lambda repo, filename: files.get(filename) or files[Path(filename).name]
    pl._decode_image_field = decoded(pl._decode_image_field)
    dataset = DatasetProfile(**{**spec["dataset"], "facets": tuple(spec["dataset"]["facets"])})
    for example in pl.load_paper_dataset_examples(dataset, target=spec["target"]):
        item = example.item
        contents = [example.content[c.content_ref] for c in item.components]
        print(json.dumps({
            "id": item.item_id,
            "question": example.question,
            "contents": [c if isinstance(c, str) else None for c in contents],  # an image: None
            "orderings": sample_permutations(len(item.components), k=6, seed=42, item_id=item.item_id),
            "choices": list(item.choices),
            "gold": item.gold,
            "fixed": [getattr(example.content[c.content_ref], "name", None) for c in example.fixed_components],
        }, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1])
