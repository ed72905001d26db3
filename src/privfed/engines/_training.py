"""The minibatch training loop shared by the classifier and the autoencoder codec."""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["train_epochs"]


def train_epochs(
    batch_loss: Callable[[torch.Tensor], torch.Tensor],
    optimiser: torch.optim.Optimizer,
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
