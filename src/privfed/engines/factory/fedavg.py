"""FedAvg (McMahan et al. 2017, arXiv:1602.05629) as the multi-round baseline.

The server holds a :class:`~privfed.engines.classifier.SmallCNN`; in every
round each client copies it, runs ``local_epochs`` epochs of SGD on its own
data and sends the weights back; the server replaces its model by the
average weighted by client sample counts.  Clients without data skip the
round.  No privacy protection: this is the communication and accuracy
baseline that single-class silos make collapse (every client's local
optimum predicts its own class).

Communication is counted as the float32 model sent down and up once per
participating client per round.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from privfed._checks import check_int
from privfed.engines._rng import seeded_global_rng
from privfed.engines.classifier import SmallCNN
from privfed.errors import ParameterError

__all__ = ["FedAvgResult", "run_fedavg"]


@dataclass(frozen=True)
class FedAvgResult:
    """Outcome of :func:`run_fedavg`.

    Attributes:
        model: The final global model (eval mode, CPU).
        bytes_per_client: Mean bytes sent plus received per client over all
            rounds (float32 weights).
        rounds: Number of rounds run.
    """

    model: nn.Module
    bytes_per_client: float
    rounds: int


def run_fedavg(
    clients: Sequence[tuple[torch.Tensor, torch.Tensor]],
    *,
    num_classes: int,
    rounds: int = 20,
    local_epochs: int = 1,
    learning_rate: float = 0.05,
    momentum: float = 0.9,
    batch_size: int = 32,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> FedAvgResult:
    """Train a :class:`SmallCNN` with FedAvg.

    Args:
        clients: Per client, ``(images, labels)``: float32 ``(n_k, C, H, W)``
            in ``[0, 1]`` and int64 ``(n_k,)``; ``n_k`` may be 0.  At least
            one client must hold data.
        num_classes: Number of classes K >= 2.
        rounds: Communication rounds (>= 1).
        local_epochs: Local epochs per round (>= 1).
        learning_rate: Local SGD step size (> 0).
        momentum: Local SGD momentum in [0, 1); reset every round.
        batch_size: Local mini-batch size (>= 1).
        seed: Seed of initialisation and local shuffling (forked torch RNG;
            the caller's global RNG is untouched).
        progress: Called as ``progress(round, rounds)`` after each round.

    Returns:
        The final model and the communication cost.

    Raises:
        ParameterError: Bad hyper-parameters or no client with data.
    """
    for name, value in (
        ("rounds", rounds),
        ("local_epochs", local_epochs),
        ("batch_size", batch_size),
    ):
        check_int(name, value, minimum=1, type_error=False)
    check_int("num_classes", num_classes, minimum=2, type_error=False)
    if (
        not (isinstance(learning_rate, int | float) and math.isfinite(learning_rate))
        or learning_rate <= 0
    ):
        raise ParameterError("learning_rate", "a finite float > 0", learning_rate)
    if not (isinstance(momentum, int | float) and 0 <= momentum < 1):
        raise ParameterError("momentum", "a float in [0, 1)", momentum)
    active = [(x, y) for x, y in clients if x.shape[0] > 0]
    if not active:
        raise ParameterError("clients", "at least one client with data", 0)
    channels = int(active[0][0].shape[1])
    with seeded_global_rng(seed):
        global_model = SmallCNN(channels, num_classes)
        shuffler = torch.Generator().manual_seed(seed)
        loss_fn = nn.CrossEntropyLoss()
        model_bytes = 4 * sum(p.numel() for p in global_model.parameters())
        for r in range(1, rounds + 1):
            total = sum(int(x.shape[0]) for x, _ in active)
            new_state = {k: torch.zeros_like(v) for k, v in global_model.state_dict().items()}
            for x, y in active:
                local = SmallCNN(channels, num_classes)
                local.load_state_dict(global_model.state_dict())
                local.train()
                opt = torch.optim.SGD(local.parameters(), lr=learning_rate, momentum=momentum)
                n = int(x.shape[0])
                for _ in range(local_epochs):
                    order = torch.randperm(n, generator=shuffler)
                    for start in range(0, n, batch_size):
                        idx = order[start : start + batch_size]
                        opt.zero_grad(set_to_none=True)
                        loss_fn(local(x[idx]), y[idx]).backward()
                        opt.step()
                weight = n / total
                for k, v in local.state_dict().items():
                    new_state[k] += weight * v.detach()
            global_model.load_state_dict(new_state)
            if progress is not None:
                progress(r, rounds)
    global_model.eval()
    bytes_per_client = 2.0 * model_bytes * rounds * len(active) / len(clients)
    return FedAvgResult(model=global_model, bytes_per_client=bytes_per_client, rounds=rounds)
