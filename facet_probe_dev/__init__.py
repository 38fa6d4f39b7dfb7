"""Development tools of facet_probe, kept out of the installed package: `testing` (loopback fake provider
servers, tiny offline model builders, the kill helper) and `tiny_vlm` (the trainer of the shipped tiny VLM,
whose weights stay package data in `facet_probe/assets/tiny_vlm`). Importable from a checkout's root
(`python -m pytest`, `make tiny-vlm`, `benchmarks/`)."""
