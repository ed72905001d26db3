"""The downstream classifier: a small CNN trained on (synthetic) images.

It is deliberately small: on 8x8 digits it trains in a few seconds on a CPU and
reaches about 97 % test accuracy on real data, which makes it a sensitive probe
of synthetic-data quality.  It adapts to any ``(C, H, W)`` input through an
adaptive pooling layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from privfed._checks import check_int
from privfed.engines._rng import seeded_global_rng
from privfed.engines._training import train_epochs
from privfed.errors import NonFiniteInputError, ParameterError, ParameterTypeError

__all__ = ["SmallCNN", "evaluate_classifier", "train_classifier"]

#: Called after every epoch with ``(epoch, epochs, mean training loss)``; epochs count from 1.
ProgressCallback = Callable[[int, int, float], None]


class SmallCNN(nn.Module):
    """Two 3x3 convolutions, adaptive pooling to 4x4, and a two-layer head.

    Args:
        in_channels: Image channels ``C >= 1``.
        num_classes: Output logits ``K >= 2``.
        width: Channels of the first convolution (the second has twice as many).
    """

    def __init__(self, in_channels: int, num_classes: int, width: int = 16) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d((4, 4)),
        )
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Dropout(0.25),
            nn.Linear(2 * width * 16, 64),
            nn.ReLU(),
            nn.Linear(64, num_classes),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Map ``(N, C, H, W)`` images in ``[0, 1]`` to ``(N, K)`` logits."""
        logits: torch.Tensor = self.head(self.features(images - 0.5))
        return logits


def _check_inputs(images: object, labels: object, num_classes: int | None) -> None:
    if not isinstance(images, torch.Tensor) or images.dtype != torch.float32:
        raise ParameterTypeError("images", "a float32 torch.Tensor", images)
    if images.ndim != 4:
        raise ParameterError("images", "a tensor of shape (N, C, H, W)", tuple(images.shape))
    if not isinstance(labels, torch.Tensor) or labels.dtype != torch.int64:
        raise ParameterTypeError("labels", "an int64 torch.Tensor", labels)
    if tuple(labels.shape) != (images.shape[0],):
        raise ParameterError(
            "labels", f"a tensor of shape ({images.shape[0]},)", tuple(labels.shape)
        )
    if images.numel() and not bool(torch.isfinite(images).all()):
        raise NonFiniteInputError("images", count=int((~torch.isfinite(images)).sum()))
    if num_classes is not None and labels.numel():
        lo, hi = int(labels.min()), int(labels.max())
        if lo < 0 or hi >= num_classes:
            raise ParameterError("labels", f"values in [0, {num_classes})", (lo, hi))


def train_classifier(
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    num_classes: int,
    epochs: int = 20,
    batch_size: int = 128,
    learning_rate: float = 2e-3,
    seed: int = 0,
    device: str | torch.device = "cpu",
    progress: ProgressCallback | None = None,
) -> nn.Module:
    """Train a :class:`SmallCNN` with Adam and cross-entropy.

    Training is deterministic for a given seed on CPU (initialisation, shuffling
    and dropout draw from a forked torch RNG, so the caller's global RNG state
    is left untouched).

    Args:
        images: ``float32`` tensor ``(N, C, H, W)``, values nominally in ``[0, 1]``;
            any device (moved to ``device``).
        labels: ``int64`` tensor ``(N,)`` with values in ``[0, num_classes)``.
        num_classes: Number of classes ``K >= 2``.
        epochs: Passes over the data, ``>= 1``.
        batch_size: Mini-batch size, ``>= 1``.
        learning_rate: Adam step size, finite and ``> 0``.
        seed: Seed of initialisation, shuffling and dropout.
        device: Where to train (``"cpu"``, ``"cuda"``, ...).
        progress: Optional callback, see :data:`ProgressCallback`.

    Returns:
        The trained model in eval mode, on ``device``.

    Raises:
        ParameterTypeError: On wrong tensor types.
        ParameterError: On bad shapes, labels, or hyper-parameters, or ``N == 0``.
        NonFiniteInputError: If ``images`` holds NaN or inf.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ParameterError("num_classes", "an int >= 2", num_classes)
    _check_inputs(images, labels, num_classes)
    for name, value in (("epochs", epochs), ("batch_size", batch_size)):
        check_int(name, value, minimum=1, type_error=False)
    if not (isinstance(learning_rate, int | float) and math.isfinite(learning_rate)) or (
        learning_rate <= 0
    ):
        raise ParameterError("learning_rate", "a finite float > 0", learning_rate)
    if images.shape[0] == 0:
        raise ParameterError("images", "at least one training example", 0)
    dev = torch.device(device)
    x = images.to(dev)
    y = labels.to(dev)
    n = x.shape[0]
    with seeded_global_rng(seed, dev):
        model = SmallCNN(int(x.shape[1]), num_classes).to(dev)
        optimiser = torch.optim.Adam(model.parameters(), lr=learning_rate)
        loss_fn = nn.CrossEntropyLoss()
        train_epochs(
            lambda idx: loss_fn(model(x[idx]), y[idx]),
            optimiser,
            n,
            epochs=epochs,
            batch_size=batch_size,
            shuffler=torch.Generator().manual_seed(seed),
            device=dev,
            before_epoch=model.train,
            progress=progress,
        )
    model.eval()
    return model


@torch.no_grad()
def evaluate_classifier(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    device: str | torch.device = "cpu",
    batch_size: int = 1024,
) -> float:
    """Return the top-1 accuracy of ``model`` on ``(images, labels)``.

    Args:
        model: A module mapping ``(B, C, H, W)`` to ``(B, K)`` logits.
        images: ``float32`` tensor ``(N, C, H, W)``, ``N >= 1``.
        labels: ``int64`` tensor ``(N,)``.
        device: Where to run the model.
        batch_size: Evaluation batch size, ``>= 1``.

    Returns:
        Accuracy in ``[0, 1]``.
    """
    _check_inputs(images, labels, None)
    if images.shape[0] == 0:
        raise ParameterError("images", "at least one test example", 0)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ParameterError("batch_size", "an int >= 1", batch_size)
    dev = torch.device(device)
    was_training = model.training
    model.eval()
    correct = 0
    for start in range(0, images.shape[0], batch_size):
        x = images[start : start + batch_size].to(dev)
        y = labels[start : start + batch_size].to(dev)
        correct += int((model(x).argmax(dim=1) == y).sum())
    model.train(was_training)
    return correct / int(images.shape[0])
