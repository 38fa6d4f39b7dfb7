"""fp_toy_plugin: a facet (`hint_order`) and a dataset (`hint_set`) from outside facet_probe."""
