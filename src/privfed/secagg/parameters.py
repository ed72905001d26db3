"""Choosing the SecAgg+ graph degree ``k`` and Shamir threshold ``t``.

SecAgg+ (Bell et al., CCS'20, arXiv:2009.01867, §3) replaces the complete
graph of Bonawitz double masking by a random Harary graph ``H(k, n)``: clients
sit on a ring in a secret random order and each masks with, and shares its
secrets with, the ``k`` clients nearest to it on the ring (``k / 2`` on each
side).  Each client's secrets are Shamir-shared with threshold ``t`` among its
``k`` neighbours.  The protocol stays secure and correct only if, with
overwhelming probability over the random order,

* the graph of honest, surviving clients stays connected (otherwise the server
  learns partial sums of the pieces);
* no client has ``t`` or more corrupted neighbours (curious server), or
  ``2t - k`` or more (semi-malicious server, which may ask different
  neighbours for different share types; the semi-malicious variant of
  arXiv:2009.01867), so corrupted clients can never pool enough shares to unmask an
  honest client; and
* every client keeps at least ``t`` surviving neighbours, so its secrets can
  always be rebuilt.

This module turns those three conditions into concrete numbers the way
Google's federated-compute "Harary graph parameter finder" does: the number of
corrupted (resp. surviving) neighbours of one client is bounded by a
hypergeometric tail (``k`` neighbours drawn without replacement from ``n``
clients, of which at most ``floor(γ n)`` are corrupted and at least
``ceil((1 - δ) n)`` survive), with a union bound over the ``n`` clients; a
disconnection needs two runs of ``k / 2`` consecutive bad clients, bounded by a
union bound over the ``n (n - k - 1) / 2`` pairs of gaps.  The security budget
``2^-σ`` is split evenly between disconnection and share pooling
(``2^-(σ+1)`` each); the correctness budget ``2^-η`` goes to the
too-few-survivors event.  The search returns the smallest even degree (and the
smallest threshold for it) that meets both budgets.

Modelling approximation (shared with the reference finder, kept so that the
answers agree): a client's ``k`` neighbours are modelled as ``k`` clients drawn
from all ``n`` clients rather than from the ``n - 1`` others.  For an honest
client this under-states the corrupted fraction among the others by a factor
``(n - 1) / n``; the effect on the tails is of relative order ``k / n`` and is
small next to the slack of the union bounds, but it means the bounds are not a
strict proof at every ``(n, k)``.

All quantities here are public: nothing in this module touches keys, shares or
inputs.  Probabilities are computed in log space from ``lgamma`` (no
underflow); their rounding error (relative ~1e-15 on log-probabilities of
size at most ~1e7) is far below the margins that decide a parameter, and the
corrupted/surviving counts are rounded in the conservative direction.

Example::

    from privfed.secagg.parameters import find_secagg_plus_parameters

    p = find_secagg_plus_parameters(
        1000, corrupted_fraction=0.05, dropout_fraction=0.05, threat_model="curious"
    )
    (p.degree, p.threshold)          # (30, 17)
    # SecAggConfig(client_ids=..., graph="harary", degree=p.degree,
    #              threshold=p.threshold, ...)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Final, Literal, cast, get_args

import numpy as np
from numpy.typing import NDArray

from privfed._checks import check_choice, check_float, check_int
from privfed.errors import ParameterError, ParameterTypeError

__all__ = [
    "MAX_NUM_CLIENTS",
    "THREAT_MODELS",
    "SecAggPlusBounds",
    "SecAggPlusParameters",
    "ThreatModel",
    "find_secagg_plus_parameters",
    "secagg_plus_bounds",
]

#: The adversary the parameters defend against.  ``"curious"``: the server and
#: the corrupted clients follow the protocol but pool what they see (semi-honest).
#: ``"semi-malicious"``: the server may also lie about which clients dropped out,
#: asking different neighbours of one client for different share types.
ThreatModel = Literal["curious", "semi-malicious"]

#: The accepted values of :data:`ThreatModel`.
THREAT_MODELS: Final[tuple[str, ...]] = get_args(ThreatModel)

#: Largest supported number of clients (the reference finder's limit; the
#: search cost grows with ``n`` only through the degree, which is O(log n)).
MAX_NUM_CLIENTS: Final = 1_000_000

# Rates are stored as floats: 0.29 * 100 evaluates to 28.999999999999996.  A tiny
# slack, applied in the conservative direction (more corrupted clients, fewer
# survivors), stops such rounding error from making the parameters less safe.
_RATE_SLACK: Final = 1e-14
# Largest allowed σ and η in bits: beyond this, the answer is the complete graph
# for any realistic n, and log-space arithmetic would still be exact enough.
_MAX_BITS: Final = 256.0
_FRACTION_DOMAIN: Final = "a finite float in [0, 1)"
_BITS_DOMAIN: Final = f"a finite float in [1, {_MAX_BITS:g}] (bits)"
_THREAT_MODEL_DOMAIN: Final = "one of 'curious', 'semi-malicious'"
# Feasibility limits of the reference finder on γ + δ (curious) and γ + 2δ
# (semi-malicious): outside them no sparse graph meets the budgets at useful n.
_MAX_BAD_FRACTION: Final = 0.9
_LN2: Final = math.log(2.0)
# Threshold searches ignore tail mass this many bits below the smallest
# probability they compare against (far below double precision).
_NEGLIGIBLE_BITS: Final = 64.0


# -- validation -----------------------------------------------------------------


def _check_fraction(name: str, value: object) -> float:
    return check_float(
        name, value, low=0, high=1, open_high=True, expected="a float", domain=_FRACTION_DOMAIN
    )


def _check_bits(name: str, value: object) -> float:
    return check_float(
        name, value, low=1, high=_MAX_BITS, expected="a float (bits)", domain=_BITS_DOMAIN
    )


def _check_threat_model(value: object) -> ThreatModel:
    model = check_choice(
        "threat_model", value, THREAT_MODELS, expected="a str", domain=_THREAT_MODEL_DOMAIN
    )
    return cast(ThreatModel, model)


def _check_feasible_rates(
    corrupted_fraction: float, dropout_fraction: float, threat_model: ThreatModel
) -> None:
    if threat_model == "curious":
        if corrupted_fraction + dropout_fraction > _MAX_BAD_FRACTION:
            raise ParameterError(
                "corrupted_fraction + dropout_fraction",
                f"<= {_MAX_BAD_FRACTION} for the curious threat model",
                corrupted_fraction + dropout_fraction,
            )
    elif corrupted_fraction + 2.0 * dropout_fraction > _MAX_BAD_FRACTION:
        raise ParameterError(
            "corrupted_fraction + 2 * dropout_fraction",
            f"<= {_MAX_BAD_FRACTION} for the semi-malicious threat model",
            corrupted_fraction + 2.0 * dropout_fraction,
        )


def _max_corrupted(num_clients: int, corrupted_fraction: float) -> int:
    return math.floor((corrupted_fraction + _RATE_SLACK) * num_clients)


def _max_dropped(num_clients: int, dropout_fraction: float) -> int:
    return math.floor((dropout_fraction + _RATE_SLACK) * num_clients)


def _min_surviving(num_clients: int, dropout_fraction: float) -> int:
    return math.ceil((1.0 - dropout_fraction - _RATE_SLACK) * num_clients)


# -- probability kernels (natural logs) ---------------------------------------------


def _log_disconnection(num_clients: int, degree: int, max_bad: int) -> float:
    """Union bound (natural log) on the surviving honest clients being disconnected.

    Removing nodes from ``H(k, n)`` disconnects it only if two disjoint runs of
    ``k / 2`` consecutive ring positions are all removed.  There are at most
    ``n (n - k - 1) / 2`` such pairs of runs, and a fixed set of ``k`` positions
    is all bad with probability ``C(B, k) / C(n, k)`` when ``B`` of the ``n``
    clients are bad (corrupted or dropped) and the order is uniform.
    """
    if degree > max_bad:
        return -math.inf
    n = num_clients
    log_pairs = math.log(n) + math.log(n - degree - 1) - _LN2
    log_all_bad = (
        math.lgamma(max_bad + 1)
        + math.lgamma(n - degree + 1)
        - math.lgamma(n + 1)
        - math.lgamma(max_bad - degree + 1)
    )
    return log_pairs + log_all_bad


class _Hypergeometric:
    """Tails (natural logs) of the number of marked items among ``draws`` drawn from ``total``.

    With ``log_negligible`` set, only a window around the mean is tabulated and
    the tails are exact up to an additive ``exp(log_negligible)``: good for the
    threshold searches, not for reporting bounds.
    """

    def __init__(
        self, total: int, marked: int, draws: int, *, log_negligible: float | None = None
    ) -> None:
        self.low = max(0, draws - (total - marked))
        self.high = min(draws, marked)
        if log_negligible is not None and draws > 0:
            # Search-only shortcut: keep the window outside which each tail holds at
            # most exp(log_negligible) of the mass, by Hoeffding's bound for sampling
            # without replacement, P(|X - E X| >= draws * s) <= exp(-2 draws s^2)
            # per side (Hoeffding 1963, §6).  Callers pick log_negligible far (2^-64)
            # below the probabilities they compare against, so no decision changes;
            # the cost drops from O(draws) to O(sqrt(draws)) per distribution.
            mean = draws * marked / total
            half_width = draws * math.sqrt(-log_negligible / (2.0 * draws))
            self.low = max(self.low, math.floor(mean - half_width))
            self.high = min(self.high, math.ceil(mean + half_width))
        # scipy.special costs ~0.4 s to import; load it here, not with the module.
        from scipy.special import gammaln

        x = np.arange(self.low, self.high + 1, dtype=np.float64)
        log_pmf: NDArray[np.float64] = (
            gammaln(marked + 1.0)
            - gammaln(x + 1.0)
            - gammaln(marked - x + 1.0)
            + gammaln(total - marked + 1.0)
            - gammaln(draws - x + 1.0)
            - gammaln(total - marked - draws + x + 1.0)
            - (gammaln(total + 1.0) - gammaln(draws + 1.0) - gammaln(total - draws + 1.0))
        )
        # Cumulative sums in log space; each tail is summed from its far end, so
        # small tails keep full relative precision.
        self._log_cdf: NDArray[np.float64] = np.logaddexp.accumulate(log_pmf)
        self._log_sf: NDArray[np.float64] = np.logaddexp.accumulate(log_pmf[::-1])[::-1]

    def log_cdf(self, x: int) -> float:
        """``log P(X <= x)``."""
        if x < self.low:
            return -math.inf
        if x >= self.high:
            return 0.0
        return float(self._log_cdf[x - self.low])

    def log_sf_at_least(self, x: int) -> float:
        """``log P(X >= x)``."""
        if x <= self.low:
            return 0.0
        if x > self.high:
            return -math.inf
        return float(self._log_sf[x - self.low])

    def smallest_upper_bound(self, log_q: float) -> int:
        """The smallest ``x`` with ``P(X > x) < q``."""
        # log_sf[i] = log P(X >= low + i), so P(X > low + i) = log_sf[i + 1].
        above = np.append(self._log_sf[1:], -math.inf)
        return self.low + int(np.argmax(above < log_q))

    def smallest_quantile(self, log_q: float) -> int:
        """The smallest ``x`` with ``P(X <= x) >= q`` (``high`` if none below it)."""
        hits = np.flatnonzero(self._log_cdf >= log_q)
        return self.low + int(hits[0]) if hits.size else self.high


def _tolerated_corrupted(degree: int, threshold: int, threat_model: ThreatModel) -> int:
    """Most corrupted neighbours a client can have while its secrets stay hidden.

    Curious: fewer than ``t`` shares reveal nothing, so ``t - 1``.  Semi-malicious:
    the server can collect one share type from ``t`` honest neighbours and the
    other from ``t`` others; safety needs ``X < 2t - k`` (semi-malicious variant
    of arXiv:2009.01867), so ``2t - k - 1`` (negative: never safe).
    """
    if threat_model == "curious":
        return threshold - 1
    return 2 * threshold - degree - 1


def _smallest_secure_threshold(degree: int, max_tolerable: int, threat_model: ThreatModel) -> int:
    """Smallest ``t >= 2`` whose tolerated corrupted count reaches ``max_tolerable``."""
    # Semi-malicious: the smallest t with 2t - k - 1 >= max_tolerable.
    t = max_tolerable + 1 if threat_model == "curious" else (max_tolerable + degree) // 2 + 1
    # Shamir sharing needs at least two shares to mean anything.
    return max(t, 2)


# -- results ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SecAggPlusBounds:
    """Failure-probability bounds of one SecAgg+ parameter choice (all public).

    Every value is the base-2 logarithm of an upper bound (union bounds over
    clients and gap pairs), so the true probability is at most ``2**value``;
    ``-inf`` means the event is impossible.  Union bounds and conservative
    rounding of the counts make them over-estimates, up to the neighbour-model
    approximation described in the module docstring.

    Attributes:
        log2_disconnection: Bound on the graph of honest surviving clients being
            disconnected.
        log2_share_pooling: Bound on some client having more corrupted neighbours
            than its threshold tolerates (``t - 1`` curious, ``2t - k - 1``
            semi-malicious), summed over the ``n`` clients.
        log2_security_failure: ``log2(2**log2_disconnection + 2**log2_share_pooling)``.
        log2_correctness_failure: Bound on some client having fewer than ``t``
            surviving neighbours, summed over the ``n`` clients.
    """

    log2_disconnection: float
    log2_share_pooling: float
    log2_security_failure: float
    log2_correctness_failure: float

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, float):
                raise ParameterTypeError(field.name, "a float", value)
            if math.isnan(value) or value == math.inf:
                raise ParameterError(field.name, "a float < inf (a log2 bound)", value)
        combined = float(np.logaddexp2(self.log2_disconnection, self.log2_share_pooling))
        both_impossible = combined == self.log2_security_failure == -math.inf
        close = math.isclose(combined, self.log2_security_failure, rel_tol=1e-9, abs_tol=1e-9)
        if not (both_impossible or close):
            raise ParameterError(
                "log2_security_failure",
                "log2(2**log2_disconnection + 2**log2_share_pooling)",
                self.log2_security_failure,
            )


@dataclasses.dataclass(frozen=True)
class SecAggPlusParameters:
    """A SecAgg+ graph degree and Shamir threshold, with the guarantee they carry.

    Use ``degree`` and ``threshold`` for
    :class:`privfed.secagg.SecAggConfig` (``graph="harary"``).  Everything here is
    public.

    Attributes:
        num_clients: Clients ``n`` in the round, an int in ``[4, 1_000_000]``.
        degree: Neighbours ``k`` per client, an even int in ``[2, n - 2]``.
        threshold: Shamir threshold ``t`` among the ``k`` neighbours, an int in
            ``[2, k]``.
        corrupted_fraction: Assumed fraction ``γ`` of clients colluding with the
            server, in ``[0, 1)``.
        dropout_fraction: Assumed fraction ``δ`` of clients dropping out, in
            ``[0, 1)``.
        threat_model: ``"curious"`` or ``"semi-malicious"`` server.
        security_bits: ``σ``: the round reveals more than the sum of the
            surviving inputs with probability at most ``2**-σ`` over the random
            graph, for any fixed set of ``floor(γ n)`` corrupted clients.
        correctness_bits: ``η``: with at most ``floor(δ n)`` dropouts, the
            round fails to output the sum with probability at most ``2**-η``.
        bounds: The failure bounds these parameters achieve; must equal
            :func:`secagg_plus_bounds` of them and lie within both budgets.
    """

    num_clients: int
    degree: int
    threshold: int
    corrupted_fraction: float
    dropout_fraction: float
    threat_model: ThreatModel
    security_bits: float
    correctness_bits: float
    bounds: SecAggPlusBounds

    def __post_init__(self) -> None:
        n = check_int(
            "num_clients", self.num_clients, minimum=4, maximum=MAX_NUM_CLIENTS, numpy=True
        )
        k = check_int("degree", self.degree, minimum=2, maximum=n - 2, numpy=True)
        if k % 2:
            raise ParameterError("degree", "an even int", k)
        t = check_int("threshold", self.threshold, minimum=2, maximum=k, numpy=True)
        gamma = _check_fraction("corrupted_fraction", self.corrupted_fraction)
        delta = _check_fraction("dropout_fraction", self.dropout_fraction)
        model = _check_threat_model(self.threat_model)
        sigma = _check_bits("security_bits", self.security_bits)
        eta = _check_bits("correctness_bits", self.correctness_bits)
        if not isinstance(self.bounds, SecAggPlusBounds):
            raise ParameterTypeError("bounds", "a SecAggPlusBounds", self.bounds)
        expected = secagg_plus_bounds(
            n, k, t, corrupted_fraction=gamma, dropout_fraction=delta, threat_model=model
        )
        if self.bounds != expected:
            raise ParameterError(
                "bounds",
                "the bounds of these parameters, as secagg_plus_bounds computes them",
                self.bounds,
            )
        # The object states a guarantee, so it must not be constructible without it.
        if self.bounds.log2_security_failure > -sigma:
            raise ParameterError(
                "bounds.log2_security_failure",
                f"<= -security_bits = {-sigma:g}",
                self.bounds.log2_security_failure,
            )
        if self.bounds.log2_correctness_failure > -eta:
            raise ParameterError(
                "bounds.log2_correctness_failure",
                f"<= -correctness_bits = {-eta:g}",
                self.bounds.log2_correctness_failure,
            )

    @property
    def max_corrupted_clients(self) -> int:
        """Corrupted clients assumed: ``floor(γ n)`` (rounded up on float noise)."""
        return _max_corrupted(self.num_clients, self.corrupted_fraction)

    @property
    def min_surviving_clients(self) -> int:
        """Surviving clients assumed: ``ceil((1 - δ) n)`` (rounded down on float noise)."""
        return _min_surviving(self.num_clients, self.dropout_fraction)


# -- public functions ---------------------------------------------------------------


def secagg_plus_bounds(
    num_clients: int,
    degree: int,
    threshold: int,
    *,
    corrupted_fraction: float,
    dropout_fraction: float,
    threat_model: ThreatModel,
) -> SecAggPlusBounds:
    """Failure-probability bounds of a given SecAgg+ degree and threshold.

    The model (arXiv:2009.01867, §3): the ``n`` clients are placed on the ring of
    the Harary graph in a uniformly random order unknown to the adversary when
    it picks which ``floor(γ n)`` clients to corrupt and which ``floor(δ n)``
    drop out (both independent of the order).  A client's ``k`` neighbours
    are then a uniform ``k``-subset of the others, modelled -- as in the
    reference finder -- as ``k`` draws from all ``n`` clients, so its counts of
    corrupted and surviving neighbours are hypergeometric.

    Args:
        num_clients: ``n``, an int in ``[4, 1_000_000]``.
        degree: ``k``, an even int in ``[2, n - 2]``.
        threshold: ``t``, an int in ``[2, k]``.
        corrupted_fraction: ``γ``, a float in ``[0, 1)``.
        dropout_fraction: ``δ``, a float in ``[0, 1)``.
        threat_model: ``"curious"`` or ``"semi-malicious"``.

    Returns:
        The base-2 log bounds; see :class:`SecAggPlusBounds`.

    Raises:
        ParameterTypeError: An argument has the wrong type.
        ParameterError: An argument is outside its domain.
    """
    n = check_int("num_clients", num_clients, minimum=4, maximum=MAX_NUM_CLIENTS, numpy=True)
    k = check_int("degree", degree, minimum=2, maximum=n - 2, numpy=True)
    if k % 2:
        raise ParameterError("degree", "an even int", k)
    t = check_int("threshold", threshold, minimum=2, maximum=k, numpy=True)
    gamma = _check_fraction("corrupted_fraction", corrupted_fraction)
    delta = _check_fraction("dropout_fraction", dropout_fraction)
    model = _check_threat_model(threat_model)

    corrupted = _max_corrupted(n, gamma)
    bad = corrupted + _max_dropped(n, delta)
    log_disc = _log_disconnection(n, k, min(bad, n))
    tolerated = _tolerated_corrupted(k, t, model)
    adversarial = _Hypergeometric(n, corrupted, k)
    log_pool = math.log(n) + adversarial.log_sf_at_least(tolerated + 1)
    surviving = _Hypergeometric(n, _min_surviving(n, delta), k)
    log_fail = math.log(n) + surviving.log_cdf(t - 1)
    log2_disc = log_disc / _LN2
    log2_pool = log_pool / _LN2
    return SecAggPlusBounds(
        log2_disconnection=log2_disc,
        log2_share_pooling=log2_pool,
        log2_security_failure=float(np.logaddexp2(log2_disc, log2_pool)),
        log2_correctness_failure=log_fail / _LN2,
    )


def _threshold_for_degree(
    n: int,
    k: int,
    corrupted: int,
    bad: int,
    surviving: int,
    model: ThreatModel,
    log_event_budget: float,
    log_client_security: float,
    log_client_correctness: float,
) -> int | None:
    """The smallest valid threshold for degree ``k``, or ``None`` if there is none."""
    if _log_disconnection(n, k, bad) >= log_event_budget:
        return None
    negligible = min(log_client_security, log_client_correctness) - _NEGLIGIBLE_BITS * _LN2
    # t1: corrupted neighbours exceed t1 with probability < 2^-(σ+1) / n.
    adversarial = _Hypergeometric(n, corrupted, k, log_negligible=negligible)
    t1 = adversarial.smallest_upper_bound(log_client_security)
    # t2: fewer than t2 neighbours survive with probability < 2^-η / n.
    survivors = _Hypergeometric(n, surviving, k, log_negligible=negligible)
    t2 = survivors.smallest_quantile(log_client_correctness)
    t = _smallest_secure_threshold(k, t1, model)
    return t if t <= t2 else None


def find_secagg_plus_parameters(
    num_clients: int,
    *,
    corrupted_fraction: float,
    dropout_fraction: float,
    threat_model: ThreatModel,
    security_bits: float = 40,
    correctness_bits: float = 20,
) -> SecAggPlusParameters:
    """The smallest SecAgg+ degree ``k`` (and threshold ``t``) meeting both budgets.

    Guarantee (arXiv:2009.01867, §3; method of Google federated-compute's
    Harary-graph parameter finder): for any fixed choice of at most
    ``floor(γ n)`` corrupted clients and ``floor(δ n)`` dropouts, over the
    random placement of clients on the Harary graph,

    * security: the server and corrupted clients learn nothing beyond the sum
      of the honest surviving inputs except with probability at most
      ``2**-security_bits`` (half of it for a disconnected honest graph, half
      for a client whose shares could be pooled);
    * correctness: the sum is output except with probability at most
      ``2**-correctness_bits``.

    Degrees are searched upwards over even ``k`` in ``[2, n - 2]``; for the
    first ``k`` that works, the smallest secure threshold is returned (cheapest
    reconstruction).  Union bounds and rounding of the counts against the
    defender make the answer err towards larger ``k``; see the module
    docstring for the one modelling approximation.

    Args:
        num_clients: ``n``, an int in ``[4, 1_000_000]``.
        corrupted_fraction: ``γ``, the fraction of clients colluding with the
            server, a float in ``[0, 1)``.
        dropout_fraction: ``δ``, the fraction of clients that may drop out, a
            float in ``[0, 1)``.
        threat_model: ``"curious"`` (needs ``γ + δ <= 0.9``) or
            ``"semi-malicious"`` (needs ``γ + 2δ <= 0.9``).
        security_bits: ``σ``, a float in ``[1, 256]`` (default 40).
        correctness_bits: ``η``, a float in ``[1, 256]`` (default 20).

    Returns:
        The parameters and the bounds they achieve.

    Raises:
        ParameterTypeError: An argument has the wrong type.
        ParameterError: An argument is outside its domain, or no Harary graph
            of degree below ``n - 1`` meets the budgets (small ``n`` with large
            rates): the protocol then has to fall back to the complete graph
            (``graph="complete"``), and the error says so.

    Example:
        >>> p = find_secagg_plus_parameters(
        ...     100, corrupted_fraction=0.05, dropout_fraction=0.05, threat_model="curious")
        >>> (p.degree, p.threshold)
        (12, 6)
    """
    n = check_int("num_clients", num_clients, minimum=4, maximum=MAX_NUM_CLIENTS, numpy=True)
    gamma = _check_fraction("corrupted_fraction", corrupted_fraction)
    delta = _check_fraction("dropout_fraction", dropout_fraction)
    model = _check_threat_model(threat_model)
    sigma = _check_bits("security_bits", security_bits)
    eta = _check_bits("correctness_bits", correctness_bits)
    _check_feasible_rates(gamma, delta, model)

    found = _smallest_degree(n, gamma, delta, model, sigma, eta)
    if found is None:
        raise ParameterError(
            "num_clients",
            "large enough for a Harary graph of degree < num_clients - 1 to meet the "
            f"2^-{sigma:g} security and 2^-{eta:g} correctness budgets",
            n,
            detail=(
                f"no even degree in [2, {n - 2}] works for corrupted_fraction={gamma!r}, "
                f"dropout_fraction={delta!r}, threat_model={model!r}; fall back to the "
                'complete graph (graph="complete", plain SecAgg)'
            ),
        )
    k, t = found
    bounds = secagg_plus_bounds(
        n,
        k,
        t,
        corrupted_fraction=gamma,
        dropout_fraction=delta,
        threat_model=model,
    )
    return SecAggPlusParameters(
        num_clients=n,
        degree=k,
        threshold=t,
        corrupted_fraction=gamma,
        dropout_fraction=delta,
        threat_model=model,
        security_bits=sigma,
        correctness_bits=eta,
        bounds=bounds,
    )


def _smallest_degree(
    n: int, gamma: float, delta: float, model: ThreatModel, sigma: float, eta: float
) -> tuple[int, int] | None:
    """The first even degree ``k`` in ``[2, n - 2]`` with a valid threshold, as ``(k, t)``."""
    corrupted = _max_corrupted(n, gamma)
    bad = min(corrupted + _max_dropped(n, delta), n)
    surviving = _min_surviving(n, delta)
    # Each of the two security events gets half of the 2^-σ budget; per-client
    # events get a 1/n share of theirs (union bound over clients).
    log_event_budget = -(sigma + 1.0) * _LN2
    log_client_security = log_event_budget - math.log(n)
    log_client_correctness = -eta * _LN2 - math.log(n)

    for k in range(2, n - 1, 2):
        t = _threshold_for_degree(
            n,
            k,
            corrupted,
            bad,
            surviving,
            model,
            log_event_budget,
            log_client_security,
            log_client_correctness,
        )
        if t is not None:
            return k, t
    return None
