"""The reference driver (reference_driver.py), printing each item whole: [item id, question, components,
fixed images, choices, gold (normalised; as stored with
`raw_gold`), K=6 orderings], one JSON per line. Text components as their text, images as
"sha256:<hex>" (marker rows carry it as their name; bytes read from an archive are hashed here, since the
plain python3 that runs this has no PIL). Orderings come from the reference's own `sample_permutations`.
"""

import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import reference_driver as rd  # noqa: E402

from facet_probe.facets import sample_permutations  # noqa: E402

undecoded = rd.pl._decode_image_field


def decode(value):
    """Archive bytes as a marker picture named by their hash; anything else as the reference decodes it."""
    if isinstance(value, (bytes, bytearray)) and value:
        return rd.Picture("sha256:" + hashlib.sha256(value).hexdigest())
    return undecoded(value)


def shown(value):
    return value.name if isinstance(value, rd.Picture) else value


def main(spec_file):
    with open(spec_file, encoding="utf-8") as fh:
        spec = json.load(fh)
    rows = rd.pictures(spec["rows"])
    rd.pl._load_dataset = lambda *args, **kwargs: iter(rows)
    rd.pl._hf_download = lambda repo, filename: Path(spec["files"][filename])
    rd.pl._decode_image_field = decode
    dataset = rd.DatasetProfile(**{**spec["dataset"], "facets": tuple(spec["dataset"]["facets"])})
    for ex in rd.pl.load_paper_dataset_examples(dataset, target=spec["target"]):
        item = ex.item
        parts = [shown(ex.content[c.content_ref]) for c in item.components]
        fixed = [shown(ex.content[c.content_ref]) for c in ex.fixed_components]
        orderings = sample_permutations(len(item.components), k=6, item_id=item.item_id)
        gold = item.gold if spec.get("raw_gold") else ex.gold_normalized  # raw: a free answer as stored
        print(json.dumps([item.item_id, ex.question, parts, fixed, list(item.choices), gold,
                          [list(p) for p in orderings]]))


if __name__ == "__main__":
    main(sys.argv[1])
