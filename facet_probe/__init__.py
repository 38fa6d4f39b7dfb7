"""facet_probe: order-sensitivity audits and adversarial chain-of-thought attacks for multimodal LLMs."""

__version__ = "0.1.0"
