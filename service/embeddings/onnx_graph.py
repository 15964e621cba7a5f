"""Build the ONNX graph of a BERT sentence encoder straight from its safetensors weights.

This is what lets the service run without torch: the bundled all-MiniLM-L6-v2 ships as a
sentence-transformers folder (config.json + model.safetensors), and this module writes the same
computation as `transformers.BertModel(...).last_hidden_state` as ONNX operators (opset 17), so
onnxruntime can run it. Pooling and normalisation stay in `onnx_backend.OnnxModel`.

The graph follows BERT's published architecture (Devlin et al., 2019): token + position +
segment embeddings and a LayerNorm; then per layer multi-head self-attention with an additive
mask, a residual LayerNorm, a GELU (erf form) feed-forward block and another residual LayerNorm.
The additive mask is (1 − mask) × the float32 minimum, as transformers applies it, so padded
positions get no attention. Vectors agree with the torch reference to cos ≥ 0.99999
(tests/integration/test_embeddings.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from service.errors import ConfigurationError

OPSET = 17
"""LayerNormalization is an ONNX operator from opset 17 on."""
_MASK_MIN = float(np.finfo(np.float32).min)


def supported(model_dir: Path) -> bool:
    """True when `model_dir` is a BERT model this builder can write (else export with torch)."""
    try:
        config = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return (
        config.get("model_type") == "bert"
        and config.get("hidden_act", "gelu") == "gelu"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and (model_dir / "model.safetensors").exists()
    )


def build_bert_onnx(model_dir: Path) -> Any:
    """The encoder of `model_dir` as an `onnx.ModelProto`.

    Inputs `input_ids`, `attention_mask`, `token_type_ids`: (batch, tokens) int64. Output
    `last_hidden_state`: (batch, tokens, hidden_size) float32.

    Raises:
        ConfigurationError: the folder is not a BERT model with safetensors weights.
    """
    if not supported(model_dir):
        raise ConfigurationError(
            f"{model_dir} is not a BERT model with model.safetensors; install the torch extra "
            "(pip install 'openwebui-memory-banks[torch]') to export it"
        )
    from onnx import TensorProto, helper, numpy_helper
    from safetensors.numpy import load_file

    config = json.loads((model_dir / "config.json").read_text())
    weights = load_file(str(model_dir / "model.safetensors"))
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dim = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""

    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    def weight(key: str, *, transpose: bool = False) -> str:
        value = weights[prefix + key]
        return const(key, np.ascontiguousarray(value.T if transpose else value))

    def node(op: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def linear(x: str, key: str, out: str) -> str:
        product = node("MatMul", [x, weight(f"{key}.weight", transpose=True)], f"{out}.mm")
        return node("Add", [product, weight(f"{key}.bias")], out)

    def layer_norm(x: str, key: str, out: str) -> str:
        scale, bias = weight(f"{key}.weight"), weight(f"{key}.bias")
        return node("LayerNormalization", [x, scale, bias], out, axis=-1, epsilon=eps)

    # embeddings: words + positions 0..T-1 + segments
    const("zero", np.array(0, dtype=np.int64))
    const("one", np.array(1, dtype=np.int64))
    const("one_f", np.array(1.0, dtype=np.float32))
    const("mask_min", np.array(_MASK_MIN, dtype=np.float32))
    const("heads_shape", np.array([0, 0, heads, head_dim], dtype=np.int64))
    const("hidden_shape", np.array([0, 0, hidden], dtype=np.int64))
    const("scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    const("half", np.array(0.5, dtype=np.float32))
    const("mask_axes", np.array([1, 2], dtype=np.int64))
    shape = node("Shape", ["input_ids"], "ids_shape")
    tokens = node("Gather", [shape, "one"], "tokens", axis=0)
    positions = node("Range", ["zero", tokens, "one"], "positions")
    words = node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "e.words")
    place = node("Gather", [weight("embeddings.position_embeddings.weight"), positions], "e.pos")
    kinds = node(
        "Gather", [weight("embeddings.token_type_embeddings.weight"), "token_type_ids"], "e.types"
    )
    summed = node("Add", [node("Add", [words, place], "e.sum1"), kinds], "e.sum")
    x = layer_norm(summed, "embeddings.LayerNorm", "e.out")

    # additive attention mask: 0 where attended, float32 min where padded; (B, 1, 1, T)
    mask_f = node("Cast", ["attention_mask"], "mask.f", to=TensorProto.FLOAT)
    inverted = node("Sub", ["one_f", mask_f], "mask.inv")
    additive = node("Mul", [inverted, "mask_min"], "mask.add")
    mask = node("Unsqueeze", [additive, "mask_axes"], "mask")

    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}"

        def split_heads(t: str, perm: list[int], name: str, p: str = p) -> str:
            shaped = node("Reshape", [t, "heads_shape"], f"{p}.{name}.r")
            return node("Transpose", [shaped], f"{p}.{name}.t", perm=perm)

        q = split_heads(linear(x, f"{p}.attention.self.query", f"{p}.q"), [0, 2, 1, 3], "q")
        k = split_heads(linear(x, f"{p}.attention.self.key", f"{p}.k"), [0, 2, 3, 1], "k")
        v = split_heads(linear(x, f"{p}.attention.self.value", f"{p}.v"), [0, 2, 1, 3], "v")
        scores = node("Mul", [node("MatMul", [q, k], f"{p}.qk"), "scale"], f"{p}.scaled")
        probs = node("Softmax", [node("Add", [scores, mask], f"{p}.masked")], f"{p}.p", axis=-1)
        context = node("MatMul", [probs, v], f"{p}.ctx")
        merged = node(
            "Reshape",
            [node("Transpose", [context], f"{p}.ctx.t", perm=[0, 2, 1, 3]), "hidden_shape"],
            f"{p}.ctx.r",
        )
        attended = linear(merged, f"{p}.attention.output.dense", f"{p}.ao")
        x = layer_norm(
            node("Add", [attended, x], f"{p}.ao.res"), f"{p}.attention.output.LayerNorm", f"{p}.a"
        )
        inner = linear(x, f"{p}.intermediate.dense", f"{p}.i")
        erf = node("Erf", [node("Div", [inner, "sqrt2"], f"{p}.i.s")], f"{p}.i.erf")
        gelu = node(
            "Mul",
            [node("Mul", [inner, node("Add", [erf, "one_f"], f"{p}.i.e1")], f"{p}.i.m"), "half"],
            f"{p}.gelu",
        )
        out = linear(gelu, f"{p}.output.dense", f"{p}.o")
        x = layer_norm(node("Add", [out, x], f"{p}.o.res"), f"{p}.output.LayerNorm", f"{p}.out")

    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    dims = ["batch", "tokens"]
    graph = helper.make_graph(
        nodes,
        "bert_encoder",
        [
            helper.make_tensor_value_info(n, TensorProto.INT64, dims)
            for n in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [*dims, hidden])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8  # readable by every onnxruntime this project supports (≥ 1.18)
    return model
