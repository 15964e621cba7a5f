"""The ONNX backend gives the torch reference's vectors."""

from __future__ import annotations

import numpy as np

from service.embeddings.encoder import Encoder

TEXTS = [
    "Suggest a dinner for tonight.",
    "User is vegetarian",
    "Ich heiße Jonas und mein Lieblingsgericht sind Käsespätzle 🧀.",
    " ".join(["word"] * 400),
]


def test_onnx_vectors_match_the_torch_reference(encoder: Encoder) -> None:
    reference = Encoder(backend="torch", cache_size=1)
    try:
        expected = reference.encode_sync(TEXTS)
    finally:
        reference.close()
    got = encoder.encode_sync(TEXTS)
    assert encoder.backend == "onnx"
    assert got.shape == (4, 384)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(got * expected, axis=1))) > 0.9999


def test_repeated_texts_are_served_from_the_cache(encoder: Encoder) -> None:
    hits = encoder.hits
    encoder.encode_sync(["a text seen twice", "a text seen twice"])
    encoder.encode_sync(["a text seen twice"])
    assert encoder.hits - hits >= 1
