"""The active security mode: identities, the configuration digest, ConsistencyCheck, noise layers.

Known-answer tests pin the Ed25519 usage (RFC 8032 §7.1) and the configuration
digest (recomputed here from its documented encoding, an independent oracle).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import random
import secrets
from pathlib import Path

import numpy as np
import pytest
from secagg_helpers import deliver

from privfed.errors import ParameterError, ParameterTypeError, ProtocolAbort
from privfed.secagg import (
    ConsistencyRequest,
    EncryptedSharesBundle,
    IdentityKey,
    IdentityRegistry,
    Roster,
    RosterEntry,
    RoutedShares,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    SecurityMode,
    Stage,
    UnmaskRequest,
    run_protocol,
)
from privfed.secagg.protocol.graph import advertisement_hash, graph_seed, graph_seed_of_root
from privfed.secagg.protocol.identity import survivor_set_payload
from privfed.secagg.protocol.roster_tree import RosterTree

L = 3

# -- RFC 8032 §7.1 known answers (Ed25519, TEST 1 to 3) ---------------------------------

RFC8032 = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
        "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
        "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
        "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
]


@pytest.mark.parametrize(("secret", "public", "message", "signature"), RFC8032)
def test_ed25519_known_answers(secret: str, public: str, message: str, signature: str) -> None:
    key = IdentityKey(bytes.fromhex(secret))
    assert key.public_key.hex() == public
    assert key.sign(bytes.fromhex(message)).hex() == signature
    registry = IdentityRegistry({7: key.public_key})
    assert registry.verify(7, bytes.fromhex(message), bytes.fromhex(signature))
    tampered = bytearray(bytes.fromhex(signature))
    tampered[0] ^= 1
    assert not registry.verify(7, bytes.fromhex(message), bytes(tampered))
    assert not registry.verify(7, bytes.fromhex(message) + b"!", bytes.fromhex(signature))
    assert not registry.verify(8, bytes.fromhex(message), bytes.fromhex(signature))


def test_identity_key_hides_its_secret() -> None:
    key = IdentityKey(bytes.fromhex(RFC8032[0][0]))
    assert RFC8032[0][0] not in repr(key)
    with pytest.raises(ParameterError) as info:
        IdentityKey(b"\x01" * 31)
    assert "01" not in str(info.value)
    with pytest.raises(ParameterTypeError):
        IdentityKey("00" * 32)  # type: ignore[arg-type]


# -- the registry file ------------------------------------------------------------------


def _keys(n: int) -> dict[int, IdentityKey]:
    return {cid: IdentityKey.generate() for cid in range(1, n + 1)}


@pytest.mark.parametrize("encoding", ["hex", "base64"])
def test_registry_file_round_trip(tmp_path: Path, encoding: str) -> None:
    registry = IdentityRegistry.of(_keys(4), assumed_corrupted=1)
    path = tmp_path / "identities.json"
    registry.save(path, encoding=encoding)
    document = json.loads(path.read_text())
    assert document["format"] == "privfed-secagg-identities"
    assert document["version"] == 1
    assert document["encoding"] == encoding
    first = document["clients"][0]["public_key"]
    raw = bytes.fromhex(first) if encoding == "hex" else base64.b64decode(first)
    assert raw == registry.public_key(1)
    loaded = IdentityRegistry.load(path)
    assert loaded == registry
    assert loaded.digest == registry.digest
    assert loaded.assumed_corrupted == 1


def test_a_parsed_registry_is_reused_only_for_the_very_same_text(tmp_path: Path) -> None:
    """A node reads its registry file and its stored state at every message: the same text
    gives the same (immutable) registry without a second parse; any other text is parsed
    afresh and checked, so a changed file is never served from the cache."""
    keys = _keys(3)
    registry = IdentityRegistry.of(keys)
    text = registry.to_json()
    assert registry.to_json() is text  # the text is made once per encoding
    assert registry.to_json(encoding="base64") != text
    first = IdentityRegistry.from_json(text)
    assert IdentityRegistry.from_json(text) is first and first == registry
    path = tmp_path / "registry.json"
    path.write_text(text)
    assert IdentityRegistry.load(path) is first
    # The file changes (one more client, then another policy): each is a new registry.
    grown = IdentityRegistry.of({**keys, 4: IdentityKey.generate()})
    path.write_text(grown.to_json())
    loaded = IdentityRegistry.load(path)
    assert loaded == grown and loaded.digest != first.digest and 4 in loaded.client_ids
    stricter = IdentityRegistry.of(keys, assumed_corrupted=1)
    path.write_text(stricter.to_json())
    assert IdentityRegistry.load(path).assumed_corrupted == 1
    # A malformed text is refused every time, never remembered.
    broken = text.replace('"ed25519"', '"rsa"')
    for _ in range(2):
        with pytest.raises(ParameterError):
            IdentityRegistry.from_json(broken)


def _document(**changes: object) -> str:
    document = json.loads(IdentityRegistry.of(_keys(2)).to_json())
    document.update(changes)
    return json.dumps(document)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        _document(format="other"),
        _document(version=2),
        _document(version=True),
        _document(algorithm="rsa"),
        _document(encoding="base32"),
        _document(assumed_corrupted=-1),
        _document(extra=1),
        _document(clients=[{"id": 1, "public_key": "zz" * 32}]),
        _document(clients=[{"id": 1, "public_key": "00" * 31}]),
        _document(clients=[{"id": 0, "public_key": "11" * 32}]),
        _document(clients=[{"id": 1}]),
    ],
)
def test_malformed_registry_files_are_refused(text: str) -> None:
    with pytest.raises((ParameterError, ParameterTypeError)):
        IdentityRegistry.from_json(text)


def test_registry_refuses_duplicates_and_binds_its_policy() -> None:
    keys = _keys(2)
    document = json.loads(IdentityRegistry.of(keys).to_json())
    document["clients"].append(dict(document["clients"][0]))
    with pytest.raises(ParameterError, match="distinct ids"):
        IdentityRegistry.from_json(json.dumps(document))
    with pytest.raises(ParameterError, match="distinct key"):
        IdentityRegistry({1: keys[1].public_key, 2: keys[1].public_key})
    assert IdentityRegistry.of(keys).digest != IdentityRegistry.of(keys, assumed_corrupted=1).digest


def test_registry_finds_the_id_enrolled_with_a_key() -> None:
    """What a node's policy asks at every message: the id its own key is enrolled as."""
    keys = _keys(5)
    registry = IdentityRegistry.of(keys)
    for cid, key in keys.items():
        assert registry.client_id_of(key.public_key) == cid
    assert registry.client_id_of(IdentityKey.generate().public_key) is None
    assert registry.client_id_of(keys[1].public_key.hex()) is None  # type: ignore[arg-type]


