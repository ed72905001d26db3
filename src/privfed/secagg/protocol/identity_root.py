"""The identity registry by commitment: a Merkle root a client pins instead of every key.

An active-mode client needs the identity keys of the clients whose
signatures it checks -- its neighbours and the committee in SecAgg+ -- not the
keys of the whole federation.  The integrator commits to its registry with a
Merkle root (:class:`IdentityRoot`, a few dozen bytes whatever the number of
clients) and gives each client that root, or the client's own
:class:`IdentityEnrolment` (the root, the client's id and key, and the proof
that the root holds them).  The server, which holds the full registry, sends
each client the keys it needs with one multiproof of the root
(:class:`~privfed.secagg.protocol.messages.IdentityProof`, ``O(k log n)``
bytes), so what a client stores, downloads and checks stays small for a
federation of millions.

Tree: the :class:`~privfed.secagg.protocol.roster_tree.RosterTree` shape
(leaves sorted by id, ``SHA-256`` nodes, the last node of an odd level
carried up), over the leaves ``(client_id, SHA-256(KEY || public key))``, and
with its own root label in place of a session, so a roster root and an
identity root never coincide.  The registry's digest -- what an active config
binds -- is ``SHA-256(DIGEST || assumed_corrupted u32 || count u32 || root)``:
a registry and its root have the same digest.

Trust: the root is the integrator's, received out of band like the registry
file it stands for.  A server cannot add a leaf to it, so every key a valid
proof carries is the enrolled key of its id.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import itertools
import json
import os
from collections.abc import Mapping, Sequence, Set
from pathlib import Path
from typing import Any, Final

from privfed._atomic import atomic_write_text
from privfed._checks import check_int
from privfed.errors import ParameterError, ParameterTypeError
from privfed.secagg.protocol.roster_tree import ProofError, RosterTree, root_of_proof

__all__ = [
    "ENROLMENT_FORMAT",
    "ROOT_FORMAT",
    "IdentityEnrolment",
    "IdentityRoot",
    "identity_document",
    "identity_tree",
    "key_digest",
    "proven_keys",
    "registry_digest",
]

#: The ``format`` field of a root file.
ROOT_FORMAT: Final = "privfed-secagg-identity-root"
#: The ``format`` field of an enrolment file.
ENROLMENT_FORMAT: Final = "privfed-secagg-enrolment"
_FILE_VERSION: Final = 1
_MAX_ID: Final = 2**32 - 1
_HASH_SIZE: Final = 32
_TREE_LABEL: Final = b"privfed/secagg/identity-tree/v1"
_KEY_DOMAIN: Final = b"privfed/secagg/identity-key/v1"
_DIGEST_DOMAIN: Final = b"privfed/secagg/identity-registry/v2"
_ROOT_FIELDS: Final = frozenset({"assumed_corrupted", "count", "root"})


def key_digest(public_key: bytes) -> bytes:
    """What a leaf of the identity tree carries for a key: ``SHA-256(KEY || public key)``."""
    return hashlib.sha256(_KEY_DOMAIN + public_key).digest()


def identity_tree(public_keys: Mapping[int, bytes]) -> RosterTree:
    """The Merkle tree over ``{client_id: public key}`` (ids increasing, at least one)."""
    return RosterTree(_TREE_LABEL, [(cid, key_digest(key)) for cid, key in public_keys.items()])


def registry_digest(assumed_corrupted: int, count: int, root: bytes) -> bytes:
    """The digest of a registry of ``count`` keys with this root (what a config binds)."""
    return hashlib.sha256(
        _DIGEST_DOMAIN + assumed_corrupted.to_bytes(4, "big") + count.to_bytes(4, "big") + root
    ).digest()


def proven_keys(
    root: IdentityRoot,
    count: int,
    items: Sequence[tuple[int, int, bytes]],
    hashes: Sequence[bytes],
) -> dict[int, bytes]:
    """``{client_id: public key}`` of ``items`` once they and ``hashes`` rebuild ``root``.

    Args:
        root: The pinned root.
        count: The leaf count the proof claims.
        items: ``(leaf index, client_id, public key)``, indices strictly increasing.
        hashes: The multiproof's sibling hashes, in walk order.

    Raises:
        ProofError: Another leaf count, no item, indices or ids not strictly
            increasing, or a proof that does not rebuild the root.
    """
    if count != root.count:
        raise ProofError("the proof is of a registry of another size")
    if not items:
        raise ProofError("the proof carries no key")
    if any(b[0] <= a[0] or b[1] <= a[1] for a, b in itertools.pairwise(items)):
        raise ProofError("the proof's leaves are not in increasing order")
    leaves = {index: (cid, key_digest(key)) for index, cid, key in items}
    if not hmac.compare_digest(root_of_proof(_TREE_LABEL, count, leaves, hashes), root.root):
        raise ProofError("the keys are not the ones the identity root commits to")
    return {cid: key for _, cid, key in items}


def identity_document(text: object, fmt: str, version: int, fields: Set[str]) -> dict[str, Any]:
    """The JSON object of an identity file (registry, root, enrolment), its header checked:
    exactly ``format``, ``version``, ``algorithm`` and ``fields``, of this format and version."""
    if not isinstance(text, str):
        raise ParameterTypeError("text", "a JSON string", text)
    try:
        document: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParameterError("text", "a JSON document", f"invalid JSON ({exc.msg})") from None
    except (ValueError, RecursionError):  # a number past Python's digit limit, or too deep
        raise ParameterError("text", "a JSON document", "JSON Python cannot read") from None
    if not isinstance(document, dict):
        raise ParameterTypeError("text", "a JSON object", document)
    expected = {"format", "version", "algorithm", *fields}
    if set(document) != expected:
        raise ParameterError("text", f"exactly the fields {sorted(expected)}", sorted(document))
    if document["format"] != fmt:
        raise ParameterError("format", repr(fmt), document["format"])
    if document["version"] != version or isinstance(document["version"], bool):
        raise ParameterError("version", str(version), document["version"])
    if document["algorithm"] != "ed25519":
        raise ParameterError("algorithm", "'ed25519'", document["algorithm"])
    return document


def _hex(name: str, value: object, size: int) -> bytes:
    """``size`` bytes from a hex string, or a :class:`ParameterError` naming ``name``."""
    try:
        raw = bytes.fromhex(value) if isinstance(value, str) else None
    except ValueError:
        raw = None
    if raw is None or len(raw) != size:
        raise ParameterError(name, f"{size} bytes, hex-encoded", value)
    return raw


@dataclasses.dataclass(frozen=True)
class IdentityRoot:
    """The integrator's commitment to its registry: what an active client may pin.

    Get one from :attr:`IdentityRegistry.commitment
    <privfed.secagg.IdentityRegistry.commitment>`; an active
    :class:`~privfed.secagg.SecAggConfig` may hold it in place of the registry
    (the config's digest is the same), and the client then checks every key
    it uses against the root (see the module docstring).  A server needs the
    full registry.

    Args:
        root: The 32-byte Merkle root.
        count: The number of enrolled clients, ``>= 1``.
        assumed_corrupted: The integrator's ``n_C`` (as
            :class:`~privfed.secagg.IdentityRegistry`), an int >= 0.

    Raises:
        ParameterTypeError: ``root`` is not bytes.
        ParameterError: ``root`` is not 32 bytes, or a count out of range.
    """

    root: bytes
    count: int
    assumed_corrupted: int = 0
    _digest: bytes = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.root, bytes):
            raise ParameterTypeError("root", "bytes", self.root)
        if len(self.root) != _HASH_SIZE:
            raise ParameterError("root", "a 32-byte Merkle root", f"{len(self.root)} bytes")
        check_int("count", self.count, minimum=1, maximum=_MAX_ID)
        check_int("assumed_corrupted", self.assumed_corrupted, minimum=0, maximum=_MAX_ID)
        digest = registry_digest(self.assumed_corrupted, self.count, self.root)
        object.__setattr__(self, "_digest", digest)

    def __repr__(self) -> str:
        return (
            f"IdentityRoot(root={self.root.hex()[:16]}..., count={self.count}, "
            f"assumed_corrupted={self.assumed_corrupted})"
        )

    @property
    def digest(self) -> bytes:
        """The registry's digest (see the module docstring); in the config digest."""
        return self._digest

    def _fields(self) -> dict[str, Any]:
        return {
            "format": ROOT_FORMAT,
            "version": _FILE_VERSION,
            "algorithm": "ed25519",
            "assumed_corrupted": self.assumed_corrupted,
            "count": self.count,
            "root": self.root.hex(),
        }

    def to_json(self) -> str:
        """The root file's text: ``format``, ``version``, ``algorithm``,
        ``assumed_corrupted``, ``count`` and the hex ``root``."""
        return json.dumps(self._fields(), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> IdentityRoot:
        """Parse a root file's text, strictly.

        Raises:
            ParameterTypeError: ``text`` is not a string or not a JSON object.
            ParameterError: Another format or version, a missing or unknown
                field, or a malformed value.
        """
        return cls._of(identity_document(text, ROOT_FORMAT, _FILE_VERSION, _ROOT_FIELDS))

    @classmethod
    def _of(cls, document: Mapping[str, Any]) -> IdentityRoot:
        return cls(
            _hex("root", document["root"], _HASH_SIZE),
            check_int("count", document["count"], minimum=1, maximum=_MAX_ID),
            check_int(
                "assumed_corrupted", document["assumed_corrupted"], minimum=0, maximum=_MAX_ID
            ),
        )

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the root file to ``path``."""
        atomic_write_text(path, self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> IdentityRoot:
        """Read a root file (see :meth:`from_json` for the errors)."""
        return cls.from_json(Path(path).read_text(encoding="utf-8"))


@dataclasses.dataclass(frozen=True)
class IdentityEnrolment:
    """One client's enrolment: the registry's root, its id and key, and their proof.

    What the integrator hands a node that should not hold the whole registry
    (:meth:`IdentityRegistry.enrolment
    <privfed.secagg.IdentityRegistry.enrolment>`): the node learns its id from
    it and knows that the root enrols its key.

    Args:
        root: The :class:`IdentityRoot`.
        client_id: The enrolled id.
        public_key: Its 32-byte Ed25519 public key.
        position: The leaf index of the id in the tree.
        proof: The sibling hashes from the leaf to the root, in walk order.

    Raises:
        ParameterTypeError: An argument of the wrong type.
        ParameterError: The proof does not tie ``(client_id, public_key)`` to
            the root.
    """

    root: IdentityRoot
    client_id: int
    public_key: bytes
    position: int
    proof: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.root, IdentityRoot):
            raise ParameterTypeError("root", "an IdentityRoot", self.root)
        check_int("client_id", self.client_id, minimum=1, maximum=_MAX_ID)
        if not isinstance(self.public_key, bytes) or len(self.public_key) != 32:
            raise ParameterError("public_key", "a 32-byte Ed25519 public key", self.public_key)
        check_int("position", self.position, minimum=0, maximum=self.root.count - 1)
        if not isinstance(self.proof, tuple) or not all(
            isinstance(h, bytes) and len(h) == _HASH_SIZE for h in self.proof
        ):
            raise ParameterTypeError("proof", "a tuple of 32-byte hashes", self.proof)
        try:
            proven_keys(
                self.root,
                self.root.count,
                [(self.position, self.client_id, self.public_key)],
                self.proof,
            )
        except ProofError:
            raise ParameterError(
                "proof", "a proof that the root enrols this id and key", "a proof that does not"
            ) from None

    @property
    def assumed_corrupted(self) -> int:
        """The registry's ``n_C``."""
        return self.root.assumed_corrupted

    @property
    def digest(self) -> bytes:
        """The registry's digest."""
        return self.root.digest

    def to_json(self) -> str:
        """The enrolment file's text: the root file's fields, then ``client_id``,
        ``public_key`` (hex), ``position`` and ``proof`` (hex hashes)."""
        document = self.root._fields()
        document.update(
            format=ENROLMENT_FORMAT,
            client_id=self.client_id,
            public_key=self.public_key.hex(),
            position=self.position,
            proof=[h.hex() for h in self.proof],
        )
        return json.dumps(document, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> IdentityEnrolment:
        """Parse an enrolment file's text, strictly, and check its proof.

        Raises:
            ParameterTypeError: ``text`` is not a string or not a JSON object.
            ParameterError: Another format or version, a missing or unknown
                field, a malformed value, or a proof that does not hold.
        """
        fields = {*_ROOT_FIELDS, "client_id", "public_key", "position", "proof"}
        document = identity_document(text, ENROLMENT_FORMAT, _FILE_VERSION, fields)
        proof = document["proof"]
        if not isinstance(proof, list):
            raise ParameterTypeError("proof", "a JSON list of hex hashes", proof)
        return cls(
            IdentityRoot._of(document),
            check_int("client_id", document["client_id"], minimum=1, maximum=_MAX_ID),
            _hex("public_key", document["public_key"], 32),
            check_int("position", document["position"], minimum=0, maximum=_MAX_ID),
            tuple(_hex("proof", h, _HASH_SIZE) for h in proof),
        )

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the enrolment file to ``path``."""
        atomic_write_text(path, self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> IdentityEnrolment:
        """Read an enrolment file (see :meth:`from_json` for the errors)."""
        return cls.from_json(Path(path).read_text(encoding="utf-8"))
