"""What the command line adds on top of the stages: the error boundary (one line per user error, exit
codes), the multirun sweep report and experiment tracking callbacks."""
