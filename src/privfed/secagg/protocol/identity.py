"""Long-term client identities for the active security mode: Ed25519 keys and their registry.

In the active mode (:attr:`~privfed.secagg.SecurityMode.ACTIVE`) every client
holds a long-term Ed25519 signing key (RFC 8032, from ``cryptography``).  The
*integrator* -- whoever enrols the clients of a federation, not the
aggregation server -- publishes the registry of their public keys: this is the
PKI of Bonawitz et al. (arXiv:1611.04482, §4, active protocol).  Clients sign

* their advertised round keys, over (bound session, config digest, client id,
  both X25519 public keys), so a server cannot substitute a key and read the
  shares sent to it;
* the survivor set of the ConsistencyCheck round, over (bound session, config
  digest, survivor set), so a server cannot show two honest clients two
  different views.

Every signed payload starts with its own domain string, so a signature of one
kind can never be replayed as another.

Registry file (JSON, UTF-8)::

    {
      "format": "privfed-secagg-identities",
      "version": 1,
      "algorithm": "ed25519",
      "encoding": "hex",            # or "base64" (standard alphabet, padded)
      "assumed_corrupted": 0,       # n_C, the integrator's bound (see below)
      "clients": [{"id": 1, "public_key": "<32 bytes, encoded>"}, ...]
    }

``assumed_corrupted`` is the integrator's policy, not the server's: the number
of corrupted clients the federation must withstand (in SecAgg+, within any one
neighbourhood).  An active-mode :class:`~privfed.secagg.SecAggConfig` must
assume at least that many, so a server cannot hand a client a configuration
with a weaker threshold rule than the integrator fixed.

Ids are the clients' secure-aggregation ids; a transport (e.g. Flower node
ids) maps its own identities onto them.  Unknown keys, duplicate ids or keys,
and malformed encodings are refused.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import itertools
import json
import os
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from privfed._atomic import atomic_write_text
from privfed._checks import check_int
from privfed.errors import ParameterError, ParameterTypeError
from privfed.secagg.protocol.identity_root import (
    IdentityEnrolment,
    IdentityRoot,
    identity_document,
    identity_tree,
)
from privfed.secagg.protocol.roster_tree import RosterTree

__all__ = [
    "IDENTITY_PUBLIC_KEY_SIZE",
    "REGISTRY_FORMAT",
    "REGISTRY_VERSION",
    "SIGNATURE_SIZE",
    "IdentityKey",
    "IdentityRegistry",
    "advertisement_payload",
    "survivor_set_payload",
    "verify_signature",
]

#: Size of an Ed25519 public key.
IDENTITY_PUBLIC_KEY_SIZE: Final = 32
#: Size of an Ed25519 signature.
SIGNATURE_SIZE: Final = 64
#: The ``format`` field of a registry file.
REGISTRY_FORMAT: Final = "privfed-secagg-identities"
#: The registry file version written and accepted.
REGISTRY_VERSION: Final = 1

_MAX_ID: Final = 2**32 - 1
_ADVERTISEMENT_DOMAIN: Final = b"privfed/secagg/signed-advertisement/v1"
_SURVIVORS_DOMAIN: Final = b"privfed/secagg/signed-survivor-set/v1"
_PARSED_KEPT: Final = 8  # registries from_json keeps parsed, by SHA-256 of their text


class IdentityKey:
    """A client's long-term Ed25519 signing key (secret; never shown in ``repr``).

    Args:
        private_key: The 32-byte Ed25519 private key (seed).

    Raises:
        ParameterTypeError: ``private_key`` is not bytes.
        ParameterError: ``private_key`` is not 32 bytes long.
    """

    __slots__ = ("_key", "_private", "_public")

    def __init__(self, private_key: bytes) -> None:
        if not isinstance(private_key, bytes):
            raise ParameterTypeError("private_key", "bytes", private_key)
        if len(private_key) != 32:
            raise ParameterError("private_key", "bytes of length 32", None, secret=True)
        self._private = private_key
        self._key = Ed25519PrivateKey.from_private_bytes(private_key)
        self._public = self._key.public_key().public_bytes_raw()

    @classmethod
    def generate(cls) -> IdentityKey:
        """A fresh key from the OS CSPRNG."""
        return cls(Ed25519PrivateKey.generate().private_bytes_raw())

    @property
    def public_key(self) -> bytes:
        """The 32-byte Ed25519 public key (goes into the registry)."""
        return self._public

    def private_bytes(self) -> bytes:
        """The 32-byte private key, for storing it (as confidentially as the key itself)."""
        return self._private

    def sign(self, payload: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``payload`` (deterministic, RFC 8032)."""
        if not isinstance(payload, bytes):
            raise ParameterTypeError("payload", "bytes", payload)
        return self._key.sign(payload)

    def __repr__(self) -> str:
        return f"IdentityKey(public_key={self._public.hex()[:16]}...)"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IdentityKey):
            return NotImplemented
        return self._public == other._public

    def __hash__(self) -> int:
        return hash(self._public)


