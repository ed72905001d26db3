"""Public parameters of one secure-aggregation round."""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import itertools
import secrets
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final, TypeVar, cast

from privfed._checks import check_enum, check_int
from privfed.errors import ParameterError, ParameterTypeError
from privfed.secagg.protocol.committee import committee_seats, default_committee_size
from privfed.secagg.protocol.graph import GraphMode, build_neighbourhoods, harary_neighbours
from privfed.secagg.protocol.id_runs import IdRuns
from privfed.secagg.threshold import (
    check_active_threshold,
    check_corrupted,
    check_protocol_threshold,
)

if TYPE_CHECKING:  # pragma: no cover - imported where active mode checks a registry
    from privfed.secagg.protocol.identity import IdentityRegistry
    from privfed.secagg.protocol.identity_root import IdentityRoot

__all__ = [
    "CONFIG_DIGEST_VERSION",
    "MAX_CLIENT_ID",
    "MAX_COMPLETE_GRAPH_CLIENTS",
    "MAX_VECTOR_LENGTH",
    "SESSION_ID_LENGTHS",
    "SecAggConfig",
    "SecurityMode",
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
#: Version of the canonical configuration encoding hashed into :attr:`SecAggConfig.digest`.
CONFIG_DIGEST_VERSION: Final = 2
#: Most clients a complete-graph config may name: each client masks with all
#: others and the server holds ``n**2`` pairs (use the Harary graph beyond).
#: It also bounds what a few bytes of runs can make a node build.
MAX_COMPLETE_GRAPH_CLIENTS: Final = 2**16
_DIGEST_DOMAIN: Final = b"privfed/secagg/config-digest"
_BOUND_SESSION_DOMAIN: Final = b"privfed/secagg/bound-session/v1"


class SecurityMode(enum.Enum):
    """Which server the protocol is secure against (see SECURITY.md).

    Attributes:
        SEMI_HONEST: A server that follows the protocol (honest-but-curious);
            the default, with no signing work.
        ACTIVE: A malicious server that may lie, drop, reorder and substitute
            messages, colluding with up to ``corrupted`` clients: round keys
            are signed against an integrator-supplied
            :class:`~privfed.secagg.IdentityRegistry`, a ConsistencyCheck
            round makes all honest clients unmask one signed survivor set, and
            clients refuse a threshold with ``2t <= s + n_C`` (Bonawitz et
            al., arXiv:1611.04482, active-security theorem).
    """

    SEMI_HONEST = "semi-honest"
    ACTIVE = "active"


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
            two.  Stored sorted, as an :class:`~privfed.secagg.IdRuns` (runs
            of consecutive ids), which compares equal to the tuple of them.
            A ``range`` (e.g. ``range(1, n + 1)``) or an ``IdRuns`` is taken
            in ``O(runs)``, so a config of a million ids numbered ``1..n``
            costs bytes, not megabytes.  An id is also the client's Shamir
            evaluation point.
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
        graph: :class:`GraphMode` (or its value ``"complete"``/``"harary"``);
            the complete graph takes at most :data:`MAX_COMPLETE_GRAPH_CLIENTS`
            clients.
        degree: Neighbours per client in Harary mode, an int in
            ``[2, n - 1]``; if odd, the number of clients ``n`` must be even.
            Must be ``None`` in complete mode.
        session_id: Public session id, 16 to 64 bytes; fresh from the OS
            CSPRNG by default.  It is hashed into :attr:`digest` (and so binds
            every key derivation, ciphertext and message to this round); it no
            longer seeds the Harary permutation, which the server could grind
            through its choice of session id (the seed comes from the roster).
        round_index: Public round counter, an int in ``[0, 2**32 - 1]``.
        mode: :class:`SecurityMode` (or its value); semi-honest by default.
        corrupted: ``n_C``, the number of corrupted clients the deployment
            assumes may collude with the server: in the complete graph among
            all clients, in SecAgg+ within any one neighbourhood (the bound
            the SecAgg+ parameter finder works with).  An int in
            ``[0, s - 2]``.  In active mode the config is refused unless
            ``2 * threshold > s + corrupted`` (``s``: neighbourhood size);
            in semi-honest mode it is recorded (and hashed) only.
        noise_layers: ``L``, the number of noise-layer seeds each client
            Shamir-shares for distributed DP with dropout-excess removal
            (Dordis XNoise, arXiv:2209.12528); 0 (default) for none.  Complete
            graph only, and ``L <= n - threshold``.
        identities: The :class:`~privfed.secagg.IdentityRegistry` of client
            identity keys (the PKI); required in active mode and must enrol
            every client id, ``None`` in semi-honest mode.  A client's config
            may hold the registry's :class:`~privfed.secagg.IdentityRoot`
            instead (the same config digest): the client then checks every
            key it uses against the root, and needs nothing of size ``n``.  A
            server needs the registry.
        committee_size: Active SecAgg+ only (:attr:`committee`): ``kappa``,
            the roster leaves drawn from the roster root to reveal the values
            that seed the graph (:mod:`~privfed.secagg.protocol.committee`);
            an int in ``[1, n]``.  ``None`` (default) picks
            :func:`~privfed.secagg.protocol.committee.default_committee_size`.
            Stored resolved; ``0`` (or ``None``) outside active SecAgg+.
        committee_dropouts: Active SecAgg+ only: how many committee members
            may fail to reveal before the round aborts, an int in
            ``[0, committee_size - 1]`` (default 0: every member must
            reveal).  Each one allowed multiplies the seeds a malicious server
            may choose between (``sum_{j <= D} C(kappa, j)`` per root; see
            SECURITY.md).

    Everything that fixes the computation is hashed into :attr:`digest`, and
    the digest into :attr:`bound_session_id`, which every message, key
    derivation, associated data and signature carries: parties whose configs
    differ in anything cannot complete a round together.

    Raises:
        ParameterError: A value is outside its domain.
        ParameterTypeError: A value has the wrong type.
    """

    client_ids: Sequence[int]
    threshold: int
    vector_length: int
    ring_bits: int = 64
    graph: GraphMode = GraphMode.COMPLETE
    degree: int | None = None
    session_id: bytes = dataclasses.field(default_factory=new_session_id)
    round_index: int = 0
    mode: SecurityMode = SecurityMode.SEMI_HONEST
    corrupted: int = 0
    noise_layers: int = 0
    identities: IdentityRegistry | IdentityRoot | None = dataclasses.field(default=None, repr=False)
    committee_size: int | None = None
    committee_dropouts: int = 0
    _neighbours: dict[int, frozenset[int]] = dataclasses.field(
        init=False, repr=False, compare=False
    )
    _digest: bytes = dataclasses.field(init=False, repr=False, compare=False)
    _bound_session: bytes = dataclasses.field(init=False, repr=False, compare=False)
    _graph_cache: dict[bytes, Mapping[int, frozenset[int]]] = dataclasses.field(
        init=False, repr=False, compare=False
    )
    _id_set: list[frozenset[int]] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ordered = _client_ids(self.client_ids)
        n = len(ordered)
        graph = _graph_mode(self.graph)
        neighbourhood_size = _neighbourhood_size(graph, self.degree, n)
        check_protocol_threshold(self.threshold, neighbourhood_size)
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
        mode = _security_mode(self.mode)
        corrupted = check_corrupted(self.corrupted, neighbourhood_size)
        layers = check_int("noise_layers", self.noise_layers, minimum=0)
        if layers and graph is not GraphMode.COMPLETE:
            raise ParameterError(
                "noise_layers",
                "0 with a SecAgg+ graph (the reveal rule needs the global survivor count)",
                layers,
            )
        if layers > n - self.threshold:
            raise ParameterError(
                "noise_layers", f"an int in [0, n - t] = [0, {n - self.threshold}]", layers
            )
        if mode is SecurityMode.ACTIVE:
            _check_active(self.identities, ordered, corrupted)
            check_active_threshold(self.threshold, neighbourhood_size, corrupted)
        elif self.identities is not None:
            raise ParameterError("identities", "None in semi-honest mode", "a registry")
        committee = _committee(
            self.committee_size,
            self.committee_dropouts,
            active=mode is SecurityMode.ACTIVE and graph is GraphMode.HARARY,
            n=n,
            neighbourhood_size=neighbourhood_size,
            corrupted=corrupted,
        )
        object.__setattr__(self, "committee_size", committee)

        object.__setattr__(self, "client_ids", ordered)
        object.__setattr__(self, "graph", graph)
        object.__setattr__(self, "mode", mode)
        # The complete graph is fixed by the ids and built on first use (a client
        # needs its own neighbours only); a Harary graph is seeded after the
        # roster is known (see :meth:`neighbourhoods`).
        object.__setattr__(self, "_neighbours", {})
        object.__setattr__(self, "_graph_cache", {})
        object.__setattr__(self, "_id_set", [])
        digest = self._canonical_digest()
        object.__setattr__(self, "_digest", digest)
        object.__setattr__(
            self, "_bound_session", hashlib.sha256(_BOUND_SESSION_DOMAIN + digest).digest()
        )

    def _canonical_digest(self) -> bytes:
        u32 = 4
        ids = self.ids
        registry = self.identities
        parts = [
            _DIGEST_DOMAIN,
            bytes((CONFIG_DIGEST_VERSION, len(self.session_id))),
            self.session_id,
            self.round_index.to_bytes(u32, "big"),
            len(ids).to_bytes(u32, "big"),
            ids.to_bytes(),
            self.threshold.to_bytes(u32, "big"),
            self.vector_length.to_bytes(u32, "big"),
            bytes((self.ring_bits,)),
            bytes((0 if self.graph is GraphMode.COMPLETE else 1,)),
            (self.degree or 0).to_bytes(u32, "big"),
            bytes((0 if self.mode is SecurityMode.SEMI_HONEST else 1,)),
            self.corrupted.to_bytes(u32, "big"),
            self.noise_layers.to_bytes(u32, "big"),
            b"\x00" if registry is None else b"\x01" + registry.digest,
        ]
        if self.committee:
            # Appended in active SecAgg+ only, so every other config keeps its digest.
            parts += [
                (self.committee_size or 0).to_bytes(u32, "big"),
                self.committee_dropouts.to_bytes(u32, "big"),
            ]
        return hashlib.sha256(b"".join(parts)).digest()

    @property
    def digest(self) -> bytes:
        """SHA-256 of the canonical encoding of everything that fixes the computation.

        Covers (version-tagged, fixed-width or length-prefixed): the session
        id, round, the client ids (their number, then their canonical runs as
        :meth:`IdRuns.to_bytes <privfed.secagg.IdRuns.to_bytes>` writes them,
        so hashing costs ``O(runs)``, not ``O(n)``), threshold, vector length, ring width,
        graph kind and degree, security mode, ``corrupted``, ``noise_layers``
        and, in active mode, the identity registry's digest.
        """
        return self._digest

    @property
    def bound_session_id(self) -> bytes:
        """The 32-byte session id every message, HKDF context, AEAD and signature carries.

        ``SHA-256(domain || digest)``: a party holding a different config sees
        another session and refuses the messages, keys and ciphertexts of its
        peers.
        """
        return self._bound_session

    @property
    def active(self) -> bool:
        """Whether the round runs in :attr:`SecurityMode.ACTIVE`."""
        return self.mode is SecurityMode.ACTIVE

    def for_clients(self) -> SecAggConfig:
        """This config with its identity registry replaced by the registry's root.

        What an active client needs (:class:`~privfed.secagg.IdentityRoot`):
        the same digest and session, nothing of size ``n``.  Returns ``self``
        when there is no full registry to replace.
        """
        from privfed.secagg.protocol.identity import IdentityRegistry

        registry = self.identities
        if not isinstance(registry, IdentityRegistry):
            return self
        return dataclasses.replace(self, identities=registry.commitment)

    @property
    def committee(self) -> bool:
        """Whether a committee reveals the graph seed (active mode with a SecAgg+ graph).

        Then the Harary graph's seed comes from values the clients committed
        to before the roster was fixed, not from the roster root alone, so
        the server cannot choose the graph by choosing the roster (see
        :mod:`~privfed.secagg.protocol.committee`).
        """
        return self.mode is SecurityMode.ACTIVE and self.graph is GraphMode.HARARY

    def neighbourhoods(self, graph_seed: bytes | None = None) -> Mapping[int, frozenset[int]]:
        """Neighbours of every client.

        Args:
            graph_seed: Required for the Harary graph: the seed derived from
                the roster (:func:`~privfed.secagg.protocol.graph.graph_seed`),
                which no single party chooses.  Ignored for the complete graph.

        Raises:
            ParameterError: A Harary config without a 32-byte seed.
        """
        if self.graph is GraphMode.COMPLETE:
            if not self._neighbours:
                self._neighbours.update(
                    build_neighbourhoods(
                        self.client_ids,
                        mode=GraphMode.COMPLETE,
                        degree=None,
                        session_id=self.session_id,
                        round_index=0,
                    )
                )
            return self._neighbours
        if not isinstance(graph_seed, bytes) or len(graph_seed) != 32:
            raise ParameterError(
                "graph_seed", "the 32-byte seed derived from the roster (Harary graph)", graph_seed
            )
        cached = self._graph_cache.get(graph_seed)
        if cached is None:
            cached = build_neighbourhoods(
                self.client_ids,
                mode=self.graph,
                degree=self.degree,
                session_id=graph_seed,
                round_index=self.round_index,
            )
            self._graph_cache.clear()
            self._graph_cache[graph_seed] = cached
        return cached

    def committee_seats(self, count: int) -> int:
        """Active SecAgg+: the committee seats the root of a ``count``-leaf roster draws.

        :attr:`committee_size` for a full roster, more for a roster the
        server left clients out of (see
        :func:`~privfed.secagg.protocol.committee.committee_seats`); 0
        without a committee.
        """
        return committee_seats(
            self.committee_size or 0,
            self.num_clients,
            self.neighbourhood_size,
            self.corrupted,
            count,
        )

    @property
    def ids(self) -> IdRuns:
        """:attr:`client_ids`, typed as what the config holds: an :class:`IdRuns`.

        Membership, the position of an id and the ``i``-th id cost
        ``O(log runs)``; a round numbered ``1..n`` is one run.
        """
        return cast(IdRuns, self.client_ids)  # what __post_init__ stores

    @property
    def client_id_set(self) -> frozenset[int]:
        """:attr:`client_ids` as a frozenset, built on first use (``in client_ids`` is as fast)."""
        if not self._id_set:
            self._id_set.append(frozenset(self.client_ids))
        return self._id_set[0]

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

    def neighbours(self, client_id: int, graph_seed: bytes | None = None) -> frozenset[int]:
        """The neighbours of ``client_id`` (never the client itself).

        Args:
            client_id: One of :attr:`client_ids`.
            graph_seed: The roster-derived seed (Harary graph only; see
                :meth:`neighbourhoods`).

        Raises:
            ParameterError: ``client_id`` is not in :attr:`client_ids`, or a
                Harary config without a seed.
        """
        if (
            self.graph is GraphMode.HARARY
            and isinstance(graph_seed, bytes)
            and graph_seed not in self._graph_cache
            and len(graph_seed) == 32
        ):
            # One client's neighbourhood: O(degree) hashes, no pass over all ids.
            try:
                return harary_neighbours(
                    self.client_ids,
                    client_id,
                    degree=self.degree or 0,
                    session_id=graph_seed,
                    round_index=self.round_index,
                )
            except (KeyError, TypeError):
                raise ParameterError(
                    "client_id", "one of the config's client ids", client_id
                ) from None
        if self.graph is GraphMode.COMPLETE and not self._neighbours:
            # One client's neighbours without the n**2 map: everyone else.
            if client_id in self.client_ids:
                return frozenset(self.client_ids) - {client_id}
            raise ParameterError("client_id", "one of the config's client ids", client_id)
        hood = self.neighbourhoods(graph_seed)
        try:
            return hood[client_id]
        except (KeyError, TypeError):
            raise ParameterError("client_id", "one of the config's client ids", client_id) from None

    def neighbourhood(self, client_id: int, graph_seed: bytes | None = None) -> frozenset[int]:
        """The neighbours of ``client_id`` plus the client itself."""
        return self.neighbours(client_id, graph_seed) | {client_id}


def _client_ids(ids: object) -> IdRuns:
    """The config's ids as runs (an ``IdRuns`` or a step-1 ``range`` checked in ``O(runs)``)."""
    if isinstance(ids, IdRuns) or (isinstance(ids, range) and ids.step == 1):
        if ids and (ids[0] < 1 or ids[-1] > MAX_CLIENT_ID):
            # Name the first out-of-domain id a pass in order would meet.
            first_bad = ids[0] if ids[0] < 1 else max(ids[0], MAX_CLIENT_ID + 1)
            check_int("client_ids", first_bad, minimum=1, maximum=MAX_CLIENT_ID)
        runs = ids if isinstance(ids, IdRuns) else IdRuns.from_range(ids)
        if len(runs) < 2:
            raise ParameterError("client_ids", "at least two ids", len(runs))
        return runs
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
        raise ParameterTypeError("client_ids", "a sequence of ints", ids)
    checked = [check_int("client_ids", i, minimum=1, maximum=MAX_CLIENT_ID) for i in ids]
    if len(checked) < 2:
        raise ParameterError("client_ids", "at least two ids", len(checked))
    if len(set(checked)) != len(checked):
        raise ParameterError("client_ids", "distinct ids", "duplicates")
    return IdRuns.from_sorted(sorted(checked))


def _graph_mode(graph: object) -> GraphMode:
    return _member("graph", graph, GraphMode, "'complete' or 'harary'")


_E = TypeVar("_E", bound=enum.Enum)


def _member(name: str, value: object, enum_type: type[_E], domain: str) -> _E:
    """A member of ``enum_type``, or the one whose value is the string ``value``."""
    if isinstance(value, str):
        value = check_enum(name, value, enum_type, domain=domain)
    if not isinstance(value, enum_type):
        raise ParameterTypeError(name, f"a {enum_type.__name__}", value)
    return value


def _neighbourhood_size(graph: GraphMode, degree: object, n: int) -> int:
    """Clients per neighbourhood (``s``), the degree checked against ``n`` clients."""
    if graph is GraphMode.COMPLETE:
        if degree is not None:
            raise ParameterError("degree", "None for the complete graph", degree)
        if n > MAX_COMPLETE_GRAPH_CLIENTS:
            raise ParameterError(
                "client_ids",
                f"at most {MAX_COMPLETE_GRAPH_CLIENTS:,} ids with the complete graph "
                "(graph='harary' beyond)",
                f"{n:,} ids",
            )
        return n
    if degree is None:
        raise ParameterError("degree", "an int for the Harary graph", None)
    checked = check_int("degree", degree, minimum=2, maximum=n - 1)
    if checked % 2 == 1 and n % 2 == 1:
        raise ParameterError("degree", "even when the number of clients is odd", checked)
    return checked + 1


def _security_mode(mode: object) -> SecurityMode:
    return _member("mode", mode, SecurityMode, "'semi-honest' or 'active'")


def _committee(
    size: object,
    dropouts: object,
    *,
    active: bool,
    n: int,
    neighbourhood_size: int,
    corrupted: int,
) -> int:
    """The resolved committee size (0 without a committee); ``dropouts`` checked against it."""
    if not active:
        if size not in (None, 0) or isinstance(size, bool):
            raise ParameterError("committee_size", "None outside active SecAgg+", size)
        check_int("committee_dropouts", dropouts, minimum=0, maximum=0)
        return 0
    resolved = (
        default_committee_size(n, neighbourhood_size, corrupted)
        if size is None
        else check_int("committee_size", size, minimum=1, maximum=n)
    )
    check_int("committee_dropouts", dropouts, minimum=0, maximum=resolved - 1)
    return resolved


def _check_active(registry: object, client_ids: Sequence[int], corrupted: int) -> None:
    """Refuse an active config whose registry is missing, incomplete or assumes more n_C."""
    # Only active mode needs the registry type (and the Ed25519 code behind it).
    from privfed.secagg.protocol.identity import IdentityRegistry
    from privfed.secagg.protocol.identity_root import IdentityRoot

    if isinstance(registry, IdentityRoot):
        # A client's view: it checks each key it uses against the root, and a root
        # of fewer leaves than the config has ids cannot enrol every one of them.
        if len(client_ids) > registry.count:
            raise ParameterError(
                "identities",
                "a registry enrolling every client id",
                f"a root of {registry.count} keys for {len(client_ids)} ids",
            )
    elif isinstance(registry, IdentityRegistry):
        enrolled = registry.public_keys
        # The first five ids (in order) the registry lacks: at most len(registry) + 5
        # steps, however many ids the config names.
        missing = list(itertools.islice((c for c in client_ids if c not in enrolled), 5))
        if missing:
            raise ParameterError(
                "identities", "a registry enrolling every client id", f"missing {missing}"
            )
    else:
        raise ParameterTypeError(
            "identities",
            "an IdentityRegistry or its IdentityRoot (required in active mode)",
            registry,
        )
    if corrupted < registry.assumed_corrupted:
        raise ParameterError(
            "corrupted",
            f"at least the registry's assumed_corrupted ({registry.assumed_corrupted})",
            corrupted,
        )
