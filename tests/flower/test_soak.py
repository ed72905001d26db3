"""``scripts/soak.py``: a short soak on Flower's deployment engine, and its checks.

The slow test runs the harness itself (a SuperLink and three SuperNodes on
127.0.0.1 with TLS and SuperNode authentication): three rounds in two Flower
runs with a SuperLink restart between them, seed 3's faults (a node killed
-9 mid-stage and restarted, a duplicated delivery, a reordered reply), bounded
by a wall-clock budget and a timeout; it checks the harness's invariants
(every round exact or a clean abort, a clean journal audit, no untyped
exception in any log, no process left) from the JSON it writes; another
interrupts the harness (SIGINT, SIGTERM) while a run is in flight and checks
that it exits 128 + the signal with no process of the run left.  The fast
tests check the schedule and the audit on hand-made journals.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from flower_helpers import tagged_processes

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import soak  # noqa: E402
import soak_checks  # noqa: E402


def test_the_schedule_is_drawn_from_the_seed_and_meets_every_kind() -> None:
    plan, restarts = soak.draw_plan(3, 5, 40, 10, 1.0)
    assert (plan, restarts) == soak.draw_plan(3, 5, 40, 10, 1.0)
    assert plan != soak.draw_plan(4, 5, 40, 10, 1.0)[0]
    assert {f["kind"] for f in plan.values()} == set(soak.NODE_FAULTS)
    kills = [f["stage"] for f in plan.values() if f["kind"] == "kill"]
    assert set(kills) == set(soak.STAGES)  # a kill in each stage
    assert restarts and all(r % 10 == 0 and 0 < r < 40 for r in restarts)
    # journal-readonly is the harness's own fault: the nodes' plan leaves it out.
    assert all(f["kind"] != "journal-readonly" for f in soak.node_plan(plan).values())


def _line(session: str, step: int, reveals: dict[str, str], answer: str) -> str:
    entry = {"session": session, "round": 0, "client": 1, "step": step, "reveals": reveals,
             "answer": answer}  # fmt: skip
    return json.dumps(entry) + "\n"


def test_the_audit_finds_a_share_revealed_twice_and_two_answers(tmp_path: Path) -> None:
    good = _line("aa", 0, {}, "") + _line("aa", 4, {"2": "seed", "3": "key"}, "d1")
    (tmp_path / "node-0.jsonl").write_text(good + '{"session": "aa", "rou')  # torn tail
    clean = soak_checks.audit_journals(tmp_path)
    assert clean["violations"] == 0 and clean["entries"] == 2 and clean["unmask_answers"] == 1
    # The same answer sent again (a duplicated delivery) reveals nothing new.
    (tmp_path / "node-0.jsonl").write_text(good + _line("aa", 4, {"2": "seed", "3": "key"}, "d1"))
    again = soak_checks.audit_journals(tmp_path)
    assert again["violations"] == 0 and again["same_answer_resent"] == 1
    (tmp_path / "node-1.jsonl").write_text(
        good + _line("aa", 5, {"2": "key"}, "d2") + _line("aa", 4, {}, "d3")
    )
    audit = soak_checks.audit_journals(tmp_path)
    assert audit["violations"] == 2 and audit["same_answer_resent"] == 1  # node-0's
    assert any("peer 2's share revealed again (seed then key)" in d for d in audit["details"])
    assert any("two answers at step 4" in d for d in audit["details"])


def test_untyped_exceptions_are_found_and_privfed_ones_are_not(tmp_path: Path) -> None:
    (tmp_path / "supernode-0.log").write_text(
        "Traceback (most recent call last):\n  File x\nprivfed.errors.ProtocolAbort: no\n"
        "Traceback (most recent call last):\n  File y\nPermissionError: [Errno 13] denied\n"
    )
    rounds = [{"round": 0, "errors": {"1": "ProtocolAbort: refused", "2": "KeyError: 'x'"}}]
    found = soak_checks.untyped_exceptions(tmp_path, rounds)
    assert found == [
        "supernode-0.log: PermissionError: [Errno 13] denied",
        "error reply in round 0: KeyError: 'x'",
    ]


_BIND_ERROR = (
    "INFO:     Application startup complete.\n"
    "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 23456): "
    "address already in use\n"
)
_HTTP_API_TRACEBACK = (
    "Traceback (most recent call last):\n  File flower_supernode.py\n"
    "RuntimeError: SuperNode Runtime HTTP API failed to start.\n"
)


def test_a_node_start_on_a_taken_port_is_counted_apart_not_as_untyped(tmp_path: Path) -> None:
    """Flower's bare RuntimeError after uvicorn's bind error (errno 98) is the host's port race.

    The same RuntimeError without the bind error before it, and the bind error followed by
    another exception, are untyped; so is a second failed start with no bind error of its own.
    """
    (tmp_path / "supernode-0.log").write_text(_BIND_ERROR + _HTTP_API_TRACEBACK + "INFO: up\n")
    assert soak_checks.untyped_exceptions(tmp_path, []) == []
    assert soak_checks.port_collisions(tmp_path) == ["supernode-0.log"]
    (tmp_path / "supernode-1.log").write_text(_HTTP_API_TRACEBACK)
    (tmp_path / "supernode-2.log").write_text(
        _BIND_ERROR + "Traceback (most recent call last):\n  File x\nKeyError: 'y'\n"
    )
    (tmp_path / "supernode-3.log").write_text(
        _BIND_ERROR + _HTTP_API_TRACEBACK + _HTTP_API_TRACEBACK
    )
    assert soak_checks.untyped_exceptions(tmp_path, []) == [
        "supernode-1.log: RuntimeError: SuperNode Runtime HTTP API failed to start.",
        "supernode-2.log: KeyError: 'y'",
        "supernode-3.log: RuntimeError: SuperNode Runtime HTTP API failed to start.",
    ]
    assert soak_checks.port_collisions(tmp_path) == ["supernode-0.log", "supernode-3.log"]


@pytest.mark.slow
def test_a_short_soak_keeps_every_invariant(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    argv = [
        sys.executable, str(ROOT / "scripts" / "soak.py"), "--nodes", "3", "--rounds", "3",
        "--rounds-per-run", "2", "--fault-rate", "1", "--seed", "3", "--budget-s", "400",
        "--workdir", str(tmp_path / "work"), "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert out.exists(), done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["rounds_run"] == 3, done.stderr[-3000:]
    assert result["outcomes"]["other"] == 0, result["rounds"]
    assert result["outcomes"]["exact"] >= 2  # one fault per round, three nodes, t = 2
    assert result["journal_audit"]["violations"] == 0
    assert result["journal_audit"]["unmask_answers"] >= 4
    assert result["untyped_exceptions"] == []
    assert result["leftover_processes"] == []
    assert result["kills_landed"] == 1 and result["faults_injected"]["superlink-restart"] == 1
    assert set(result["rss_slopes"]) == {"superlink", "supernode-0", "supernode-1", "supernode-2"}
    assert result["passed"] and done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "soak.png").stat().st_size > 0


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_soak_leaves_no_process(tmp_path: Path, signum: int) -> None:
    tag = uuid.uuid4().hex
    out, work = tmp_path / "soak.json", tmp_path / "work"
    argv = [
        sys.executable, str(ROOT / "scripts" / "soak.py"), "--nodes", "3", "--rounds", "2",
        "--workdir", str(work), "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PRIVFED_SOAK_TEST": tag}
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 400
        # A round is in flight once a node has handled a stage (ClientApps running).
        while not list((work / "soak" / "progress").glob("*.log")):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.5)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=180)
        assert proc.returncode == 128 + signum, stderr[-3000:]
        result = json.loads(out.read_text())
        assert result["interrupted"] == signal.Signals(signum).name
        assert result["leftover_processes"] == [] and not result["passed"]
        assert tagged_processes(tag) == []  # no SuperLink, SuperNode, SuperExec or App
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid, _ in tagged_processes(tag):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_node_whose_journal_disk_fails_refuses_in_one_line(
    caplog: pytest.LogCaptureFixture, loopback: type
) -> None:
    """The soak's journal-full finding: an OSError of the node's storage is a typed refusal."""
    import errno

    from flwr.app import Context, Message, RecordDict

    from privfed.flower.node_app import _refusals_as_errors

    loopback(None, 1)  # sets Flower's task identity, as a ClientApp process has one
    message = Message(RecordDict(), dst_node_id=1, message_type="query.privfed_secagg_advertise")
    context = Context(run_id=1, node_id=1, node_config={"partition-id": 3}, state=RecordDict(),
                      run_config={})  # fmt: skip

    def full(msg: Message, ctx: Context) -> Message:
        raise OSError(errno.ENOSPC, "No space left on device", "/journals/node-3.jsonl")

    reply = _refusals_as_errors(message, context, full)
    assert reply.has_error()
    assert reply.error.reason.startswith(
        "ProtocolAbort: protocol aborted: this node's storage failed: OSError: [Errno 28] No space"
    )
    assert "refused at ADVERTISE_KEYS" in caplog.text and "Traceback" not in caplog.text