def _decode_key(text: object, encoding: str, client_id: int) -> bytes:
    if not isinstance(text, str):
        raise ParameterTypeError(f"public_key of client {client_id}", "a string", text)
    try:
        raw = (
            bytes.fromhex(text)
            if encoding == "hex"
            else base64.b64decode(text.encode("ascii"), validate=True)
        )
    except (ValueError, binascii.Error, UnicodeEncodeError):
        raise ParameterError(
            f"public_key of client {client_id}", f"a {encoding}-encoded Ed25519 key", text
        ) from None
    return raw


@dataclasses.dataclass(frozen=True)
class IdentityRegistry:
    """The integrator's registry of client identity public keys (public data).

    Args:
        public_keys: ``{client_id: 32-byte Ed25519 public key}``; ids in
            ``[1, 2**32 - 1]``, keys distinct.
        assumed_corrupted: The integrator's ``n_C``: every active-mode config
            over this registry must set ``corrupted`` at least this high (so
            the clients refuse ``2t <= s + n_C``); an int >= 0.

    Raises:
        ParameterTypeError: Not a mapping of ints to bytes.
        ParameterError: An id out of range, a key of the wrong size or not a
            valid Ed25519 point, or two clients with one key.
    """

    public_keys: Mapping[int, bytes]
    assumed_corrupted: int = 0
    _verifiers: Mapping[int, Ed25519PublicKey] = dataclasses.field(
        init=False, repr=False, compare=False
    )
    _lazy: dict[str, Any] = dataclasses.field(init=False, repr=False, compare=False)
    _texts: dict[str, str] = dataclasses.field(init=False, repr=False, compare=False)
    _owners: Mapping[bytes, int] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        keys = self.public_keys
        if not isinstance(keys, Mapping):
            raise ParameterTypeError("public_keys", "a mapping from client id to bytes", keys)
        checked: dict[int, bytes] = {}
        verifiers: dict[int, Ed25519PublicKey] = {}
        if not keys:
            raise ParameterError("public_keys", "at least one enrolled client", "none")
        for cid in keys:  # every id checked before sorting (mixed types do not sort)
            check_int("public_keys", cid, minimum=1, maximum=_MAX_ID)
        for cid, key in sorted(keys.items()):
            if not isinstance(key, bytes):
                raise ParameterTypeError(f"public_keys[{cid}]", "bytes", key)
            if len(key) != IDENTITY_PUBLIC_KEY_SIZE:
                raise ParameterError(
                    f"public_keys[{cid}]", "a 32-byte Ed25519 public key", f"{len(key)} bytes"
                )
            try:
                verifiers[cid] = Ed25519PublicKey.from_public_bytes(key)
            except ValueError:
                raise ParameterError(
                    f"public_keys[{cid}]", "a valid Ed25519 public key", key.hex()
                ) from None
            checked[cid] = key
        owners = {key: cid for cid, key in checked.items()}
        if len(owners) != len(checked):
            raise ParameterError("public_keys", "one distinct key per client", "a repeated key")
        check_int("assumed_corrupted", self.assumed_corrupted, minimum=0, maximum=_MAX_ID)
        object.__setattr__(self, "public_keys", dict(checked))
        object.__setattr__(self, "_verifiers", verifiers)
        object.__setattr__(self, "_owners", owners)
        # The Merkle tree, its root and the digest, built on first use (O(n) hashes).
        object.__setattr__(self, "_lazy", {})
        object.__setattr__(self, "_texts", {})  # to_json's text per encoding (immutable registry)

    def __hash__(self) -> int:
        return hash(self.digest)

    @property
    def tree(self) -> RosterTree:
        """The Merkle tree over the enrolled keys (see
        :mod:`~privfed.secagg.protocol.identity_root`)."""
        tree = self._lazy.get("tree")
        if tree is None:
            tree = self._lazy["tree"] = identity_tree(self.public_keys)
            self._lazy["ids"] = np.fromiter(self.public_keys, dtype=np.int64)
        return tree

    @property
    def commitment(self) -> IdentityRoot:
        """The registry's :class:`~privfed.secagg.IdentityRoot` (what a client may pin instead)."""
        root = self._lazy.get("root")
        if root is None:
            root = self._lazy["root"] = IdentityRoot(
                self.tree.root, len(self.public_keys), self.assumed_corrupted
            )
        return root

    def enrolment(self, client_id: int) -> IdentityEnrolment:
        """The :class:`~privfed.secagg.IdentityEnrolment` of ``client_id`` (for its node).

        Raises:
            ParameterError: ``client_id`` is not enrolled.
        """
        key = self.public_key(client_id)
        position = int(np.searchsorted(self._ids(), client_id))
        return IdentityEnrolment(
            self.commitment, client_id, key, position, self.tree.prove([position])
        )

    def _ids(self) -> npt.NDArray[np.int64]:
        self.tree  # noqa: B018 -- builds the id array with the tree
        ids: npt.NDArray[np.int64] = self._lazy["ids"]
        return ids

    def key_proofs(
        self, sets: Sequence[Iterable[int]]
    ) -> list[tuple[tuple[tuple[int, int, bytes], ...], tuple[bytes, ...]]]:
        """``(items, hashes)`` of an identity multiproof for each of ``sets`` of enrolled ids.

        ``items`` are ``(leaf index, client_id, public key)``, increasing;
        ``hashes`` the multiproof of their leaves, in walk order (what
        :func:`~privfed.secagg.protocol.identity_root.proven_keys` checks).
        All sets are walked together with array operations.

        Raises:
            ParameterError: An id that is not enrolled.
        """
        ids, tree = self._ids(), self.tree
        lists = [sorted(set(s)) for s in sets]
        flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64)
        at = np.searchsorted(ids, flat)
        inside = at < ids.size
        if not (inside.all() and (ids[at[inside]] == flat).all()):
            missing = sorted(set(flat.tolist()) - set(self.public_keys))[:5]
            raise ParameterError("sets", "enrolled client ids", f"not enrolled: {missing}")
        rows = np.repeat(np.arange(len(lists), dtype=np.int64), [len(v) for v in lists])
        hashes = tree.prove_many((rows << 32) | at, len(lists))
        key_of = self.public_keys.__getitem__
        positions = at.tolist()
        out = []
        start = 0
        for members, proof in zip(lists, hashes, strict=True):
            end = start + len(members)
            # (position, id, key) triples, zipped in C.
            row = zip(positions[start:end], members, map(key_of, members), strict=True)
            items = tuple(row)
            out.append((items, proof))
            start = end
        return out

    @property
    def client_ids(self) -> tuple[int, ...]:
        """The enrolled ids, increasing."""
        return tuple(self.public_keys)

    @property
    def digest(self) -> bytes:
        """The digest of the registry's :attr:`commitment` (the same for the registry and its
        root); in the config digest."""
        return self.commitment.digest

    def public_key(self, client_id: int) -> bytes:
        """The public key of ``client_id``.

        Raises:
            ParameterError: ``client_id`` is not enrolled.
        """
        try:
            return self.public_keys[client_id]
        except (KeyError, TypeError):
            raise ParameterError("client_id", "an enrolled client id", client_id) from None

    def client_id_of(self, public_key: bytes) -> int | None:
        """The id enrolled with ``public_key`` (32 raw bytes), or ``None``: O(1), any N."""
        return self._owners.get(public_key) if isinstance(public_key, bytes) else None

    def verify(self, client_id: int, payload: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is ``client_id``'s valid Ed25519 signature of ``payload``.

        Never raises for a bad signature or an unknown id (returns ``False``),
        so callers decide how to fail.
        """
        return _verified(self._verifiers.get(client_id), payload, signature)

    # -- file format -------------------------------------------------------------

    def to_json(self, *, encoding: str = "hex") -> str:
        """The registry file's text (see the module docstring).

        Args:
            encoding: ``"hex"`` or ``"base64"``.
        """
        if encoding not in ("hex", "base64"):
            raise ParameterError("encoding", "'hex' or 'base64'", encoding)
        cached = self._texts.get(encoding)
        if cached is not None:
            return cached

        def enc(key: bytes) -> str:
            return key.hex() if encoding == "hex" else base64.b64encode(key).decode("ascii")

        document = {
            "format": REGISTRY_FORMAT,
            "version": REGISTRY_VERSION,
            "algorithm": "ed25519",
            "encoding": encoding,
            "assumed_corrupted": self.assumed_corrupted,
            "clients": [{"id": cid, "public_key": enc(k)} for cid, k in self.public_keys.items()],
        }
        text = json.dumps(document, indent=2) + "\n"
        self._texts[encoding] = text
        return text

    @classmethod
    def from_json(cls, text: str) -> IdentityRegistry:
        """Parse a registry file's text, strictly.

        Raises:
            ParameterTypeError: ``text`` is not a string, or a field has the
                wrong JSON type.
            ParameterError: Not a version-1 ed25519 registry, an unknown or
                missing field, a duplicate id, or a malformed key.
        """
        if not isinstance(text, str):
            raise ParameterTypeError("text", "a JSON string", text)
        # A node reads its registry (its policy file, its stored round state) at every
        # message; a registry is immutable, so the same text gives the same object.
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        if cls is IdentityRegistry and key in _PARSED:
            _PARSED.move_to_end(key)
            return _PARSED[key]
        registry = cls._parse(text)
        if cls is IdentityRegistry:
            _PARSED[key] = registry
            while len(_PARSED) > _PARSED_KEPT:
                _PARSED.popitem(last=False)
        return registry

    @classmethod
    def _parse(cls, text: str) -> IdentityRegistry:
        fields = {"encoding", "assumed_corrupted", "clients"}
        document = identity_document(text, REGISTRY_FORMAT, REGISTRY_VERSION, fields)
        encoding = document["encoding"]
        if encoding not in ("hex", "base64"):
            raise ParameterError("encoding", "'hex' or 'base64'", encoding)
        clients = document["clients"]
        if not isinstance(clients, list):
            raise ParameterTypeError("clients", "a JSON list", clients)
        keys: dict[int, bytes] = {}
        for item in clients:
            if not isinstance(item, dict) or set(item) != {"id", "public_key"}:
                raise ParameterError("clients", "objects with exactly 'id' and 'public_key'", item)
            cid = check_int("id", item["id"], minimum=1, maximum=_MAX_ID)
            if cid in keys:
                raise ParameterError("clients", "distinct ids", f"id {cid} twice")
            keys[cid] = _decode_key(item["public_key"], encoding, cid)
        corrupted = check_int("assumed_corrupted", document["assumed_corrupted"], minimum=0)
        return cls(keys, corrupted)

    def save(self, path: str | os.PathLike[str], *, encoding: str = "hex") -> None:
        """Write the registry file to ``path``."""
        atomic_write_text(path, self.to_json(encoding=encoding))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> IdentityRegistry:
        """Read a registry file (see :meth:`from_json` for the errors)."""
        return cls.from_json(Path(path).read_text(encoding="utf-8"))

    @classmethod
    def of(
        cls, identities: Mapping[int, IdentityKey], *, assumed_corrupted: int = 0
    ) -> IdentityRegistry:
        """The registry of the public halves of ``{client_id: IdentityKey}`` (for simulations)."""
        return cls({cid: key.public_key for cid, key in identities.items()}, assumed_corrupted)


_PARSED: OrderedDict[bytes, IdentityRegistry] = OrderedDict()


def _verified(verifier: Ed25519PublicKey | None, payload: bytes, signature: object) -> bool:
    if verifier is None or not isinstance(signature, bytes) or len(signature) != SIGNATURE_SIZE:
        return False
    try:
        verifier.verify(signature, payload)
    except InvalidSignature:
        return False
    return True


def verify_signature(public_key: bytes, payload: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is a valid Ed25519 signature of ``payload`` under ``public_key``
    (32 raw bytes, e.g. one proven against an :class:`IdentityRoot`); never raises."""
    try:
        verifier = Ed25519PublicKey.from_public_bytes(public_key)
    except (ValueError, TypeError):
        return False
    return _verified(verifier, payload, signature)


def advertisement_payload(
    *,
    session: bytes,
    config_digest: bytes,
    client_id: int,
    encryption_public_key: bytes,
    mask_public_key: bytes,
) -> bytes:
    """The bytes a client signs over its advertised round keys (fixed-width fields)."""
    return b"".join(
        [
            _ADVERTISEMENT_DOMAIN,
            len(session).to_bytes(1, "big"),
            session,
            config_digest,
            client_id.to_bytes(4, "big"),
            encryption_public_key,
            mask_public_key,
        ]
    )


def survivor_set_payload(
    *, session: bytes, config_digest: bytes, survivors: Sequence[int]
) -> bytes:
    """The bytes a client signs in the ConsistencyCheck round: the survivor set, ids increasing."""
    ids = sorted(survivors)
    return b"".join(
        [
            _SURVIVORS_DOMAIN,
            len(session).to_bytes(1, "big"),
            session,
            config_digest,
            len(ids).to_bytes(4, "big"),
            *(i.to_bytes(4, "big") for i in ids),
        ]
    )
