"""Public parameters of one secure-aggregation round."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Mapping, Sequence
from typing import Final

from privfed._checks import check_int
from privfed.errors import ParameterError, ParameterTypeError
from privfed.secagg.protocol.graph import GraphMode, build_neighbourhoods

__all__ = [
    "MAX_CLIENT_ID",
    "MAX_VECTOR_LENGTH",
    "SESSION_ID_LENGTHS",
    "SecAggConfig",
    "new_session_id",
]

#: Largest client id; ids travel as unsigned 32-bit integers and double as
#: Shamir evaluation points.
MAX_CLIENT_ID: Final = 2**32 - 1
#: Largest vector length (values per client), so lengths fit in 32 bits.
MAX_VECTOR_LENGTH: Final = 2**31 - 1
#: Accepted session-id lengths in bytes (inclusive range).
SESSION_ID_LENGTHS: Final = (16, 64)
_DEFAULT_SESSION_ID_BYTES: Final = 32


def new_session_id() -> bytes:
    """A fresh 32-byte session id from the OS CSPRNG."""
    return secrets.token_bytes(_DEFAULT_SESSION_ID_BYTES)


@dataclasses.dataclass(frozen=True)
class SecAggConfig:
    """Public, validated parameters shared by the server and every client.

    Everything here is public: it may be sent in the clear and logged.  All
    parties of a round must hold equal configs (same ids, threshold, graph and
    session id); messages of another session or round are refused.

    Args:
        client_ids: Distinct client ids, ints in ``[1, 2**32 - 1]``; at least
            two.  Stored sorted.  An id is also the client's Shamir evaluation
            point.
        threshold: Shamir threshold ``t``: the number of shares needed to
            rebuild a client's secrets, and the fewest surviving clients (per
            neighbourhood, the client itself included) with which a client
            still takes part.  An int in ``[2, s]`` where ``s`` is the
            neighbourhood size: ``len(client_ids)`` for the complete graph,
            ``degree + 1`` for the Harary graph.  ``t`` colluding clients
            (with the server) can unmask an honest client's input, so choose
            ``t`` above the number of clients you are prepared to see collude;
            see SECURITY.md.  As in Bonawitz et al., a client holds (and at
            unmasking reveals) one share of its own self-mask seed, so ``t``
            counts the client itself; SECURITY.md explains how this maps onto
            SecAgg+ parameter-finder outputs, which count neighbours only.
        vector_length: Values per client input, an int in ``[1, 2**31 - 1]``.
        ring_bits: Inputs, masks and the sum live in the ring of integers
            modulo ``2**ring_bits``; an int in ``[8, 64]`` (default 64).  The
            wire carries each value in the smallest of 1, 2, 4 or 8 bytes that
            holds ``ring_bits`` bits.
        graph: :class:`GraphMode` (or its value ``"complete"``/``"harary"``).
        degree: Neighbours per client in Harary mode, an int in
            ``[2, n - 1]``; if odd, the number of clients ``n`` must be even.
            Must be ``None`` in complete mode.
        session_id: Public session id, 16 to 64 bytes; fresh from the OS
            CSPRNG by default.  It binds every key derivation, ciphertext and
            message to this round, and seeds the Harary permutation.
        round_index: Public round counter, an int in ``[0, 2**32 - 1]``.

    Raises:
        ParameterError: A value is outside its domain.
        ParameterTypeError: A value has the wrong type.
    """

    client_ids: tuple[int, ...]
    threshold: int
    vector_length: int
    ring_bits: int = 64
    graph: GraphMode = GraphMode.COMPLETE
    degree: int | None = None
    session_id: bytes = dataclasses.field(default_factory=new_session_id)
    round_index: int = 0
    _neighbours: Mapping[int, frozenset[int]] = dataclasses.field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        ids = self.client_ids
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
            raise ParameterTypeError("client_ids", "a sequence of ints", ids)
        checked = [check_int("client_ids", i, minimum=1, maximum=MAX_CLIENT_ID) for i in ids]
        if len(checked) < 2:
            raise ParameterError("client_ids", "at least two ids", len(checked))
        if len(set(checked)) != len(checked):
            raise ParameterError("client_ids", "distinct ids", "duplicates")
        n = len(checked)

        graph = self.graph
        if isinstance(graph, str):
            try:
                graph = GraphMode(graph)
            except ValueError:
                raise ParameterError("graph", "'complete' or 'harary'", self.graph) from None
        if not isinstance(graph, GraphMode):
            raise ParameterTypeError("graph", "a GraphMode", graph)

        if graph is GraphMode.COMPLETE:
            if self.degree is not None:
                raise ParameterError("degree", "None for the complete graph", self.degree)
            neighbourhood_size = n
        else:
            if self.degree is None:
                raise ParameterError("degree", "an int for the Harary graph", None)
            degree = check_int("degree", self.degree, minimum=2, maximum=n - 1)
            if degree % 2 == 1 and n % 2 == 1:
                raise ParameterError(
                    "degree",
                    "even when the number of clients is odd",
                    degree,
                )
            neighbourhood_size = degree + 1
        check_int("threshold", self.threshold, minimum=2, maximum=neighbourhood_size)
        check_int("vector_length", self.vector_length, minimum=1, maximum=MAX_VECTOR_LENGTH)
        check_int("ring_bits", self.ring_bits, minimum=8, maximum=64)
        check_int("round_index", self.round_index, minimum=0, maximum=2**32 - 1)
        sid = self.session_id
        if not isinstance(sid, bytes):
            raise ParameterTypeError("session_id", "bytes", sid)
        low, high = SESSION_ID_LENGTHS
        if not low <= len(sid) <= high:
            raise ParameterError(
                "session_id", f"bytes of length {low} to {high}", f"{len(sid)} bytes"
            )

        ordered = tuple(sorted(checked))
        object.__setattr__(self, "client_ids", ordered)
        object.__setattr__(self, "graph", graph)
        object.__setattr__(
            self,
            "_neighbours",
            build_neighbourhoods(
                ordered,
                mode=graph,
                degree=self.degree,
                session_id=sid,
                round_index=self.round_index,
            ),
        )

    @property
    def num_clients(self) -> int:
        """Number of clients ``n``."""
        return len(self.client_ids)

    @property
    def neighbourhood_size(self) -> int:
        """Clients in one neighbourhood, the client itself included."""
        if self.graph is GraphMode.COMPLETE:
            return self.num_clients
        return (self.degree or 0) + 1

    @property
    def value_bytes(self) -> int:
        """Bytes per ring value on the wire (1, 2, 4 or 8)."""
        width = (self.ring_bits + 7) // 8
        for size in (1, 2, 4, 8):
            if width <= size:
                return size
        return 8  # pragma: no cover -- ring_bits <= 64

    @property
    def modulus(self) -> int:
        """The ring modulus ``2**ring_bits``."""
        return 1 << self.ring_bits

    def neighbours(self, client_id: int) -> frozenset[int]:
        """The neighbours of ``client_id`` (never the client itself).

        Raises:
            ParameterError: ``client_id`` is not in :attr:`client_ids`.
        """
        try:
            return self._neighbours[client_id]
        except (KeyError, TypeError):
            raise ParameterError("client_id", "one of the config's client ids", client_id) from None

    def neighbourhood(self, client_id: int) -> frozenset[int]:
        """The neighbours of ``client_id`` plus the client itself."""
        return self.neighbours(client_id) | {client_id}
