"""The models: one runner per backend (API SDKs, HF transformers, vLLM, reference policies) behind one
`Runner` contract (requests in, responses out), with batching, retries and the cost ledger."""

from facet_probe.runners.hf import families as _families  # noqa: F401 (registers the resolvers of model=hf)