def test_registry_with_a_non_integer_id_gets_a_typed_error_naming_it() -> None:
    """Mixed id types do not sort: the ids are checked first, with the parameter named."""
    keys = _keys(2)
    mixed: dict[object, bytes] = {1: keys[1].public_key, "2": keys[2].public_key}
    with pytest.raises(ParameterTypeError, match="public_keys"):
        IdentityRegistry(mixed)  # type: ignore[arg-type]


# -- the configuration digest -------------------------------------------------------------


def _oracle_runs(ids: list[int]) -> bytes:
    """The ids' maximal runs of consecutive ids: a count, then (start, length) per run."""
    runs: list[list[int]] = []
    for i in ids:
        if runs and runs[-1][0] + runs[-1][1] == i:
            runs[-1][1] += 1
        else:
            runs.append([i, 1])
    return len(runs).to_bytes(4, "big") + b"".join(
        start.to_bytes(4, "big") + length.to_bytes(4, "big") for start, length in runs
    )


def _oracle_registry_digest(registry: IdentityRegistry) -> bytes:
    """The registry digest from the identity tree documented in identity_root, rebuilt here."""

    def sha(*parts: bytes) -> bytes:
        return hashlib.sha256(b"".join(parts)).digest()

    level = [
        sha(
            b"privfed/secagg/roster-leaf/v1",
            cid.to_bytes(4, "big"),
            sha(b"privfed/secagg/identity-key/v1", registry.public_keys[cid]),
        )
        for cid in sorted(registry.public_keys)
    ]
    while len(level) > 1:
        pairs = [
            sha(b"privfed/secagg/roster-node/v1", level[i], level[i + 1])
            for i in range(0, len(level) - 1, 2)
        ]
        level = pairs + ([level[-1]] if len(level) % 2 else [])
    label = b"privfed/secagg/identity-tree/v1"
    count = len(registry.public_keys).to_bytes(4, "big")
    root = sha(b"privfed/secagg/roster-root/v1", bytes((len(label),)), label, count, level[0])
    corrupted = registry.assumed_corrupted.to_bytes(4, "big")
    return sha(b"privfed/secagg/identity-registry/v2", corrupted, count, root)


