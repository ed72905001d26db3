"""DP-SGD for factories: Poisson sampling, per-example clipping, Gaussian noise.

The step follows Abadi et al. 2016 (arXiv:1607.00133, Algorithm 1) with the
Poisson subsampling that the privacy accountants assume (Mironov, Talwar,
Zhang 2019, arXiv:1908.10530): at every step each training record is included
independently with probability q' = :func:`realised_sampling_rate` of
``sampling_rate`` (see *Sampling*); the gradient of each included record's
loss is computed separately (``torch.func.vmap`` over ``torch.func.grad``),
clipped to L2 norm ``clip_norm`` over *all* parameters jointly (see
*Clipping*), summed in float64, and Gaussian noise of standard deviation
``noise_multiplier * clip_norm`` is added to every coordinate of the sum; the
result is divided by ``q' * n``, with ``n = data.shape[0]`` the number of
training records.  A step whose Poisson batch is empty still releases pure
noise, as the accounting assumes.

Guarantee: under *replace-one* adjacency within the training set (the two
neighbouring sets have the same size ``n``, which the factory's manifest ships
in the clear), the divisor ``q' * n`` is the same constant for both
neighbours, so the division is post-processing of the noisy sum, and the
sequence of noisy gradients, hence the trained weights, is differentially
private with the (ε, δ) that a subsampled-Gaussian accountant gives for
``(noise_multiplier, q', steps)`` under replace-one adjacency.  It is *not*
an add/remove guarantee: adding or removing a record changes ``n`` and with
it the divisor, so the normalised step is no longer post-processing of the
noisy sum (the two neighbours' outputs are Gaussians of different variances,
whose privacy loss is not the one the accountant bounds).  Only a normaliser
fixed independently of the data would make the step post-processing under
add/remove; this module has none, so :func:`record_in_ledger` refuses
add/remove adjacency.  This module computes no ε; it returns a
:class:`~privfed.engines.factory.privacy.PrivacyRecord` whose release event
(:func:`~privfed.engines.factory.privacy.release_from_record`) a
:mod:`privfed.dp` ledger accounts for (see :func:`record_in_ledger`).

The guarantee further requires the batches to be *secret*: amplification by
subsampling holds only if nobody learns which records a step used.  Without a
seed the inclusion draws therefore come from a ChaCha20 keystream keyed from
``os.urandom``; in a seeded run whoever knows the seed can recompute the
batches (and the noise), and the record says ``seeded=True``.  The batch size
that :func:`dp_sgd_step` returns is not protected either: use it in tests and
diagnostics, never release it.  The per-example draws (``draw_aux``) must be
independent of the data.

Sampling: record ``i`` is included iff ``u_i < T``, an exact integer
comparison of a uniform 64-bit word ``u_i`` with ``T = ceil(q * 2**64)``
(:func:`inclusion_threshold`), so the inclusion probability is exactly
``q' = T / 2**64`` with ``q <= q' < q + 2**-64``; ``q' == q`` whenever
``q * 2**64`` is an integer (every float ``q >= 2**-12``).  ``q'`` is exactly
a float64, and it is the rate that the privacy record carries and the
divisor uses, so the ledger accounts the rate actually realised, never the
smaller requested one (the accountant's bound does not decrease with the
rate, so the requested ``q`` would understate the loss).  Rates below
``2**-64`` (:data:`MIN_SAMPLING_RATE`), which 64-bit words cannot
represent, are refused.

Clipping: see :func:`clip_per_example_gradients`.  Norms and scale factors
are computed in float64 with a relative safety margin of ``2**-20`` and a
re-check, so every clipped per-example gradient, exactly as it enters the
float64 sum, has L2 norm below ``clip_norm``; a per-example gradient with a
non-finite entry contributes zero.

Noise source: without a seed, the noise comes from
:func:`privfed.dp.gaussian_noise` (a ChaCha20 keystream keyed from
``os.urandom``), never from torch's generators; with a seed (experiments,
tests) it comes from a seeded ``torch.Generator`` and the record says
``seeded=True``.  The noise is continuous floating-point noise, and the
float64 sum of the clipped gradients is exact only up to rounding; the
floating-point attack of Mironov 2012 is not mitigated for DP-SGD.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import torch

from privfed._checks import check_float, check_int
from privfed.dp import PartitionKey
from privfed.engines.factory.privacy import (
    FACTORY_SCHEME,
    SEEDED_TORCH_SAMPLER,
    PrivacyRecord,
    release_from_record,
)
from privfed.engines.factory.rates import (
    _TWO_POW_64,
    MIN_SAMPLING_RATE,
    _check_sampling_rate,
    inclusion_threshold,
    realised_sampling_rate,
)
from privfed.errors import ParameterError, ParameterTypeError

__all__ = [
    "FACTORY_SCHEME",
    "MIN_SAMPLING_RATE",
    "SEEDED_TORCH_SAMPLER",
    "DPSGDConfig",
    "GaussianNoiseSource",
    "clip_per_example_gradients",
    "dp_sgd_step",
    "inclusion_threshold",
    "poisson_inclusion",
    "realised_sampling_rate",
    "record_in_ledger",
]

#: Clipped norms are aimed at ``clip_norm * (1 - 2**-20)``; the re-check
#: accepts computed norms up to ``clip_norm * (1 - 2**-21)``.
_CLIP_TARGET: Final = 1.0 - 2.0**-20
_CHECK_BOUND: Final = 1.0 - 2.0**-21


def _csprng_words(count: int) -> npt.NDArray[np.uint64]:
    """``count`` uniform 64-bit words from a ChaCha20 keystream keyed from os.urandom."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    # A fresh 256-bit key per call, so the fixed all-zero nonce is safe.
    cipher = Cipher(algorithms.ChaCha20(os.urandom(32), bytes(16)), mode=None)
    data = cipher.encryptor().update(bytes(8 * count))
    return np.frombuffer(data, dtype="<u8").astype(np.uint64)


