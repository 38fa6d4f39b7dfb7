"""The vocabulary every stage shares: items, prompts, orderings, the trial record, errors and exit codes, console
lines, secret masking, untrusted text as Markdown and LaTeX. Pure data and functions; imports nothing above it."""
