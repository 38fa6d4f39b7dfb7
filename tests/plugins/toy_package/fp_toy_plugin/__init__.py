"""fp_toy_plugin: a facet (`hint_order`), a dataset (`hint_set`) and a model (`last_candidate`) from outside facet_probe."""
