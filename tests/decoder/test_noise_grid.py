"""The temperature grid (issue 22, point 6): what takes a temperature, what refuses one, where each grid
point is written, and how sampling is seeded."""

from __future__ import annotations

import pytest
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from facet_probe.app.boundary import user_message
from facet_probe.config.schema import run_name, settings_suffix
from facet_probe.runners.policies import POLICIES


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_reference_policy_refuses_a_temperature_saying_it_is_a_simulator(policy):
    """It used to say "unknown setting 'generation' ... check the spelling", as if a typo were the problem."""
    target = f"{POLICIES[policy].__module__}.{POLICIES[policy].__name__}"
    with pytest.raises(InstantiationException) as err:
        instantiate({"_target_": target, "generation": {"temperature": 0.7}})
    message = user_message(err.value)
    assert message is not None and "spelling" not in message
    assert "takes no temperature" in message and "generation.temperature=0.7" in message
    assert "model=tiny_vlm" in message  # what to do instead


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_reference_policy_without_decoding_settings_still_builds(policy):
    target = f"{POLICIES[policy].__module__}.{POLICIES[policy].__name__}"
    assert instantiate({"_target_": target}).policy == policy
    assert instantiate({"_target_": target, "generation": {}}).policy == policy  # nothing to refuse


def test_each_grid_point_names_a_folder_of_its_own():
    """`model.generation.temperature=T repeats=5`: repeats is spelt in the name, T in the settings suffix."""
    folders = {run_name("tiny_vlm", "facet_probe.facets.option_order.OptionOrder", "synthetic_mcq", "offline",
                        False, 6, 42, 5) + settings_suffix([f"model.generation.temperature={t}", "repeats=5"])
               for t in ("0.0", "0.7", "1.0")}
    assert len(folders) == 3 and all("-r5_model.generation.temperature=" in f for f in folders)
