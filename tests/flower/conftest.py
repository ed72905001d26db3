"""Flower tests: they need flwr (extra ``flower``, in ``dev``).

:class:`LoopbackGrid` is a test double of Flower's Grid that delivers each
message to a ClientApp in this process.  It keeps one Context per node (so
``Context.state`` persists between messages, as on a SuperNode) and turns a
raising ClientApp into an error reply, as Flower does.  It lets the workflow
and the job apps be tested in well under a second, without Ray (``apps`` gives
chosen nodes another ClientApp: a federation with an outdated node); the real
engines are tested in ``test_simulation.py`` and ``test_deployment.py``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("flwr", reason="privfed[flower] is not installed")


from collections.abc import Iterable, Mapping
from typing import Any

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid
from flwr.supercore.task_identity import TaskIdentity


class LoopbackGrid(Grid):
    def __init__(
        self,
        app: ClientApp,
        num_nodes: int,
        *,
        run_config: Mapping[str, Any] | None = None,
        first_node_id: int = 1001,
        apps: Mapping[int, ClientApp] | None = None,
    ) -> None:
        TaskIdentity.run_id = 1
        TaskIdentity.node_id = 0
        TaskIdentity.task_id = 1
        self.app = app
        self.apps = dict(apps or {})  # node id -> the ClientApp that node runs instead
        self.contexts = {
            first_node_id + i: Context(
                run_id=1,
                node_id=first_node_id + i,
                node_config={"partition-id": i, "num-partitions": num_nodes},
                state=RecordDict(),
                run_config=dict(run_config or {}),
            )
            for i in range(num_nodes)
        }
        self.delivered: list[Message] = []

    def set_run(self, run: Any) -> None:  # pragma: no cover -- unused
        raise NotImplementedError

    @property
    def run(self) -> Any:  # pragma: no cover -- unused
        raise NotImplementedError

    def create_message(self, *args: Any, **kwargs: Any) -> Message:  # pragma: no cover
        raise NotImplementedError

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:  # pragma: no cover
        raise NotImplementedError

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:  # pragma: no cover
        raise NotImplementedError

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        replies = []
        for message in messages:
            node = message.metadata.dst_node_id
            context = self.contexts[node]
            try:
                reply = self.apps.get(node, self.app)(message, context)
            except Exception as exc:
                reply = Message(
                    Error(code=1, reason=f"{type(exc).__name__}: {exc}"), reply_to=message
                )
            reply.metadata.__dict__["_src_node_id"] = node
            self.delivered.append(reply)
            replies.append(reply)
        return replies


@pytest.fixture
def loopback() -> type[LoopbackGrid]:
    """The :class:`LoopbackGrid` class."""
    return LoopbackGrid
