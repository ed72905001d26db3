"""``benchmarks/server_replay.py``: a journaled server, replayed alone, does the same work.

``secagg_scale.py`` times the server a second time by replaying what it was
given; that figure means something only if the replay publishes exactly what
the round's server published.  These tests play a small active SecAgg+ round
with dropouts, replay its journal and require the same bytes and sum; and a
journal with one message changed must not pass as the same work.
"""

from __future__ import annotations

import hashlib
import importlib.util
import pickle
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from privfed.errors import ProtocolAbort
from privfed.secagg import Stage, run_protocol, runner

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


replay_mod = _load("_privfed_bench_server_replay", ROOT / "benchmarks" / "server_replay.py")


def _round(path: Path) -> tuple[object, np.ndarray]:
    rng = np.random.default_rng(5)
    inputs = [rng.integers(0, 2**63, size=40, dtype=np.uint64) for _ in range(24)]
    with replay_mod.Journal(path) as journal:
        report = run_protocol(
            inputs,
            threshold=9,
            dropouts={Stage.MASKED_INPUT: [2, 7]},
            graph="harary",
            degree=14,
            mode="active",
            corrupted=1,
        )
    expected = np.zeros(40, dtype=np.uint64)
    for i, vector in enumerate(inputs):
        if i not in (2, 7):
            np.add(expected, vector, out=expected)
    assert np.array_equal(report.total, expected)
    return journal, report.total


def test_the_replay_publishes_the_same_bytes_and_sum(tmp_path: Path) -> None:
    path = tmp_path / "server.journal"
    journal, total = _round(path)
    # The runner's hooks are put back on exit.
    assert runner._Round._server_receive is journal._originals[0]
    result = replay_mod.replay(path)
    assert result["digest"] == journal.digest.hexdigest()
    assert result["sum_digest"] == hashlib.sha256(total.tobytes()).hexdigest()
    # Every message of every stage was received again (22 survivors answer each late stage).
    assert result["messages"] > 4 * 22
    assert set(result["server_seconds_per_stage"]) == {s.name for s in Stage}
    assert result["server_seconds"] == pytest.approx(
        sum(result["server_seconds_per_stage"].values())
    )


def test_a_changed_message_is_not_the_same_work(tmp_path: Path) -> None:
    path = tmp_path / "server.journal"
    journal, _ = _round(path)
    events = list(replay_mod._events(path))
    # Drop one client's masked input: the replayed server sums other inputs.
    masked = [i for i, e in enumerate(events) if e[0] == "receive" and e[1] == "MASKED_INPUT"]
    del events[masked[0]]
    changed = tmp_path / "changed.journal"
    with changed.open("wb") as file:
        for event in events:
            pickle.dump(event, file)
    # The dropped client's later messages are refused: the replay stops, it
    # never reports a time for other work.
    with pytest.raises(ProtocolAbort, match="not a survivor"):
        replay_mod.replay(changed)
    assert journal.events == len(events) + 1
