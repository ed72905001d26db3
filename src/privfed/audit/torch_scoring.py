"""Torch adapters for the audit attacks (imports torch; loaded lazily by privfed.audit).

The attacks in :mod:`privfed.audit.reference` and :mod:`privfed.audit.generative`
work on numpy arrays.  These helpers turn torch models into what they need:

* :func:`true_class_probabilities` and :func:`per_example_losses` score a
  classifier on every record, batched, on CPU or GPU;
* :func:`classifier_train_fn` builds a ``train_fn(indices) -> probabilities``
  for :func:`privfed.audit.reference_model_attack` from any training function
  ``fit(images, labels, seed) -> model``;
* :func:`numpy_callable` wraps a torch function so it accepts and returns
  numpy arrays (for ``denoise`` / ``reconstruct`` callables).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from privfed.errors import ParameterError, ParameterTypeError

__all__ = [
    "classifier_train_fn",
    "numpy_callable",
    "per_example_losses",
    "true_class_probabilities",
]


def _check(model: Any, inputs: Any, labels: Any, batch_size: int) -> None:
    if not callable(model):
        raise ParameterTypeError("model", "a callable torch module", model)
    if not isinstance(inputs, torch.Tensor) or inputs.ndim < 2:
        raise ParameterTypeError("inputs", "a torch.Tensor of shape (N, ...)", inputs)
    if not isinstance(labels, torch.Tensor) or labels.dtype != torch.int64:
        raise ParameterTypeError("labels", "an int64 torch.Tensor", labels)
    if tuple(labels.shape) != (inputs.shape[0],):
        raise ParameterError("labels", f"shape ({inputs.shape[0]},)", tuple(labels.shape))
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ParameterError("batch_size", "an int >= 1", batch_size)


@torch.no_grad()
def _log_probs(
    model: Callable[[torch.Tensor], torch.Tensor],
    inputs: torch.Tensor,
    labels: torch.Tensor,
    batch_size: int,
    device: str | torch.device | None,
) -> NDArray[np.float64]:
    was_training = getattr(model, "training", None)
    if hasattr(model, "eval"):
        model.eval()
    out = np.empty(inputs.shape[0])
    for start in range(0, inputs.shape[0], batch_size):
        x = inputs[start : start + batch_size]
        y = labels[start : start + batch_size]
        if device is not None:
            x, y = x.to(device), y.to(device)
        logp = torch.log_softmax(model(x).double(), dim=1)
        out[start : start + batch_size] = logp.gather(1, y[:, None])[:, 0].cpu().numpy()
    if was_training and hasattr(model, "train"):
        model.train(True)
    return out


def true_class_probabilities(
    model: Callable[[torch.Tensor], torch.Tensor],
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    batch_size: int = 1024,
    device: str | torch.device | None = None,
) -> NDArray[np.float64]:
    """Softmax probability of the true class for every record.

    Args:
        model: Maps (B, ...) inputs to (B, K) logits.
        inputs: Tensor (N, ...), any float dtype.
        labels: int64 tensor (N,), values in [0, K).
        batch_size: Records per forward pass, ≥ 1.
        device: Where to run each batch (None: where ``inputs`` live).

    Returns:
        float64 numpy array (N,), values in [0, 1] (computed in float64 from the logits).
    """
    _check(model, inputs, labels, batch_size)
    return np.exp(_log_probs(model, inputs, labels, batch_size, device))


def per_example_losses(
    model: Callable[[torch.Tensor], torch.Tensor],
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    batch_size: int = 1024,
    device: str | torch.device | None = None,
) -> NDArray[np.float64]:
    """Cross-entropy loss of every record (negate it to use as an attack score).

    Args:
        model: Maps (B, ...) inputs to (B, K) logits.
        inputs: Tensor (N, ...).
        labels: int64 tensor (N,).
        batch_size: Records per forward pass, ≥ 1.
        device: Where to run each batch.

    Returns:
        float64 numpy array (N,), values ≥ 0 (nats).
    """
    _check(model, inputs, labels, batch_size)
    return -_log_probs(model, inputs, labels, batch_size, device)


def classifier_train_fn(
    fit: Callable[[torch.Tensor, torch.Tensor, int], Callable[[torch.Tensor], torch.Tensor]],
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    base_seed: int = 0,
    batch_size: int = 1024,
    device: str | torch.device | None = None,
) -> Callable[[NDArray[np.int64]], NDArray[np.float64]]:
    """Build ``train_fn(indices) -> probabilities`` for reference-model attacks.

    Args:
        fit: ``fit(images, labels, seed) -> model`` trains a classifier, e.g.
            ``lambda x, y, s: train_classifier(x, y, num_classes=10, seed=s)``.
        inputs: The whole population, tensor (N, ...).
        labels: int64 tensor (N,).
        base_seed: The k-th call trains with seed ``base_seed + k``.
        batch_size: Scoring batch size.
        device: Scoring device.

    Returns:
        A callable for :func:`privfed.audit.reference_model_attack`.
    """
    _check(fit, inputs, labels, batch_size)
    calls = {"count": 0}

    def train_fn(indices: NDArray[np.int64]) -> NDArray[np.float64]:
        idx = torch.as_tensor(np.asarray(indices, dtype=np.int64))
        model = fit(inputs[idx], labels[idx], base_seed + calls["count"])
        calls["count"] += 1
        return true_class_probabilities(model, inputs, labels, batch_size=batch_size, device=device)

    return train_fn


def numpy_callable(
    fn: Callable[..., torch.Tensor],
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> Callable[..., NDArray[np.float64]]:
    """Wrap a torch function so it takes numpy arrays (and plain floats) and returns numpy.

    Array arguments become tensors of ``dtype`` on ``device``; other arguments
    pass unchanged; the call runs under ``torch.no_grad()``.

    Args:
        fn: e.g. ``lambda x, sigma: model(x, sigma)`` for a denoiser.
        device: Where tensors are placed.
        dtype: Floating dtype of the tensors.

    Returns:
        A callable returning float64 numpy arrays.
    """
    if not callable(fn):
        raise ParameterTypeError("fn", "a callable", fn)

    def wrapped(*args: Any) -> NDArray[np.float64]:
        converted = [
            torch.as_tensor(a, dtype=dtype, device=device) if isinstance(a, np.ndarray) else a
            for a in args
        ]
        with torch.no_grad():
            result = fn(*converted)
        return np.asarray(result.detach().double().cpu().numpy(), dtype=np.float64)

    return wrapped
