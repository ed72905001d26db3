"""Client ids: the protocol's ``1..n`` and the partitions' ``0..n-1``, mapped in one place.

A job splits its data into partitions ``0..n-1`` (a Flower node's
``partition-id``); the protocol names its clients ``1..n`` (an id is also the
client's Shamir evaluation point, and 0 is the secret's).  Partition ``p`` is
client id ``p + 1``: :class:`ClientIds` is the only place that adds or
subtracts the one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import NewType, TypeVar

from privfed._checks import check_int
from privfed.secagg.protocol.config import MAX_CLIENT_ID

__all__ = ["ClientId", "ClientIds"]

#: A protocol client id, an int in ``[1, 2**32 - 1]`` (see :class:`ClientIds`).
ClientId = NewType("ClientId", int)

_K = TypeVar("_K")


@dataclasses.dataclass(frozen=True)
class ClientIds:
    """The roster of ``num_clients`` clients: partition ``p`` in ``[0, n)`` is client id ``p + 1``.

    Args:
        num_clients: ``n``, an int in ``[1, 2**32 - 1]``.

    Raises:
        ParameterError, ParameterTypeError: ``num_clients`` outside its domain.
    """

    num_clients: int

    def __post_init__(self) -> None:
        check_int("num_clients", self.num_clients, minimum=1, maximum=MAX_CLIENT_ID)

    @classmethod
    def from_partitions(
        cls, partitions: Iterable[int], num_clients: int | None = None
    ) -> ClientIds:
        """The roster of these partition ids (``num_clients``: by default the fewest holding all).

        Raises:
            ParameterError, ParameterTypeError: A partition id outside
                ``[0, num_clients)`` (or negative), or no partition and no
                ``num_clients``.
        """
        top = MAX_CLIENT_ID - 1
        pids = [check_int("partition_id", p, minimum=0, maximum=top) for p in partitions]
        roster = cls(max(pids, default=-1) + 1 if num_clients is None else num_clients)
        for pid in pids:
            roster.protocol_id(pid)
        return roster

    @classmethod
    def any(cls) -> ClientIds:
        """The widest roster: every id the protocol can carry (for ids not yet tied to a job)."""
        return cls(MAX_CLIENT_ID)

    @property
    def client_ids(self) -> tuple[ClientId, ...]:
        """Every client id of the roster, ``1..n``."""
        return tuple(ClientId(c) for c in range(1, self.num_clients + 1))

    def __contains__(self, client_id: object) -> bool:
        return (
            isinstance(client_id, int)
            and not isinstance(client_id, bool)
            and 1 <= client_id <= self.num_clients
        )

    def protocol_id(self, partition_id: int) -> ClientId:
        """The client id of ``partition_id``.

        Raises:
            ParameterError, ParameterTypeError: ``partition_id`` is not an int in ``[0, n)``.
        """
        pid = check_int("partition_id", partition_id, minimum=0, maximum=self.num_clients - 1)
        return ClientId(pid + 1)

    def partition_id(self, client_id: int) -> int:
        """The partition of ``client_id``.

        Raises:
            ParameterError, ParameterTypeError: ``client_id`` is not an int in ``[1, n]``.
        """
        return check_int("client_id", client_id, minimum=1, maximum=self.num_clients) - 1

    def protocol_ids(self, partition_ids: Iterable[int]) -> tuple[ClientId, ...]:
        """:meth:`protocol_id` of each, in order."""
        return tuple(self.protocol_id(p) for p in partition_ids)

    def partition_ids(self, client_ids: Iterable[int]) -> tuple[int, ...]:
        """:meth:`partition_id` of each, in order."""
        return tuple(self.partition_id(c) for c in client_ids)

    def of_nodes(self, partitions: Mapping[_K, int]) -> dict[_K, ClientId]:
        """``{node: client id}`` from ``{node: partition id}``."""
        return {node: self.protocol_id(pid) for node, pid in partitions.items()}
