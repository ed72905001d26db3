"""The downstream classifier: a small network trained on (synthetic) images.

Two architectures, both deliberately small (they probe synthetic-data quality,
they are not the object of study):

* ``"cnn"`` -- :class:`SmallCNN`: two 3x3 convolutions and adaptive pooling
  (the default of :func:`train_classifier`, and the model FedAvg trains in the
  factory engine, so that its comparison stays like for like).
* ``"mlp"`` -- :class:`SmallMLP`: the image flattened, two hidden layers of
  256 units.  On the latent engine's synthetic images it is as accurate as the
  CNN and many times cheaper per epoch, on 8x8 and on 28x28 images alike
  (``benchmarks/classifier_speed.py`` measures both); the latent job uses it.

With ``patience`` set, training stops when the loss on a held-out part of the
training data has not improved for ``patience`` epochs, and the weights of
the best epoch are returned.  The held-out part is carved from the images
passed in (for a classifier trained on synthetic data it is synthetic too);
test data are never looked at.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
from torch import nn

from privfed._checks import check_choice, check_float, check_int
from privfed.engines._rng import seeded_global_rng
from privfed.engines._training import Adam, train_epochs
from privfed.errors import NonFiniteInputError, ParameterError, ParameterTypeError

__all__ = [
    "ARCHITECTURES",
    "SmallCNN",
    "SmallMLP",
    "evaluate_classifier",
    "train_classifier",
]

#: Called after every epoch with ``(epoch, epochs, mean training loss)``; epochs count
#: from 1 and ``epochs`` is the most that may run (early stopping can end sooner).
ProgressCallback = Callable[[int, int, float], None]

#: The architectures :func:`train_classifier` can build.
ARCHITECTURES = ("cnn", "mlp")


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


class SmallMLP(nn.Module):
    """The flattened image, two ReLU layers of ``hidden`` units with dropout, and logits.

    Args:
        in_features: ``C * H * W`` of the images, ``>= 1``.
        num_classes: Output logits ``K >= 2``.
        hidden: Units of each hidden layer.
    """

    def __init__(self, in_features: int, num_classes: int, hidden: int = 256) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(in_features, hidden),
            nn.ReLU(),
            nn.Dropout(0.25),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Map ``(N, C, H, W)`` images in ``[0, 1]`` to ``(N, K)`` logits."""
        logits: torch.Tensor = self.net(images - 0.5)
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


def _build(architecture: str, images: torch.Tensor, num_classes: int) -> nn.Module:
    if architecture == "cnn":
        return SmallCNN(int(images.shape[1]), num_classes)
    return SmallMLP(int(images[0].numel()), num_classes)


class _EarlyStopping:
    """Held-out loss after every epoch; keeps the best weights; says when to stop."""

    def __init__(self, model: nn.Module, loss: Callable[[], float], patience: int) -> None:
        self._model = model
        self._loss = loss
        self._patience = patience
        self._best = math.inf
        self._best_state: dict[str, torch.Tensor] | None = None
        self._stale = 0
        self.best_epoch = 0

    def __call__(self, epoch: int) -> bool:
        value = self._loss()
        if value < self._best:
            self._best, self._stale, self.best_epoch = value, 0, epoch
            self._best_state = copy.deepcopy(self._model.state_dict())
            return False
        self._stale += 1
        return self._stale >= self._patience

    def restore(self) -> None:
        if self._best_state is not None:
            self._model.load_state_dict(self._best_state)


