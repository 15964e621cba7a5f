"""Text embeddings (the only package that imports torch)."""
