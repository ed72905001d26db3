"""The secure-aggregation threshold ``t``: one policy for every place that picks or checks it.

Notation: ``s`` is the neighbourhood size (``n`` clients for the complete graph,
``degree + 1`` for SecAgg+) and ``n_C`` the number of corrupted clients assumed
to collude with the server.

Two layers of rules:

* The protocol's own domain (:class:`~privfed.secagg.SecAggConfig`):
  ``2 <= t <= s`` and ``n_C`` in ``[0, s - 2]``; in active mode also
  ``2t > s + n_C`` (Bonawitz et al., arXiv:1611.04482: two honest groups shown
  different survivor sets would each need ``t - n_C`` signatures).
* :class:`ThresholdPolicy`, what a deployment proposes or takes part in (the
  latent job, the Flower apps, every node's policy): the protocol's domain plus
  a strict majority ``2t > s`` (two disjoint groups of ``t`` could otherwise be
  shown different survivor views), ``t > n_C`` (the colluders then hold fewer
  than ``t`` shares) and ``t`` at least an operator's minimum.  Its default is
  the strict majority ``s // 2 + 1`` (raised to the minimum), the threshold of
  every job.

"No threshold" is spelled ``None`` and means the policy's default.  Run
configs (TOML has no null) write it as ``0`` or leave the key out;
:func:`requested_threshold` reads them.  An API that takes an explicit ``t``
(:class:`~privfed.secagg.SecAggConfig`,
:class:`~privfed.flower.server.SecAggRound`) refuses ``0`` like every ``t``
below :data:`MIN_THRESHOLD`.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Final

from privfed._checks import check_bool, check_int
from privfed.errors import ParameterError

__all__ = [
    "MIN_THRESHOLD",
    "ThresholdPolicy",
    "ThresholdRule",
    "active_rule_holds",
    "check_active_threshold",
    "check_corrupted",
    "check_protocol_threshold",
    "majority_threshold",
    "requested_threshold",
]

#: The smallest Shamir threshold the protocol takes.
MIN_THRESHOLD: Final = 2


def majority_threshold(size: int) -> int:
    """The smallest strict majority of ``size`` clients, ``size // 2 + 1`` (the default ``t``)."""
    return size // 2 + 1


def active_rule_holds(threshold: int, size: int, corrupted: int) -> bool:
    """Whether ``2t > s + n_C``, the active mode's condition on the threshold."""
    return 2 * threshold > size + corrupted


def check_protocol_threshold(threshold: object, size: int, *, name: str = "threshold") -> int:
    """``threshold`` checked as an int in ``[2, size]`` (the protocol's domain).

    Raises:
        ParameterError, ParameterTypeError: It is not such an int.
    """
    return check_int(name, threshold, minimum=MIN_THRESHOLD, maximum=size)


def check_corrupted(corrupted: object, size: int, *, name: str = "corrupted") -> int:
    """``n_C`` checked as an int in ``[0, size - 2]`` (the protocol's domain).

    Raises:
        ParameterError, ParameterTypeError: It is not such an int.
    """
    value = check_int(name, corrupted, minimum=0)
    if value > size - 2:
        raise ParameterError(name, f"an int in [0, {size - 2}]", value)
    return value


def check_active_threshold(
    threshold: int, size: int, corrupted: int, *, name: str = "threshold"
) -> None:
    """Refuse a threshold that breaks the active rule ``2t > s + n_C``.

    Raises:
        ParameterError: ``2 * threshold <= size + corrupted``, naming ``name``.
    """
    if not active_rule_holds(threshold, size, corrupted):
        raise ParameterError(
            name,
            f"more than (s + n_C) / 2 = ({size} + {corrupted}) / 2 in active mode "
            "(Bonawitz et al.: two honest groups shown different survivor sets would each "
            "need t - n_C signatures)",
            threshold,
        )


def requested_threshold(value: object, *, name: str = "threshold") -> int | None:
    """The threshold a run config asks for: ``None`` (the default) for ``0`` or no value.

    Any other value is converted with ``int`` as the run config gives it; the
    policy (or the protocol) checks it where the round's size is known.

    Raises:
        ParameterError: A value ``int`` cannot read.
    """
    if value is None:
        return None
    try:
        threshold = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise ParameterError(name, "an int (0: the default strict majority)", value) from None
    return threshold or None


