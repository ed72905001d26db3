"""Message-API strategies under privfed's secure aggregation: a Grid that secures train rounds.

``strategy.start(grid=SecAggGrid(grid, workflow), ...)``: see :class:`SecAggGrid`
and :mod:`privfed.flower.training` (the protocol's stages, the threat model).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import cast

from flwr.app import Message, Metadata, RecordDict
from flwr.app.message_type import MessageType
from flwr.serverapp import Grid
from flwr.supercore.run import Run

from privfed._checks import check_str
from privfed.errors import ParameterError, ParameterTypeError
from privfed.flower.training import AGGREGATE_NODE_ID, SecAggWorkflow, TrainingRoundState

__all__ = ["SecAggGrid"]


class SecAggGrid(Grid):
    """A Grid whose train rounds are secure aggregations: any Message-API strategy, unchanged.

    ``strategy.start(grid=SecAggGrid(grid, workflow, weighted_by_key=...), ...)``:
    each ``send_and_receive`` of ``train`` messages runs one round of
    ``workflow``'s protocol over ``grid`` (the strategy's content of each
    message is that node's train instructions) and returns one reply, the
    :class:`SecureAggregate` as a Message (its ``src_node_id`` is 0: no node
    sent it), or no reply if the round was skipped (the strategy keeps its
    arrays).  Every other message goes to ``grid`` as it is.

    Args:
        grid: The ServerApp's grid.
        workflow: The protocol's parameters (its ``timeout`` applies per stage;
            ``None``: the strategy's timeout).
        weighted_by_key: The strategy's ``weighted_by_key`` (default Flower's
            ``"num-examples"``): where nodes report their example count, and
            where the reply carries the total.

    Raises:
        ParameterTypeError: ``grid`` is not a Grid or ``workflow`` not a
            :class:`SecAggWorkflow`.
    """

    def __init__(
        self,
        grid: Grid,
        workflow: SecAggWorkflow,
        *,
        weighted_by_key: str = "num-examples",
    ) -> None:
        if not isinstance(grid, Grid):
            raise ParameterTypeError("grid", "a flwr Grid", grid)
        if not isinstance(workflow, SecAggWorkflow):
            raise ParameterTypeError("workflow", "a SecAggWorkflow", workflow)
        self.grid = grid
        self.workflow = workflow
        self.weighted_by_key = check_str("weighted_by_key", weighted_by_key)
        self._rounds = 0

    # -- delegated ---------------------------------------------------------------

    def set_run(self, run: Run) -> None:
        """Flower's ``Grid.set_run``, on the wrapped grid."""
        self.grid.set_run(run)

    @property
    def run(self) -> Run:
        """The wrapped grid's run."""
        return self.grid.run

    def create_message(
        self,
        content: RecordDict,
        message_type: str,
        dst_node_id: int,
        group_id: str,
        ttl: float | None = None,
    ) -> Message:
        """Flower's ``Grid.create_message``, on the wrapped grid."""
        return self.grid.create_message(content, message_type, dst_node_id, group_id, ttl)

    def get_node_ids(self) -> Iterable[int]:
        """The wrapped grid's node ids."""
        return self.grid.get_node_ids()

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Pushed as they are: only :meth:`send_and_receive` secures train rounds."""
        return self.grid.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        """Pulled from the wrapped grid."""
        return self.grid.pull_messages(message_ids)

    # -- secured -----------------------------------------------------------------

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        """Send ``messages``; train messages become one secure round and one reply.

        Raises:
            ParameterError: Two train messages for one node, or train messages
                of different types.
            RingOverflowError: The round's configuration could wrap the ring.
        """
        batch = list(messages)
        train = [m for m in batch if m.metadata.message_type.split(".")[0] == MessageType.TRAIN]
        other = [m for m in batch if m.metadata.message_type.split(".")[0] != MessageType.TRAIN]
        replies = list(self.grid.send_and_receive(other, timeout=timeout)) if other else []
        if train:
            replies.extend(self._secure_round(train, timeout))
        return replies

    def _secure_round(self, train: list[Message], timeout: float | None) -> list[Message]:
        instructions = {int(m.metadata.dst_node_id): m.content for m in train}
        if len(instructions) != len(train):
            raise ParameterError("messages", "one train message per node", "duplicates")
        kinds = {m.metadata.message_type for m in train}
        if len(kinds) != 1:
            raise ParameterError("messages", "train messages of one type", sorted(kinds))
        self._rounds += 1
        round_index = _server_round(train[0].content, self._rounds)
        state = TrainingRoundState(
            round_index=round_index,
            instructions=instructions,
            message_type=kinds.pop(),
            group_id=train[0].metadata.group_id or str(round_index),
            reply_format="message",
            weight_key=self.weighted_by_key,
            timeout=self.workflow.timeout if self.workflow.timeout is not None else timeout,
        )
        aggregate = self.workflow.secure_aggregate(self.grid, state)
        if aggregate is None:
            return []
        first = train[0].metadata
        metadata = Metadata(
            run_id=first.run_id,
            message_id="",
            src_node_id=AGGREGATE_NODE_ID,
            dst_node_id=first.src_node_id,
            reply_to_message_id="",
            group_id=state.group_id,
            created_at=time.time(),
            ttl=first.ttl,
            message_type=state.message_type,
        )
        # No single node sent it: Flower's constructor takes explicit metadata for that
        # (its typed overloads leave the keyword out).
        reply = Message(aggregate.to_content(self.weighted_by_key), metadata=metadata)  # type: ignore[call-overload]
        return [cast(Message, reply)]


def _server_round(content: RecordDict, fallback: int) -> int:
    """The strategy's ``server-round`` (Flower's strategies put it in the train config)."""
    for record in content.config_records.values():
        value = record.get("server-round")
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**32:
            return value
    return fallback