def _oracle_digest(cfg: SecAggConfig) -> bytes:
    """The digest recomputed from the encoding documented in SecAggConfig.digest."""
    registry = cfg.identities
    registry_part = b"\x00"
    if registry is not None:
        assert isinstance(registry, IdentityRegistry)
        registry_part = b"\x01" + _oracle_registry_digest(registry)
    data = b"".join(
        [
            b"privfed/secagg/config-digest",
            bytes((2, len(cfg.session_id))),
            cfg.session_id,
            cfg.round_index.to_bytes(4, "big"),
            len(cfg.client_ids).to_bytes(4, "big"),
            _oracle_runs(sorted(cfg.client_ids)),
            cfg.threshold.to_bytes(4, "big"),
            cfg.vector_length.to_bytes(4, "big"),
            bytes((cfg.ring_bits,)),
            bytes((0 if cfg.graph.value == "complete" else 1,)),
            (cfg.degree or 0).to_bytes(4, "big"),
            bytes((0 if cfg.mode is SecurityMode.SEMI_HONEST else 1,)),
            cfg.corrupted.to_bytes(4, "big"),
            cfg.noise_layers.to_bytes(4, "big"),
            registry_part,
        ]
    )
    return hashlib.sha256(data).digest()


BASE = {
    "client_ids": tuple(range(1, 9)),
    "threshold": 5,
    "vector_length": L,
    "session_id": bytes(32),
}


def test_config_digest_known_answer() -> None:
    cfg = SecAggConfig(**BASE)  # type: ignore[arg-type]
    assert cfg.digest == _oracle_digest(cfg)
    # Pinned: a change of the encoding must be deliberate (and bump its version).
    assert cfg.digest.hex() == "48f3e188cacae94653d7261d7021746fd25e8b17766b506aafc7697a72acc8ef"
    assert (
        cfg.bound_session_id
        == hashlib.sha256(b"privfed/secagg/bound-session/v1" + cfg.digest).digest()
    )
    keys = _keys(8)
    active = SecAggConfig(
        **BASE,  # type: ignore[arg-type]
        mode="active",
        corrupted=1,
        identities=IdentityRegistry.of(keys, assumed_corrupted=1),
    )
    assert active.digest == _oracle_digest(active)
    # A registry of 11 (odd levels carried up), and the config over its root alone.
    wider = IdentityRegistry.of({**keys, **{i: IdentityKey.generate() for i in range(9, 12)}})
    for registry in (wider, wider.commitment):
        over = SecAggConfig(**BASE, mode="active", identities=registry)  # type: ignore[arg-type]
        assert over.digest == _oracle_digest(dataclasses.replace(over, identities=wider))
    assert wider.digest == _oracle_registry_digest(wider) == wider.commitment.digest


@pytest.mark.parametrize(
    "change",
    [
        {"client_ids": (*range(1, 8), 10)},
        {"threshold": 6},
        {"vector_length": L + 1},
        {"ring_bits": 32},
        {"graph": "harary", "degree": 4, "threshold": 3},
        {"graph": "harary", "degree": 6, "threshold": 3},
        {"session_id": b"\x01" * 32},
        {"round_index": 1},
        {"corrupted": 1},
        {"noise_layers": 1},
    ],
)
def test_every_field_changes_the_digest(change: dict[str, object]) -> None:
    base = SecAggConfig(**BASE)  # type: ignore[arg-type]
    other = SecAggConfig(**{**BASE, **change})  # type: ignore[arg-type]
    assert other.digest != base.digest
    assert other.bound_session_id != base.bound_session_id
    assert other.digest == _oracle_digest(other)


@pytest.mark.parametrize("seed", range(40))
def test_the_digest_of_ids_with_gaps_is_the_oracle_s(seed: int) -> None:
    """Runs and gaps of every shape: the digest commits to exactly the set of ids."""
    rng = random.Random(seed)
    ids = rng.sample(range(1, 40), rng.randint(2, 30))
    cfg = SecAggConfig(**{**BASE, "client_ids": ids, "threshold": 2})  # type: ignore[arg-type]
    assert cfg.digest == _oracle_digest(cfg)
    moved = [*sorted(ids)[:-1], max(ids) + 1]  # the same count and first runs, one id moved
    other = SecAggConfig(**{**BASE, "client_ids": moved, "threshold": 2})  # type: ignore[arg-type]
    assert other.digest != cfg.digest and other.digest == _oracle_digest(other)


def test_the_registry_is_in_the_digest() -> None:
    one = SecAggConfig(**BASE, mode="active", identities=IdentityRegistry.of(_keys(8)))  # type: ignore[arg-type]
    two = SecAggConfig(**BASE, mode="active", identities=IdentityRegistry.of(_keys(8)))  # type: ignore[arg-type]
    assert one.digest != two.digest


# -- active-mode configuration rules ---------------------------------------------------------


