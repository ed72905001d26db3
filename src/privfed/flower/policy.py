"""A node's own secure-aggregation policy: what its operator pins, and what it refuses.

Over Flower the server proposes each round's :class:`~privfed.secagg.SecAggConfig`;
a node that took it as given would accept ``t = 2`` of ``n = 5`` in
semi-honest mode from a server that lies.  :class:`NodePolicy` is the node
operator's, read on the node from its node config (``flower-supernode
--node-config ...``), never from the server: the security mode, the minimum
threshold, the assumed number of corrupted clients ``n_C``, the node's
Ed25519 identity key and the registry of identities.  At ADVERTISE_KEYS --
before any key exists -- the node checks the proposed config against it
(:meth:`NodePolicy.check`) and refuses a weaker one with
:class:`~privfed.errors.ProtocolAbort`, which Flower turns into an error
reply: the node is a dropout of that round.

Node config (individual keys, or a file named by ``privfed-policy``; keys
given individually override the file's)::

    --node-config 'privfed-policy="/etc/privfed/policy.toml"'
    --node-config 'privfed-mode="active" privfed-min-threshold=4 privfed-corrupted=1
                   privfed-identity-key="/etc/privfed/node.key"
                   privfed-registry="/etc/privfed/registry.json"'

Paths given as node-config keys are relative to the SuperNode's working
folder; use absolute ones.

Policy file (TOML; paths relative to the file's folder; unknown keys refused)::

    mode = "active"              # "semi-honest" (default) or "active"
    min-threshold = 4            # fewest shares t a round may use (always also a strict majority)
    corrupted = 1                # n_C the node assumes (default 0)
    identity-key = "node.key"    # the node's Ed25519 private key
    registry = "registry.json"   # the integrator's registry of public keys

Identity key file: an unencrypted PKCS#8 PEM Ed25519 private key
(``openssl genpkey -algorithm ed25519 -out node.key``, or
:func:`write_identity_key`), readable and writable by its owner only (mode
0600 or stricter; a file any group or other user can access is refused).
Registry file: :class:`~privfed.secagg.IdentityRegistry`'s JSON format
(:meth:`~privfed.secagg.IdentityRegistry.save`); the node's own client id is
the id the registry holds for its key.  Or, for a federation too large for
every node to hold every key, the node's own enrolment
(:meth:`IdentityRegistry.enrolment(client_id).save(path)
<privfed.secagg.IdentityRegistry.enrolment>`, a few hundred bytes): the
registry's Merkle root, the node's id and key, and the proof that the root
enrols them.  Either way the node's client holds the registry's root only,
and checks each peer key a roster carries against it.

Threat model: the node trusts its own node config, key and registry files
(they are its operator's); it trusts the server for relaying only.  In
active mode it signs its round keys with the identity key, checks every
peer's against its own registry and runs the ConsistencyCheck round, so a
server that substitutes a registry, a key or a survivor set is refused.
The identity key is read from its file at each stage and handed to the
client; it is never written into ``Context.state``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, NoReturn

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from flwr.app import Context

from privfed._atomic import fsync_dir, temporary_sibling
from privfed._checks import check_finite_positive
from privfed.errors import MessageFormatError, ParameterError, ParameterTypeError, ProtocolAbort
from privfed.secagg import (
    IdentityEnrolment,
    IdentityKey,
    IdentityRegistry,
    SecAggConfig,
    SecurityMode,
)
from privfed.secagg.protocol.committee import default_committee_size, seeds_per_root
from privfed.secagg.protocol.identity_root import ENROLMENT_FORMAT
from privfed.secagg.protocol.state import decode_config
from privfed.secagg.threshold import MIN_THRESHOLD, ThresholdPolicy, ThresholdRule

__all__ = [
    "POLICY_KEYS",
    "POLICY_NODE_CONFIG_KEY",
    "NodePolicy",
    "PolicyFiles",
    "PolicyFn",
    "default_policy",
    "identify_payload",
    "load_identity_key",
    "load_registry",
    "write_identity_key",
]

#: Node-config key naming the node's policy file.
POLICY_NODE_CONFIG_KEY: Final = "privfed-policy"
#: The policy's keys (node config: with the ``privfed-`` prefix; policy file: without).
POLICY_KEYS: Final = (
    "mode", "min-threshold", "corrupted", "identity-key", "registry", "dp-max-epsilon",
)  # fmt: skip
_PREFIX: Final = "privfed-"
_IDENTIFY_DOMAIN: Final = b"privfed/flower/identify/v1"
#: Permission bits a private key file must not have (group and others: nothing).
_KEY_FORBIDDEN_BITS: Final = 0o077

#: ``policy(context) -> NodePolicy`` of this node.
PolicyFn = Callable[[Context], "NodePolicy"]


def load_identity_key(path: str | os.PathLike[str], *, name: str = "identity-key") -> IdentityKey:
    """Read the node's Ed25519 identity key (PKCS#8 PEM, owner-only permissions).

    Args:
        path: The key file.
        name: The policy key naming the file (for error messages).

    Raises:
        ParameterError: The file is missing, accessible to its group or to
            others, or not an unencrypted Ed25519 PKCS#8 PEM key (the key's
            bytes are never shown).
    """
    file = Path(path)
    try:
        info = file.stat()
    except OSError as exc:
        raise ParameterError(name, "a readable key file", str(file), detail=exc.strerror) from None
    if not stat.S_ISREG(info.st_mode):
        raise ParameterError(name, "a regular key file", str(file))
    if os.name == "posix" and info.st_mode & _KEY_FORBIDDEN_BITS:
        raise ParameterError(
            name,
            "a private key file only its owner can access (chmod 600)",
            f"{file} with mode {stat.filemode(info.st_mode)}",
        )
    try:
        key = serialization.load_pem_private_key(file.read_bytes(), password=None)
    except (ValueError, TypeError, OSError):
        raise ParameterError(
            name, "an unencrypted PKCS#8 PEM Ed25519 private key", str(file)
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ParameterError(name, "an Ed25519 private key", f"{file}: {type(key).__name__}")
    return IdentityKey(key.private_bytes_raw())


def write_identity_key(path: str | os.PathLike[str], key: IdentityKey) -> Path:
    """Write ``key`` as :func:`load_identity_key` reads it (PKCS#8 PEM, mode 0600, new file).

    Raises:
        ParameterTypeError: ``key`` is not an :class:`~privfed.secagg.IdentityKey`.
        FileExistsError: ``path`` exists (a key is never overwritten).
    """
    if not isinstance(key, IdentityKey):
        raise ParameterTypeError("key", "an IdentityKey", key)
    pem = Ed25519PrivateKey.from_private_bytes(key.private_bytes()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    file = Path(path)
    if file.exists():
        raise FileExistsError(f"{file} exists: a key is never overwritten")
    tmp = temporary_sibling(file)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
            out.flush()
            os.fsync(out.fileno())
        # A hard link never replaces: complete key or none, and an existing key wins.
        os.link(tmp, file)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(file.parent)
    return file


def load_registry(
    path: str | os.PathLike[str], *, name: str = "registry"
) -> IdentityRegistry | IdentityEnrolment:
    """Read the registry of identities, or this node's enrolment in it.

    The file is :class:`~privfed.secagg.IdentityRegistry` JSON, or
    :class:`~privfed.secagg.IdentityEnrolment` JSON (told apart by its
    ``format`` field; the enrolment's proof is checked).

    Raises:
        ParameterError: The file is missing or not a valid registry (the
            message names ``name`` and the file).
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ParameterError(name, "a readable registry file", str(file), detail=str(exc)) from None
    try:
        if _format_of(text) == ENROLMENT_FORMAT:
            return IdentityEnrolment.from_json(text)
        return IdentityRegistry.from_json(text)
    except (ParameterError, ParameterTypeError) as exc:
        raise ParameterError(
            name, "a privfed identity registry or enrolment file", str(file), detail=str(exc)
        ) from None


def _format_of(text: str) -> object:
    """The ``format`` field of a JSON object's text (``None`` if there is none to read)."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, a number past the digit limit, too deep
        return None
    return document.get("format") if isinstance(document, dict) else None


@dataclasses.dataclass(frozen=True)
class NodePolicy:
    """What a node accepts of the rounds a server proposes (the node operator's).

    Args:
        mode: The weakest security mode the node takes part in: semi-honest
            (default: either mode, active needing ``identity``) or active.
        min_threshold: The lowest Shamir threshold ``t`` it accepts, ``>= 2``,
            on top of the floor every node keeps: a strict majority of its
            neighbourhood, ``2t > s`` (a server cannot propose ``t = 2`` of
            100).  ``None`` (default): that floor alone.
        corrupted: The ``n_C`` it assumes: a round must assume at least as many
            (and, with the registry's ``assumed_corrupted``, the larger).
        identity: The node's Ed25519 identity key (needed for active rounds).
        registry: The registry of identities it checks every round against,
            or this node's :class:`~privfed.secagg.IdentityEnrolment` in it
            (given together with ``identity``, which it must enrol).
        dp_max_epsilon: ``None`` (default), or the largest ε of a training run
            the node takes part in: it then trains only under distributed DP
            whose plan, recomputed by the node, claims at most this ε
            (node config ``privfed-dp-max-epsilon``).

    Raises:
        ParameterError, ParameterTypeError: A value outside its domain (named
            as the node-config key), an active policy without identity and
            registry, or a key the registry does not enrol.
    """

    mode: SecurityMode = SecurityMode.SEMI_HONEST
    min_threshold: int | None = None
    corrupted: int = 0
    identity: IdentityKey | None = dataclasses.field(default=None, repr=False)
    registry: IdentityRegistry | IdentityEnrolment | None = dataclasses.field(
        default=None, repr=False
    )
    dp_max_epsilon: float | None = None
    _client_id: int | None = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        mode = _mode(self.mode, "mode")
        object.__setattr__(self, "mode", mode)
        if self.min_threshold is not None:
            floor = _int(self.min_threshold, "min-threshold", MIN_THRESHOLD)
            object.__setattr__(self, "min_threshold", floor)
        object.__setattr__(self, "corrupted", _int(self.corrupted, "corrupted", 0))
        if self.dp_max_epsilon is not None:
            pin = check_finite_positive(_PREFIX + "dp-max-epsilon", self.dp_max_epsilon)
            object.__setattr__(self, "dp_max_epsilon", pin)
        if self.identity is not None and not isinstance(self.identity, IdentityKey):
            raise ParameterTypeError(_PREFIX + "identity-key", "an IdentityKey", self.identity)
        if self.registry is not None and not isinstance(
            self.registry, (IdentityRegistry, IdentityEnrolment)
        ):
            raise ParameterTypeError(
                _PREFIX + "registry", "an IdentityRegistry or IdentityEnrolment", self.registry
            )
        if (self.identity is None) != (self.registry is None):
            missing = "registry" if self.registry is None else "identity-key"
            raise ParameterError(
                _PREFIX + missing, "set together with the other of identity-key and registry", None
            )
        if mode is SecurityMode.ACTIVE and self.identity is None:
            raise ParameterError(
                _PREFIX + "identity-key", "a key file (and a registry) with mode = 'active'", None
            )
        client_id = None
        if self.identity is not None and self.registry is not None:
            own = self.identity.public_key
            registry = self.registry
            if isinstance(registry, IdentityEnrolment):
                client_id = registry.client_id if registry.public_key == own else None
            else:
                client_id = registry.client_id_of(own)
            if client_id is None:
                raise ParameterError(
                    _PREFIX + "identity-key",
                    "a key the registry enrols",
                    f"public key {own.hex()[:16]}...",
                )
        object.__setattr__(self, "_client_id", client_id)

    @property
    def client_id(self) -> int | None:
        """The node's client id: the registry's id of its identity key (``None``: no identity)."""
        return self._client_id

    @property
    def assumed_corrupted(self) -> int:
        """The ``n_C`` a round must assume: the larger of the policy's and the registry's."""
        floor = self.registry.assumed_corrupted if self.registry is not None else 0
        return max(self.corrupted, floor)

    # -- reading it ------------------------------------------------------------------

    @classmethod
    def from_node_config(cls, node_config: Mapping[str, Any]) -> NodePolicy:
        """The policy a node config gives (``privfed-policy`` file, then individual keys).

        Raises:
            ParameterError, ParameterTypeError: A bad value, named by its key.
        """
        values: dict[str, tuple[Any, str, Path]] = {}
        named = node_config.get(POLICY_NODE_CONFIG_KEY)
        if named is not None:
            if not isinstance(named, str) or not named:
                raise ParameterTypeError(POLICY_NODE_CONFIG_KEY, "a path string", named)
            values = _read_policy_file(Path(named))
        for key in POLICY_KEYS:
            if _PREFIX + key in node_config:
                values[key] = (node_config[_PREFIX + key], _PREFIX + key, Path.cwd())
        return cls._of(values)

    @classmethod
    def _of(cls, values: Mapping[str, tuple[Any, str, Path]]) -> NodePolicy:
        kwargs: dict[str, Any] = {}
        if "mode" in values:
            raw, name, _ = values["mode"]
            kwargs["mode"] = _mode(raw, name)
        for key, field in (("min-threshold", "min_threshold"), ("corrupted", "corrupted")):
            if key in values:
                raw, name, _ = values[key]
                kwargs[field] = _int(raw, name, MIN_THRESHOLD if key == "min-threshold" else 0)
        if "dp-max-epsilon" in values:
            raw, name, _ = values["dp-max-epsilon"]
            if isinstance(raw, bool) or not isinstance(raw, int | float):
                raise ParameterTypeError(name, "a number > 0", raw)
            kwargs["dp_max_epsilon"] = float(raw)
        if "identity-key" in values:
            raw, name, folder = values["identity-key"]
            kwargs["identity"] = load_identity_key(_path(raw, name, folder), name=name)
        if "registry" in values:
            raw, name, folder = values["registry"]
            kwargs["registry"] = load_registry(_path(raw, name, folder), name=name)
        return cls(**kwargs)

    # -- the check -------------------------------------------------------------------

    def proposed_config(self, data: bytes) -> SecAggConfig:
        """Decode the config a server proposes, its registry sent by digest or in full.

        A registry sent by digest (:func:`~privfed.secagg.protocol.state.encode_config`
        with ``registry_by_digest``, what privfed's servers send) stands for this
        node's pinned registry, and only if the digests agree; one sent in full
        is checked by :meth:`check`.

        Raises:
            MessageFormatError: Malformed bytes.
            ProtocolAbort: A registry digest without an identity at this node,
                or not its registry's.
        """
        registry = self.registry
        pinned = registry.root if isinstance(registry, IdentityEnrolment) else registry
        try:
            # The node's client needs the registry's root only (the roster proves
            # each key it uses), so nothing of size n goes into its stored state.
            return decode_config(data, registry=pinned).for_clients()
        except ProtocolAbort:
            if self.identity is None or self.registry is None:
                _refuse(_NO_IDENTITY)
            _refuse(_OTHER_REGISTRY)

    def check(self, config: SecAggConfig, client_id: int) -> None:
        """Refuse a proposed round that is weaker than this policy (before any key exists).

        Refused: a semi-honest round under an active policy; an active round
        without an identity; an active SecAgg+ round whose graph-seed committee
        is below :func:`~privfed.secagg.protocol.committee.default_committee_size`
        (with this node's ``n_C``) or that lets any committee reveal go missing;
        ``corrupted`` below :attr:`assumed_corrupted`; a
        threshold the :class:`~privfed.secagg.ThresholdPolicy` of the round's
        mode and ``n_C`` with ``min_threshold`` refuses -- below the minimum,
        not above ``n_C`` (``n_C`` colluders must hold fewer than ``t``
        shares), not a strict majority, or with ``2t <= s + n_C`` (active); a
        sparse graph cannot lower a neighbourhood below the minimum, since
        ``t <= s``; an active round over a registry other than the node's
        own; a client id that is not the registry's id of this node's key.

        Args:
            config: The round the server proposes.
            client_id: The client id the server gives this node.

        Raises:
            ProtocolAbort: The round is weaker than the policy (one line, the
                reason and the policy key).
        """
        refuse = _refuse
        if self.mode is SecurityMode.ACTIVE and not config.active:
            refuse("mode 'semi-honest' is below this node's policy (privfed-mode = 'active')")
        if config.active and (self.identity is None or self.registry is None):
            refuse(_NO_IDENTITY)
        t, s, n_c = config.threshold, config.neighbourhood_size, self.assumed_corrupted
        if config.corrupted < n_c:
            refuse(f"corrupted {config.corrupted} is below this node's assumed n_C = {n_c}")
        rules = ThresholdPolicy(
            active=config.active,
            corrupted=config.corrupted,
            minimum=MIN_THRESHOLD if self.min_threshold is None else self.min_threshold,
        )
        broken = rules.violation(t, s)
        if broken is not None:
            refuse(_threshold_reason(broken, config, self.min_threshold))
        if config.active:
            self._check_active(config, client_id, refuse)

    def _check_active(
        self, config: SecAggConfig, client_id: int, refuse: Callable[[str], NoReturn]
    ) -> None:
        registry = self.registry
        assert registry is not None  # noqa: S101 -- checked by the caller
        if config.identities is None or config.identities.digest != registry.digest:
            refuse(_OTHER_REGISTRY)
        if client_id != self.client_id:
            refuse(
                f"client id {client_id} is not this node's identity in its registry "
                f"(id {self.client_id})"
            )
        if config.committee:
            # The graph-seed committee: a smaller one, or reveals the server may leave
            # out, would let a server choose the graph by grinding (SECURITY.md).
            floor = default_committee_size(
                config.num_clients,
                config.neighbourhood_size,
                max(config.corrupted, self.assumed_corrupted),
            )
            if (config.committee_size or 0) < floor:
                refuse(
                    f"a graph-seed committee of {config.committee_size} is below the "
                    f"{floor} this round needs"
                )
            dropouts = config.committee_dropouts
            if dropouts:
                seeds = seeds_per_root(config.committee_size or 0, dropouts)
                refuse(
                    f"committee_dropouts {dropouts} would let the server choose among "
                    f"{seeds} graph seeds; this node accepts 0"
                )


def _threshold_reason(broken: ThresholdRule, config: SecAggConfig, minimum: int | None) -> str:
    """Why ``config``'s threshold breaks the rule ``broken``, in one line."""
    t, s, n_c = config.threshold, config.neighbourhood_size, config.corrupted
    graph = config.graph.value
    reasons = {
        # Also a sparse graph whose neighbourhoods are smaller: t <= s always.
        ThresholdRule.MINIMUM: f"threshold {t} is below this node's privfed-min-threshold "
        f"{minimum} (graph {graph}, {s} per neighbourhood)",
        ThresholdRule.ABOVE_CORRUPTED: f"threshold {t} does not exceed n_C = {n_c}",
        # Two disjoint groups of t could then be shown different survivor views.
        ThresholdRule.MAJORITY: f"threshold {t} is not a strict majority of its {s}-client "
        f"neighbourhood (graph {graph})",
        ThresholdRule.ACTIVE: f"threshold {t} breaks the active rule 2t > s + n_C = {s} + {n_c}",
    }
    # The config itself holds t in [2, s]: no other rule can break.
    return reasons.get(broken, f"threshold {t} is outside [2, {s}]")


_NO_IDENTITY: Final = "an active round needs this node's identity (privfed-identity-key, -registry)"
_OTHER_REGISTRY: Final = "the round's identity registry is not this node's own (privfed-registry)"


def _refuse(reason: str) -> NoReturn:
    raise ProtocolAbort(f"this node's policy refuses the round: {reason}", stage="ADVERTISE_KEYS")


def _mode(raw: object, name: str) -> SecurityMode:
    if isinstance(raw, SecurityMode):
        return raw
    try:
        return SecurityMode(raw)
    except ValueError:
        raise ParameterError(_named(name), "'semi-honest' or 'active'", raw) from None


def _int(raw: object, name: str, minimum: int) -> int:
    value = raw
    if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
        value = int(raw)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterTypeError(_named(name), "an int", raw)
    if value < minimum:
        raise ParameterError(_named(name), f"an int >= {minimum}", value)
    return value


def _named(name: str) -> str:
    return name if name.startswith(_PREFIX) or ": " in name else _PREFIX + name


def _path(raw: object, name: str, folder: Path) -> Path:
    if not isinstance(raw, str) or not raw:
        raise ParameterTypeError(name, "a path string", raw)
    path = Path(raw).expanduser()
    return path if path.is_absolute() else folder / path


def _read_policy_file(file: Path) -> dict[str, tuple[Any, str, Path]]:
    try:
        document = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ParameterError(
            POLICY_NODE_CONFIG_KEY, "a readable policy file", str(file), detail=exc.strerror
        ) from None
    except (ValueError, RecursionError) as exc:  # not TOML or UTF-8, a huge number, too deep
        raise ParameterError(
            POLICY_NODE_CONFIG_KEY, "a TOML policy file", str(file), detail=str(exc)
        ) from None
    unknown = sorted(set(document) - set(POLICY_KEYS))
    if unknown:
        raise ParameterError(
            f"{file}: {unknown[0]}", f"one of the policy keys {list(POLICY_KEYS)}", unknown[0]
        )
    folder = file.resolve().parent
    return {key: (value, f"{file}: {key}", folder) for key, value in document.items()}


class PolicyFiles:
    """A picklable :data:`PolicyFn` for simulations: one key file per partition in a folder.

    Flower's simulation engine gives its virtual nodes no node config of their
    own (only ``partition-id``), so a simulated federation names its policy in
    code: node ``p`` reads ``folder / key_file`` with ``{partition-id}``
    replaced by ``p``, and ``folder / registry_file``.  In a deployment use the
    node config (:func:`default_policy`): the policy is then each operator's.

    Args:
        folder: Folder of the key files and the registry.
        mode: The policy's mode (default ``"active"``).
        min_threshold: The policy's minimum threshold (``None``: a strict majority).
        corrupted: The policy's ``n_C``.
        key_file: Key file name, with ``{partition-id}``.
        registry_file: Registry file name.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        *,
        mode: str = "active",
        min_threshold: int | None = None,
        corrupted: int = 0,
        key_file: str = "node-{partition-id}.key",
        registry_file: str = "registry.json",
    ) -> None:
        self.folder = Path(folder)
        self.mode = mode
        self.min_threshold = min_threshold
        self.corrupted = corrupted
        self.key_file = key_file
        self.registry_file = registry_file

    def __call__(self, context: Context) -> NodePolicy:
        pid = str(context.node_config.get("partition-id", ""))
        key = self.folder / self.key_file.replace("{partition-id}", pid)
        return NodePolicy(
            mode=_mode(self.mode, "mode"),
            min_threshold=self.min_threshold,
            corrupted=self.corrupted,
            identity=load_identity_key(key),
            registry=load_registry(self.folder / self.registry_file),
        )


def identify_payload(nonce: bytes, client_id: int, registry_digest: bytes) -> bytes:
    """What a node signs to prove its client id: a domain of its own, the server's nonce,
    the registry's digest and the id.

    Answers the training workflow's ``identify`` stage and an active job's
    hello round; the domain keeps it apart from every protocol signature, and
    the registry digest keeps an answer from proving anything to a server of
    another federation that uses the same key.

    Raises:
        MessageFormatError: The nonce is not 16 to 64 bytes.
    """
    if not isinstance(nonce, bytes) or not 16 <= len(nonce) <= 64:
        raise MessageFormatError("the identify nonce is not 16 to 64 bytes")
    return (
        _IDENTIFY_DOMAIN
        + bytes((len(nonce),))
        + nonce
        + bytes((len(registry_digest),))
        + registry_digest
        + client_id.to_bytes(4, "big")
    )


def default_policy(context: Context) -> NodePolicy:
    """The node's policy from its node config (:meth:`NodePolicy.from_node_config`)."""
    return NodePolicy.from_node_config(context.node_config)
