"""The minibatch training loop shared by the classifier and the autoencoder codec.

Also :class:`Adam`, the classifier's optimiser: the same update as
``torch.optim.Adam`` with its defaults (bit-identical on CPU, where torch runs
its single-tensor path; tested), written out because constructing any
``torch.optim`` optimiser imports ``torch._dynamo`` -- about two seconds on a
2-core machine, more than the main job spends training.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

import torch

__all__ = ["Adam", "Optimiser", "train_epochs"]


class Optimiser(Protocol):
    """What :func:`train_epochs` needs of an optimiser (``torch.optim`` ones qualify)."""

    def zero_grad(self, set_to_none: bool = True) -> None: ...

    def step(self) -> object: ...


class Adam:
    """Adam (Kingma & Ba) without weight decay, AMSGrad or ``maximize``.

    Per parameter ``p`` with gradient ``g`` at step ``t``::

        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
        p -= lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    with the same floating-point operations, in the same order, as
    ``torch.optim.Adam``'s single-tensor implementation, so a model trained
    with either is bit-identical on CPU.  Parameters without a gradient are
    skipped, as there.  The caller validates ``lr`` (finite, > 0).
    """

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        *,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self._params = [p for p in params if p.requires_grad]
        self._lr, (self._beta1, self._beta2), self._eps = float(lr), betas, float(eps)
        self._step = 0.0
        self._exp_avg: list[torch.Tensor | None] = [None] * len(self._params)
        self._exp_avg_sq: list[torch.Tensor | None] = [None] * len(self._params)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop (``set_to_none``) or zero every parameter's gradient."""
        for p in self._params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.detach_()
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One Adam update of every parameter that has a gradient."""
        self._step += 1.0
        beta1, beta2 = self._beta1, self._beta2
        bias_correction1 = 1 - beta1**self._step
        bias_correction2_sqrt = (1 - beta2**self._step) ** 0.5
        step_size = self._lr / bias_correction1
        for i, p in enumerate(self._params):
            grad = p.grad
            if grad is None:
                continue
            exp_avg, exp_avg_sq = self._exp_avg[i], self._exp_avg_sq[i]
            if exp_avg is None or exp_avg_sq is None:
                exp_avg = self._exp_avg[i] = torch.zeros_like(
                    p, memory_format=torch.preserve_format
                )
                exp_avg_sq = self._exp_avg_sq[i] = torch.zeros_like(
                    p, memory_format=torch.preserve_format
                )
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(self._eps)
            p.addcdiv_(exp_avg, denom, value=-step_size)


def train_epochs(
    batch_loss: Callable[[torch.Tensor], torch.Tensor],
    optimiser: Optimiser,
    num_records: int,
    *,
    epochs: int,
    batch_size: int,
    shuffler: torch.Generator,
    device: torch.device | None = None,
    before_epoch: Callable[[], object] | None = None,
    progress: Callable[[int, int, float], None] | None = None,
    stop: Callable[[int], bool] | None = None,
) -> int:
    """Run up to ``epochs`` passes of shuffled minibatch steps.

    Each epoch calls ``before_epoch`` (if given), draws a permutation of the
    ``num_records`` record indices from ``shuffler`` (moved to ``device`` if
    given), and for each consecutive batch of at most ``batch_size`` indices
    zeroes the gradients, backpropagates ``batch_loss(indices)`` and steps
    ``optimiser``; then it reports ``progress(epoch, epochs, mean batch loss)``
    and, if ``stop`` is given, ends the loop when ``stop(epoch)`` is true
    (early stopping).  Validation is the caller's (``num_records >= 1``,
    ``epochs`` and ``batch_size >= 1``).

    Returns:
        The number of epochs run.
    """
    for epoch in range(1, epochs + 1):
        if before_epoch is not None:
            before_epoch()
        order = torch.randperm(num_records, generator=shuffler)
        if device is not None:
            order = order.to(device)
        total, batches = 0.0, 0
        for start in range(0, num_records, batch_size):
            optimiser.zero_grad(set_to_none=True)
            loss = batch_loss(order[start : start + batch_size])
            loss.backward()  # type: ignore[no-untyped-call]
            optimiser.step()
            total += float(loss.detach())
            batches += 1
        if progress is not None:
            progress(epoch, epochs, total / batches)
        if stop is not None and stop(epoch):
            return epoch
    return epochs
