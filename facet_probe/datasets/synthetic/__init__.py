"""Offline synthetic datasets, generated deterministically by the package (no downloads).

One module per set; `base.py` holds the shared stream/versioning machinery, `vocab.py` the closed
vocabulary, `draw.py` the Pillow pictures. `GENERATOR_VERSION` is recorded in every item and run.
"""

from facet_probe.datasets.synthetic.base import GENERATOR_VERSION, SyntheticLoader
from facet_probe.datasets.synthetic.dialog import SyntheticDialog
from facet_probe.datasets.synthetic.docs import SyntheticDocs
from facet_probe.datasets.synthetic.evidence import SyntheticEvidence
from facet_probe.datasets.synthetic.few_shot import SyntheticFewShot
from facet_probe.datasets.synthetic.image_set import SyntheticImageSet
from facet_probe.datasets.synthetic.mcq import SyntheticMCQ
from facet_probe.datasets.synthetic.mixed import SyntheticMixed
from facet_probe.datasets.synthetic.tools import SyntheticTools
from facet_probe.datasets.synthetic.visual_mcq import SyntheticVisualMCQ

#: Config name -> loader class, for every synthetic set.
SYNTHETIC_SETS: dict[str, type[SyntheticLoader]] = {
    cls.set_name: cls
    for cls in (SyntheticMCQ, SyntheticVisualMCQ, SyntheticEvidence, SyntheticDocs, SyntheticImageSet,
                SyntheticMixed, SyntheticDialog, SyntheticFewShot, SyntheticTools)
}

__all__ = ["GENERATOR_VERSION", "SYNTHETIC_SETS", "SyntheticLoader", *(c.__name__ for c in SYNTHETIC_SETS.values())]
