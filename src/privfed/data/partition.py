"""Spreading a labelled dataset over federated clients.

:func:`partition` returns one index array per client.  Whatever the scheme,
every record is assigned to exactly one client (the arrays are disjoint and
their union is ``0..N-1``), so experiments that vary the partition compare the
same records.

Empty clients.  Skewed schemes (Dirichlet with small ``alpha``, more clients
than records of a class) can leave a client with no records.  Such clients are
*kept* as empty arrays rather than dropped: the number of returned arrays is
always ``num_clients``.  In the latent-statistic engine an empty client still
takes part in secure aggregation and contributes all-zero statistics, which is
exactly what a real deployment sees.
"""

from __future__ import annotations

import enum
import math

import numpy as np

from privfed._checks import check_enum, check_float, check_int
from privfed.errors import ParameterError

__all__ = ["PartitionScheme", "partition"]


class PartitionScheme(enum.StrEnum):
    """How records are spread over clients.

    Members:
        IID: A uniform random split into ``num_clients`` near-equal parts
            (sizes differ by at most one).
        DIRICHLET: For every class, client shares drawn from
            ``Dirichlet(alpha * 1)``; small ``alpha`` is highly skewed
            (the usual label-skew benchmark, Hsu et al. arXiv:1909.06335).
        PATHOLOGICAL: Every client holds at most ``classes_per_client`` classes;
            the records of a class are split evenly among the clients holding it
            (McMahan et al. arXiv:1602.05629, §3).
        SINGLE_CLASS: Pathological with one class per client (the
            FederatedFactory setting).
    """

    IID = "iid"
    DIRICHLET = "dirichlet"
    PATHOLOGICAL = "pathological"
    SINGLE_CLASS = "single-class"


def _split_evenly(indices: np.ndarray, owners: list[int], out: list[list[np.ndarray]]) -> None:
    for owner, chunk in zip(owners, np.array_split(indices, len(owners)), strict=True):
        out[owner].append(chunk)


def partition(
    labels: np.ndarray,
    *,
    scheme: PartitionScheme | str,
    num_clients: int,
    seed: int,
    alpha: float | None = None,
    classes_per_client: int | None = None,
) -> list[np.ndarray]:
    """Assign every record to exactly one of ``num_clients`` clients.

    Args:
        labels: Integer class labels, shape ``(N,)``, values ``>= 0``.
        scheme: A :class:`PartitionScheme` or its value (``"iid"``,
            ``"dirichlet"``, ``"pathological"``, ``"single-class"``).
        num_clients: Number of clients, ``>= 1``.
        seed: Seed of the numpy generator (a partition is an experimental
            design, not a privacy mechanism).
        alpha: Dirichlet concentration, finite and ``> 0``; required by
            ``"dirichlet"`` and refused by the other schemes.
        classes_per_client: Classes per client ``>= 1`` for ``"pathological"``
            (required there, refused elsewhere).  Needs
            ``num_clients * classes_per_client >= number of classes present``
            so that every class has a holder.

    Returns:
        ``num_clients`` sorted ``int64`` index arrays, pairwise disjoint, whose
        union is ``arange(N)``.  Some may be empty (see the module docstring).

    Raises:
        ParameterError: On an unknown scheme, a missing or superfluous option, or
            a configuration that cannot give every class a holder.
    """
    kind = check_enum("scheme", scheme, PartitionScheme)
    labels = np.asarray(labels)
    if labels.ndim != 1 or (labels.size and not np.issubdtype(labels.dtype, np.integer)):
        raise ParameterError("labels", "a 1-D integer array", labels.shape)
    if labels.size and labels.min() < 0:
        raise ParameterError("labels", "values >= 0", int(labels.min()))
    n_clients = check_int("num_clients", num_clients, minimum=1, numpy=True)
    concentration = _concentration(kind, alpha)
    k = _classes_per_client(kind, classes_per_client)
    present = np.unique(labels)
    single_or_few = kind in (PartitionScheme.PATHOLOGICAL, PartitionScheme.SINGLE_CLASS)
    if single_or_few and n_clients * k < present.size:
        raise ParameterError(
            "num_clients",
            f"at least {math.ceil(present.size / k)} so that each of the "
            f"{present.size} classes has a holder",
            n_clients,
        )

    rng = np.random.default_rng(seed)
    parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
    if kind is PartitionScheme.IID:
        _split_evenly(rng.permutation(labels.size), list(range(n_clients)), parts)
    elif kind is PartitionScheme.DIRICHLET:
        _split_dirichlet(labels, present, concentration, rng, parts)
    else:
        _split_by_holders(labels, present, k, rng, parts)
    return [
        np.sort(np.concatenate(p)).astype(np.int64) if p else np.zeros(0, dtype=np.int64)
        for p in parts
    ]


def _concentration(kind: PartitionScheme, alpha: float | None) -> float:
    """The Dirichlet ``alpha`` (required by that scheme, refused by the others; 0.0 there)."""
    if kind is PartitionScheme.DIRICHLET:
        if alpha is None:
            raise ParameterError("alpha", "a finite float > 0 for scheme 'dirichlet'", alpha)
        return check_float("alpha", alpha, low=0, open_low=True, numpy=False, expected="a float")
    if alpha is not None:
        raise ParameterError("alpha", f"None for scheme {kind.value!r}", alpha)
    return 0.0


def _classes_per_client(kind: PartitionScheme, classes_per_client: int | None) -> int:
    """``classes_per_client`` (required by "pathological", refused elsewhere; 1 there)."""
    if kind is PartitionScheme.PATHOLOGICAL:
        if classes_per_client is None:
            raise ParameterError(
                "classes_per_client", "an int >= 1 for scheme 'pathological'", None
            )
        return check_int("classes_per_client", classes_per_client, minimum=1, numpy=True)
    if classes_per_client is not None:
        raise ParameterError(
            "classes_per_client", f"None for scheme {kind.value!r}", classes_per_client
        )
    return 1


def _split_dirichlet(
    labels: np.ndarray,
    present: np.ndarray,
    concentration: float,
    rng: np.random.Generator,
    parts: list[list[np.ndarray]],
) -> None:
    """Per class, cut its shuffled records at shares drawn from ``Dirichlet(alpha * 1)``."""
    n_clients = len(parts)
    for c in present:
        members = rng.permutation(np.flatnonzero(labels == c))
        shares = rng.dirichlet(np.full(n_clients, concentration))
        # Cut points from the cumulative shares; the last cut is forced to the
        # end so that rounding can never lose or duplicate a record.
        cuts = np.floor(np.cumsum(shares)[:-1] * members.size).astype(np.int64)
        cuts = np.clip(cuts, 0, members.size)
        for client, chunk in enumerate(np.split(members, cuts)):
            parts[client].append(chunk)


def _split_by_holders(
    labels: np.ndarray,
    present: np.ndarray,
    k: int,
    rng: np.random.Generator,
    parts: list[list[np.ndarray]],
) -> None:
    """Give every client up to ``k`` classes; split each class evenly among its holders."""
    # Cycle through a random order of the present classes so every class is
    # held by floor or ceil(n_clients * k / n_classes) clients.
    order = rng.permutation(present)
    holders: dict[int, list[int]] = {int(c): [] for c in present}
    slot = 0
    for client in range(len(parts)):
        mine: set[int] = set()
        for _ in range(min(k, present.size)):
            cls = int(order[slot % present.size])
            slot += 1
            if cls not in mine:
                mine.add(cls)
                holders[cls].append(client)
    for cls, owners in holders.items():
        members = rng.permutation(np.flatnonzero(labels == cls))
        _split_evenly(members, owners, parts)
