"""membench: a benchmark harness for memorization, privacy leakage and bias in HF checkpoints."""

__version__ = "0.1.0"
