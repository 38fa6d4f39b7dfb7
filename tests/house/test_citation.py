"""LICENSE and CITATION.cff (issue 63): the standard text of the license pyproject names, and a citation file in
the Citation File Format 1.2.0 citing the tool and the two papers whose methods it implements. (cffconvert, the
format's validator, pins jsonschema < 4: this checks the structure its schema requires for what the file uses.)"""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
#: sha256 of apache.org's LICENSE-2.0.txt (md5 3b83ef96387f14655fc854ddc3c6bd57), the text every project ships
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
#: CFF 1.2.0: the keys a file must have, and those a reference must have
REQUIRED = ("cff-version", "message", "title", "authors")
REFERENCE_REQUIRED = ("type", "title", "authors")
#: the reference types the schema defines, among those a paper or a tool can be
REFERENCE_TYPES = {"article", "conference-paper", "generic", "report", "software", "unpublished"}


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def valid_person(author: dict) -> bool:
    """A CFF person (family-names, given-names) or entity (name), and no other kind of entry."""
    return isinstance(author, dict) and bool(author.get("family-names") or author.get("name"))


def test_the_license_file_is_the_standard_text_of_the_license_pyproject_names():
    assert project()["license"] == "Apache-2.0"
    assert hashlib.sha256((ROOT / "LICENSE").read_bytes()).hexdigest() == APACHE_2_SHA256


def test_citation_cff_has_the_format_s_structure_and_cites_the_tool_and_both_papers():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and all(cff.get(key) for key in REQUIRED)
    assert all(valid_person(a) for a in cff["authors"])
    assert (cff["version"], cff["license"]) == (project()["version"], project()["license"])
    references = {r["title"]: r for r in cff["references"]}
    for reference in references.values():
        assert all(reference.get(key) for key in REFERENCE_REQUIRED) and reference["type"] in REFERENCE_TYPES
        assert all(valid_person(a) for a in reference["authors"]) and isinstance(reference["year"], int)
    facet = references["Same Evidence, Different Answer: Auditing Order Sensitivity in Multimodal Large Language "
                       "Models"]  # FACET-PROBE's own CITATION.cff, preferred-citation
    assert [a["family-names"] for a in facet["authors"]] == ["Paruchuri", "Koyejo", "Adeli"]
    assert (facet["year"], facet["url"]) == (2026, "https://arxiv.org/abs/2606.26079")
    stop = references["Stop Reasoning! When Multimodal LLM with Chain-of-Thought Reasoning Meets Adversarial Image"]
    assert [a["family-names"] for a in stop["authors"]] == ["Wang", "Han", "Chen", "Xue", "Ding", "Xiao", "Tresp",
                                                            "Torr", "Gu"]  # the StopReasoning README's BibTeX
    assert stop["year"] == 2024 and "COLM" in stop["conference"]["name"] and "2402.14899" in stop["url"]
