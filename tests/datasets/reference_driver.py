"""Runs the reference's own loaders (yahskapar/facet-probe `paper_loaders.py`) on our fixture rows and prints
their [item id, question] pairs, one JSON per line. Run by system python3 with PYTHONPATH=<a `git archive` of the reference's src>;
it imports nothing of ours. Argument: a JSON file {dataset: DatasetProfile kwargs, target, rows: [...],
files: {name: path}}; rows are what `datasets.load_dataset` would yield, images as {"__image__": name}.
"""

import json
import sys

import facet_probe.paper_loaders as pl
from facet_probe.profiles import DatasetProfile


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


def main(spec_file):
    with open(spec_file, encoding="utf-8") as fh:
        spec = json.load(fh)
    rows = pictures(spec["rows"])
    pl._load_dataset = lambda *args, **kwargs: iter(rows)
    pl._hf_download = lambda repo, filename: spec["files"][filename]
    dataset = DatasetProfile(**{**spec["dataset"], "facets": tuple(spec["dataset"]["facets"])})
    for example in pl.load_paper_dataset_examples(dataset, target=spec["target"]):
        print(json.dumps([example.item.item_id, example.question]))


if __name__ == "__main__":
    main(sys.argv[1])
