"""What an untrusted node sends back: the server refuses that node and carries on.

Each test corrupts one node's reply (a wrapper around the real ClientApp) and
drives the real server loop over a :class:`LoopbackGrid`.  A node is left
out, or its reply refused, with the reason logged; the job goes on with the
others and its result stays exact.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flower_helpers import active_node_config
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from privfed.errors import ProtocolAbort
from privfed.flower import SecAggRound, _wire
from privfed.flower.client import JournalIn
from privfed.flower.secagg_app import expected_sum, sum_client_app
from privfed.secagg import Stage

LENGTH = 64
Mutation = Callable[[Message, Message], Message]
App = Callable[[Message, Context], Message]


def _corrupting(app: App, node: int, action: str, mutate: Mutation) -> App:
    """``app``, except that ``node``'s reply to ``query.<action>`` goes through ``mutate``."""

    def corrupted(message: Message, context: Context) -> Message:
        reply = app(message, context)
        if context.node_id == node and message.metadata.message_type == f"query.{action}":
            return mutate(reply, message)
        return reply

    return corrupted


def _with_field(key: str, value: Any) -> Mutation:
    """The reply with its privfed record's field ``key`` set to ``value``."""

    def mutate(reply: Message, request: Message) -> Message:
        fields = dict(_wire.config_record(reply.content))
        fields[key] = value
        content = RecordDict({**dict(reply.content), _wire.RECORD: ConfigRecord(fields)})
        return Message(content, reply_to=request)

    return mutate


def _with_bytes(edit: Callable[[bytes], bytes]) -> Mutation:
    """The reply with its protocol message's bytes edited."""

    def mutate(reply: Message, request: Message) -> Message:
        fields = dict(_wire.config_record(reply.content))
        data = fields["message"]
        assert isinstance(data, bytes)
        fields["message"] = edit(data)
        return Message(RecordDict({_wire.RECORD: ConfigRecord(fields)}), reply_to=request)

    return mutate


def _with_values(array: Array) -> Mutation:
    """A masked input whose value array is replaced by ``array``."""

    def mutate(reply: Message, request: Message) -> Message:
        content = RecordDict(
            {
                _wire.RECORD: _wire.config_record(reply.content),
                _wire.ARRAYS: ArrayRecord({"values": array}),
            }
        )
        return Message(content, reply_to=request)

    return mutate


def _empty(reply: Message, request: Message) -> Message:
    return Message(RecordDict(), reply_to=request)


