"""privfed's one-pass delivery thread against Flower's own (no Ray: the link state alone).

:func:`privfed.flower.simulation._deliver_pending` must hand out what
Flower 1.42's ``add_messages_to_queue`` poll hands out -- each node's first
undelivered message, in node order, marked delivered, expired messages
dropped -- on two link states built the same way, poll after poll.
"""

from __future__ import annotations

import secrets
import threading
import time
from queue import Queue
from typing import Any

import pytest

from privfed.flower import simulation

flwr = pytest.importorskip("flwr")

from flwr.app import ConfigRecord, Message, RecordDict  # noqa: E402
from flwr.common.constant import (  # noqa: E402
    HEARTBEAT_INTERVAL_INF,
    NOOP_ACCOUNT_NAME,
    NOOP_FLWR_AID,
    SUPERLINK_NODE_ID,
)
from flwr.proto.task_pb2 import Task  # noqa: E402
from flwr.server.superlink.fleet.vce import vce_api  # noqa: E402
from flwr.server.superlink.linkstate import LinkStateFactory  # noqa: E402
from flwr.server.superlink.linkstate.in_memory_linkstate import RunRecord  # noqa: E402
from flwr.supercore.constant import FLWR_IN_MEMORY_DB_NAME, NOOP_FEDERATION_ID  # noqa: E402
from flwr.supercore.object_store import ObjectStoreFactory  # noqa: E402
from flwr.supercore.run import Run  # noqa: E402
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402
from flwr.superlink.federation import NoOpFederationManager  # noqa: E402
from flwr.superlink.grid import InMemoryGrid  # noqa: E402

NODES = 7
#: Messages per node index, in the order they are pushed (node 3 gets none).
PLAN = [6, 0, 1, 2, 0, 4, 5, 0, 1, 5, 5, 6, 2]
EXPIRED = 4  # the node whose first message outlives its TTL


def _state() -> tuple[Any, dict[int, int], dict[str, tuple[int, int]]]:
    """A link state with NODES nodes and PLAN's messages: (state, mapping, id -> (node, seq))."""
    factory = LinkStateFactory(
        FLWR_IN_MEMORY_DB_NAME, NoOpFederationManager(), ObjectStoreFactory()
    )
    state = factory.state()
    run = Run.create_empty(run_id=7)
    run.primary_task_id = 8
    run.federation_id = NOOP_FEDERATION_ID
    state.run_ids[run.run_id] = RunRecord(run=run)  # as flwr.simulation registers its run
    state.task_store[8] = Task(task_id=8, run_id=run.run_id)
    mapping: dict[int, int] = {}
    for index in range(NODES):
        node = state.create_node(
            NOOP_FLWR_AID,
            NOOP_ACCOUNT_NAME,
            secrets.token_bytes(32),
            heartbeat_interval=HEARTBEAT_INTERVAL_INF,
        )
        state.acknowledge_node_heartbeat(node_id=node, heartbeat_interval=HEARTBEAT_INTERVAL_INF)
        mapping[node] = index
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 7, SUPERLINK_NODE_ID, 8
    grid = InMemoryGrid(state_factory=factory)
    grid.set_run(run)
    node_of = {index: node for node, index in mapping.items()}
    origin: dict[str, tuple[int, int]] = {}
    for seq, index in enumerate(PLAN):
        content = RecordDict({"r": ConfigRecord({"seq": seq})})
        message = Message(content, dst_node_id=node_of[index], message_type="query.x")
        if index == EXPIRED and seq == PLAN.index(EXPIRED):
            message.metadata.ttl = 0.05
        (message_id,) = grid.push_messages([message])
        origin[message_id] = (index, seq)
    return state, mapping, origin


def _flower_poll(state: Any, mapping: dict[int, int]) -> list[Message]:
    """One poll of Flower's own delivery thread (``vce_api.add_messages_to_queue``)."""
    queue: Queue[Message] = Queue()
    stop = threading.Event()

    def once(timeout: float | None = None) -> bool:
        stop.set()  # after the first poll
        return True

    stop.wait = once  # type: ignore[method-assign]
    vce_api.add_messages_to_queue(state, queue, mapping, stop)
    return [queue.get_nowait() for _ in range(queue.qsize())]


def _seen(messages: list[Message], origin: dict[str, tuple[int, int]]) -> list[tuple[int, int]]:
    return [origin[m.metadata.message_id] for m in messages]


def test_one_pass_delivery_hands_out_what_flower_does() -> None:
    ours, ours_map, ours_origin = _state()
    theirs, theirs_map, theirs_origin = _state()
    time.sleep(0.1)  # the expired message's TTL runs out in both
    polls = []
    for _ in range(8):
        mine = _seen(simulation._deliver_pending(ours, ours_map), ours_origin)
        flower = _seen(_flower_poll(theirs, theirs_map), theirs_origin)
        assert mine == flower
        polls.append(mine)
    delivered = [seq for poll in polls for _, seq in poll]
    assert sorted(delivered) == [s for s in range(len(PLAN)) if s != PLAN.index(EXPIRED)]
    # In node order (not store order); node 3 has none, node 4 only an expired one.
    assert polls[0] == [(0, 1), (1, 2), (2, 3), (5, 6), (6, 0)]
    assert polls[-1] == []
    for message in ours.message_ins_store.values():
        assert message.metadata.delivered_at != ""


def test_flowers_thread_is_restored() -> None:
    flower_thread = vce_api.add_messages_to_queue
    with simulation._one_pass_delivery():
        assert vce_api.add_messages_to_queue is not flower_thread
        assert vce_api.add_messages_to_queue.__module__ == simulation.__name__
    assert vce_api.add_messages_to_queue is flower_thread


def test_overlapping_runs_share_one_patch_and_the_last_out_restores_flower() -> None:
    """Enter A, enter B, leave A, leave B: Flower's own thread is back, and in between
    both runs see the one-pass thread."""
    flower_thread = vce_api.add_messages_to_queue
    first, second = simulation._one_pass_delivery(), simulation._one_pass_delivery()
    first.__enter__()
    ours = vce_api.add_messages_to_queue
    second.__enter__()
    assert vce_api.add_messages_to_queue is ours is not flower_thread
    first.__exit__(None, None, None)
    assert vce_api.add_messages_to_queue is ours
    second.__exit__(None, None, None)
    assert vce_api.add_messages_to_queue is flower_thread
