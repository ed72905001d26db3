"""privfed's ClientApp pickles as the arguments that built it (Flower pickles it per message)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flwr.app import Context, Message

from privfed.flower import SecAggRound, hello
from privfed.flower.client import JournalIn
from privfed.flower.secagg_app import expected_sum, sum_client_app
from privfed.secagg import Stage

cloudpickle = pytest.importorskip("ray.cloudpickle")

LENGTH = 64


def test_the_app_pickles_small_and_rebuilt_it_runs_the_same_round(
    loopback: Any, tmp_path: Path
) -> None:
    faults = {(0, 4): (Stage.MASKED_INPUT, "raise"), (0, 1): (Stage.UNMASKING, "rollback")}
    app = sum_client_app(faults=faults, fault_delay=0.0, journal=JournalIn(tmp_path))
    blob = cloudpickle.dumps(app)
    assert len(blob) < 3000  # the handlers' closures in full are some 10 KB
    faults[(0, 2)] = (Stage.SHARE_KEYS, "raise")  # after the build: in neither app
    copy = pickle.loads(blob)  # noqa: S301 -- the bytes this test just made
    assert type(copy) is type(app) and copy is not app
    assert sorted(copy._registered_funcs) == sorted(app._registered_funcs)
    grid = loopback(copy, 5)
    mapping = {node: pid + 1 for node, pid in hello(grid, grid.get_node_ids()).items()}
    result = SecAggRound(threshold=3, vector_length=LENGTH, timeout=1.0).run(grid, mapping)
    assert result.dropped[Stage.MASKED_INPUT] == (5,)
    assert "rolled-back" in result.errors[2]
    np.testing.assert_array_equal(result.total, expected_sum(range(4), 0, LENGTH))


def test_an_app_with_a_handler_added_since_pickles_in_full(tmp_path: Path) -> None:
    app = sum_client_app(journal=JournalIn(tmp_path))

    @app.query("extra")
    def extra(message: Message, context: Context) -> Message:  # pragma: no cover
        return Message(message.content, reply_to=message)

    blob = cloudpickle.dumps(app)
    assert len(blob) > 3000
    copy = pickle.loads(blob)  # noqa: S301 -- the bytes this test just made
    assert "query.extra" in copy._registered_funcs
    assert sorted(copy._registered_funcs) == sorted(app._registered_funcs)