def test_active_mode_needs_a_registry_covering_every_client() -> None:
    with pytest.raises(ParameterTypeError, match="identities"):
        SecAggConfig(**BASE, mode="active")  # type: ignore[arg-type]
    keys = _keys(7)
    with pytest.raises(ParameterError, match="missing"):
        SecAggConfig(**BASE, mode="active", identities=IdentityRegistry.of(keys))  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="semi-honest"):
        SecAggConfig(**BASE, identities=IdentityRegistry.of(_keys(8)))  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="mode"):
        SecAggConfig(**BASE, mode="paranoid")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("n", "graph", "degree", "t", "corrupted", "ok"),
    [
        (10, "complete", None, 7, 3, True),  # 14 > 13
        (10, "complete", None, 6, 3, False),  # 12 <= 13
        (10, "complete", None, 4, 3, False),  # the review's n=10, t=4, 3 colluders
        (6, "complete", None, 3, 0, False),  # the review's split views at n=6, t=3
        (6, "complete", None, 4, 0, True),
        (20, "harary", 8, 6, 2, True),  # s = 9: 12 > 11
        (20, "harary", 8, 5, 2, False),
        (20, "harary", 2, 2, 0, True),  # k=2, t=2 only passes with n_C = 0 ...
        (20, "harary", 2, 2, 1, False),  # ... which an integrator's pin of 1 forbids
    ],
)
def test_active_mode_enforces_2t_above_s_plus_corrupted(
    n: int, graph: str, degree: int | None, t: int, corrupted: int, ok: bool
) -> None:
    keys = _keys(n)
    kwargs = {
        "client_ids": tuple(keys),
        "threshold": t,
        "vector_length": 1,
        "graph": graph,
        "degree": degree,
        "mode": "active",
        "corrupted": corrupted,
        "identities": IdentityRegistry.of(keys),
    }
    if ok:
        assert SecAggConfig(**kwargs).active  # type: ignore[arg-type]
    else:
        with pytest.raises(ParameterError, match="threshold"):
            SecAggConfig(**kwargs)  # type: ignore[arg-type]


def test_a_config_may_not_assume_fewer_corrupted_clients_than_the_integrator() -> None:
    keys = _keys(20)
    registry = IdentityRegistry.of(keys, assumed_corrupted=1)
    with pytest.raises(ParameterError, match="assumed_corrupted"):
        SecAggConfig(
            client_ids=tuple(keys),
            threshold=2,
            vector_length=1,
            graph="harary",
            degree=2,
            mode="active",
            identities=registry,
        )


def test_noise_layers_domain() -> None:
    with pytest.raises(ParameterError, match="noise_layers"):
        SecAggConfig(**{**BASE, "graph": "harary", "degree": 4, "threshold": 3}, noise_layers=1)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="noise_layers"):
        SecAggConfig(**BASE, noise_layers=4)  # type: ignore[arg-type]  # n - t = 3
    assert SecAggConfig(**BASE, noise_layers=3).noise_layers == 3  # type: ignore[arg-type]


def test_client_identity_must_match_the_registry() -> None:
    keys = _keys(8)
    cfg = SecAggConfig(**BASE, mode="active", identities=IdentityRegistry.of(keys))  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="identity"):
        SecAggClient(cfg, 1)
    with pytest.raises(ParameterError, match="registry"):
        SecAggClient(cfg, 1, identity=keys[2])
    assert SecAggClient(cfg, 1, identity=keys[1]).client_id == 1
    with pytest.raises(ParameterError, match="semi-honest"):
        SecAggClient(SecAggConfig(**BASE), 1, identity=keys[1])  # type: ignore[arg-type]


# -- a hand-driven active round ---------------------------------------------------------------


@dataclasses.dataclass
class Active:
    config: SecAggConfig
    keys: dict[int, IdentityKey]
    clients: dict[int, SecAggClient]
    server: SecAggServer
    inputs: dict[int, np.ndarray]


def active_round(n: int = 7, t: int = 5, corrupted: int = 2, **config: object) -> Active:
    keys = _keys(n)
    cfg = SecAggConfig(
        client_ids=tuple(keys),
        threshold=t,
        vector_length=L,
        mode="active",
        corrupted=corrupted,
        identities=IdentityRegistry.of(keys, assumed_corrupted=corrupted),
        **config,  # type: ignore[arg-type]
    )
    rng = np.random.default_rng(n)
    inputs = {c: rng.integers(0, 2**40, size=L, dtype=np.uint64) for c in cfg.client_ids}
    clients = {c: SecAggClient(cfg, c, inputs[c], identity=keys[c]) for c in cfg.client_ids}
    return Active(cfg, keys, clients, SecAggServer(cfg), inputs)


def to_consistency(r: Active, mask_skip: tuple[int, ...] = ()) -> dict[int, ConsistencyRequest]:
    for c in r.clients.values():
        deliver(r.server, c.advertise_keys())
    roster = r.server.roster()
    for c in r.clients.values():
        deliver(r.server, EncryptedSharesBundle.from_shares(c.share_keys(roster)))
    routed = r.server.routed_shares()
    for cid, c in r.clients.items():
        if cid not in mask_skip:
            deliver(r.server, c.masked_input(routed[cid]))
    return r.server.consistency_requests()


