"""Test helpers shipped with the package (loopback fake servers), reusable by tests and benchmarks."""