_BYTES_REPLIES = {
    "truncated": _with_bytes(lambda b: b[: len(b) // 2]),
    "trailing-bytes": _with_bytes(lambda b: b + bytes(7)),
    "three-bytes": _with_bytes(lambda b: b[:3]),
    "bad-magic": _with_bytes(lambda b: bytes([b[0] ^ 0xFF]) + b[1:]),
    "bad-type": _with_bytes(lambda b: b[:5] + bytes([b[5] ^ 0xFF]) + b[6:]),
    "all-ff": _with_bytes(lambda b: b[:8] + b"\xff" * (len(b) - 8)),
    "all-zero": _with_bytes(lambda b: b[:8] + bytes(len(b) - 8)),
    "int-not-bytes": _with_field("message", 5),
    "str-not-bytes": _with_field("message", "x"),
    "list-not-bytes": _with_field("message", [b"a", b"b"]),
    "no-record": _empty,
}
_MASKED_REPLIES = {
    "sender-huge": _with_field("sender", 2**62),
    "sender-negative": _with_field("sender", -1),
    "round-negative": _with_field("round", -5),
    "ring-bits-0": _with_field("ring-bits", 0),
    "ring-bits-65": _with_field("ring-bits", 65),
    "ring-bits-huge": _with_field("ring-bits", 2**62),
    "session-short": _with_field("session", b"x"),
    "declaration-not-utf8": _with_field("noise-declaration", b"\xff\x00junk"),
    "declaration-too-deep": _with_field("noise-declaration", b"[" * 100_000),
    "declaration-huge-int": _with_field("noise-declaration", b"1" * 5_000),
    "declaration-a-list": _with_field("noise-declaration", b"[1]"),
    "declaration-a-str": _with_field("noise-declaration", "x"),
    "float64-values": _with_values(Array(np.zeros(LENGTH))),
    "short-values": _with_values(Array(np.zeros(LENGTH - 1, dtype=np.uint64))),
    "2d-values": _with_values(Array(np.zeros((8, LENGTH // 8), dtype=np.uint64))),
    "pickled-values": _with_values(
        Array(dtype="object", shape=(1,), stype="numpy.ndarray", data=b"\x80\x04N.")
    ),
    "bad-npy-header": _with_values(
        Array(dtype="<u8", shape=(LENGTH,), stype="numpy.ndarray", data=b"\x93NUMPY\x01\x00\xff")
    ),
}
_CASES = [
    *(
        pytest.param(stage, mutate, id=f"{stage}-{name}")
        for stage in ("advertise", "share", "unmask")
        for name, mutate in _BYTES_REPLIES.items()
    ),
    *(pytest.param("mask", mutate, id=f"mask-{name}") for name, mutate in _MASKED_REPLIES.items()),
]
_STAGES = {
    "advertise": Stage.ADVERTISE_KEYS,
    "share": Stage.SHARE_KEYS,
    "mask": Stage.MASKED_INPUT,
    "unmask": Stage.UNMASKING,
}


@pytest.mark.parametrize(("stage", "mutate"), _CASES)
def test_a_malformed_secagg_reply_is_a_typed_refusal_of_that_node(
    stage: str,
    mutate: Mutation,
    loopback: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Client 2's reply is malformed: refused with a typed error (never the catch-all)."""
    app = sum_client_app(journal=JournalIn(tmp_path))
    grid = loopback(_corrupting(app, 1002, _wire.ACTIONS[_STAGES[stage]], mutate), 5)
    flow = SecAggRound(threshold=3, vector_length=LENGTH, timeout=1.0)
    with caplog.at_level(logging.WARNING, logger="privfed"):
        result = flow.run(grid, {1001 + i: i + 1 for i in range(5)})
    assert 2 in result.refused
    assert not any("unexpected" in r.getMessage() for r in caplog.records)
    if stage == "unmask":  # its masked input is in the sum; the others' shares unmask it
        assert result.survivors == (1, 2, 3, 4, 5)
        np.testing.assert_array_equal(result.total, expected_sum(range(5), 0, LENGTH))
    else:
        assert result.survivors == (1, 3, 4, 5)
        np.testing.assert_array_equal(result.total, expected_sum([0, 2, 3, 4], 0, LENGTH))


# -- the factory job ----------------------------------------------------------------------

_SMALL_FACTORY_RUN = {
    "job": "factory",
    "num-clients": 3,
    "scenario": "dirichlet",
    "synthetic-per-class": 20,
    "factory-classifier-epochs": 1,
}


def _factory_apps() -> tuple[ClientApp, str]:
    from privfed.flower.apps import client_app
    from privfed.flower.factory_app import FACTORY_ACTION

    return client_app, FACTORY_ACTION


def _ship_twice(reply: Message, request: Message) -> Message:
    """The node ships its first factory a second time: two factories of one (class, client)."""
    fields = dict(_wire.config_record(reply.content))
    count = fields["count"]
    assert isinstance(count, int)
    for part in ("manifest", "weights", "seconds"):
        fields[f"{count}.{part}"] = fields[f"0.{part}"]
    fields["count"] = count + 1
    return Message(RecordDict({_wire.RECORD: ConfigRecord(fields)}), reply_to=request)


def test_a_node_shipping_one_class_twice_is_refused_alone(loopback: Any, tmp_path: Path) -> None:
    from privfed.flower.factory_app import factory_main

    app, action = _factory_apps()
    run = {**_SMALL_FACTORY_RUN, "output-dir": str(tmp_path / "out")}
    grid = loopback(_corrupting(app, 1002, action, _ship_twice), 3, run_config=run)
    doc = factory_main(grid, run)
    assert "must be an empty cell" in doc["refused"]["1"]


@pytest.mark.parametrize("seconds", [math.nan, math.inf], ids=["nan", "inf"])
def test_non_finite_fit_seconds_refuse_the_node(
    seconds: float, loopback: Any, tmp_path: Path
) -> None:
    from privfed.flower.factory_app import factory_main

    app, action = _factory_apps()
    run = {**_SMALL_FACTORY_RUN, "output-dir": str(tmp_path / "out")}
    grid = loopback(_corrupting(app, 1002, action, _with_field("0.seconds", seconds)), 3,
                    run_config=run)  # fmt: skip
    doc = factory_main(grid, run)
    assert "'0.seconds'" in doc["refused"]["1"]


def test_a_factory_node_declaring_a_partition_outside_the_job_is_left_out(
    loopback: Any, tmp_path: Path
) -> None:
    from privfed.flower.factory_app import factory_main

    app, _ = _factory_apps()
    run = {**_SMALL_FACTORY_RUN, "output-dir": str(tmp_path / "out")}
    grid = loopback(app, 4, run_config=run)
    grid.contexts[1004].node_config["partition-id"] = 9  # outside [0, 3)
    doc = factory_main(grid, run)
    assert doc["clients"] == [0, 1, 2]


# -- the hello round ----------------------------------------------------------------------


def _run_sum_job(grid: Any, run: dict[str, Any]) -> None:
    from privfed.flower import apps

    context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=run)
    apps.server_app(grid, context)


_SUM_RUN = {"job": "sum", "num-clients": 3, "wait-s": 5.0, "vector-length": LENGTH}


@pytest.mark.parametrize(
    "partition",
    [-1, True, 2.5, "1", b"1", [1], 2**40, 5],
    ids=["negative", "a-bool", "a-float", "a-str", "bytes", "a-list", "past-the-id-range",
         "past-the-job"],
)  # fmt: skip
def test_a_malformed_or_foreign_hello_partition_leaves_that_node_out(
    partition: Any, loopback: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = sum_client_app(journal=JournalIn(tmp_path))
    hello = _with_field("partition-id", partition)
    grid = loopback(_corrupting(app, 1002, _wire.HELLO_ACTION, hello), 3, run_config=_SUM_RUN)
    _run_sum_job(grid, _SUM_RUN)
    assert "2 survivors, exact" in capsys.readouterr().out


# -- the active mode ----------------------------------------------------------------------

_ACTIVE_N = 5


@pytest.fixture
def active_grid(loopback: Any, tmp_path: Path) -> Callable[[App], Any]:
    """``active_grid(wrap)``: 5 enrolled nodes running ``wrap(app)``, and the server's registry."""
    from privfed.flower.policy import write_identity_key
    from privfed.secagg import IdentityKey, IdentityRegistry

    keys = {cid: IdentityKey.generate() for cid in range(1, _ACTIVE_N + 1)}
    registry = IdentityRegistry.of(keys, assumed_corrupted=1)
    registry.save(tmp_path / "registry.json")
    for cid, key in keys.items():
        write_identity_key(tmp_path / f"node-{cid}.key", key)

    def make(wrap: Callable[[App], App]) -> Any:
        app = sum_client_app(journal=JournalIn(tmp_path / "j"))
        grid = loopback(wrap(app), _ACTIVE_N)
        for i, context in enumerate(grid.contexts.values()):
            context.node_config.update(active_node_config(tmp_path, i + 1))
        grid.registry = registry
        return grid

    return make


def _active_round(registry: Any, **extra: Any) -> SecAggRound:
    fields = {"mode": "active", "identities": registry, "corrupted": 1}
    flow = SecAggRound(threshold=4, vector_length=LENGTH, timeout=1.0, config_fields=fields)
    for key, value in extra.items():
        setattr(flow, key, value)
    return flow


_ACTIVE_CASES = [
    *(
        pytest.param(_wire.ACTIONS[Stage.CONSISTENCY_CHECK], m, {}, id=f"consist-{name}")
        for name, m in _BYTES_REPLIES.items()
    ),
    *(
        pytest.param(_wire.REVEAL_ACTION, m, {"graph": "harary", "degree": 4}, id=f"reveal-{name}")
        for name, m in _BYTES_REPLIES.items()
    ),
]


@pytest.mark.parametrize(("action", "mutate", "graph"), _ACTIVE_CASES)
def test_a_malformed_active_reply_is_a_typed_refusal_of_that_node(
    action: str,
    mutate: Mutation,
    graph: dict[str, Any],
    active_grid: Callable[..., Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    grid = active_grid(lambda app: _corrupting(app, 1002, action, mutate))
    flow = _active_round(grid.registry, **graph)
    mapping = {1001 + i: i + 1 for i in range(_ACTIVE_N)}
    with caplog.at_level(logging.WARNING, logger="privfed"):
        if action == _wire.REVEAL_ACTION:
            # With 5 nodes every node is on the committee and none may miss its reveal:
            # a malformed one is a member that did not reveal, and the round stops there.
            with pytest.raises(ProtocolAbort, match="did not reveal") as info:
                flow.run(grid, mapping)
            assert info.value.stage == "ADVERTISE_KEYS"
            assert not any(m.metadata.message_type.endswith("_share") for m in grid.delivered)
        else:
            result = flow.run(grid, mapping)
            assert 2 in result.refused
            # It sent its masked input before the check: the others' shares unmask it.
            assert result.survivors == (1, 2, 3, 4, 5)
            np.testing.assert_array_equal(result.total, expected_sum(range(5), 0, LENGTH))
    assert not any("unexpected" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("signature", b"x"),
        ("signature", 3),
        ("client-id", 2**70),
        ("client-id", True),
        ("client-id", 3),  # another enrolled node's id
        ("partition-id", 2**40),
    ],
    ids=["short-signature", "int-signature", "huge-id", "bool-id", "others-id", "huge-pid"],
)
def test_an_active_hello_without_a_valid_identity_leaves_that_node_out(
    key: str, value: Any, active_grid: Callable[..., Any]
) -> None:
    from privfed.flower import hello

    grid = active_grid(
        lambda app: _corrupting(app, 1002, _wire.HELLO_ACTION, _with_field(key, value))
    )
    found = hello(grid, grid.get_node_ids(), registry=grid.registry)
    assert found == {1001: 0, 1003: 2, 1004: 3, 1005: 4}