def test_an_active_round_by_hand_gives_the_exact_sum() -> None:
    r = active_round()
    consistency = to_consistency(r, mask_skip=(7,))
    assert set(consistency) == {1, 2, 3, 4, 5, 6}
    for cid, request in consistency.items():
        assert request.survivors == (1, 2, 3, 4, 5, 6)
        if cid != 6:  # 6 sends its masked input, then drops
            deliver(r.server, r.clients[cid].consistency_check(request))
    requests = r.server.unmask_requests()
    assert set(requests) == {1, 2, 3, 4, 5}
    for cid, request in requests.items():
        assert len(request.signatures) == r.config.threshold
        deliver(r.server, r.clients[cid].unmask(request))
    expected = sum((r.inputs[c] for c in range(1, 7)), np.zeros(L, np.uint64))
    np.testing.assert_array_equal(r.server.finalize(), expected)
    # One advertisement and one survivor-set signature each; the 6 peers' keys
    # and t survivor-set signatures verified.
    assert r.clients[1].signatures_made == 2
    assert r.clients[1].signatures_verified == 6 + r.config.threshold


@pytest.mark.parametrize("graph", ["complete", "harary"])
def test_active_rounds_survive_dropouts_at_every_stage(graph: str) -> None:
    rng = np.random.default_rng(3)
    n = 24
    inputs = [rng.integers(0, 2**40, size=L, dtype=np.uint64) for _ in range(n)]
    # Complete: 2 * 15 > 24 + 5.  SecAgg+: s = 15, 2 * 10 > 15 + 4, and a
    # neighbourhood that loses all 5 dropouts keeps t = 10 holders.
    kwargs = (
        {"threshold": 15, "corrupted": 5}
        if graph == "complete"
        else {"graph": "harary", "degree": 14, "threshold": 10, "corrupted": 4}
    )
    dropouts = {
        Stage.ADVERTISE_KEYS: [0],
        Stage.SHARE_KEYS: [1],
        Stage.MASKED_INPUT: [2],
        Stage.CONSISTENCY_CHECK: [3],
        Stage.UNMASKING: [4],
    }
    report = run_protocol(inputs, mode="active", dropouts=dropouts, **kwargs)  # type: ignore[arg-type]
    expected = sum((inputs[i] for i in range(n) if i not in (0, 1, 2)), np.zeros(L, np.uint64))
    np.testing.assert_array_equal(report.total, expected)
    assert report.survivors == tuple(c for c in range(1, n + 1) if c not in (1, 2, 3))
    full = [c for c in report.clients if len(c.seconds) == 5]
    # A member of the graph-seed committee (active SecAgg+) also signs its reveal.
    assert full and all(c.signatures_made == 2 + (c.client_id in report.committee) for c in full)
    assert bool(report.committee) == (graph == "harary")
    assert all(c.signatures_verified >= report.config.threshold for c in full)


def test_semi_honest_rounds_make_no_signatures() -> None:
    inputs = [np.arange(L, dtype=np.uint64)] * 5
    report = run_protocol(inputs, threshold=3)
    assert all(c.signatures_made == c.signatures_verified == 0 for c in report.clients)
    assert Stage.CONSISTENCY_CHECK not in report.clients[0].seconds


def test_the_server_checks_signatures_before_forwarding() -> None:
    r = active_round()
    first = r.clients[1].advertise_keys()
    with pytest.raises(ProtocolAbort, match="signature"):
        deliver(r.server, dataclasses.replace(first, signature=b"\x00" * 64))
    with pytest.raises(ProtocolAbort, match="signature"):
        deliver(r.server, dataclasses.replace(first, signature=None))
    deliver(r.server, first)
    assert r.server.advertised == {1}


def test_consistency_signatures_are_checked_by_the_server_too() -> None:
    r = active_round()
    consistency = to_consistency(r)
    answer = r.clients[1].consistency_check(consistency[1])
    with pytest.raises(ProtocolAbort, match="invalid"):
        deliver(r.server, dataclasses.replace(answer, signature=bytes(64)))
    deliver(r.server, answer)
    assert r.server.signers == {1}
    # A repeat of the very same request is answered with the very same signature.
    assert r.clients[1].consistency_check(consistency[1]) == answer


