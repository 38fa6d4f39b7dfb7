"""The paper targets: each name and the function that builds it, in the module of its own concept; each reads run
folders (through `Inputs`) and writes its tables and figures.

`TARGETS` is the one list of target names (the app's `target=`, the Makefile's targets and docs/paper.md
follow it); `paper` runs every target whose inputs the given run folders hold and says which it skipped."""

from __future__ import annotations

from facet_probe.paper import (
    attack_tables,
    calibration_table,
    capability_figure,
    cot_table,
    decoder_table,
    flip_tables,
    mechanism,
    mitigation,
    odi_tables,
    policy_tables,
    think_budget,
    verify,
)
from facet_probe.paper.build_inputs import (  # noqa: F401 (imported from here too)
    Inputs,
    Target,
    needs_input,
    published_only,
)
from facet_probe.paper.inputs import MissingInput  # noqa: F401 (imported from here too)
from facet_probe.paper.odi_tables import ODI_STATUS, odi_folders  # noqa: F401 (imported from here too)
from facet_probe.paper.verify import VerifyFailed  # noqa: F401 (imported from here too)

#: target name -> what builds it. `paper` is every one of them, in this order.
TARGETS: dict[str, Target] = {
    "table1": flip_tables.table1,
    "fig-flip-facets": flip_tables.fig_flip_facets,
    "table4-mitigation": policy_tables.table4_mitigation,
    "fig-pareto": policy_tables.fig_pareto,
    "table-k-ablation": policy_tables.table_k_ablation,
    "table-decoder": decoder_table.table_decoder,
    "table2-odi": odi_tables.table2_odi,
    "table-odi-intervals": odi_tables.table_odi_intervals,
    "fig-capability": capability_figure.fig_capability,
    "table-cot-order": cot_table.table_cot_order,
    "table-prompt-mitigation": mitigation.table_prompt_mitigation,
    "table-mechanism": mechanism.table_mechanism,
    "fig-think-budget": think_budget.fig_think_budget,
    "table-calibration": calibration_table.table_calibration,
    "verify": verify.verify,
    "attack-tables": attack_tables.attack_tables_target,
}
