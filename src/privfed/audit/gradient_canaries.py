"""White-box Dirac gradient canaries for DP-SGD, audited in one run (pure: numpy).

Steinke, Nasr & Jagielski 2023 (arXiv:2305.08846, §6.2, white-box) and Nasr et
al. 2023 (arXiv:2302.07956, "Dirac canaries"): the auditor inserts m canary
*gradients* straight into the training loop.  Canary j is a fixed coordinate
direction e_{k_j} of the parameter vector (the m coordinates distinct, drawn
from ``seed``) with norm equal to the clipping bound C, so it is a legitimate
per-example gradient.  Its inclusion bit b_j is drawn once, independently with
probability ½:

* ``adjacency="replace-one"`` (what privfed's DP-SGD claims): the slot holds
  +C·e_k when b_j = 1 and the replacing record −C·e_k when b_j = 0, the
  neighbouring pair at distance 2C that replace-one accounting covers;
* ``adjacency="add-remove"``: +C·e_k when b_j = 1, nothing when b_j = 0.

Each step, every canary slot is Poisson-sampled at the loop's rate q like a
record.  The training loop calls two hooks (privfed's own
:func:`privfed.engines.factory.dpsgd.dp_sgd_step` does when given
``canaries=``; a user's loop calls them itself):

1. :meth:`DiracGradientCanaries.insert` with the clipped per-example gradient
   sum (a mapping of name → tensor, before noise, modified in place);
2. :meth:`DiracGradientCanaries.observe` with the noisy sum (after noise,
   before any normalisation).

Scores (higher ⇒ "in"), two threat models:

* **all iterates** (:attr:`DiracGradientCanaries.scores`, the default): the
  adversary sees every noisy gradient (DP-SGD's guarantee covers the whole
  sequence) and, as in the DP game, knows every record but the canaries.  In a
  full-batch run (q = 1) the rest of the batch's clipped sum is then a known
  function of the iterate and the data, and is subtracted; in a subsampled run
  the batch is secret, so nothing is subtracted.  Score_j = Σ_t ⟨noisy_t −
  known_t, e_{k_j}⟩.
* **last iterate** (:meth:`DiracGradientCanaries.last_iterate_scores`): only
  the final model is seen; score_j = −(θ_T − θ_0)[k_j] (gradient descent moves
  against an included canary).

Neither score looks at the inclusion bits or at which steps sampled a canary,
so the one-run estimator (:meth:`DiracGradientCanaries.audit`, which calls
:func:`privfed.audit.one_run_audit_selected`) gives an ε lower bound valid for
this one training run.  The module imports no torch: tensors are handled
through their own methods (``reshape``, indexing, ``new_tensor``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from privfed._checks import check_float, check_int, check_probability, check_seed
from privfed.audit.bounds import BoundSpec, HeldOutSplit, OneRunAudit
from privfed.audit.one_run import OneRunSelection, one_run_audit_selected
from privfed.errors import ParameterError

__all__ = ["CanaryAdjacency", "DiracGradientCanaries"]

#: The neighbouring relation the canaries realise.
CanaryAdjacency = Literal["replace-one", "add-remove"]


def _to_numpy(values: Any) -> NDArray[np.float64]:
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.float64)


class DiracGradientCanaries:
    """m Dirac gradient canaries, their inclusion bits and their accumulated scores.

    Args:
        parameter_shapes: Name → shape of every trainable parameter, in the
            order the loop's gradient mappings use (e.g. ``{n: p.shape for n, p in
            model.named_parameters()}``).
        num_canaries: m >= 1 canaries, at most the number of coordinates.
        clip_norm: The loop's clipping bound C > 0 (each canary has norm C).
        sampling_rate: The loop's Poisson rate q in (0, 1]; each canary slot is
            sampled at every step with this probability.
        adjacency: ``"replace-one"`` (default) or ``"add-remove"``.
        seed: Seed of the coordinates, the inclusion bits and the per-step sampling.

    Attributes:
        included: The inclusion bits, bool (m,).
        names: Parameter name of each canary's coordinate, (m,).
        offsets: Flat index of each canary's coordinate within its parameter, (m,).
        steps: Steps observed so far.
    """

    def __init__(
        self,
        parameter_shapes: Mapping[str, Sequence[int]],
        num_canaries: int,
        *,
        clip_norm: float,
        sampling_rate: float = 1.0,
        adjacency: CanaryAdjacency = "replace-one",
        seed: int = 0,
    ) -> None:
        sizes = {
            name: int(np.prod(tuple(shape), dtype=np.int64))
            for name, shape in parameter_shapes.items()
        }
        total = sum(sizes.values())
        m = check_int("num_canaries", num_canaries, minimum=1, numpy=True)
        if m > total:
            raise ParameterError("num_canaries", f"an int in [1, {total}] (the coordinates)", m)
        self.clip_norm = check_float("clip_norm", clip_norm, low=0, open_low=True)
        self.sampling_rate = check_probability(
            "sampling_rate", sampling_rate, open_low=True, open_high=False
        )
        if adjacency not in ("replace-one", "add-remove"):
            raise ParameterError("adjacency", "'replace-one' or 'add-remove'", adjacency)
        self.adjacency: CanaryAdjacency = adjacency
        rng = np.random.default_rng(check_seed("seed", seed))
        flat = np.sort(rng.choice(total, size=m, replace=False))
        self.included: NDArray[np.bool_] = rng.random(m) < 0.5
        self._sampler = np.random.default_rng(rng.integers(2**63))
        starts = np.cumsum([0, *sizes.values()])[:-1]
        which = np.searchsorted(starts, flat, side="right") - 1
        names = list(sizes)
        self.names = np.array([names[i] for i in which], dtype=object)
        self.offsets = (flat - starts[which]).astype(np.int64)
        self._groups = {
            name: np.flatnonzero(which == i) for i, name in enumerate(names) if np.any(which == i)
        }
        low = -1.0 if adjacency == "replace-one" else 0.0
        self._value = np.where(self.included, 1.0, low) * self.clip_norm
        self._known = np.zeros(m)
        self._scores = np.zeros(m)
        self.steps = 0

    @property
    def num_canaries(self) -> int:
        """m."""
        return int(self.included.size)

    @property
    def subtracts_known_sum(self) -> bool:
        """Whether the rest of the batch's clipped sum is public (full batch, q = 1)."""
        return self.sampling_rate == 1.0

    def _gather(self, tensors: Mapping[str, Any]) -> NDArray[np.float64]:
        out = np.zeros(self.num_canaries)
        for name, rows in self._groups.items():
            out[rows] = _to_numpy(tensors[name].reshape(-1)[self.offsets[rows]])
        return out

    def insert(self, summed: MutableMapping[str, Any]) -> None:
        """Add this step's sampled canaries to the clipped gradient sum, in place.

        Call once per step, after the per-example gradients are clipped and
        summed, before noise.  Records the sum at the canary coordinates first
        (the known part, subtracted from the scores in a full-batch run).

        Args:
            summed: Name → summed clipped gradient tensor (float64 recommended).
        """
        self._known = (
            self._gather(summed) if self.subtracts_known_sum else np.zeros_like(self._known)
        )
        if self.sampling_rate == 1.0:
            add = self._value
        else:
            add = np.where(
                self._sampler.random(self.num_canaries) < self.sampling_rate, self._value, 0.0
            )
        for name, rows in self._groups.items():
            tensor = summed[name]
            flat = tensor.reshape(-1)
            flat[self.offsets[rows]] += flat.new_tensor(add[rows])
            summed[name] = flat.reshape(tensor.shape)  # a no-op unless reshape copied

    def observe(self, noisy: Mapping[str, Any]) -> None:
        """Accumulate the all-iterates scores from this step's noisy sum.

        Args:
            noisy: Name → noisy gradient sum (clipped sum + canaries + noise),
                before any division by the batch size.
        """
        self._scores += self._gather(noisy) - self._known
        self.steps += 1

    @property
    def scores(self) -> NDArray[np.float64]:
        """All-iterates scores Σ_t ⟨noisy_t − known_t, e_k⟩, shape (m,)."""
        return self._scores.copy()

    def last_iterate_scores(
        self, initial: Mapping[str, Any], final: Mapping[str, Any]
    ) -> NDArray[np.float64]:
        """Last-iterate scores −(θ_T − θ_0) at the canary coordinates, shape (m,).

        Args:
            initial: Name → parameter before training (e.g. a ``state_dict`` copy).
            final: Name → parameter after training.
        """
        return self._gather(initial) - self._gather(final)

    def audit(
        self,
        scores: NDArray[np.float64] | None = None,
        *,
        delta: float,
        significance: float = 0.05,
        selection: OneRunSelection = "held-out",
        seed: int = 0,
    ) -> OneRunAudit:
        """One-run ε lower bound from the canaries' scores (default: all iterates).

        Args:
            scores: Scores (m,), e.g. :meth:`last_iterate_scores`; None: :attr:`scores`.
            delta: δ in [0, 1) of the claim audited.
            significance: α in (0, 1).
            selection: How the guess rule is chosen (see
                :func:`privfed.audit.one_run_audit_selected`).
            seed: Seed of the held-out split of the canaries.

        Returns:
            The :class:`~privfed.audit.bounds.OneRunAudit`.
        """
        if self.steps == 0 and scores is None:
            raise ParameterError("scores", "observed steps (call observe) or explicit scores", 0)
        values = self.scores if scores is None else np.asarray(scores, dtype=np.float64)
        if not math.isfinite(float(np.sum(values))):
            raise ParameterError("scores", "finite scores", "non-finite")
        return one_run_audit_selected(
            values,
            self.included,
            spec=BoundSpec(delta, significance),
            selection=selection,
            split=HeldOutSplit(seed=seed),
        )
