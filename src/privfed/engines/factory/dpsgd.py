"""DP-SGD for factories: Poisson sampling, per-example clipping, Gaussian noise.

The step follows Abadi et al. 2016 (arXiv:1607.00133, Algorithm 1) with the
Poisson subsampling that the privacy accountants assume (Mironov, Talwar,
Zhang 2019, arXiv:1908.10530): at every step each training record is included
independently with probability ``sampling_rate``; the gradient of each
included record's loss is computed separately (``torch.func.vmap`` over
``torch.func.grad``), clipped to L2 norm ``clip_norm`` over *all* parameters
jointly, summed, and Gaussian noise of standard deviation
``noise_multiplier * clip_norm`` is added to every coordinate of the sum; the
result is divided by the *expected* batch size ``sampling_rate * n`` (a
public constant, so the division is post-processing).  A step whose Poisson
batch is empty still releases pure noise, as the accounting assumes.

Guarantee: the sequence of noisy gradients, hence the trained weights, is
differentially private under add/remove-one-record adjacency within the
training set, with the (ε, δ) that a subsampled-Gaussian accountant gives for
``(noise_multiplier, sampling_rate, steps)``.  This module computes no ε; it
returns a :class:`~privfed.engines.factory.base.PrivacyRecord` that a
:mod:`privfed.dp` ledger accounts for (see :func:`record_in_ledger`).

Noise source: without a seed, the noise comes from
:func:`privfed.dp.gaussian_noise` (a ChaCha20 keystream keyed from
``os.urandom``), never from torch's generators; with a seed (experiments,
tests) it comes from a seeded ``torch.Generator`` and the record says
``seeded=True``.  The noise is continuous floating-point noise; the
floating-point attack of Mironov 2012 is not mitigated for DP-SGD.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from privfed.engines.factory.base import PrivacyRecord
from privfed.errors import ParameterError, ParameterTypeError

__all__ = [
    "SEEDED_TORCH_SAMPLER",
    "DPSGDConfig",
    "GaussianNoiseSource",
    "dp_sgd_step",
    "record_in_ledger",
]


@dataclass(frozen=True)
class DPSGDConfig:
    """Parameters of DP-SGD training.

    Attributes:
        noise_multiplier: σ/Δ, dimensionless, > 0: the noise standard
            deviation in units of ``clip_norm``.
        clip_norm: Per-example L2 clipping bound on the full gradient, > 0
            (units of the loss gradient).
        sampling_rate: Poisson inclusion probability q in (0, 1].  The
            expected batch is ``q * n`` records.
        max_physical_batch: Largest number of per-example gradients held in
            memory at once (>= 1); does not affect privacy.
    """

    noise_multiplier: float
    clip_norm: float = 1.0
    sampling_rate: float = 0.25
    max_physical_batch: int = 64

    def __post_init__(self) -> None:
        for name in ("noise_multiplier", "clip_norm", "sampling_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ParameterTypeError(name, "a float", value)
            if not math.isfinite(value) or value <= 0:
                raise ParameterError(name, "a finite float > 0", value)
        if self.sampling_rate > 1:
            raise ParameterError("sampling_rate", "a float in (0, 1]", self.sampling_rate)
        if (
            isinstance(self.max_physical_batch, bool)
            or not isinstance(self.max_physical_batch, int)
            or self.max_physical_batch < 1
        ):
            raise ParameterError("max_physical_batch", "an int >= 1", self.max_physical_batch)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return asdict(self)

    def privacy_record(self, steps: int, *, noise: GaussianNoiseSource) -> PrivacyRecord:
        """The record of a run of ``steps`` noisy steps with these parameters."""
        return PrivacyRecord(
            mechanism="dp-sgd",
            noise_multiplier=float(self.noise_multiplier),
            clip_norm=float(self.clip_norm),
            sampling_rate=float(self.sampling_rate),
            steps=steps,
            seeded=noise.seeded,
            sampler=noise.sampler,
        )


#: Sampler name recorded for seeded (reproducible, not cryptographic) DP-SGD noise.
SEEDED_TORCH_SAMPLER = "torch-generator-gaussian"


class GaussianNoiseSource:
    """Standard-normal float32 noise for DP-SGD.

    Args:
        generator: A seeded ``torch.Generator`` (reproducible experiments,
            not cryptographically secure), or ``None`` (default) to draw
            from :func:`privfed.dp.gaussian_noise`, a ChaCha20 keystream keyed
            from ``os.urandom``.
    """

    def __init__(self, generator: torch.Generator | None = None) -> None:
        if generator is not None and not isinstance(generator, torch.Generator):
            raise ParameterTypeError("generator", "a torch.Generator or None", generator)
        self._generator = generator

    @property
    def seeded(self) -> bool:
        """Whether the noise is reproducible from a caller-supplied seed."""
        return self._generator is not None

    @property
    def sampler(self) -> str:
        """Sampler name to record in a privacy ledger."""
        from privfed.dp import GAUSSIAN_SAMPLER

        return SEEDED_TORCH_SAMPLER if self.seeded else GAUSSIAN_SAMPLER

    def __repr__(self) -> str:
        return f"GaussianNoiseSource(seeded={self.seeded})"

    def standard_normal(self, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
        """Independent N(0, 1) values, float32, of the given shape on ``device``."""
        if self._generator is not None:
            out = torch.randn(shape, generator=self._generator, device=self._generator.device)
            return out.to(device)
        from privfed.dp import gaussian_noise

        values = gaussian_noise(shape, 1.0)
        return torch.from_numpy(values.astype(np.float32)).to(device)


def dp_sgd_step(
    module: torch.nn.Module,
    per_example_loss: Callable[[dict[str, torch.Tensor], torch.Tensor, torch.Tensor], torch.Tensor],
    data: torch.Tensor,
    config: DPSGDConfig,
    optimizer: torch.optim.Optimizer,
    *,
    batch_generator: torch.Generator,
    noise: GaussianNoiseSource,
    draw_aux: Callable[[int], torch.Tensor],
) -> int:
    """Run one DP-SGD step on ``module`` and return the Poisson batch size.

    Args:
        module: The model; its trainable parameters are updated in place by
            ``optimizer`` from the privatised gradient.
        per_example_loss: ``f(params, x, aux) -> scalar``: the loss of ONE
            record ``x`` (no batch dimension) under the parameter dictionary
            ``params`` (evaluate the model with
            ``torch.func.functional_call``), using that record's own random
            draws ``aux``.  It must not look at other records.
        data: All training records of this factory, ``(n, ...)`` on the
            module's device.
        config: DP-SGD parameters.
        optimizer: Optimizer over ``module``'s trainable parameters.
        batch_generator: CPU generator for the Poisson inclusion draws; the
            batch need not be secret for the accounting, only independent of
            the data.
        noise: Source of the Gaussian noise added to the clipped sum.
        draw_aux: ``g(count) -> Tensor (count, ...)`` drawing per-example
            randomness (e.g. diffusion noise levels) for a micro-batch, on the
            module's device; transforms cannot draw randomness inside ``f``.

    Returns:
        The number of records included in this step (may be 0).
    """
    from torch.func import grad, vmap

    n = data.shape[0]
    device = data.device
    trainable = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
    params = {name: p.detach() for name, p in trainable}
    include = torch.rand(n, generator=batch_generator) < config.sampling_rate
    indices = torch.nonzero(include).flatten().to(device)

    summed = {name: torch.zeros_like(p) for name, p in params.items()}
    per_grad = vmap(grad(per_example_loss), in_dims=(None, 0, 0))
    for start in range(0, int(indices.numel()), config.max_physical_batch):
        chunk = indices[start : start + config.max_physical_batch]
        count = int(chunk.numel())
        grads = per_grad(params, data[chunk], draw_aux(count))
        sq = torch.zeros(count, device=device)
        for name in params:
            sq = sq + grads[name].reshape(count, -1).pow(2).sum(dim=1)
        # min(1, C / ||g||): clipped gradients have norm <= C exactly.
        factor = config.clip_norm / torch.clamp(sq.sqrt(), min=config.clip_norm)
        for name in params:
            g = grads[name]
            summed[name] += (g * factor.view(-1, *([1] * (g.ndim - 1)))).sum(dim=0)
    expected_batch = config.sampling_rate * n
    std = config.noise_multiplier * config.clip_norm
    optimizer.zero_grad(set_to_none=True)
    for name, p in trainable:
        noisy = summed[name] + std * noise.standard_normal(tuple(p.shape), device)
        p.grad = (noisy / expected_batch).to(p.dtype)
    optimizer.step()
    return int(indices.numel())


def record_in_ledger(
    ledger: Any,
    record: PrivacyRecord,
    *,
    name: str,
    partition: int | str | None,
    adjacency: Any = None,
) -> Any:
    """Record a DP-SGD training run in a :class:`privfed.dp.PrivacyLedger`.

    Args:
        ledger: The ledger; its budget is checked before anything is recorded.
        record: A record with ``mechanism == "dp-sgd"``.
        name: What was released (e.g. ``"factory class=3 client=7"``).
        partition: Ledger partition of the records the factory was trained
            on.  Factories of different cells are trained on disjoint records,
            so a per-cell label (``"class=3/client=7"``) lets them compose in
            parallel; ``None`` means they may overlap with every release.
        adjacency: A :class:`privfed.dp.Adjacency`; default ``REPLACE_ONE``,
            the honest choice because the factory's sample count ``n_{c,k}``
            is shipped in the clear (public counts).  ``ADD_REMOVE`` is only
            correct if the counts are protected by other means.

    Returns:
        The :class:`privfed.dp.SubsampledGaussianRelease` recorded.

    Raises:
        ParameterError: ``record`` is not a DP-SGD record.
        BudgetExceededError, LedgerError: From the ledger; nothing recorded.
    """
    from privfed import dp

    if not isinstance(record, PrivacyRecord):
        raise ParameterTypeError("record", "a PrivacyRecord", record)
    if record.mechanism != "dp-sgd":
        raise ParameterError("record", "a DP-SGD privacy record", record.mechanism)
    release = dp.SubsampledGaussianRelease(
        name=name,
        partition=partition,
        noise_multiplier=float(record.noise_multiplier or 0.0),
        sampling_rate=float(record.sampling_rate or 0.0),
        steps=int(record.steps or 0),
        adjacency=dp.Adjacency.REPLACE_ONE if adjacency is None else adjacency,
        sampler=record.sampler or SEEDED_TORCH_SAMPLER,
        seeded=record.seeded,
    )
    ledger.record(release)
    return release