class ThresholdRule(enum.Enum):
    """The rules of :class:`ThresholdPolicy`, in the order they are checked."""

    #: ``2 <= t <= s``.
    RANGE = "range"
    #: ``t >=`` the policy's minimum.
    MINIMUM = "minimum"
    #: ``t > n_C``.
    ABOVE_CORRUPTED = "above-corrupted"
    #: ``2t > s``.
    MAJORITY = "majority"
    #: ``2t > s + n_C`` (active mode only).
    ACTIVE = "active"


@dataclasses.dataclass(frozen=True)
class ThresholdPolicy:
    """What a deployment accepts as the threshold ``t`` of a round, ``s`` clients per neighbourhood.

    Args:
        active: Whether rounds run in active mode (then ``2t > s + n_C``).
        corrupted: ``n_C``, an int ``>= 0``.
        minimum: The lowest ``t`` accepted, an int ``>= 2`` (default 2), on top
            of the strict-majority floor (it never lowers it).

    Raises:
        ParameterError, ParameterTypeError: A value outside its domain.
    """

    active: bool = False
    corrupted: int = 0
    minimum: int = MIN_THRESHOLD

    def __post_init__(self) -> None:
        check_bool("active", self.active)
        check_int("corrupted", self.corrupted, minimum=0)
        check_int("minimum", self.minimum, minimum=MIN_THRESHOLD)

    def default(self, size: int) -> int:
        """The threshold of a round that asks for none: a strict majority, at least the minimum.

        Not checked: :meth:`resolve` (or :meth:`check`) refuses it where
        ``n_C`` is too large for it.
        """
        return max(majority_threshold(size), self.minimum)

    def violation(self, threshold: int, size: int) -> ThresholdRule | None:
        """The first rule ``threshold`` breaks over ``size`` clients (``None``: it meets all)."""
        if not MIN_THRESHOLD <= threshold <= size:
            return ThresholdRule.RANGE
        if threshold < self.minimum:
            return ThresholdRule.MINIMUM
        if threshold <= self.corrupted:
            return ThresholdRule.ABOVE_CORRUPTED
        if 2 * threshold <= size:
            return ThresholdRule.MAJORITY
        if self.active and not active_rule_holds(threshold, size, self.corrupted):
            return ThresholdRule.ACTIVE
        return None

    def domain(self, size: int) -> str:
        """The thresholds the policy accepts over ``size`` clients, in words (for errors)."""
        low = max(self.default(size), self.corrupted + 1)
        if self.active:
            low = max(low, (size + self.corrupted) // 2 + 1)
        rules = "a strict majority, above n_C"
        if self.active:
            rules += ", 2t > s + n_C"
        mode = "active" if self.active else "semi-honest"
        return (
            f"an int in [{low}, {size}] ({rules}; s = {size}, n_C = {self.corrupted}, "
            f"minimum {self.minimum}, {mode} mode)"
        )

    def max_corrupted(self, threshold: int, size: int) -> int:
        """The largest ``n_C`` with which ``threshold`` over ``size`` clients meets the policy.

        ``t - 1`` (``t > n_C``), and in active mode at most ``2t - s - 1``
        (``2t > s + n_C``); negative when no ``n_C`` does.
        """
        limit = threshold - 1
        if self.active:
            limit = min(limit, 2 * threshold - size - 1)
        return limit

    def check(self, threshold: object, size: int, *, name: str = "threshold") -> int:
        """``threshold`` checked against the policy over ``size`` clients.

        Raises:
            ParameterError, ParameterTypeError: It is not an int the policy
                accepts (naming ``name`` and the accepted range).
        """
        t = check_int(name, threshold)
        if self.violation(t, size) is not None:
            raise ParameterError(name, self.domain(size), t)
        return t

    def resolve(self, requested: int | None, size: int, *, name: str = "threshold") -> int:
        """The round's threshold: ``requested`` (``None``: :meth:`default`), checked.

        Raises:
            ParameterError, ParameterTypeError: The threshold breaks the policy.
        """
        return self.check(self.default(size) if requested is None else requested, size, name=name)
