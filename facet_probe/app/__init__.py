"""What the command line adds on top of the stages: the audit's job, the error boundary (one line per user error,
exit codes), the run's timeline, the multirun sweep report and experiment tracking callbacks."""
