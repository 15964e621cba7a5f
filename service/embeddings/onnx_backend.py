"""ONNX Runtime backend: tokenizers + onnxruntime + numpy, no torch at query time.

The ONNX file is made once per installation from the sentence-transformers folder and kept in
a cache folder every process of the installation shares (MEMORY_MODEL_CACHE_DIR, else the
user's cache folder), named after a hash of the model's files: a BERT model (the bundled
all-MiniLM-L6-v2) is written straight from its safetensors weights by `onnx_graph` (no torch
needed; 1.6 to 2.1 s on this project's 2-core machine while 12 processes compete for it, build
and write); any other architecture is exported with `torch.onnx.export` (opset 17), which
needs the `torch` extra. Processes starting together take a file lock, so one writes and the
others wait and load its file. Mean pooling over the
attention mask and L2 normalisation follow the model's own modules.json
(Transformer → Pooling(mean) → Normalize).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from service.embeddings import onnx_graph
from service.errors import ConfigurationError

log = logging.getLogger(__name__)

MAX_SEQ_TOKENS = 256


CACHE_FOLDER = "memory-service"
"""Folder under the user's cache folder (XDG_CACHE_HOME, else ~/.cache) for ONNX exports."""


def default_cache_dir() -> Path:
    """Where ONNX exports are kept when MEMORY_MODEL_CACHE_DIR is unset: the user's cache
    folder (`$XDG_CACHE_HOME`, else `~/.cache`), `memory-service/onnx`.
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / CACHE_FOLDER / "onnx"


def model_key(model_dir: Path) -> str:
    """A hash of the model's files (config, tokenizer, weights): 16 hex digits. The same model
    installed in two places shares one export; changed weights get a new one.
    """
    digest = hashlib.sha256()
    files = sorted(
        p
        for p in model_dir.iterdir()
        if p.is_file() and p.suffix in (".json", ".safetensors", ".bin", ".txt")
    )
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as handle:
            digest.update(hashlib.file_digest(handle, "sha256").digest())
    return digest.hexdigest()[:16]


def ensure_onnx(model_dir: Path, target: Path) -> Path:
    """Write `model_dir` as ONNX at `target` unless it is already there; returns `target`.

    Under an exclusive lock on `target` + ".lock": of processes starting together, one
    writes (to a temporary file, renamed into place, so a half-written model is never
    loaded) and the others wait, then find the file.

    Raises:
        ConfigurationError: the model is not BERT and torch (the `torch` extra) is missing.
    """
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        if target.exists():  # another process wrote it while this one waited
            return target
        log.info("writing the embedding model as ONNX (once per installation): %s", target)
        handle, tmp = tempfile.mkstemp(suffix=".onnx.tmp", dir=target.parent)
        os.close(handle)
        try:
            if onnx_graph.supported(model_dir):
                import onnx

                onnx.save(onnx_graph.build_bert_onnx(model_dir), tmp)
            else:
                _export_with_torch(model_dir, tmp)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; other users' processes read it too
        os.replace(tmp, target)
    return target


def _export_with_torch(model_dir: Path, tmp: str) -> None:
    """Export a model `onnx_graph` cannot write, with torch (the `torch` extra)."""
    try:
        import torch
    except ImportError as exc:
        raise ConfigurationError(
            f"{model_dir} is not a BERT model, so exporting it to ONNX needs torch: "
            "pip install 'openwebui-memory-banks[torch]'"
        ) from exc
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()

    class _Wrapper(torch.nn.Module):
        # transformers 5 rejects positional arguments here; pass them by name.
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    ids = torch.ones((1, 8), dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer notes about shapes fixed at export time
        torch.onnx.export(
            _Wrapper(),
            (ids, ids, torch.zeros_like(ids)),
            tmp,
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                "input_ids": axes,
                "attention_mask": axes,
                "token_type_ids": axes,
                "last_hidden_state": axes,
            },
            opset_version=17,
            dynamo=False,
        )


class OnnxModel:
    """all-MiniLM-L6-v2 as ONNX on CPU."""

    def __init__(self, onnx_path: Path, tokenizer_path: Path, *, threads: int) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(
            str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.enable_truncation(MAX_SEQ_TOKENS)
        self.tokenizer.enable_padding()
        self.dimension = int(self.session.get_outputs()[0].shape[-1] or 384)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, L2-normalized."""
        encodings = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        hidden: np.ndarray = self.session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        )[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        normalized: np.ndarray = pooled / np.clip(norms, 1e-12, None)
        return normalized.astype(np.float32)