def _generator_words(count: int, generator: torch.Generator) -> npt.NDArray[np.uint64]:
    """``count`` uniform 64-bit words from a seeded torch generator (two 32-bit halves)."""
    halves = torch.randint(
        0, 1 << 32, (count, 2), dtype=torch.int64, generator=generator, device=generator.device
    )
    parts = halves.cpu().numpy().astype(np.uint64)
    return np.asarray((parts[:, 0] << np.uint64(32)) | parts[:, 1], dtype=np.uint64)


def _inclusion_mask(words: npt.NDArray[np.uint64], threshold: int) -> npt.NDArray[np.bool_]:
    """``words < threshold`` as exact unsigned 64-bit integer comparisons."""
    if threshold >= _TWO_POW_64:
        return np.ones(words.shape, dtype=np.bool_)
    return np.asarray(words < np.uint64(threshold), dtype=np.bool_)


def poisson_inclusion(
    n: int, sampling_rate: float, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Draw a Poisson sample: each of ``n`` records included independently.

    Record ``i`` is included iff ``u_i < inclusion_threshold(sampling_rate)``
    for a uniform 64-bit word ``u_i``, so with probability exactly
    :func:`realised_sampling_rate` ``(sampling_rate)``.  One word is drawn per
    record, whatever the rate.

    Args:
        n: Number of records, an int >= 0.
        sampling_rate: The requested inclusion probability, in ``[2**-64, 1]``.
        generator: ``None`` (default) draws the words from a ChaCha20
            keystream keyed from ``os.urandom`` (secret batches, as the
            accounting requires); a seeded ``torch.Generator`` makes the
            batches reproducible (experiments, tests), and anyone who knows
            the seed knows them.

    Returns:
        A CPU bool tensor of shape ``(n,)``, True for the included records.

    Raises:
        ParameterError: ``n < 0`` or ``sampling_rate`` outside ``[2**-64, 1]``.
        ParameterTypeError: ``n`` is not an int or ``generator`` is not a
            ``torch.Generator`` or ``None``.
    """
    check_int("n", n, minimum=0, numpy=True)
    threshold = inclusion_threshold(sampling_rate)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ParameterTypeError("generator", "a torch.Generator or None", generator)
    count = int(n)
    words = _csprng_words(count) if generator is None else _generator_words(count, generator)
    return torch.from_numpy(_inclusion_mask(words, threshold))


@dataclass(frozen=True)
class DPSGDConfig:
    """Parameters of DP-SGD training.

    Attributes:
        noise_multiplier: σ/Δ, dimensionless, > 0: the noise standard
            deviation in units of ``clip_norm``.
        clip_norm: Per-example L2 clipping bound on the full gradient, > 0
            (units of the loss gradient).
        sampling_rate: Requested Poisson inclusion probability q in
            ``[2**-64, 1]``.  The sampler realises (and the privacy record
            carries) :attr:`realised_sampling_rate`, ``q' >= q`` with
            ``q' - q < 2**-64``.  The expected batch is ``q' * n`` records.
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
            check_float(name, value, low=0, open_low=True, numpy=False, expected="a float")
        _check_sampling_rate(self.sampling_rate)
        check_int("max_physical_batch", self.max_physical_batch, minimum=1, type_error=False)

    @property
    def realised_sampling_rate(self) -> float:
        """The inclusion probability the sampler realises: see :func:`realised_sampling_rate`."""
        return realised_sampling_rate(self.sampling_rate)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return asdict(self)

    def privacy_record(self, steps: int, *, noise: GaussianNoiseSource) -> PrivacyRecord:
        """The record of a run of ``steps`` noisy steps with these parameters.

        The record's ``sampling_rate`` is the realised rate ``q'``, not the
        requested one.
        """
        return PrivacyRecord(
            mechanism="dp-sgd",
            noise_multiplier=float(self.noise_multiplier),
            clip_norm=float(self.clip_norm),
            sampling_rate=self.realised_sampling_rate,
            steps=steps,
            seeded=noise.seeded,
            sampler=noise.sampler,
        )


class GaussianNoiseSource:
    """Standard-normal float32 noise for DP-SGD.

    Args:
        generator: A seeded ``torch.Generator`` (reproducible experiments,
            not cryptographically secure), or ``None`` (default) to draw
            from :func:`privfed.dp.gaussian_noise`, a ChaCha20 keystream keyed
            from ``os.urandom``.  Whether the source is seeded also decides
            where :func:`dp_sgd_step` draws the Poisson batches from (the
            step's ``batch_generator``, or a ChaCha20 keystream).
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


def _rows(g: torch.Tensor, count: int) -> torch.Tensor:
    return g.reshape(count, -1).to(torch.float64)


def _scaled_sq_norms(
    grads: Mapping[str, torch.Tensor], count: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-row ``(finite, scale, s)`` with ``||g|| = scale * sqrt(s)`` in float64.

    ``scale`` is the row's largest absolute entry (1 for all-zero or
    non-finite rows), so ``s`` lies in ``[1, d]`` and neither overflows nor
    underflows, whatever the magnitude of the gradient.
    """
    peak = torch.zeros(count, dtype=torch.float64, device=device)
    for g in grads.values():
        rows = _rows(g, count)
        if rows.shape[1]:
            # torch.maximum propagates NaN, so a NaN anywhere marks the row.
            peak = torch.maximum(peak, rows.abs().amax(dim=1))
    finite = torch.isfinite(peak)
    scale = torch.where(finite & (peak > 0), peak, torch.ones_like(peak))
    s = torch.zeros(count, dtype=torch.float64, device=device)
    for g in grads.values():
        rows = _rows(g, count) / scale.unsqueeze(1)
        s = s + rows.pow(2).sum(dim=1)
    return finite, scale, s


def _clip_plan(
    grads: Mapping[str, torch.Tensor], clip_norm: float, count: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-row ``(clip, scale, factor, keep)``; see :func:`clip_per_example_gradients`."""
    finite, scale, s = _scaled_sq_norms(grads, count, device)
    norm = scale * s.sqrt()
    target = clip_norm * _CLIP_TARGET
    # Not (norm <= target): NaN and inf norms take the clipping branch.
    clip = ~(norm <= target)
    # For a finite row s >= 1, so the factor is finite and at most target.
    factor = torch.where(finite & clip, target / s.clamp(min=1.0).sqrt(), torch.zeros_like(s))
    keep = finite.clone()
    # Re-check the clipped rows exactly as they will be summed.
    check_sq = torch.zeros(count, dtype=torch.float64, device=device)
    for g in grads.values():
        clipped = _apply_clip(g, count, clip, scale, factor, keep)
        check_sq = check_sq + (clipped / clip_norm).pow(2).sum(dim=1)
    keep = keep & (check_sq.sqrt() <= _CHECK_BOUND)
    return clip, scale, factor, keep


def _apply_clip(
    g: torch.Tensor,
    count: int,
    clip: torch.Tensor,
    scale: torch.Tensor,
    factor: torch.Tensor,
    keep: torch.Tensor,
) -> torch.Tensor:
    rows = _rows(g, count)
    shrunk = (rows / scale.unsqueeze(1)) * factor.unsqueeze(1)
    out = torch.where(clip.unsqueeze(1), shrunk, rows)
    return torch.where(keep.unsqueeze(1), out, torch.zeros_like(out))


def clip_per_example_gradients(
    grads: Mapping[str, torch.Tensor], clip_norm: float
) -> dict[str, torch.Tensor]:
    """Clip each example's gradient, jointly over all tensors, to L2 norm < ``clip_norm``.

    Every tensor in ``grads`` holds one row per example (leading dimension
    ``count``); example ``j``'s gradient is the concatenation of row ``j`` of
    every tensor.  In float64, with ``m_j`` its largest absolute entry and
    ``s_j = Σ (g/m_j)²`` (computed scale-free, so huge and subnormal
    gradients neither overflow nor underflow), the computed norm is
    ``ν_j = m_j·sqrt(s_j)``:

    * if ``ν_j <= C·(1 − 2**-20)`` the gradient is kept unchanged (converted
      to float64 exactly);
    * otherwise it becomes ``(g/m_j)·(C·(1 − 2**-20)/sqrt(s_j))``;
    * if it has a non-finite entry it becomes zero (a per-example function
      with norm 0 <= C, so the sensitivity is unaffected).

    The relative rounding error of these float64 operations is below
    ``(d + 4)·2**-53`` even for naive summation over ``d`` coordinates, so the
    true norm is below ``C`` whenever ``d < 2**31``.  The result is then
    re-checked: any example whose recomputed norm exceeds
    ``C·(1 − 2**-21)`` (none, by the argument above, unless ``C`` is so
    small that the scale factor underflows into subnormals) is replaced by
    zero, so the bound does not rest on the argument alone.

    Args:
        grads: Per-example gradients, each ``(count, ...)``, any float dtype
            and device (all on one device).
        clip_norm: The bound C, a finite float > 0.

    Returns:
        float64 tensors of the same shapes: the clipped gradients, exactly as
        :func:`dp_sgd_step` sums them.

    Raises:
        ParameterError: ``clip_norm`` is not finite and > 0, or the tensors
            disagree on the number of examples.
    """
    check_float("clip_norm", clip_norm, low=0, open_low=True, numpy=False, expected="a float")
    if not grads:
        return {}
    first = next(iter(grads.values()))
    count = int(first.shape[0]) if first.ndim else -1
    if count < 0 or any(g.ndim == 0 or g.shape[0] != count for g in grads.values()):
        shapes = [tuple(g.shape) for g in grads.values()]
        raise ParameterError(
            "grads", "tensors with one shared leading (per-example) dimension", shapes
        )
    device = first.device
    plan = _clip_plan(grads, float(clip_norm), count, device)
    return {name: _apply_clip(g, count, *plan).reshape(g.shape) for name, g in grads.items()}


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
    canaries: Any = None,
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
        data: All ``n >= 1`` training records of this factory, ``(n, ...)``
            on the module's device.  ``n`` is treated as public (replace-one
            adjacency): the noisy sum is divided by ``q' * n``.
        config: DP-SGD parameters.
        optimizer: Optimizer over ``module``'s trainable parameters.
        batch_generator: Source of the Poisson inclusion draws when ``noise``
            is seeded (reproducible batches; whoever knows the seed knows
            them).  When ``noise`` is unseeded the inclusions come from a
            ChaCha20 keystream keyed from ``os.urandom`` instead and this
            generator is not consumed: the subsampling amplification that the
            accounting relies on requires the batches to be secret.
        noise: Source of the Gaussian noise added to the clipped sum.
        draw_aux: ``g(count) -> Tensor (count, ...)`` drawing per-example
            randomness (e.g. diffusion noise levels) for a micro-batch, on the
            module's device; transforms cannot draw randomness inside ``f``.
        canaries: Audit hook (``None``: none), e.g. a
            :class:`privfed.audit.gradient_canaries.DiracGradientCanaries`: its
            ``insert(summed)`` gets the clipped sum before noise (and may add
            canary gradients to it), its ``observe(noisy)`` the noisy sum.

    Returns:
        The number of records included in this step (may be 0).  It is
        *not* covered by the privacy guarantee: never release it.

    Raises:
        ParameterError: ``data`` holds no record.
        ParameterTypeError: ``config``, ``noise`` or ``batch_generator`` has
            the wrong type.
    """
    from torch.func import grad, vmap

    if not isinstance(config, DPSGDConfig):
        raise ParameterTypeError("config", "a DPSGDConfig", config)
    if not isinstance(noise, GaussianNoiseSource):
        raise ParameterTypeError("noise", "a GaussianNoiseSource", noise)
    if not isinstance(batch_generator, torch.Generator):
        raise ParameterTypeError("batch_generator", "a torch.Generator", batch_generator)
    if data.ndim == 0 or data.shape[0] < 1:
        raise ParameterError("data", "a tensor of n >= 1 records", tuple(data.shape))
    n = int(data.shape[0])
    device = data.device
    trainable = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
    params = {name: p.detach() for name, p in trainable}
    include = poisson_inclusion(
        n, config.sampling_rate, generator=batch_generator if noise.seeded else None
    )
    indices = torch.nonzero(include).flatten().to(device)

    summed = {name: torch.zeros_like(p, dtype=torch.float64) for name, p in params.items()}
    per_grad = vmap(grad(per_example_loss), in_dims=(None, 0, 0))
    for start in range(0, int(indices.numel()), config.max_physical_batch):
        chunk = indices[start : start + config.max_physical_batch]
        count = int(chunk.numel())
        grads = per_grad(params, data[chunk], draw_aux(count))
        plan = _clip_plan(grads, float(config.clip_norm), count, device)
        for name in params:
            clipped = _apply_clip(grads[name], count, *plan)
            summed[name] += clipped.sum(dim=0).reshape(summed[name].shape)
    if canaries is not None:
        canaries.insert(summed)
    expected_batch = config.realised_sampling_rate * n
    std = float(config.noise_multiplier * config.clip_norm)
    optimizer.zero_grad(set_to_none=True)
    noisy_sums = {}
    for name, p in trainable:
        draw = noise.standard_normal(tuple(p.shape), device).to(torch.float64)
        noisy_sums[name] = summed[name] + std * draw
        p.grad = (noisy_sums[name] / expected_batch).to(p.dtype)
    if canaries is not None:
        canaries.observe(noisy_sums)
    optimizer.step()
    return int(indices.numel())


def record_in_ledger(
    ledger: Any,
    record: PrivacyRecord,
    *,
    name: str,
    partition: int | str | PartitionKey | None,
    adjacency: Any = None,
) -> Any:
    """Record a factory's DP training in a :class:`privfed.dp.PrivacyLedger`.

    A DP-SGD record (``mechanism == "dp-sgd"``) becomes a
    :class:`privfed.dp.SubsampledGaussianRelease`; a one-shot Gaussian record
    (``mechanism == "gaussian"``, the DP latent-Gaussian factory) a
    :class:`privfed.dp.GaussianRelease` in whitened form (Δ = 1, σ =
    ``noise_multiplier``, so μ = 1/``noise_multiplier``).  Both are accounted
    under replace-one adjacency in the ``"cell"`` scheme.

    Args:
        ledger: The ledger; its budget is checked before anything is recorded.
        record: A record with ``mechanism`` ``"dp-sgd"`` or ``"gaussian"``.
        name: What was released (e.g. ``"factory class=3 client=7"``).
        partition: Ledger partition of the records the factory was trained
            on.  Factories of different cells are trained on disjoint records,
            so a per-cell label (``"class=3/client=7"``) lets them compose in
            parallel; ``None`` means they may overlap with every release.
        adjacency: ``None`` or ``privfed.dp.Adjacency.REPLACE_ONE`` (the
            default), the only relation under which the DP-SGD guarantee
            holds: the factory's sample count ``n_{c,k}`` is shipped in the
            clear, and :func:`dp_sgd_step` divides the noisy sum by
            ``q' * n``, a constant only when neighbouring training sets have
            the same size.  ``ADD_REMOVE`` is refused: it would account a
            guarantee the step does not have (see the module notes).

    The ledger accounts the rate the sampler realises,
    :func:`realised_sampling_rate` of ``record.sampling_rate`` (a no-op for
    records made by :meth:`DPSGDConfig.privacy_record`, which already carry
    it).

    Returns:
        The :class:`privfed.dp.SubsampledGaussianRelease` (or
        :class:`privfed.dp.GaussianRelease`) recorded.

    Raises:
        ParameterError: ``record`` has no DP mechanism, its sampling rate
            is below ``2**-64``, or ``adjacency`` is ``ADD_REMOVE``.
        ParameterTypeError: ``record`` or ``adjacency`` has the wrong type.
        BudgetExceededError, LedgerError: From the ledger; nothing recorded.
    """
    from privfed import dp

    if not isinstance(record, PrivacyRecord):
        raise ParameterTypeError("record", "a PrivacyRecord", record)
    if adjacency is not None and adjacency is not dp.Adjacency.REPLACE_ONE:
        if not isinstance(adjacency, dp.Adjacency):
            raise ParameterTypeError("adjacency", "a privfed.dp.Adjacency or None", adjacency)
        raise ParameterError(
            "adjacency",
            "Adjacency.REPLACE_ONE or None (DP-SGD here divides by q'·n, so it has no "
            "add/remove guarantee)",
            adjacency,
        )
    release = release_from_record(record, name=name, partition=partition)
    ledger.record(release)
    return release
