"""Tests of the torch adapters of privfed.audit (lazily imported)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import privfed.audit as audit
from privfed.audit import ReferenceAttack, denoising_loss_scores, reference_model_attack
from privfed.errors import ParameterError, ParameterTypeError


def test_lazy_names_resolve() -> None:
    assert audit.true_class_probabilities is audit.torch_scoring.true_class_probabilities
    with pytest.raises(AttributeError):
        _ = audit.no_such_name  # type: ignore[attr-defined]


def test_probabilities_and_losses_match_manual_softmax() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3)
    x = torch.randn(17, 5)
    y = torch.randint(0, 3, (17,))
    probs = audit.true_class_probabilities(model, x, y, batch_size=4)
    manual = torch.softmax(model(x).double(), dim=1)[torch.arange(17), y].detach().numpy()
    np.testing.assert_allclose(probs, manual, rtol=1e-6)
    losses = audit.per_example_losses(model, x, y, batch_size=5)
    np.testing.assert_allclose(losses, -np.log(manual), rtol=1e-6)
    with pytest.raises(ParameterTypeError, match="labels"):
        audit.true_class_probabilities(model, x, y.float())
    with pytest.raises(ParameterError, match="batch_size"):
        audit.true_class_probabilities(model, x, y, batch_size=0)


def test_classifier_train_fn_drives_reference_attacks() -> None:
    # A least-squares linear classifier with almost as many features as training records
    # nearly interpolates random labels, i.e. memorises its training half; the attacks must
    # see it.  Closed form (no optimiser loop) keeps the test fast on a busy CPU.
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(400, 180, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 2, (400,), generator=gen)

    def fit(images: torch.Tensor, labels: torch.Tensor, seed: int) -> torch.nn.Module:
        del seed  # deterministic fit
        targets = 4.0 * torch.nn.functional.one_hot(labels, 2).double() - 2.0
        ridge = 1e-2 * torch.eye(images.shape[1], dtype=torch.float64)
        weight = torch.linalg.solve(images.T @ images + ridge, images.T @ targets)
        model = torch.nn.Linear(180, 2, bias=False).double()
        with torch.no_grad():
            model.weight.copy_(weight.T)
        return model

    train_fn = audit.classifier_train_fn(fit, x, y)
    results = reference_model_attack(
        train_fn,
        400,
        attacks=(ReferenceAttack.LOSS, ReferenceAttack.LIRA_ONLINE),
        num_reference_models=8,
        seed=0,
    )
    loss, lira = (r.metrics.auc for r in results)
    # The interpolating model is confident on members, but also on many non-members, so the
    # raw loss is a weak signal; LiRA calibrates per record and must clearly beat it.
    assert loss.estimate > 0.55
    assert lira.lower > 0.8
    assert lira.estimate > loss.upper


def test_numpy_callable_wraps_a_denoiser() -> None:
    def denoiser(x: torch.Tensor, sigma: float) -> torch.Tensor:
        return x / (1.0 + sigma**2)  # the posterior mean for N(0, I) data

    wrapped = audit.numpy_callable(denoiser)
    samples = np.random.default_rng(0).normal(size=(8, 3, 2, 2))
    result = denoising_loss_scores(samples, wrapped, [0.1, 1.0], seed=0)
    assert result.losses.shape == (8, 2)
    assert np.all(np.isfinite(result.scores))
