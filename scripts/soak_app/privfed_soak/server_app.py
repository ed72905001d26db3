"""The soak ServerApp: rounds of privfed's secure sum; each outcome to ``<soak-dir>/server``.

For round ``r`` it appends one JSON line to ``server/rounds.jsonl`` when the
round starts and one when it ends: the survivors' partition ids, the stage
each dropout was lost at, and the total (``server/total-<run>-<r>.npy``), or
the privfed error that ended the round (type and message).  It never reads
the nodes' side files: the harness checks the totals against them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Context, Message
from flwr.serverapp import Grid, ServerApp

from privfed._atomic import atomic_write_bytes
from privfed.errors import PrivfedError
from privfed.flower.server import (
    SecAggRound,
    SecAggRoundResult,
    quiet_privfed_errors,
    say,
    wait_for_federation,
)
from privfed.secagg import ClientIds, majority_threshold

app = ServerApp()
_POLL_S = 0.1


class _PromptGrid:
    """The ServerApp's grid, whose ``send_and_receive`` looks for replies every 0.1 s.

    Flower's grid sleeps 3 s between two pulls; a stage then ends up to 3 s after
    its last reply.  Everything else is the grid's own (push, pull, node ids).
    """

    def __init__(self, grid: Grid) -> None:
        self._grid = grid

    def __getattr__(self, name: str) -> Any:
        return getattr(self._grid, name)

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> list[Message]:
        waiting = set(self._grid.push_messages(messages))
        deadline = time.monotonic() + (timeout or 0.0)
        replies: list[Message] = []
        while waiting:
            got = list(self._grid.pull_messages(waiting))
            replies.extend(got)
            waiting.difference_update(m.metadata.reply_to_message_id for m in got)
            if not waiting or (timeout is not None and time.monotonic() >= deadline):
                break
            time.sleep(_POLL_S)
        return replies


def _append(path: Path, record: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(record, sort_keys=True) + "\n")
        out.flush()
        os.fsync(out.fileno())


def _outcome(result: SecAggRoundResult, partition_of: dict[int, int]) -> dict[str, Any]:
    return {
        "outcome": "total",
        "survivors": sorted(partition_of[c] for c in result.survivors),
        "dropped": {
            stage.name: sorted(partition_of[c] for c in cids)
            for stage, cids in result.dropped.items()
            if cids
        },
        "errors": {str(partition_of[c]): why[:300] for c, why in result.errors.items()},
        "refused": {str(partition_of[c]): why[:300] for c, why in result.refused.items()},
    }


@app.main()
def _main(grid: Grid, context: Context) -> None:
    quiet_privfed_errors()
    run = dict(context.run_config)
    folder = Path(str(run["soak-dir"])) / "server"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "rounds.jsonl"
    count = int(run["num-clients"])
    partitions = wait_for_federation(grid, run, count)
    ids = ClientIds.from_partitions(partitions.values())
    mapping = ids.of_nodes(partitions)
    partition_of = {cid: partitions[node] for node, cid in mapping.items()}
    threshold = int(run.get("threshold", 0)) or majority_threshold(len(mapping))
    flow = SecAggRound(
        threshold=threshold,
        vector_length=int(run["vector-length"]),
        timeout=float(run["timeout"]),
    )
    prompt = _PromptGrid(grid)
    first, rounds = int(run["first-round"]), int(run["rounds"])
    run_id = int(context.run_id)
    say(f"soak run {run_id}: rounds {first}..{first + rounds - 1} over {len(mapping)} nodes")
    for r in range(first, first + rounds):
        base = {"run": run_id, "round": r}
        _append(log, {**base, "event": "start", "time": time.time()})
        started = time.perf_counter()
        record: dict[str, Any]
        try:
            result = flow.run(prompt, mapping, round_index=r)  # type: ignore[arg-type]
        except PrivfedError as exc:  # a clean abort: the round is over, nothing released
            record = {"outcome": "abort", "error": f"{type(exc).__name__}: {exc}"[:500]}
        else:
            record = _outcome(result, partition_of)
            total = np.ascontiguousarray(result.total, dtype="<u8")
            atomic_write_bytes(folder / f"total-{run_id}-{r}.bin", total.tobytes())
        seconds = round(time.perf_counter() - started, 3)
        _append(log, {**base, **record, "event": "end", "seconds": seconds, "time": time.time()})
        say(f"round {r}: {record['outcome']}")
