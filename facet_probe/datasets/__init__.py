"""The datasets: one loader per source (its upstream schema -> items), the synthetic offline sets, the
reference's sampling of item ids, and screening items for a facet."""
