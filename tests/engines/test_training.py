"""privfed's Adam against torch.optim.Adam, and the shared training loop's contract."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch
from torch import nn

from privfed.engines._training import Adam, train_epochs
from privfed.engines.classifier import _build


def _train(
    model: nn.Module, optimiser: object, x: torch.Tensor, y: torch.Tensor, steps: int
) -> None:
    loss_fn = nn.CrossEntropyLoss()
    torch.manual_seed(1)  # dropout draws: the same in both runs
    for _ in range(steps):
        optimiser.zero_grad(set_to_none=True)  # type: ignore[attr-defined]
        loss_fn(model(x), y).backward()
        optimiser.step()  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.parametrize("architecture", ["cnn", "mlp"])
@pytest.mark.parametrize("lr", [2e-3, 0.1])
def test_adam_is_bit_identical_to_torch_adam(architecture: str, lr: float) -> None:
    torch.manual_seed(0)
    x, y = torch.rand(48, 1, 8, 8), torch.randint(0, 10, (48,))
    base = _build(architecture, x, 10)
    ours, theirs = copy.deepcopy(base), copy.deepcopy(base)
    _train(theirs, torch.optim.Adam(theirs.parameters(), lr=lr), x, y, steps=25)
    _train(ours, Adam(ours.parameters(), lr=lr), x, y, steps=25)
    for (name, a), b in zip(theirs.state_dict().items(), ours.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    # ...and the parameters did move (the comparison is not between two untouched copies).
    assert any(
        not torch.equal(a, b)
        for a, b in zip(base.state_dict().values(), ours.state_dict().values(), strict=True)
    )


def test_adam_skips_parameters_without_gradient_and_frozen_ones() -> None:
    used, unused, frozen = (nn.Parameter(torch.ones(3)) for _ in range(3))
    frozen.requires_grad_(False)
    optimiser = Adam([used, unused, frozen], lr=0.5)
    optimiser.zero_grad()
    (used * torch.arange(3.0)).sum().backward()
    optimiser.step()
    assert torch.equal(unused.detach(), torch.ones(3))
    assert torch.equal(frozen.detach(), torch.ones(3))
    # First Adam step moves each coordinate with a non-zero gradient by lr (sign of the gradient).
    assert torch.allclose(used.detach(), torch.tensor([1.0, 0.5, 0.5]))


def test_zero_grad_drops_or_zeroes() -> None:
    p = nn.Parameter(torch.ones(2))
    optimiser = Adam([p], lr=0.1)
    p.sum().backward()
    optimiser.zero_grad(set_to_none=False)
    assert p.grad is not None and torch.equal(p.grad, torch.zeros(2))
    optimiser.zero_grad()
    assert p.grad is None


def test_train_epochs_stops_early_and_counts_epochs() -> None:
    p = nn.Parameter(torch.zeros(1))
    seen: list[int] = []
    ran = train_epochs(
        lambda idx: (p - 1.0).pow(2).sum() * idx.numel(),
        Adam([p], lr=0.1),
        10,
        epochs=8,
        batch_size=4,
        shuffler=torch.Generator().manual_seed(0),
        progress=lambda epoch, total, loss: seen.append(epoch),
        stop=lambda epoch: epoch == 3,
    )
    assert ran == 3 and seen == [1, 2, 3]
    assert 0.0 < float(p.detach()) < 1.0


@pytest.mark.slow
def test_training_a_classifier_does_not_import_torch_dynamo() -> None:
    """The reason Adam exists: torch.optim's constructors import torch._dynamo (seconds)."""
    code = (
        "import sys, torch\n"
        "from privfed.engines.classifier import train_classifier\n"
        "x = torch.rand(20, 1, 8, 8); y = torch.arange(20) % 2\n"
        "train_classifier(x, y, num_classes=2, architecture='mlp', epochs=2, patience=1)\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
