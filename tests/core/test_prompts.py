"""`PromptMode.of`: the one reading of the `prompt.cot` switch that the audit and the attack apps share."""

from __future__ import annotations

import pytest

from facet_probe.core.errors import ConfigError
from facet_probe.core.prompts import PromptMode


@pytest.mark.parametrize(("cot", "mode"), [(True, PromptMode.COT), (False, PromptMode.DIRECT),
                                           ("cot", PromptMode.COT), ("direct", PromptMode.DIRECT),
                                           (PromptMode.COT, PromptMode.COT), (PromptMode.DIRECT, PromptMode.DIRECT)])
def test_the_switch_sets_the_mode_and_a_mode_or_its_name_is_itself(cot, mode):
    assert PromptMode.of(cot) is mode


def test_text_that_names_no_mode_is_one_config_error_naming_the_modes():
    with pytest.raises(ConfigError, match=r"must be one of direct, cot; got 'yes'"):
        PromptMode.of("yes")
