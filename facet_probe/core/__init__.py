"""The vocabulary every stage shares: items, prompts, orderings (permutations), the trial record, errors and
exit codes, console lines and secret masking. Pure data and functions; imports nothing of the package above it."""