def train_classifier(
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    num_classes: int,
    architecture: str = "cnn",
    epochs: int = 20,
    patience: int | None = None,
    validation_fraction: float = 0.1,
    batch_size: int = 128,
    learning_rate: float = 2e-3,
    seed: int = 0,
    device: str | torch.device = "cpu",
    progress: ProgressCallback | None = None,
) -> nn.Module:
    """Train a small classifier with Adam and cross-entropy, optionally stopping early.

    With ``patience`` set, a random ``validation_fraction`` of
    the records is held out of training (at least one record, and only when
    there are at least two); after every epoch the mean cross-entropy on it is
    computed (eval mode), and training ends once it has not improved for
    ``patience`` consecutive epochs, or after ``epochs`` epochs.  The weights
    of the epoch with the lowest held-out loss are returned.  With
    ``patience=None`` (the default) every record is trained on for exactly
    ``epochs`` epochs.

    Training is deterministic for a given seed on CPU (initialisation, the
    hold-out split, shuffling and dropout draw from seeded generators, so the
    caller's global RNG state is left untouched).  The number of CPU threads
    is torch's setting (:func:`torch.set_num_threads`); the jobs set it from
    their ``num_threads``.

    Args:
        images: ``float32`` tensor ``(N, C, H, W)``, values nominally in ``[0, 1]``;
            any device (moved to ``device``).
        labels: ``int64`` tensor ``(N,)`` with values in ``[0, num_classes)``.
        num_classes: Number of classes ``K >= 2``.
        architecture: ``"cnn"`` (:class:`SmallCNN`) or ``"mlp"`` (:class:`SmallMLP`).
        epochs: Most passes over the training records, ``>= 1``.
        patience: Epochs without improvement of the held-out loss before
            stopping, ``>= 1``; ``None`` trains all ``epochs`` on all records.
        validation_fraction: Share of the records held out for early stopping,
            in ``(0, 1)`` (ignored when ``patience`` is ``None``).
        batch_size: Mini-batch size, ``>= 1``.
        learning_rate: Adam step size, finite and ``> 0``.
        seed: Seed of initialisation, hold-out split, shuffling and dropout.
        device: Where to train (``"cpu"``, ``"cuda"``, ...).
        progress: Optional callback, see :data:`ProgressCallback`.

    Returns:
        The trained model in eval mode, on ``device``.

    Raises:
        ParameterTypeError: On wrong tensor types.
        ParameterError: On bad shapes, labels, or hyper-parameters, or ``N == 0``.
        NonFiniteInputError: If ``images`` holds NaN or inf.
    """
    arch = _check_training_arguments(
        images,
        labels,
        num_classes=num_classes,
        architecture=architecture,
        epochs=epochs,
        patience=patience,
        validation_fraction=validation_fraction,
        batch_size=batch_size,
        learning_rate=learning_rate,
    )
    dev = torch.device(device)
    # One generator for the hold-out split (drawn first) and the epochs' shuffles.
    shuffler = torch.Generator().manual_seed(seed)
    x, y, held = _hold_out(
        images.to(dev), labels.to(dev), None if patience is None else validation_fraction, shuffler
    )
    n = int(x.shape[0])
    with seeded_global_rng(seed, dev):
        model = _build(arch, x, num_classes).to(dev)
        optimiser = Adam(model.parameters(), lr=learning_rate)
        loss_fn = nn.CrossEntropyLoss()
        stopper = None
        if held is not None and patience is not None:
            stopper = _EarlyStopping(model, _HeldOutLoss(model, loss_fn, *held), patience)
        train_epochs(
            lambda idx: loss_fn(model(x[idx]), y[idx]),
            optimiser,
            n,
            epochs=epochs,
            batch_size=batch_size,
            shuffler=shuffler,
            device=dev,
            before_epoch=model.train,
            progress=progress,
            stop=stopper,
        )
        if stopper is not None:
            stopper.restore()
    model.eval()
    return model


def _check_training_arguments(
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    num_classes: int,
    architecture: str,
    epochs: int,
    patience: int | None,
    validation_fraction: float,
    batch_size: int,
    learning_rate: float,
) -> str:
    """Check :func:`train_classifier`'s arguments (in this order); return the architecture."""
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ParameterError("num_classes", "an int >= 2", num_classes)
    _check_inputs(images, labels, num_classes)
    arch = check_choice("architecture", architecture, ARCHITECTURES)
    for name, value in (("epochs", epochs), ("batch_size", batch_size)):
        check_int(name, value, minimum=1, type_error=False)
    if patience is not None:
        check_int("patience", patience, minimum=1, type_error=False)
    check_float(
        "validation_fraction",
        validation_fraction,
        low=0.0,
        high=1.0,
        open_low=True,
        open_high=True,
        numpy=False,
        expected="a float",
        domain="a float in (0, 1)",
    )
    if not (isinstance(learning_rate, int | float) and math.isfinite(learning_rate)) or (
        learning_rate <= 0
    ):
        raise ParameterError("learning_rate", "a finite float > 0", learning_rate)
    if images.shape[0] == 0:
        raise ParameterError("images", "at least one training example", 0)
    return arch


def _hold_out(
    x: torch.Tensor,
    y: torch.Tensor,
    validation_fraction: float | None,
    shuffler: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
    """Split off a random ``validation_fraction`` of the records (at least one, at most n − 1).

    Returns ``(train images, train labels, (held images, held labels))``; the records
    unchanged and ``None`` without a fraction or with fewer than two records.
    """
    n = int(x.shape[0])
    if validation_fraction is None or n < 2:
        return x, y, None
    held = min(n - 1, max(1, round(validation_fraction * n)))
    split = torch.randperm(n, generator=shuffler).to(x.device)
    return x[split[held:]], y[split[held:]], (x[split[:held]], y[split[:held]])


class _HeldOutLoss:
    """The mean loss on the held-out records, in eval mode and without gradients."""

    def __init__(
        self, model: nn.Module, loss_fn: nn.Module, images: torch.Tensor, labels: torch.Tensor
    ) -> None:
        self._model, self._loss_fn = model, loss_fn
        self._images, self._labels = images, labels

    @torch.no_grad()
    def __call__(self) -> float:
        self._model.eval()
        return _mean_loss(self._model, self._loss_fn, self._images, self._labels)


def _mean_loss(
    model: nn.Module,
    loss_fn: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    batch_size: int = 4096,
) -> float:
    """Mean ``loss_fn`` over ``(images, labels)`` in batches (no gradients)."""
    total = 0.0
    for start in range(0, int(images.shape[0]), batch_size):
        xb, yb = images[start : start + batch_size], labels[start : start + batch_size]
        total += float(loss_fn(model(xb), yb)) * int(xb.shape[0])
    return total / int(images.shape[0])


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
