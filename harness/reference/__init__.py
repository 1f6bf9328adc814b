"""Reference checkpoints: small causal LMs trained by the project itself, the positive and negative controls."""
