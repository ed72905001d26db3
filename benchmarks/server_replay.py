"""The server of an in-process round, timed again alone: record its inputs, replay them.

``run_protocol`` plays every client and the server in one process, one after
another.  The server's seconds measured there include what the simulation does
to it: every full collection of the garbage collector also walks the N clients'
objects, and each message reaches the server right after a client's whole step
(its masks, keys and ciphers) has taken the caches.  A deployed server is a
process of its own that receives one message after another.

:class:`Journal` records, during the round, everything the server is given and
asked for: the fresh server object (before its first message), every message
as the bytes the transport delivered and who delivered it, and every call that
closes a stage (``committee_requests``, ``roster_bytes(c)``, ``routed_shares``,
...), with a digest of what each close published.  :func:`main` (run as a
script, in a fresh interpreter) loads the server, replays the journal through
the same public calls in the same order, times each receive and close exactly
as the runner does (decoding a message and encoding what a close publishes are
part of the server's time), and checks that it published the same bytes and
the same sum.  Benchmark only: nothing here is part of privfed.

Usage (what ``secagg_scale.py`` runs after each round)::

    python benchmarks/server_replay.py JOURNAL OUT.json
"""

from __future__ import annotations

import copyreg
import hashlib
import json
import pickle
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from privfed.secagg import runner
from privfed.secagg.protocol.messages import Message, decode_message

#: The server calls that close a stage (what the runner hands to ``server_close``).
CLOSES = (
    "committee_requests",
    "roster",
    "roster_bytes",
    "routed_shares",
    "consistency_requests",
    "consistency_request_bytes",
    "unmask_requests",
    "finalize",
)


def _public_key(key: ed25519.Ed25519PublicKey) -> tuple[Any, tuple[bytes]]:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return ed25519.Ed25519PublicKey.from_public_bytes, (raw,)


# The identity registry inside the server's configuration holds Ed25519 public
# keys, which do not pickle by themselves; their raw bytes do.
copyreg.pickle(type(ed25519.Ed25519PrivateKey.generate().public_key()), _public_key)


def _encoded(result: object) -> object:
    """What a close publishes, serialized as the runner serializes it."""
    if isinstance(result, dict) and any(isinstance(m, Message) for m in result.values()):
        return runner._serialized(result)
    if isinstance(result, Message):
        return result.to_bytes()
    return result


def _digest(result: object, into: Any) -> None:
    """Feed what a close published (bytes per client, bytes, or the sum) into ``into``."""
    if isinstance(result, dict):
        for client in sorted(result):
            into.update(client.to_bytes(8, "big"))
            into.update(result[client])
    elif isinstance(result, bytes):
        into.update(result)
    else:
        into.update(np.ascontiguousarray(result).tobytes())


class Journal:
    """Record a round's server inputs to ``path`` while ``run_protocol`` plays it.

    Enter it after the benchmark's other runner probes (innermost), so that
    nothing it writes falls inside their timed regions or the runner's.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.digest = hashlib.sha256()
        self.events = 0
        self._file: BinaryIO | None = None
        self._server: object | None = None
        self._stage: str | None = None
        self._depth = 0
        self._originals = (runner._Round._server_receive, runner._Round.server_close)

    def __enter__(self) -> Journal:
        self._file = self.path.open("wb")
        receive, close = self._originals
        journal = self

        def journaled_receive(round_: Any, stage: Any, data: bytes, client_id: int) -> Any:
            journal._attach(round_.server)
            journal._write(("receive", stage.name, data, client_id))
            return receive(round_, stage, data, client_id)

        def journaled_close(round_: Any, stage: Any, produce: Callable[[], Any]) -> Any:
            journal._attach(round_.server)
            journal._stage = stage.name
            try:
                result = close(round_, stage, produce)
            finally:
                journal._stage = None
            _digest(result, journal.digest)
            return result

        runner._Round._server_receive = journaled_receive  # type: ignore[method-assign]
        runner._Round.server_close = journaled_close  # type: ignore[method-assign]
        return self

    def __exit__(self, *_: object) -> None:
        runner._Round._server_receive, runner._Round.server_close = self._originals  # type: ignore[method-assign]
        if self._file is not None:
            self._file.close()
            self._file = None

    def _write(self, event: tuple[Any, ...]) -> None:
        assert self._file is not None
        pickle.dump(event, self._file, protocol=pickle.HIGHEST_PROTOCOL)
        self.events += 1

    def _attach(self, server: object) -> None:
        """At the server's first input: save it as it is, and journal its stage closes."""
        if self._server is not None:
            return
        self._server = server
        self._write(("server", pickle.dumps(server, protocol=pickle.HIGHEST_PROTOCOL)))
        for name in CLOSES:
            setattr(server, name, self._journaled(name, getattr(server, name)))

    def _journaled(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            # A close the runner times, not a call one close makes of another (nor
            # one made outside the server's time: a replay without it would
            # publish other bytes, and the benchmark would stop).
            if self._depth == 0 and self._stage is not None:
                self._write(("close", self._stage, name, args, kwargs))
            self._depth += 1
            try:
                return method(*args, **kwargs)
            finally:
                self._depth -= 1

        return call


def _events(path: Path) -> Iterator[tuple[Any, ...]]:
    with path.open("rb") as file:
        while True:
            try:
                yield pickle.load(file)  # noqa: S301 -- our own journal, private temp dir
            except EOFError:
                return


def replay(path: Path) -> dict[str, Any]:
    """Replay a journal on its server alone, in this process; seconds per stage and digest."""
    receive: dict[str, float] = {}
    close: dict[str, float] = {}
    digest = hashlib.sha256()
    server: Any = None
    total: Any = None
    messages = 0
    for event in _events(path):
        kind = event[0]
        if kind == "server":
            server = pickle.loads(event[1])  # noqa: S301 -- pickled by our Journal
        elif kind == "receive":
            _, stage, data, client_id = event
            start = time.perf_counter()
            server.receive(decode_message(data), sender=client_id)
            receive[stage] = receive.get(stage, 0.0) + time.perf_counter() - start
            messages += 1
        else:
            _, stage, name, args, kwargs = event
            start = time.perf_counter()
            result = _encoded(getattr(server, name)(*args, **kwargs))
            close[stage] = close.get(stage, 0.0) + time.perf_counter() - start
            _digest(result, digest)
            if name == "finalize":
                total = result
    stages = list(dict.fromkeys([*receive, *close]))
    per_stage = {s: receive.get(s, 0.0) + close.get(s, 0.0) for s in stages}
    return {
        "server_seconds": sum(per_stage.values()),
        "server_seconds_per_stage": per_stage,
        "receive_seconds_per_stage": receive,
        "close_seconds_per_stage": close,
        "messages": messages,
        "digest": digest.hexdigest(),
        "sum_digest": hashlib.sha256(np.ascontiguousarray(total).tobytes()).hexdigest(),
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__.split("Usage")[0].strip(), file=sys.stderr)
        print("usage: python benchmarks/server_replay.py JOURNAL OUT.json", file=sys.stderr)
        return 2
    journal = Path(args[0])
    if not journal.is_file():
        print(f"server_replay: JOURNAL {journal} is not a file", file=sys.stderr)
        return 2
    result = replay(journal)
    Path(args[1]).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
