"""Export and restore a :class:`~privfed.secagg.SecAggClient` between messages, rollback-safe.

A transport that runs each protocol step in a fresh process (a Flower
SuperNode, a serverless function, a job queue) must keep the client's state
somewhere between two messages.  This module gives it an explicit, versioned
byte format for that state, and a *reveal journal* that makes restoring an
old state visible.

Format: ``b"PFCS"``, a one-byte :data:`STATE_VERSION`, then one tagged value
(the attributes of the client, by name).  Version 2 leaves out the client's
long-term identity key (active mode): the key is the node's, not the state's,
and is supplied again at every :func:`restore_client_state` (version 1 stored
it; this build refuses such a state).  A config alone (:func:`encode_config`,
what a server sends a new client) carries :data:`CONFIG_VERSION`.

The encoding is type-directed over a whitelist -- ``None``, ``bool``,
``int``, ``str``, ``bytes``, tuples, lists, frozensets, dicts, the protocol's
enums, 1-D numpy ``uint64`` arrays, X25519
:class:`~privfed.secagg.primitives.keys.KeyPair`, :class:`SecAggConfig` (its
identity registry included: public) and protocol
:class:`~privfed.secagg.protocol.messages.Message` objects, plus the types
registered in :data:`_EXTENSIONS`.  Decoding builds only those types; nothing
is unpickled, imported or called by name from the data.  A client attribute
of any other type makes :func:`export_client_state` raise, naming the attribute.

Rollback.  Every answer of a client reveals something, and one answer
(UNMASKING) reveals, per peer, one of two share kinds; a client that could be
wound back to a state before an answer could be asked again with a different
view and reveal the other kind -- both shares of a peer, i.e. its input.  So:

* the state carries a *step counter*: how many answers the client produced;
* before an answer leaves, :func:`record_answer` writes a
  :class:`JournalEntry` (session, round, client, the step counter after the
  answer, and for an unmasking answer which share kind it revealed for which
  peer) to a durable :class:`RevealJournal`;
* :func:`restore_client_state` refuses (:class:`~privfed.errors.ProtocolAbort`)
  a state whose step counter is older than the latest one journaled for that
  client and session, and a state that has answered whose client and session
  the journal does not know at all (the journal was lost or swapped for an
  empty one while the state survived); the journal itself refuses an entry
  that goes back in steps or reveals, for some peer, the other kind of share
  than it already did.

Threat model: the journal, not the state, is what must be stored durably and
out of the reach of whoever can replace the state (see SECURITY.md).  The
state holds the client's round secrets (private round keys, Shamir shares, the
input until it is masked): store it as confidentially as the client's own
memory.  It never holds the long-term identity key: a copy of the state is
worth one round, not the client's identity.
A state lost after its answer was journaled can never be used again -- the
client then counts as a dropout, which the protocol tolerates.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import enum
import hashlib
import hmac
import json
import os
import struct
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import numpy as np

try:  # POSIX; elsewhere the file journal serializes writers within one process only
    import fcntl
except ImportError:  # pragma: no cover -- Windows
    fcntl = None  # type: ignore[assignment]

from privfed.errors import MessageFormatError, ParameterError, ParameterTypeError, ProtocolAbort
from privfed.secagg.primitives import keys
from privfed.secagg.protocol import client as _client_module
from privfed.secagg.protocol import config as _config_module
from privfed.secagg.protocol import graph as _graph_module
from privfed.secagg.protocol import messages as _messages_module
from privfed.secagg.protocol import stages as _stages_module
from privfed.secagg.protocol.client import SecAggClient
from privfed.secagg.protocol.config import SecAggConfig
from privfed.secagg.protocol.id_runs import IdRuns
from privfed.secagg.protocol.identity import IdentityKey, IdentityRegistry
from privfed.secagg.protocol.identity_root import IdentityRoot
from privfed.secagg.protocol.messages import Message, UnmaskResponse, decode_message
from privfed.secagg.protocol.stages import Stage

__all__ = [
    "CONFIG_VERSION",
    "STATE_MAGIC",
    "STATE_VERSION",
    "FileRevealJournal",
    "JournalEntry",
    "MemoryRevealJournal",
    "RevealJournal",
    "RevealKind",
    "client_step",
    "decode_config",
    "encode_config",
    "export_client_state",
    "record_answer",
    "restore_client_state",
]

#: First four bytes of an exported client state.
STATE_MAGIC: Final = b"PFCS"
#: Client-state format version written and accepted (2: no identity key inside;
#: 3: a SecAgg+ client keeps the survivor-tree root it signed; 4: an active
#: SecAgg+ client keeps its committed graph value and the root it revealed it for;
#: 5: a config is one length-prefixed body, so that it is parsed once, not at
#: every restore; 6: the config's ids travel as runs of consecutive ids, an
#: :class:`~privfed.secagg.IdRuns`, 8 bytes a run instead of about 7 an id).
STATE_VERSION: Final = 6
#: Format version of a config on its own (:func:`encode_config`; 2: the
#: length-prefixed config body of state version 5; 3: the registry may be sent
#: by its digest, ``registry_by_digest``; 4: the ids travel as runs, as in state
#: version 6).
CONFIG_VERSION: Final = 4
#: Client attributes never exported: supplied again at each restore.
_NOT_EXPORTED: Final = frozenset({"_identity"})

# -- the type-directed value codec ------------------------------------------------------

_NONE, _FALSE, _TRUE, _INT, _BYTES, _STR = 0, 1, 2, 3, 4, 5
_TUPLE, _LIST, _FROZENSET, _DICT = 6, 7, 8, 9
_ENUM, _U64_ARRAY, _KEYPAIR, _CONFIG, _MESSAGE, _EXTENSION = 10, 11, 12, 13, 14, 15

_U32 = struct.Struct(">I")
_MAX_DEPTH = 16


def _enum_types() -> dict[str, type[enum.Enum]]:
    """The protocol's enums, by a stable name (never a module path taken from the data).

    Every enum defined in the protocol's own modules is whitelisted, under
    ``"<module>.<name>"`` (e.g. ``"client._Phase"``), so an enum the protocol
    layer adds is handled without an edit here.
    """
    found: dict[str, type[enum.Enum]] = {}
    for short, module in _ENUM_MODULES.items():
        for name, value in sorted(vars(module).items()):
            if (
                isinstance(value, type)
                and issubclass(value, enum.Enum)
                and value.__module__ == module.__name__
            ):
                found[f"{short}.{name}"] = value
    return found


_ENUM_MODULES: Final = {
    "client": _client_module,
    "config": _config_module,
    "graph": _graph_module,
    "messages": _messages_module,
    "stages": _stages_module,
    "keys": keys,
}
_ENUMS: Final = _enum_types()
_ENUM_NAMES: Final = {cls: name for name, cls in _ENUMS.items()}

#: Further whitelisted types: stable name -> (type, to bytes, from bytes).  The
#: protocol layer appends an entry here when the client gains an attribute of a
#: new type (e.g. a signing key); the completeness test shows which is missing.
_EXTENSIONS: dict[str, tuple[type[Any], Callable[[Any], bytes], Callable[[bytes], Any]]] = {}


def _register_identity_types() -> None:
    """Active mode: the config's registry (public).

    The client's :class:`~privfed.secagg.IdentityKey` is deliberately not a
    codec type: encoding one anywhere raises, so it cannot reach a state.
    """
    from privfed.secagg.protocol.identity import IdentityRegistry
    from privfed.secagg.protocol.identity_root import IdentityRoot

    _EXTENSIONS["identity.IdentityRegistry"] = (
        IdentityRegistry,
        lambda registry: registry.to_json().encode(),
        lambda raw: IdentityRegistry.from_json(raw.decode()),
    )
    _EXTENSIONS["identity.IdentityRoot"] = (
        IdentityRoot,
        lambda root: root.to_json().encode(),
        lambda raw: IdentityRoot.from_json(raw.decode()),
    )


_register_identity_types()
_EXTENSIONS["config.IdRuns"] = (IdRuns, IdRuns.to_bytes, IdRuns.from_bytes)


class _UnsupportedError(Exception):
    """A value of a type outside the whitelist (carries the type's name)."""


def _encode(value: object, out: bytearray, depth: int = 0) -> None:
    if depth > _MAX_DEPTH:
        raise _UnsupportedError("nesting deeper than the format allows")
    # bool before int: bool is a subclass of int.
    if value is None:
        out.append(_NONE)
    elif value is False:
        out.append(_FALSE)
    elif value is True:
        out.append(_TRUE)
    elif isinstance(value, enum.Enum):
        name = _ENUM_NAMES.get(type(value))
        if name is None:
            raise _UnsupportedError(type(value).__qualname__)
        out.append(_ENUM)
        _put_blob(out, name.encode())
        _put_blob(out, value.name.encode())
    elif type(value) is int:
        out.append(_INT)
        _put_blob(out, value.to_bytes((value.bit_length() + 8) // 8 or 1, "big", signed=True))
    elif type(value) is bytes:
        out.append(_BYTES)
        _put_blob(out, value)
    elif type(value) is str:
        out.append(_STR)
        _put_blob(out, value.encode())
    elif type(value) in (tuple, list):
        out.append(_TUPLE if type(value) is tuple else _LIST)
        items: Any = value
        out += _U32.pack(len(items))
        for item in items:
            _encode(item, out, depth + 1)
    elif type(value) is frozenset:
        # Canonical: items in the order of their encodings.
        encoded = sorted(_encoded(item, depth + 1) for item in value)
        out.append(_FROZENSET)
        out += _U32.pack(len(encoded))
        for blob in encoded:
            out += blob
    elif type(value) is dict:
        mapping: dict[Any, Any] = value
        out.append(_DICT)
        out += _U32.pack(len(mapping))
        for key, item in mapping.items():
            _encode(key, out, depth + 1)
            _encode(item, out, depth + 1)
    elif isinstance(value, np.ndarray):
        if value.dtype != np.uint64 or value.ndim != 1:
            raise _UnsupportedError(
                f"numpy array of dtype {value.dtype} and {value.ndim} dimensions"
            )
        out.append(_U64_ARRAY)
        out.append(1 if value.flags.writeable else 0)
        _put_blob(out, value.astype("<u8", copy=False).tobytes())
    elif type(value) is keys.KeyPair:
        out.append(_KEYPAIR)
        _put_blob(out, value.private_key)
    elif type(value) is SecAggConfig:
        out.append(_CONFIG)
        _put_blob(out, _config_body(value, depth + 1))
    elif isinstance(value, Message):
        out.append(_MESSAGE)
        _put_blob(out, value.to_bytes())
    else:
        for name, (cls, to_bytes, _) in _EXTENSIONS.items():
            if type(value) is cls:
                out.append(_EXTENSION)
                _put_blob(out, name.encode())
                _put_blob(out, to_bytes(value))
                return
        raise _UnsupportedError(type(value).__qualname__)


def _encoded(value: object, depth: int) -> bytes:
    out = bytearray()
    _encode(value, out, depth)
    return bytes(out)


def _put_blob(out: bytearray, blob: bytes) -> None:
    out += _U32.pack(len(blob))
    out += blob


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def take(self, n: int) -> bytes:
        end = self._pos + n
        if n < 0 or end > len(self._data):
            raise MessageFormatError("client state is truncated")
        chunk = self._data[self._pos : end]
        self._pos = end
        return chunk

    def u8(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        value: int = _U32.unpack(self.take(4))[0]
        return value

    def blob(self) -> bytes:
        return self.take(self.u32())

    def finish(self) -> None:
        if self._pos != len(self._data):
            raise MessageFormatError("client state has trailing bytes")


def _hashable(make: Any, value: Any) -> Any:
    """``make(value)``; an unhashable key or member (crafted bytes) is a format error."""
    try:
        return make(value)
    except TypeError:
        raise MessageFormatError("client state holds an unhashable key or set member") from None


def _decode(reader: _Reader, depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        raise MessageFormatError("client state nests too deeply")
    tag = reader.u8()
    if tag == _NONE:
        return None
    if tag == _FALSE:
        return False
    if tag == _TRUE:
        return True
    if tag == _INT:
        return int.from_bytes(reader.blob(), "big", signed=True)
    if tag == _BYTES:
        return reader.blob()
    if tag == _STR:
        return _text(reader.blob())
    if tag in (_TUPLE, _LIST, _FROZENSET):
        items = [_decode(reader, depth + 1) for _ in range(reader.u32())]
        if tag == _TUPLE:
            return tuple(items)
        return items if tag == _LIST else _hashable(frozenset, items)
    if tag == _DICT:
        count = reader.u32()
        out: dict[Any, Any] = {}
        for _ in range(count):
            key = _decode(reader, depth + 1)
            value = _decode(reader, depth + 1)
            _hashable(hash, key)
            out[key] = value
        return out
    if tag == _ENUM:
        cls = _ENUMS.get(_text(reader.blob()))
        member = _text(reader.blob())
        if cls is None or member not in cls.__members__:
            raise MessageFormatError("client state names an unknown enum member")
        return cls[member]
    if tag == _U64_ARRAY:
        writeable = reader.u8()
        raw = reader.blob()
        if len(raw) % 8:
            raise MessageFormatError("client state holds a truncated uint64 array")
        array = np.frombuffer(raw, dtype="<u8").astype(np.uint64)
        array.flags.writeable = bool(writeable)
        return array
    if tag == _KEYPAIR:
        return _rebuild(keys.KeyPair.from_private_bytes, reader.blob())
    if tag == _CONFIG:
        return _config_from_body(reader.blob(), depth + 1)
    if tag == _MESSAGE:
        return _rebuild(decode_message, reader.blob())
    if tag == _EXTENSION:
        entry = _EXTENSIONS.get(_text(reader.blob()))
        if entry is None:
            raise MessageFormatError("client state names an unknown value type")
        return _rebuild(entry[2], reader.blob())
    raise MessageFormatError(f"client state holds an unknown tag {tag}")


# A config is immutable and O(N) (its ids, in active mode its registry): every
# state of a round holds the same one, so its body is encoded once per config
# object and parsed once per body.  Both caches are keyed by exactly what they
# stand for (the very object; the very bytes), so a hit returns what encoding
# or parsing those would give, and any other config or body is handled afresh.
_CONFIG_CACHE_SIZE: Final = 8
_config_bodies: dict[int, tuple[SecAggConfig, bytes]] = {}
_configs_by_body: dict[bytes, SecAggConfig] = {}
# decode_config of a config sent with its registry by digest: by the very bytes and the kind
# of identities (a registry and its root share a digest, but only a registry holder checks
# every id's enrolment), returned only for the same digest (a node decodes a proposal twice).
_configs_by_digest_form: dict[tuple[bytes, type], SecAggConfig] = {}
_config_cache_lock = threading.Lock()


def _config_body(config: SecAggConfig, depth: int) -> bytes:
    with _config_cache_lock:
        hit = _config_bodies.get(id(config))
    if hit is not None and hit[0] is config:
        return hit[1]
    body = _encoded(_config_fields(config), depth)
    with _config_cache_lock:
        _remember(_config_bodies, id(config), (config, body))
    return body


def _config_fields(config: SecAggConfig) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.init}


#: The key under which a config sent with ``registry_by_digest`` carries the
#: registry's digest (never a field name: a config's fields are identifiers).
_REGISTRY_DIGEST: Final = "identities-digest"


def _config_from_body(body: bytes, depth: int) -> SecAggConfig:
    with _config_cache_lock:
        hit = _configs_by_body.get(body)
    if hit is not None:
        return hit
    reader = _Reader(body)
    fields = _decode(reader, depth)
    reader.finish()
    if not isinstance(fields, dict):
        raise MessageFormatError("client state holds a malformed config")
    config: SecAggConfig = _rebuild(lambda f: SecAggConfig(**f), fields)
    with _config_cache_lock:
        _remember(_configs_by_body, body, config)
    return config


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    """Insert ``key`` as the newest entry, dropping the oldest beyond the cache size."""
    cache.pop(key, None)
    cache[key] = value
    while len(cache) > _CONFIG_CACHE_SIZE:
        del cache[next(iter(cache))]


def _text(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise MessageFormatError("client state holds invalid UTF-8") from None


def _rebuild(build: Callable[[Any], Any], raw: Any) -> Any:
    try:
        return build(raw)
    except (ParameterError, ParameterTypeError, TypeError, ValueError, RecursionError):
        raise MessageFormatError("client state holds an invalid value") from None


# -- the config on its own (what a transport sends to a new client) ------------------------


def encode_config(config: SecAggConfig, *, registry_by_digest: bool = False) -> bytes:
    """A :class:`SecAggConfig` as bytes in this module's tagged format (public data).

    Args:
        config: The config.
        registry_by_digest: In active mode, send the identity registry as its
            32-byte digest instead of in full (about 117 B a client): for
            clients that hold the registry already -- an active client must
            pin it anyway, or the server could hand it keys of its own -- so
            the config a client downloads stays O(N) ids, not O(N) keys.  The
            receiver passes its registry to :func:`decode_config`.  No effect
            without a registry.

    Raises:
        ParameterTypeError: ``config`` is not a :class:`SecAggConfig`.
    """
    if not isinstance(config, SecAggConfig):
        raise ParameterTypeError("config", "a SecAggConfig", config)
    out = bytearray(STATE_MAGIC)
    out.append(CONFIG_VERSION)
    if registry_by_digest and config.identities is not None:
        fields = _config_fields(config)
        fields[_REGISTRY_DIGEST] = fields.pop("identities").digest
        _encode(fields, out)
    else:
        _encode(config, out)
    return bytes(out)


def decode_config(
    data: bytes, *, registry: IdentityRegistry | IdentityRoot | None = None
) -> SecAggConfig:
    """Parse :func:`encode_config` bytes (the config's own checks run again).

    Args:
        data: The bytes.
        registry: The identity registry this client holds, or its
            :class:`~privfed.secagg.IdentityRoot`: what a config sent with
            ``registry_by_digest`` stands for (the decoded config holds it).  Not consulted for a
            config that carries its registry (or has none): checking that one
            against the client's own is the caller's policy.

    Raises:
        ParameterTypeError: ``data`` is not bytes, or ``registry`` is not a
            registry, a root or ``None``.
        MessageFormatError: Not a config of this format version, or invalid.
        ProtocolAbort: The config names its registry by a digest that is not
            ``registry``'s, or ``registry`` is ``None``.
    """
    if not isinstance(data, bytes):
        raise ParameterTypeError("data", "bytes", data)
    if registry is not None and not isinstance(registry, (IdentityRegistry, IdentityRoot)):
        raise ParameterTypeError("registry", "an IdentityRegistry, IdentityRoot or None", registry)
    with _config_cache_lock:
        hit = _configs_by_digest_form.get((data, type(registry)))
    known = None if hit is None or hit.identities is None else hit.identities.digest
    if hit is not None and registry is not None and known == registry.digest:
        return hit  # these very bytes, decoded before against this registry (or this root)
    reader = _Reader(data)
    if reader.take(4) != STATE_MAGIC or reader.u8() != CONFIG_VERSION:
        raise MessageFormatError("not a privfed config of this format version")
    config = _decode(reader)
    reader.finish()
    if isinstance(config, dict) and type(config.get(_REGISTRY_DIGEST)) is bytes:
        digest = config.pop(_REGISTRY_DIGEST)
        if registry is None or not hmac.compare_digest(digest, registry.digest):
            raise ProtocolAbort(
                "the config names its identity registry by a digest that is not "
                "the registry this client holds"
            )
        config = _rebuild(lambda f: SecAggConfig(**f, identities=registry), config)
        with _config_cache_lock:
            _remember(_configs_by_digest_form, (data, type(registry)), config)
    if not isinstance(config, SecAggConfig):
        raise MessageFormatError("not a privfed config")
    return config


# -- the step counter --------------------------------------------------------------------


def client_step(client: SecAggClient) -> int:
    """How many answers ``client`` has produced (its phase's position in protocol order).

    An aborted client counts as past every step: it never answers again.
    """
    if not isinstance(client, SecAggClient):
        raise ParameterTypeError("client", "a SecAggClient", client)
    phase = client._phase
    order = [p for p in type(phase) if p.name != "ABORTED"]
    if phase.name == "ABORTED":
        return len(order) + 1
    return order.index(phase)


# -- export / restore --------------------------------------------------------------------


def export_client_state(client: SecAggClient) -> bytes:
    """Serialize ``client``'s attributes (round secrets included) in the versioned format.

    Every attribute but the long-term identity key (active mode), which the
    caller keeps and hands to :func:`restore_client_state` again.

    Args:
        client: The client to export; it is not changed.

    Returns:
        The state bytes (``b"PFCS"``, version, tagged attributes).

    Raises:
        ParameterTypeError: ``client`` is not a :class:`SecAggClient`, or one of
            its attributes has a type the codec does not handle (the message
            names the attribute and the type, never the value).
    """
    if not isinstance(client, SecAggClient):
        raise ParameterTypeError("client", "a SecAggClient", client)
    out = bytearray(STATE_MAGIC)
    out.append(STATE_VERSION)
    attributes = {k: v for k, v in vars(client).items() if k not in _NOT_EXPORTED}
    out += _U32.pack(len(attributes))
    for name in sorted(attributes):
        _put_blob(out, name.encode())
        try:
            _encode(attributes[name], out)
        except _UnsupportedError as exc:
            raise ParameterTypeError(
                f"client.{name}",
                "a value of a type the state codec handles",
                f"<a value of type {exc}>",
            ) from None
    return bytes(out)


def _parse_state(data: bytes) -> dict[str, Any]:
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise ParameterTypeError("data", "bytes", data)
    reader = _Reader(data)
    if reader.take(4) != STATE_MAGIC:
        raise MessageFormatError("not a privfed client state (bad magic)")
    version = reader.u8()
    if version != STATE_VERSION:
        raise MessageFormatError(
            f"client state version {version} (this build reads {STATE_VERSION})"
        )
    attributes: dict[str, Any] = {}
    for _ in range(reader.u32()):
        name = _text(reader.blob())
        if not name.isidentifier() or name in attributes or name in _NOT_EXPORTED:
            raise MessageFormatError("client state holds a bad attribute name")
        attributes[name] = _decode(reader)
    reader.finish()
    return attributes


def restore_client_state(
    data: bytes, *, journal: RevealJournal, identity: IdentityKey | None = None
) -> SecAggClient:
    """Rebuild a client from :func:`export_client_state` bytes, refusing a rolled-back state.

    Args:
        data: The state bytes.
        journal: The client's durable reveal journal.
        identity: The client's long-term Ed25519 key: required when the
            state's config is in active mode (the state never holds it), and
            it must be the key the config's registry holds for the client;
            ignored in semi-honest mode.

    Returns:
        A :class:`SecAggClient` in the exported state.

    Raises:
        ParameterTypeError: ``data`` is not bytes, ``journal`` not a
            :class:`RevealJournal`, or an active-mode state without an
            :class:`~privfed.secagg.IdentityKey`.
        ParameterError: ``identity`` is not the registry's key for the client.
        MessageFormatError: ``data`` is not a state of this format version, or
            holds a value outside the whitelist or an invalid one.
        ProtocolAbort: The state's step counter is older than the latest the
            journal recorded for this client, session and round (a rollback),
            or the state has answered (step > 0) but the journal knows nothing
            of its client, session and round (the journal was lost or replaced):
            the client must not answer from it.
    """
    if not isinstance(journal, RevealJournal):
        raise ParameterTypeError("journal", "a RevealJournal", journal)
    attributes = _parse_state(data)
    client = SecAggClient.__new__(SecAggClient)
    if not set(_client_attribute_names()) <= set(attributes) or any(
        name.startswith("__") for name in attributes
    ):
        raise MessageFormatError("client state's attributes differ from this build's client")
    for name, value in attributes.items():
        object.__setattr__(client, name, value)
    try:
        config, client_id, step = client.config, client.client_id, client_step(client)
    except (AttributeError, TypeError, ValueError):
        raise MessageFormatError("client state lacks its config, id or phase") from None
    if not isinstance(config, SecAggConfig) or client_id not in config.client_ids:
        raise MessageFormatError("client state's id is not one of its config's clients")
    proven = getattr(client, "_identity_keys", None)
    proven = proven.get(client_id) if isinstance(proven, dict) else None
    object.__setattr__(client, "_identity", _restored_identity(config, client_id, identity, proven))
    latest = journal.latest_step(config.session_id, config.round_index, client_id)
    if latest is None and step > 0:
        # Every answer is journaled before the state after it is stored, so a state that
        # answered belongs to a session its journal knows -- unless the journal was lost
        # or replaced while the state survived: the rollback the journal exists to stop.
        raise ProtocolAbort(
            f"state at step {step} of a session its reveal journal does not know (the "
            "journal was lost or replaced): refusing to answer from it",
            stage=None if client.stage is None else client.stage.name,
        )
    if latest is not None and step < latest:
        raise ProtocolAbort(
            f"rolled-back state: step {step} is older than step {latest} already answered",
            stage=None if client.stage is None else client.stage.name,
        )
    return client


def _restored_identity(
    config: SecAggConfig, client_id: int, identity: IdentityKey | None, proven: bytes | None
) -> IdentityKey | None:
    """The identity key a restored client holds: the supplied one (active mode), else ``None``.

    It must be the registry's key for the client -- with the registry's root
    only, the key the roster proved for it, once a roster has been checked.
    """
    if not config.active:
        return None
    if not isinstance(identity, IdentityKey):
        raise ParameterTypeError(
            "identity", "the client's IdentityKey (an active-mode state never holds it)", identity
        )
    registry = config.identities
    enrolled = registry.public_key(client_id) if isinstance(registry, IdentityRegistry) else proven
    if registry is None or (
        enrolled is not None and not hmac.compare_digest(enrolled, identity.public_key)
    ):
        raise ParameterError("identity", "the key the registry holds for this client", identity)
    return identity


def _client_attribute_names() -> tuple[str, ...]:
    """The attribute names of a freshly built client (the format's expected set)."""
    cached = _ATTRIBUTES.get("names")
    if cached is None:
        probe = SecAggClient(SecAggConfig(client_ids=(1, 2), threshold=2, vector_length=1), 1)
        cached = tuple(sorted(set(vars(probe)) - _NOT_EXPORTED))
        _ATTRIBUTES["names"] = cached
    return cached


_ATTRIBUTES: dict[str, tuple[str, ...]] = {}


# -- the reveal journal ------------------------------------------------------------------


class RevealKind(enum.Enum):
    """Which share of a peer an unmasking answer revealed."""

    SELF_MASK_SEED = "seed"
    MASK_KEY = "key"


@dataclasses.dataclass(frozen=True)
class JournalEntry:
    """One answer of one client, as journaled before it leaves.

    Attributes:
        session_id: The round's session id.
        round_index: The round's index.
        client_id: The answering client.
        step: The client's step counter after the answer.
        reveals: For an unmasking answer, ``{peer: kind}`` for every peer a
            share was revealed for; empty otherwise.
        answer: SHA-256 (hex) of the answer's canonical encoding; two entries
            at one step must carry the same one (empty: not known).
    """

    session_id: bytes
    round_index: int
    client_id: int
    step: int
    reveals: Mapping[int, RevealKind] = dataclasses.field(default_factory=dict)
    answer: str = ""

    def to_json(self) -> str:
        """One line of JSON (the file journal's record)."""
        return json.dumps(
            {
                "session": self.session_id.hex(),
                "round": self.round_index,
                "client": self.client_id,
                "step": self.step,
                "reveals": {str(p): k.value for p, k in sorted(self.reveals.items())},
                "answer": self.answer,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, line: str) -> JournalEntry:
        """Parse one :meth:`to_json` line.

        Raises:
            MessageFormatError: The line is not a journal record.
        """
        try:
            raw = json.loads(line)
            return cls(
                session_id=bytes.fromhex(raw["session"]),
                round_index=int(raw["round"]),
                client_id=int(raw["client"]),
                step=int(raw["step"]),
                reveals={int(p): RevealKind(k) for p, k in raw["reveals"].items()},
                answer=str(raw.get("answer", "")),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            raise MessageFormatError("malformed reveal-journal record") from None


class RevealJournal(abc.ABC):
    """Durable record of what a client revealed, written before each answer leaves.

    Implementations must make :meth:`_persist` durable before it returns (the
    answer is sent right after) and must survive whatever can roll the client
    state back.  The checks live here, in :meth:`record`: an entry that goes
    back in steps, gives at a step an answer other than the one already
    journaled there, or reveals for some peer a different kind of share than an
    earlier entry of the same session, round and client, is refused.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[tuple[bytes, int, int], int] = {}
        self._kinds: dict[tuple[bytes, int, int], dict[int, RevealKind]] = {}
        # The answer digest journaled at each (session, round, client, step).
        self._answers: dict[tuple[bytes, int, int, int], str] = {}

    def latest_step(self, session_id: bytes, round_index: int, client_id: int) -> int | None:
        """The latest step journaled for this client of this round, ``None`` if none."""
        with self._lock, self._exclusive():
            return self._latest.get((session_id, round_index, client_id))

    def knows_session(self, session_id: bytes) -> bool:
        """Whether any answer of any client of any round of ``session_id`` is journaled."""
        with self._lock, self._exclusive():
            return any(key[0] == session_id for key in self._latest)

    def start_session(self, session_id: bytes, round_index: int, client_id: int) -> None:
        """Journal that a client of this session and round exists, before it answers.

        A step-0 entry (idempotent): from here on a state of this client that
        has answered can be restored, and :meth:`knows_session` is true.  A
        node calls it when it creates the client, before its first answer.
        """
        self.record(JournalEntry(session_id, round_index, client_id, 0))

    def record(self, entry: JournalEntry) -> None:
        """Check ``entry`` against the journal, then store it durably.

        Raises:
            ParameterTypeError: ``entry`` is not a :class:`JournalEntry`.
            ProtocolAbort: The entry's step is older than one already recorded,
                or it reveals another share kind for a peer than before (the
                journal is unchanged).
        """
        if not isinstance(entry, JournalEntry):
            raise ParameterTypeError("entry", "a JournalEntry", entry)
        key = (entry.session_id, entry.round_index, entry.client_id)
        with self._lock, self._exclusive():
            latest = self._latest.get(key)
            if latest is not None and entry.step < latest:
                raise ProtocolAbort(
                    f"rolled-back state: step {entry.step} is older than step {latest}"
                )
            previous = self._answers.get((*key, entry.step))
            if previous is not None and previous != entry.answer:
                # Two copies of one state (restored before either answer was
                # journaled) answering differently: e.g. signing two survivor sets.
                raise ProtocolAbort(
                    f"rolled-back state: a second answer at step {entry.step} that differs "
                    "from the one already given"
                )
            known = self._kinds.get(key, {})
            for peer, kind in entry.reveals.items():
                if known.get(peer, kind) is not kind:
                    raise ProtocolAbort(
                        f"refusing to reveal a second kind of share of client {peer}",
                        stage=Stage.UNMASKING.name,
                    )
            self._persist(entry)
            self._apply(entry)

    def _apply(self, entry: JournalEntry) -> None:
        key = (entry.session_id, entry.round_index, entry.client_id)
        self._latest[key] = max(entry.step, self._latest.get(key, entry.step))
        self._kinds.setdefault(key, {}).update(entry.reveals)
        self._answers.setdefault((*key, entry.step), entry.answer)

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Hold whatever lock the storage needs and bring the view up to date."""
        yield

    @abc.abstractmethod
    def _persist(self, entry: JournalEntry) -> None:
        """Store ``entry`` durably (called under the locks, after the checks)."""


class MemoryRevealJournal(RevealJournal):
    """A journal in memory: for tests and for transports that keep one process per client.

    It protects against rollback only while the process lives.
    """

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[JournalEntry] = []

    def _persist(self, entry: JournalEntry) -> None:
        self.entries.append(entry)


class FileRevealJournal(RevealJournal):
    """An append-only JSON-lines file, ``fsync``-ed before each answer leaves.

    Crash-consistent: a record counts once its closing newline is on disk; a
    writer killed mid-append leaves a torn tail, which readers ignore and the
    next writer removes (that record's answer never left).

    Several processes may share the file: each check and write happens under an
    exclusive ``flock`` after reading what other processes appended.  Keep the
    file on storage that outlives, and is never restored together with, the
    client state.

    Args:
        path: The journal file; created (with its folder, mode 0600) if missing.

    Raises:
        ParameterTypeError: ``path`` is not a str or path.
        MessageFormatError: The file holds a malformed record.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise ParameterTypeError("path", "a str or os.PathLike", path)
        super().__init__()
        self._path = Path(path)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._offset = 0
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        """The journal file."""
        return self._path

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        fd = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            self._fd = fd
            self._reload(fd)
            yield
        finally:
            self._fd = None
            os.close(fd)  # closing releases the lock

    def _reload(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        if size <= self._offset:
            return
        chunk = os.pread(fd, size - self._offset, self._offset)
        complete = chunk[: chunk.rfind(b"\n") + 1]
        for line in complete.decode("utf-8", errors="replace").splitlines():
            if line.strip():
                self._apply(JournalEntry.from_json(line))
        self._offset += len(complete)

    def _persist(self, entry: JournalEntry) -> None:
        fd = self._fd
        if fd is None:  # pragma: no cover -- only called under _exclusive
            raise RuntimeError("journal written outside its lock")
        if os.fstat(fd).st_size > self._offset:
            # A torn tail: a writer killed mid-append (we hold the lock, so it is dead).
            # Its record never completed, so its answer never left: drop the fragment,
            # or this record would be glued to it into one malformed line.
            os.ftruncate(fd, self._offset)
        line = (entry.to_json() + "\n").encode()
        os.write(fd, line)
        os.fsync(fd)
        self._offset += len(line)


def record_answer(journal: RevealJournal, client: SecAggClient, answer: object) -> None:
    """Journal the answer ``client`` just produced, before it is sent.

    Call it after the client method returned and before the answer leaves;
    if it raises, do not send the answer.

    Args:
        journal: The client's durable journal.
        client: The client, in its state after the answer.
        answer: What the client method returned (for an
            :class:`~privfed.secagg.UnmaskResponse`, the revealed share kinds
            are journaled per peer).

    Raises:
        ParameterTypeError: ``journal`` or ``client`` has the wrong type.
        ProtocolAbort: The journal refuses the entry (a rollback, or a second
            kind of share for some peer).
    """
    if not isinstance(journal, RevealJournal):
        raise ParameterTypeError("journal", "a RevealJournal", journal)
    if not isinstance(client, SecAggClient):
        raise ParameterTypeError("client", "a SecAggClient", client)
    if isinstance(answer, dict):
        # A share_keys answer: canonical in the recipients' order.
        answer = tuple(sorted(answer.items()))
    try:
        digest = hashlib.sha256(_encoded(answer, 0)).hexdigest()
    except _UnsupportedError:
        raise ParameterTypeError("answer", "a client method's answer", answer) from None
    reveals: dict[int, RevealKind] = {}
    if isinstance(answer, UnmaskResponse):
        reveals.update((s.owner, RevealKind.SELF_MASK_SEED) for s in answer.self_mask_shares)
        reveals.update((s.owner, RevealKind.MASK_KEY) for s in answer.key_shares)
    config = client.config
    journal.record(
        JournalEntry(
            session_id=config.session_id,
            round_index=config.round_index,
            client_id=client.client_id,
            step=client_step(client),
            reveals=reveals,
            answer=digest,
        )
    )