def test_consistency_check_does_not_exist_in_semi_honest_mode() -> None:
    cfg = SecAggConfig(client_ids=(1, 2, 3), threshold=2, vector_length=1)
    client = SecAggClient(cfg, 1)
    request = ConsistencyRequest(
        session_id=cfg.bound_session_id, round_index=0, recipient=1, survivors=(1, 2, 3)
    )
    with pytest.raises(ProtocolAbort, match="semi-honest"):
        client.consistency_check(request)
    with pytest.raises(ProtocolAbort, match="semi-honest"):
        SecAggServer(cfg).consistency_requests()
    assert not client.aborted


# -- noise layers (I3) ----------------------------------------------------------------------


def _noise_seeds(n: int, layers: int) -> list[list[bytes]]:
    return [[secrets.token_bytes(32) for _ in range(layers)] for _ in range(n)]


@pytest.mark.parametrize(("dropped", "revealed"), [((), (1, 2, 3)), ((2,), (2, 3)), ((2, 4), (3,))])
def test_noise_layers_follow_the_reveal_rule(
    dropped: tuple[int, ...], revealed: tuple[int, ...]
) -> None:
    n, layers = 6, 3
    seeds = _noise_seeds(n, layers)
    inputs = [np.full(L, i, np.uint64) for i in range(n)]
    report = run_protocol(
        inputs,
        threshold=3,
        noise_layers=layers,
        noise_seeds=seeds,
        dropouts={Stage.MASKED_INPUT: list(dropped)},
    )
    survivors = [i + 1 for i in range(n) if i not in dropped]
    assert set(report.revealed_noise_seeds) == set(survivors)
    for cid in survivors:
        # u survivors of n: layers j > n - u, each rebuilt exactly; none of a dropout.
        assert report.revealed_noise_seeds[cid] == {j: seeds[cid - 1][j - 1] for j in revealed}


def test_noise_layers_in_active_mode_count_the_signed_set() -> None:
    n, layers = 7, 2
    seeds = _noise_seeds(n, layers)
    inputs = [np.full(L, i, np.uint64) for i in range(n)]
    report = run_protocol(
        inputs,
        threshold=5,
        corrupted=2,
        mode="active",
        noise_layers=layers,
        noise_seeds=seeds,
        dropouts={Stage.MASKED_INPUT: [6]},
    )
    assert report.revealed_noise_seeds[1] == {2: seeds[0][1]}  # u = 6: layers j > 1


def _unmasking_with_layers(n: int = 6, t: int = 3, layers: int = 3, drop: int = 6):
    seeds = _noise_seeds(n, layers)
    cfg = SecAggConfig(
        client_ids=tuple(range(1, n + 1)), threshold=t, vector_length=L, noise_layers=layers
    )
    clients = {
        c: SecAggClient(cfg, c, np.full(L, c, np.uint64), noise_seeds=seeds[c - 1])
        for c in cfg.client_ids
    }
    server = SecAggServer(cfg)
    for c in clients.values():
        deliver(server, c.advertise_keys())
    roster = server.roster()
    for c in clients.values():
        deliver(server, EncryptedSharesBundle.from_shares(c.share_keys(roster)))
    routed = server.routed_shares()
    for cid, c in clients.items():
        if cid != drop:
            deliver(server, c.masked_input(routed[cid]))
    return cfg, clients, server, server.unmask_requests()


@pytest.mark.parametrize("asked", [(1, 2, 3), (3,), (), (2, 3, 4)])
def test_a_server_asking_for_other_layers_gets_nothing(asked: tuple[int, ...]) -> None:
    _, clients, _, requests = _unmasking_with_layers()
    assert requests[1].noise_layers == (2, 3)  # u = 5 of n = 6
    liar = dataclasses.replace(requests[1], noise_layers=asked)
    with pytest.raises(ProtocolAbort, match="reveal rule"):
        clients[1].unmask(liar)
    assert clients[1].aborted and not clients[1].done
    # ... and having aborted, the client reveals nothing later either.
    with pytest.raises(ProtocolAbort):
        clients[1].unmask(requests[1])


def test_noise_shares_are_never_revealed_for_a_dropped_client() -> None:
    _, clients, server, requests = _unmasking_with_layers()
    response = clients[2].unmask(requests[2])
    assert {s.owner for s in response.noise_shares} == {1, 2, 3, 4, 5}
    assert {s.layer for s in response.noise_shares} == {2, 3}
    assert {s.owner for s in response.key_shares} == {6}
    tampered = dataclasses.replace(response, noise_shares=response.noise_shares[:-1])
    with pytest.raises(ProtocolAbort, match="noise"):
        deliver(server, tampered)


