"""Issue 66 (6): facet_probe_dev/gpu_wheels.py picks the wheels the quick GPU check needs beside a machine's own torch
and transformers, group by group, within what the device tool carries (the downloads themselves are not run here)."""

from __future__ import annotations

from facet_probe_dev.gpu_wheels import fitting, groups
from facet_probe_dev.packages import closure, requirement_names

REQUIRES = {"transformers": ["huggingface-hub<2,>=1.5", "numpy>=1.17", "tqdm>=4.27", "pytest; extra == 'testing'"],
            "huggingface-hub": ["PyYAML>=5.1", "tqdm"], "torch": ["filelock", "sympy>=1.13.3"],
            "facet-probe": ["torch>=2.11", "transformers>=5.21,<6", "pandas>=2.2", "hydra-core==1.3.*", "pillow>=10"],
            "pandas": ["numpy>=1.26", "python-dateutil>=2.8.2"], "hydra-core": ["omegaconf<2.4,>=2.2"]}


def test_what_torch_and_transformers_bring_is_their_requirements_transitively_extras_left_out():
    assert closure(["torch", "transformers"], REQUIRES) == {
        "torch", "filelock", "sympy", "transformers", "huggingface-hub", "numpy", "tqdm", "pyyaml"}
    assert requirement_names(["pytest; extra == 'testing'", "numpy>=1.17"]) == {"numpy"}


def test_each_group_adds_what_the_project_requires_and_the_machine_lacks_in_the_checks_order():
    provided = closure(["torch", "transformers"], REQUIRES)
    wanted = closure(["facet-probe"], REQUIRES) - {"facet-probe"}
    measured = {"runner rows": {"hydra-core", "omegaconf", "numpy", "pillow", "google-genai"},  # an optional import
                "audit row": {"pandas", "python-dateutil", "pillow"}}
    assert groups(measured, {"quant extra": {"bitsandbytes"}}, provided, wanted) == {
        "runner rows": ["hydra-core", "omegaconf", "pillow"], "audit row": ["pandas", "python-dateutil"],
        "quant extra": ["bitsandbytes"]}


def test_each_group_is_kept_whole_where_it_still_fits_taken_in_order():
    sizes = {"runner rows": {"a.whl": 20}, "audit row": {"b.whl": 50, "c.whl": 10}, "quant extra": {"d.whl": 40}}
    assert fitting(sizes, 64) == (["runner rows", "quant extra"], ["audit row"])
    assert fitting(sizes, 10) == ([], ["runner rows", "audit row", "quant extra"])
