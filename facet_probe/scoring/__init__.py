"""Replies -> answers: the letter/answer parser, scoring a reply against its item and ordering, re-scoring
stored trials under the current parser, and the run's trials as scored now."""

from facet_probe._moved import forward_old_names

__getattr__ = forward_old_names(__name__)  # facet_probe.scoring was a module in 0.1
