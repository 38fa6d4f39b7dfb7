"""Test helpers (loopback fake provider servers, tiny offline models, the kill helper), for tests and benchmarks; not installed."""
