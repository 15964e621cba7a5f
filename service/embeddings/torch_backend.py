"""sentence-transformers (torch) backend: the reference the ONNX export is checked against."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


class TorchModel:
    """all-MiniLM-L6-v2 through sentence-transformers on CPU."""

    def __init__(self, path: Path, *, threads: int) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        self.model = SentenceTransformer(str(path), device="cpu")
        get_dim = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        self.dimension = int(get_dim() or 0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, L2-normalized."""
        return self.model.encode(
            list(texts),
            batch_size=32,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        ).astype(np.float32)