def test_noise_seeds_are_checked_at_construction() -> None:
    cfg = SecAggConfig(client_ids=(1, 2, 3, 4), threshold=2, vector_length=1, noise_layers=2)
    with pytest.raises(ParameterError, match="exactly 2"):
        SecAggClient(cfg, 1, noise_seeds=[bytes(32)])
    with pytest.raises(ParameterError):
        SecAggClient(cfg, 1, noise_seeds=[bytes(32), bytes(31)])
    with pytest.raises(ParameterTypeError):
        SecAggClient(cfg, 1, noise_seeds=bytes(64))  # type: ignore[arg-type]


# -- the SecAgg+ graph seed -------------------------------------------------------------------


def _harary(n: int = 12, degree: int = 4, t: int = 3):
    cfg = SecAggConfig(
        client_ids=tuple(range(1, n + 1)),
        threshold=t,
        vector_length=L,
        graph="harary",
        degree=degree,
    )
    clients = {c: SecAggClient(cfg, c, np.full(L, c, np.uint64)) for c in cfg.client_ids}
    server = SecAggServer(cfg)
    return cfg, clients, server


def test_the_graph_seed_hashes_every_roster_members_advertisement() -> None:
    cfg, clients, server = _harary()
    adverts = {cid: c.advertise_keys() for cid, c in clients.items()}
    for message in adverts.values():
        deliver(server, message)
    server.roster()
    session = cfg.bound_session_id
    members = [
        (cid, advertisement_hash(session, cid, m.encryption_public_key, m.mask_public_key))
        for cid, m in sorted(adverts.items())
    ]
    assert server.graph_seed == graph_seed(session, members)
    assert server.graph_seed != graph_seed(session, members[1:])  # roster selection changes it
    part = server.roster(1)
    # The part carries the neighbourhood and a proof of the root, not the member list.
    assert part.proof is not None and part.proof.count == len(members)
    assert set(part.client_ids) == server.neighbours(1) | {1}
    assert server.graph_seed == graph_seed_of_root(session, RosterTree(session, members).root)
    assert set(clients[1].share_keys(part)) == server.neighbours(1)


def test_a_roster_part_that_misstates_the_members_is_refused() -> None:
    _, clients, server = _harary()
    for c in clients.values():
        deliver(server, c.advertise_keys())
    server.roster()
    part = server.roster(1)
    other = next(c for c in part.client_ids if c != 1)
    # An entry that does not match its leaf (e.g. a substituted key) rebuilds
    # another root: the client either refuses the part or ends up in another
    # graph session than the round's (caught at the next stage, see
    # test_roster_commitment.py).
    entries = tuple(
        dataclasses.replace(e, mask_public_key=bytes([7]) * 32) if e.client_id == other else e
        for e in part.entries
    )
    try:
        clients[1].share_keys(
            Roster._trusted(
                **_header(part), entries=entries, proof=part.proof, identities=part.identities
            )
        )
    except ProtocolAbort:
        assert clients[1].aborted
    else:
        assert clients[1]._graph_seed != server.graph_seed
    # A part that leaves out a neighbour the root includes: its leaf moved to
    # the brackets keeps the proof valid, and the client sees the omission.
    part2 = server.roster(2)
    assert part2.proof is not None
    dropped = min(server.neighbours(2))
    at = part2.client_ids.index(dropped)
    kept = tuple(e for e in part2.entries if e.client_id != dropped)
    leaf = part2.proof.positions[at]
    hood_entry = part2.entries[at]
    digest = advertisement_hash(
        server.config.bound_session_id,
        dropped,
        hood_entry.encryption_public_key,
        hood_entry.mask_public_key,
    )
    proof = dataclasses.replace(
        part2.proof,
        positions=part2.proof.positions[:at] + part2.proof.positions[at + 1 :],
        brackets=(*part2.proof.brackets, (leaf, dropped, digest)),
    )
    with pytest.raises(ProtocolAbort, match="leaves out"):
        clients[2].share_keys(
            Roster._trusted(
                **_header(part2), entries=kept, proof=proof, identities=part2.identities
            )
        )


def _header(message: Roster) -> dict[str, object]:
    return {"session_id": message.session_id, "round_index": message.round_index}


# -- the review's small findings --------------------------------------------------------------


def test_a_repeated_roster_id_is_refused_not_overwritten() -> None:
    cfg = SecAggConfig(client_ids=(1, 2, 3), threshold=2, vector_length=L)
    clients = {c: SecAggClient(cfg, c) for c in cfg.client_ids}
    adverts = {cid: c.advertise_keys() for cid, c in clients.items()}
    entries = [
        RosterEntry(cid, m.encryption_public_key, m.mask_public_key) for cid, m in adverts.items()
    ]
    fake = RosterEntry(2, bytes([9]) * 32, bytes([10]) * 32)
    # The constructor already refuses it; a roster built around the checks is refused by the client.
    with pytest.raises(ParameterError):
        Roster(**_hdr(cfg), entries=(entries[0], entries[1], fake, entries[2]))
    forged = Roster._trusted(**_hdr(cfg), entries=(entries[0], entries[1], fake, entries[2]))
    with pytest.raises(ProtocolAbort, match="twice"):
        clients[1].share_keys(forged)


