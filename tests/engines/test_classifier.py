"""The downstream classifier: architectures, early stopping on held-out loss, validation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from privfed.data import load_digits
from privfed.engines import _training, classifier
from privfed.engines.classifier import (
    ARCHITECTURES,
    SmallCNN,
    SmallMLP,
    evaluate_classifier,
    train_classifier,
)
from privfed.errors import ParameterError


@pytest.fixture(scope="module")
def digits() -> tuple[torch.Tensor, torch.Tensor]:
    ds = load_digits()
    return torch.from_numpy(np.array(ds.images)), torch.from_numpy(np.array(ds.labels))


def _epochs_run(**kwargs: object) -> tuple[nn.Module, list[int]]:
    seen: list[int] = []
    model = train_classifier(**kwargs, progress=lambda e, _t, _l: seen.append(e))  # type: ignore[arg-type]
    return model, seen


@pytest.mark.slow
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_each_architecture_learns_real_digits(
    digits: tuple[torch.Tensor, torch.Tensor], architecture: str
) -> None:
    # Deterministic on CPU (fixed seed): 1200 training digits, 597 test digits.
    x, y = digits
    torch.set_num_threads(1)
    model, seen = _epochs_run(
        images=x[:1200],
        labels=y[:1200],
        num_classes=10,
        architecture=architecture,
        epochs=60,
        patience=3,
    )
    expected = SmallMLP if architecture == "mlp" else SmallCNN
    assert isinstance(model, expected)
    assert not model.training
    assert evaluate_classifier(model, x[1200:], y[1200:]) > 0.9
    # Early stopping ended the run before the cap (the held-out loss stopped improving).
    assert seen == list(range(1, len(seen) + 1))
    assert len(seen) < 60


@pytest.mark.slow
def test_same_seed_same_model_and_the_fixed_epoch_mode(
    digits: tuple[torch.Tensor, torch.Tensor],
) -> None:
    x, y = digits
    torch.set_num_threads(1)
    kwargs = {"num_classes": 10, "architecture": "mlp", "patience": 2, "seed": 4}
    a = train_classifier(x[:600], y[:600], **kwargs)  # type: ignore[arg-type]
    b = train_classifier(x[:600], y[:600], **kwargs)  # type: ignore[arg-type]
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    # The default (patience=None): every record, exactly `epochs` epochs, the CNN.
    model, seen = _epochs_run(images=x[:300], labels=y[:300], num_classes=10, epochs=4)
    assert seen == [1, 2, 3, 4]
    assert isinstance(model, SmallCNN)


def test_held_out_records_are_carved_from_the_training_data(
    digits: tuple[torch.Tensor, torch.Tensor], monkeypatch: pytest.MonkeyPatch
) -> None:
    x, y = digits
    trained_on: list[int] = []
    real = _training.train_epochs

    def spy(*args: object, **kwargs: object) -> int:
        trained_on.append(int(args[2]))  # type: ignore[call-overload]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(classifier, "train_epochs", spy)
    common = {"num_classes": 10, "epochs": 2, "architecture": "mlp"}
    train_classifier(x[:200], y[:200], patience=1, validation_fraction=0.25, **common)  # type: ignore[arg-type]
    train_classifier(x[:200], y[:200], patience=None, **common)  # type: ignore[arg-type]
    # One record cannot be split: it is trained on, without early stopping.
    train_classifier(x[:1], y[:1], patience=1, **common)  # type: ignore[arg-type]
    assert trained_on == [150, 200, 1]


class _Recorder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))


def test_early_stopping_keeps_the_best_epoch_and_waits_patience_epochs() -> None:
    model = _Recorder()
    losses = iter([3.0, 2.0, 2.5, 1.5, 1.5, 1.7, 0.1])
    stopper = classifier._EarlyStopping(model, lambda: next(losses), patience=2)
    decisions = []
    for epoch in range(1, 7):
        with torch.no_grad():
            model.weight.fill_(float(epoch))  # the "training" of this epoch
        decisions.append(stopper(epoch))
    # Epoch 4 is best (1.5; an equal loss is no improvement); two stale epochs then stop.
    assert decisions == [False, False, False, False, False, True]
    assert stopper.best_epoch == 4
    stopper.restore()
    assert float(model.weight.detach()) == 4.0


def test_train_epochs_stops_when_told() -> None:
    net = nn.Linear(2, 1)
    optimiser = torch.optim.SGD(net.parameters(), lr=0.1)
    data = torch.ones(8, 2)
    ran = _training.train_epochs(
        lambda idx: net(data[idx]).pow(2).mean(),
        optimiser,
        8,
        epochs=10,
        batch_size=4,
        shuffler=torch.Generator().manual_seed(0),
        stop=lambda epoch: epoch == 3,
    )
    assert ran == 3


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("architecture", "resnet"),
        ("architecture", 1),
        ("patience", 0),
        ("patience", 1.5),
        ("validation_fraction", 0.0),
        ("validation_fraction", 1.0),
        ("validation_fraction", float("nan")),
        ("epochs", 0),
    ],
)
def test_bad_hyper_parameters_are_refused_by_name(
    digits: tuple[torch.Tensor, torch.Tensor], name: str, value: object
) -> None:
    x, y = digits
    images, labels = x[:20].clone(), y[:20].clone()
    with pytest.raises(ParameterError, match=name):
        train_classifier(images, labels, num_classes=10, **{name: value})  # type: ignore[arg-type]
    assert torch.equal(images, x[:20]) and torch.equal(labels, y[:20])
