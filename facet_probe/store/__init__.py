"""Everything that touches a run folder's files: the folder (`run_folder`: its file names and records), atomic writes,
locks, append-only JSONL, the trial store and call cache, reading trials back, and writing run_status.json."""

from facet_probe._moved import forward_old_names

__getattr__ = forward_old_names(__name__)  # facet_probe.store was a module in 0.1
