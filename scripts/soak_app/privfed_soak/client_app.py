"""The soak ClientApp: privfed's secure-aggregation handlers, plus the harness's faults.

The node's input for round ``r`` is a fresh random ring vector (the OS
CSPRNG), written before it is masked to ``<soak-dir>/plain/<run>/<r>/p<pid>.bin``:
a side channel only the harness reads, to check the server's total.  The
node's reveal journal is its node config's ``privfed-journal`` (a file that
outlives the SuperNode process: it is what a restarted node reloads).

:class:`SoakFaults` (a Mod) first appends ``<time> <run> <round> <stage>`` to
``<soak-dir>/progress/node-<pid>.log`` (the harness kills a node -9 when it
sees the stage it is waiting for), then acts out what ``<soak-dir>/plan.json``
schedules for this node, round and stage:

* ``kill``: wait ``hold-s`` seconds before handling the message, so that the
  harness's SIGKILL lands while the node is inside the stage;
* ``delay``: answer after ``delay-s`` seconds (replies arrive late and in
  another order than the messages went out);
* ``duplicate``: the message is handled twice (a duplicated delivery); the
  first reply is sent;
* ``reorder``: the reply to this stage is held back and the node's reply to
  the previous stage is sent in its place (an old reply arriving late);
* ``garbage``: every bytes field of the reply is replaced by random bytes
  of the same length, and its arrays by random words;
* ``journal-full``: every journal write fails with ``ENOSPC`` (a full disk:
  this user cannot mount a small file system, so the failure is injected at
  the journal's write).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.clientapp.typing import ClientAppCallable

from privfed._atomic import atomic_write_bytes
from privfed.errors import PrivfedError
from privfed.flower import _wire
from privfed.flower.client import add_secagg_handlers, default_journal
from privfed.flower.node_app import _refusals_as_errors
from privfed.secagg import SecAggConfig
from privfed.secagg.protocol.state import FileRevealJournal, RevealJournal, decode_config

_ROUND_KEY = "privfed_soak"
_LAST_KEY = "privfed_soak_last"
# The fault the current message acts out (one ClientApp process serves one message).
_ACTIVE: dict[str, str] = {}


def _soak_dir(context: Context) -> Path:
    return Path(str(context.run_config["soak-dir"]))


def _pid(context: Context) -> int:
    return int(context.node_config["partition-id"])


def _values(context: Context, config: SecAggConfig) -> npt.NDArray[np.uint64]:
    rng = np.random.default_rng(secrets.randbits(128))
    vector = rng.integers(0, 2**64, size=config.vector_length, dtype=np.uint64, endpoint=False)
    side = _soak_dir(context) / "plain" / str(context.run_id) / str(config.round_index)
    side.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(side / f"p{_pid(context)}.bin", vector.astype("<u8").tobytes())
    return vector


class _FullJournal(FileRevealJournal):
    """A journal on a full disk: every write fails as ``write(2)`` would."""

    def _persist(self, entry: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))


def _journal(context: Context) -> RevealJournal:
    if _ACTIVE.get("kind") == "journal-full":
        return _FullJournal(str(context.node_config["privfed-journal"]))
    return default_journal(context)


def _round_of(message: Message, context: Context, stage: str) -> int:
    """The round this message belongs to (-1: unknown, e.g. a restarted node's later stage)."""
    if stage == "ADVERTISE_KEYS":
        try:
            record = _wire.config_record(message.content)
            r = decode_config(_wire.get_bytes(record, "config")).round_index
        except PrivfedError:
            return -1
        context.state[_ROUND_KEY] = ConfigRecord({"round": r})
        return r
    stored = context.state.config_records.get(_ROUND_KEY)
    return int(stored["round"]) if stored is not None else -1  # type: ignore[arg-type]


def _random_like(value: Any) -> Any:
    return secrets.token_bytes(len(value)) if isinstance(value, bytes) else value


def _garbage(reply: Message, message: Message) -> Message:
    content = RecordDict()
    for name, record in reply.content.config_records.items():
        content.config_records[name] = ConfigRecord(
            {k: _random_like(v) for k, v in record.items()}
        )
    for name, arrays in reply.content.array_records.items():
        content.array_records[name] = ArrayRecord(
            {
                k: Array(np.frombuffer(secrets.token_bytes(8 * max(1, a.numpy().size)), "<u8"))
                for k, a in arrays.items()
            }
        )
    return Message(content, reply_to=message)


class SoakFaults:
    """The harness's fault Mod (see the module docstring)."""

    def __call__(self, message: Message, context: Context, call_next: ClientAppCallable) -> Message:
        stage = _wire.STAGE_OF_TYPE.get(message.metadata.message_type)
        if stage is None:
            return call_next(message, context)
        folder = _soak_dir(context)
        pid, r = _pid(context), _round_of(message, context, stage.name)
        progress = folder / "progress" / f"node-{pid}.log"
        progress.parent.mkdir(parents=True, exist_ok=True)
        with progress.open("a", encoding="utf-8") as out:
            out.write(f"{time.time():.3f} {context.run_id} {r} {stage.name}\n")
        fault = _planned(folder, pid, r, stage.name)
        kind = str(fault.get("kind", ""))
        _ACTIVE["kind"] = kind
        try:
            return self._act(kind, fault, message, context, call_next)
        finally:
            _ACTIVE.clear()

    @staticmethod
    def _act(
        kind: str,
        fault: dict[str, Any],
        message: Message,
        context: Context,
        call_next: ClientAppCallable,
    ) -> Message:
        if kind in ("delay", "kill"):
            # A kill target waits here for the harness's SIGKILL: killed mid-stage.
            time.sleep(float(fault.get("delay-s", fault.get("hold-s", 1.0))))
        reply = call_next(message, context)
        if kind == "duplicate":
            with contextlib.suppress(PrivfedError):
                # The node refuses the second delivery; the first reply stands.
                call_next(message, context)
        if kind == "garbage" and not reply.has_error():
            return _garbage(reply, message)
        last = context.state.config_records.get(_LAST_KEY)
        if not reply.has_error() and _wire.RECORD in reply.content.config_records:
            ours = reply.content.config_records[_wire.RECORD]
            context.state[_LAST_KEY] = ConfigRecord(dict(ours))
        if kind == "reorder" and last is not None:
            return Message(RecordDict({_wire.RECORD: last}), reply_to=message)
        return reply


def _planned(folder: Path, pid: int, r: int, stage: str) -> dict[str, Any]:
    try:
        plan = json.loads((folder / "plan.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = plan.get(f"{pid}/{r}/{stage}", {})
    return found if isinstance(found, dict) else {}


app = add_secagg_handlers(
    ClientApp(mods=[_refusals_as_errors, SoakFaults()]), _values, journal=_journal
)
