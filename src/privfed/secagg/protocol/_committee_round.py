"""The server's side of the committee stage (active SecAgg+): ask, check, seed.

See :mod:`~privfed.secagg.protocol.committee` for the protocol.  The server
asks each committee seat's member to reveal, checks each reveal against the
commitment in the member's leaf and the member's signature over the root, and
once the stage closes derives the graph seed and the committee section every
roster part carries.
"""

from __future__ import annotations

from collections.abc import Mapping

from privfed.secagg.protocol.committee import (
    committee_positions,
    committee_seed,
    graph_commitment,
    reveal_payload,
)
from privfed.secagg.protocol.config import SecAggConfig
from privfed.secagg.protocol.identity import IdentityRegistry
from privfed.secagg.protocol.messages.roster import CommitteeRequest, CommitteeReveal
from privfed.secagg.protocol.roster_tree import RosterTree

__all__ = ["CommitteeRefusedError", "CommitteeRound"]

#: ``(index, client_id, advertisement hash, value, signature)``: one reveal in a roster part.
CommitteeItem = tuple[int, int, bytes, bytes, bytes]


class CommitteeRefusedError(Exception):
    """A reveal the server refuses, or a stage that cannot close (the reason, no secret)."""


class CommitteeRound:
    """The committee of one roster root and the reveals received so far.

    Args:
        config: The round's config (:attr:`~SecAggConfig.committee` true).
        tree: The roster tree the root is of.
        members: ``{client_id: (advertisement hash, graph commitment)}`` of
            every leaf.
    """

    def __init__(
        self,
        config: SecAggConfig,
        tree: RosterTree,
        members: Mapping[int, tuple[bytes, bytes]],
    ) -> None:
        self._config = config
        self._tree = tree
        self._members = members
        session = config.bound_session_id
        seats = config.committee_seats(tree.count)
        positions = committee_positions(session, tree.root, tree.count, seats)
        self._seat_of = {tree.member(p)[0]: p for p in positions}
        self._reveals: dict[int, tuple[bytes, bytes]] = {}
        self._closed: tuple[bytes, tuple[CommitteeItem, ...]] | None = None

    @property
    def seats(self) -> frozenset[int]:
        """The committee members (client ids)."""
        return frozenset(self._seat_of)

    @property
    def revealed(self) -> frozenset[int]:
        """The members whose reveal was accepted."""
        return frozenset(self._reveals)

    @property
    def positions(self) -> tuple[int, ...]:
        """The committee's leaf positions, increasing."""
        return tuple(sorted(self._seat_of.values()))

    def requests(self) -> dict[int, CommitteeRequest]:
        """One request per member: its leaf position and inclusion proof."""
        cfg, tree = self._config, self._tree
        return {
            member: CommitteeRequest._trusted(
                session_id=cfg.bound_session_id,
                round_index=cfg.round_index,
                count=tree.count,
                position=position,
                hashes=tree.prove([position]),
            )
            for member, position in sorted(self._seat_of.items())
        }

    def accept(self, message: CommitteeReveal) -> None:
        """Keep a member's reveal after checking it against its leaf and its signature.

        Raises:
            CommitteeRefusedError: Not a member, a second reveal, a value that
                does not open the member's commitment, or no valid signature.
        """
        if self._closed is not None:
            raise CommitteeRefusedError("the committee stage is closed")
        sender, cfg = message.sender, self._config
        if sender not in self._seat_of:
            raise CommitteeRefusedError(f"client {sender} is not on the root's committee")
        if sender in self._reveals:
            raise CommitteeRefusedError(f"a second reveal from client {sender}")
        session = cfg.bound_session_id
        if graph_commitment(session, sender, message.value) != self._members[sender][1]:
            raise CommitteeRefusedError(f"client {sender}'s value does not open its commitment")
        payload = reveal_payload(
            session=session,
            config_digest=cfg.digest,
            root=self._tree.root,
            client_id=sender,
            value=message.value,
        )
        registry = cfg.identities
        if not isinstance(registry, IdentityRegistry) or not registry.verify(
            sender, payload, message.signature
        ):
            raise CommitteeRefusedError(f"client {sender}'s reveal carries no valid signature")
        self._reveals[sender] = (message.value, message.signature)

    def close(self) -> tuple[bytes, tuple[CommitteeItem, ...]]:
        """``(graph seed, committee section)`` once enough members revealed.

        Raises:
            CommitteeRefusedError: More than ``committee_dropouts`` members did
                not reveal (the round must abort).
        """
        if self._closed is None:
            cfg = self._config
            missing = len(self._seat_of) - len(self._reveals)
            if missing > cfg.committee_dropouts:
                raise CommitteeRefusedError(
                    f"{missing} of the {len(self._seat_of)} committee members did not reveal "
                    f"(at most {cfg.committee_dropouts} may be missing)"
                )
            items = tuple(
                (position, member, self._members[member][0], *self._reveals[member])
                for member, position in sorted(self._seat_of.items(), key=lambda kv: kv[1])
                if member in self._reveals
            )
            seed = committee_seed(
                cfg.bound_session_id, self._tree.root, [(i[0], i[3]) for i in items]
            )
            self._closed = (seed, items)
        return self._closed