def test_the_threshold_counts_distinct_senders() -> None:
    cfg = SecAggConfig(client_ids=(1, 2, 3, 4), threshold=3, vector_length=L)
    clients = {c: SecAggClient(cfg, c, np.zeros(L, np.uint64)) for c in cfg.client_ids}
    server = SecAggServer(cfg)
    for c in clients.values():
        deliver(server, c.advertise_keys())
    roster = server.roster()
    for c in clients.values():
        deliver(server, EncryptedSharesBundle.from_shares(c.share_keys(roster)))
    routed = server.routed_shares()
    one = routed[1].shares[0]
    # Two copies of one peer's ciphertext must not count as two peers.
    forged = RoutedShares._trusted(**_hdr(cfg), recipient=1, shares=(one, one))
    with pytest.raises(ProtocolAbort, match="twice"):
        clients[1].masked_input(forged)
    assert clients[1].aborted


def _hdr(cfg: SecAggConfig) -> dict[str, object]:
    return {"session_id": cfg.bound_session_id, "round_index": cfg.round_index}


def test_survivor_set_payload_is_order_free_and_domain_separated() -> None:
    a = survivor_set_payload(session=bytes(32), config_digest=bytes(32), survivors=(3, 1, 2))
    b = survivor_set_payload(session=bytes(32), config_digest=bytes(32), survivors=(1, 2, 3))
    assert a == b
    assert a.startswith(b"privfed/secagg/signed-survivor-set/v1")


def test_unmask_request_signatures_round_trip_through_bytes() -> None:
    r = active_round()
    consistency = to_consistency(r)
    for cid, request in consistency.items():
        deliver(
            r.server,
            r.clients[cid].consistency_check(ConsistencyRequest.from_bytes(request.to_bytes())),
        )
    for cid, request in r.server.unmask_requests().items():
        wire = UnmaskRequest.from_bytes(request.to_bytes())
        assert wire == request
        deliver(r.server, r.clients[cid].unmask(wire))
    expected = sum(r.inputs.values(), np.zeros(L, np.uint64))
    np.testing.assert_array_equal(r.server.finalize(), expected)


def test_an_active_client_survives_export_and_restore_mid_round() -> None:
    from privfed.secagg import MemoryRevealJournal, export_client_state, restore_client_state

    r = active_round()
    consistency = to_consistency(r)
    journal = MemoryRevealJournal()  # the node's own, which knows its session
    journal.start_session(r.config.session_id, r.config.round_index, 1)
    restored = restore_client_state(
        export_client_state(r.clients[1]), journal=journal, identity=r.keys[1]
    )
    assert restored.config == r.config
    r.clients[1] = restored
    for cid, request in consistency.items():
        deliver(r.server, r.clients[cid].consistency_check(request))
    for cid, request in r.server.unmask_requests().items():
        deliver(r.server, r.clients[cid].unmask(request))
    expected = sum(r.inputs.values(), np.zeros(L, np.uint64))
    np.testing.assert_array_equal(r.server.finalize(), expected)


def test_clients_shown_different_rosters_cannot_exchange_shares() -> None:
    from privfed.errors import AuthenticationError

    cfg = SecAggConfig(
        client_ids=tuple(range(1, 9)), threshold=3, vector_length=L, graph="harary", degree=6
    )
    clients = {c: SecAggClient(cfg, c, np.zeros(L, np.uint64)) for c in cfg.client_ids}
    honest, lying = SecAggServer(cfg), SecAggServer(cfg)
    adverts = {cid: c.advertise_keys() for cid, c in clients.items()}
    for cid, message in adverts.items():
        deliver(honest, message)
        if cid != 8:  # the server leaves client 8 out of the roster it shows client 1
            deliver(lying, message)
    honest.roster()
    lying.roster()
    assert honest.graph_seed != lying.graph_seed
    clients[1].share_keys(lying.roster(1))
    out = {cid: clients[cid].share_keys(honest.roster(cid)) for cid in range(2, 8)}
    # Neighbours of 1 in both graphs (6 of 7 others each: at least 5 in common).
    common = sorted(c for c in clients[1].neighbours & honest.neighbours(1) if 1 in out.get(c, {}))
    assert len(common) >= 2
    routed = RoutedShares(**_hdr(cfg), recipient=1, shares=tuple(out[c][1] for c in common))
    with pytest.raises(AuthenticationError):
        clients[1].masked_input(routed)
    assert clients[1].aborted
