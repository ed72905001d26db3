"""``scripts/flower_deploy.py``: what it reports, where it keeps the logs, how it stops.

Most tests need no Flower job: the script is loaded as a module (as in
``test_deployment.py``) and its log reading, process stopping and ``main``
(with the deployment replaced by a stand-in) are called directly.  The slow
tests start the real script (a SuperLink and SuperNodes on 127.0.0.1), each
bounded by timeouts: a failing run must exit 1 with the ServerApp's error in
one line, and SIGINT (Ctrl-C) or SIGTERM must stop every process, print no
traceback and exit 128 + the signal.  Leftover processes are found by a
marker in their environment, which every process the script starts inherits.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "flower_deploy.py"
_ESC = "\x1b"

SUCCESS_LOG = f"""Using SuperLink: privfed-loopback (127.0.0.1:40891)
Successfully started run 9385724828210234830
{_ESC}[92mINFO {_ESC}[0m:      Starting logstream for run_id `9385724828210234830`
{_ESC}[92mINFO {_ESC}[0m:      Start `flwr-serverapp` process
privfed: job 'latent'
privfed: 3 of 3 nodes connected
privfed latent job over Flower: epsilon=10, accuracy on synthetic data 0.8123; artefacts in out
{_ESC}[92mINFO {_ESC}[0m:
"""

# Flower 1.42's log of a ServerApp that raised (a traceback) ...
TRACEBACK_LOG = f"""Using SuperLink: privfed-loopback (127.0.0.1:36533)
Successfully started run 12923094849849206855
{_ESC}[92mINFO {_ESC}[0m:      Start `flwr-serverapp` process
{_ESC}[91mERROR {_ESC}[0m:     ServerApp raised an exception
Traceback (most recent call last):
  File "/x/flwr/superlink/runtime/run_serverapp.py", line 221, in run_serverapp
    context = run_(
              ^^^^^
  File "/x/privfed/flower/apps.py", line 43, in _job
    raise ParameterError("job", f"one of {{JOBS}}", job)
privfed.errors.ParameterError: parameter 'job' must be one of ('latent', 'factory', 'sum'); \
got 'bogus'
{_ESC}[91mERROR {_ESC}[0m:     Exit Code: 201

An unhandled exception occurred in the ServerApp.

For more information, visit: <https://flower.ai/docs/framework/1.42/en/ref-exit-codes/201.html>
"""

# ... and of a privfed error, which privfed's ServerApp has Flower log as one line.
ONE_LINE_LOG = f"""Successfully started run 16399553764134754762
{_ESC}[91mERROR {_ESC}[0m:     ServerApp raised an exception: ProtocolAbort: 2 of 10 nodes \
connected; run with num-clients=2
{_ESC}[91mERROR {_ESC}[0m:     Exit Code: 201

An unhandled exception occurred in the ServerApp.
"""


def _deploy_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("flower_deploy_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def deploy() -> ModuleType:
    """The script, loaded as a module."""
    return _deploy_module()


# --- the log of `flwr run --stream` ------------------------------------------------------


def test_result_lines_are_the_jobs_summary(deploy: ModuleType) -> None:
    outcome = deploy.read_outcome(SUCCESS_LOG)
    assert outcome.failure is None
    # The summary line, not the "privfed: ..." progress lines.
    assert outcome.results == [
        "privfed latent job over Flower: epsilon=10, accuracy on synthetic data 0.8123; "
        "artefacts in out"
    ]


@pytest.mark.parametrize(
    ("log", "reason"),
    [
        (
            TRACEBACK_LOG,
            "privfed.errors.ParameterError: parameter 'job' must be one of "
            "('latent', 'factory', 'sum'); got 'bogus' (Flower exit code 201)",
        ),
        (
            ONE_LINE_LOG,
            "ProtocolAbort: 2 of 10 nodes connected; run with num-clients=2 (Flower exit code 201)",
        ),
        (
            "Successfully started run 1\nERROR :     Exit Code: 203\n\nThe run was rejected.\n",
            "Exit Code: 203 The run was rejected.",
        ),
    ],
    ids=["traceback", "one-line", "exit-code-only"],
)
def test_failure_is_found_and_said_in_one_line(deploy: ModuleType, log: str, reason: str) -> None:
    outcome = deploy.read_outcome(log)
    assert outcome.results == []
    assert outcome.failure == reason


def test_a_long_traceback_is_cut_short(deploy: ModuleType) -> None:
    frames = '  File "/x/y.py", line 1, in f\n    f()\n' * 200
    log = (
        "ERROR :     ServerApp raised an exception\nTraceback (most recent call last):\n"
        f"{frames}RuntimeError: {'boom ' * 200}\nERROR :     Exit Code: 201\n"
    )
    failure = deploy.read_outcome(log).failure
    assert failure is not None and failure.startswith("RuntimeError: boom boom")
    assert len(failure) <= 500 and "\n" not in failure


# --- main(), with the deployment replaced by a stand-in -------------------------------


def _fake_deployment(
    deploy: ModuleType, monkeypatch: pytest.MonkeyPatch, log_text: str, status: int = 0
) -> None:
    @contextlib.contextmanager
    def deployment(nodes: int, **kwargs: Any) -> Iterator[tuple[str, dict[str, str], list[Any]]]:
        try:
            yield "fake", {}, []
        finally:
            kwargs["report"].stopped = 1 + nodes

    def run_app(app: Path, connection: str, env: Any, config: str, **kwargs: Any) -> int:
        kwargs["log"].write_text(log_text)
        return status

    monkeypatch.setattr(deploy, "deployment", deployment)
    monkeypatch.setattr(deploy, "run_app", run_app)
    monkeypatch.setattr(deploy, "run_status", lambda *args: None)
    monkeypatch.setattr(deploy, "_become_subreaper", lambda: None)


def test_success_prints_the_result_and_keeps_the_logs(
    deploy: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    _fake_deployment(deploy, monkeypatch, SUCCESS_LOG)
    assert deploy.main(["--nodes", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    logs = sorted((tmp_path / "runs" / "flower-deploy-logs").iterdir())
    assert len(logs) == 1 and (logs[0] / "flwr-run.log").read_text() == SUCCESS_LOG
    assert f"logs in {logs[0]}" in lines[0]
    assert "[deploy] all processes stopped (4)" in lines
    assert deploy.read_outcome(SUCCESS_LOG).results[0] in lines
    assert lines[-1] == f"[deploy] run finished; logs in {logs[0]}"


def test_workdir_overrides_where_the_logs_go(
    deploy: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    _fake_deployment(deploy, monkeypatch, SUCCESS_LOG)
    assert deploy.main(["--nodes", "2", "--workdir", "mine"]) == 0
    assert (tmp_path / "mine" / "flwr-run.log").is_file()
    assert not (tmp_path / "runs").exists()
    assert capsys.readouterr().out.splitlines()[-1].endswith(f"logs in {tmp_path / 'mine'}")


def test_a_failed_serverapp_fails_the_script_briefly(
    deploy: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    long_log = TRACEBACK_LOG.replace("Traceback", "INFO :  filler\n" * 500 + "Traceback")
    _fake_deployment(deploy, monkeypatch, long_log)  # flwr run exits 0 all the same
    assert deploy.main(["--nodes", "1", "--workdir", "w"]) == 1
    out = capsys.readouterr().out
    assert len(out) < 1500 and "filler" not in out and "Traceback" not in out
    lines = out.splitlines()
    assert lines[-2] == (
        "[deploy] the run failed: privfed.errors.ParameterError: parameter 'job' must be one "
        "of ('latent', 'factory', 'sum'); got 'bogus' (Flower exit code 201)"
    )
    assert str(tmp_path / "w" / "flwr-run.log") in lines[-1]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--run-config", "num-clients=10"], "sets num-clients=10 but --nodes is 2"),
        # Flower refuses a run config that sets a key twice.
        (["--run-dir", "a", "--run-config", 'output-dir="b"'], "--run-dir or output-dir"),
    ],
    ids=["num-clients", "output-dir-twice"],
)
def test_run_config_conflicts_are_refused(
    deploy: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    error: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        deploy.main(["--nodes", "2", *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and error in err
    assert list(tmp_path.iterdir()) == []


# --- bad arguments: one line, exit 2, nothing started ----------------------------------


@pytest.mark.parametrize(
    "args",
    [["--nodes", "0"], ["--app", "no-such-app"], ["--run-dir", "a-file/out"], ["--nodes", "x"]],
    ids=["nodes-0", "missing-app", "unwritable-run-dir", "nodes-not-int"],
)
def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "a-file").write_text("")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""  # nothing was started
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


# --- stopping processes -----------------------------------------------------------------


def _tagged(tag: str) -> list[tuple[int, str]]:
    """Live (not zombie) processes whose environment holds ``tag``: ``(pid, command)``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if tag.encode() not in (entry / "environ").read_bytes():
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if state != "Z":
            found.append((int(entry.name), command[:120]))
    return found


needs_proc = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")

# A process that starts a child in a session of its own (as a SuperLink starts its
# SuperExec), which starts a grandchild, and then waits.
_TREE = """
import subprocess, sys, time
if sys.argv[1:] == ["leaf"]:
    time.sleep(600)
elif sys.argv[1:] == ["middle"]:
    subprocess.Popen([sys.executable, __file__, "leaf"]); time.sleep(600)
else:
    subprocess.Popen([sys.executable, __file__, "middle"], start_new_session=True)
    time.sleep(600)
"""


@needs_proc
def test_stop_ends_detached_descendants_and_counts_them(deploy: ModuleType, tmp_path: Path) -> None:
    tag = f"PRIVFED_DEPLOY_TEST={uuid.uuid4().hex}"
    script = tmp_path / "tree.py"
    script.write_text(_TREE)
    env = {**os.environ, "PRIVFED_DEPLOY_TEST": tag.split("=")[1]}
    root = subprocess.Popen([sys.executable, str(script)], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(_tagged(tag)) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_tagged(tag)) == 3
        report = deploy._stop([root], grace=5.0)
        assert report.stopped == 3 and report.left == []
        assert _tagged(tag) == []
    finally:
        for pid, _ in _tagged(tag):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        root.kill()
        root.wait()


def _start_script(tmp_path: Path, tag: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
    out = tmp_path / "stdout.txt"
    env = {**os.environ, "PRIVFED_DEPLOY_TEST": tag.split("=")[1]}
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), *args],
            cwd=tmp_path,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    return proc, out


def _cleanup(proc: subprocess.Popen[bytes], tag: str) -> None:
    """Whatever the test's outcome: nothing it started keeps running."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid, _ in _tagged(tag):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@needs_proc
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupt_stops_everything_without_a_traceback(tmp_path: Path, signum: int) -> None:
    tag = f"PRIVFED_DEPLOY_TEST={uuid.uuid4().hex}"
    # The latent job takes far longer than this test waits: it is interrupted mid-run.
    proc, out = _start_script(
        tmp_path, tag, "--nodes", "2", "--workdir", "logs", "--run-dir", "out", "--timeout", "120"
    )
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and proc.poll() is None:
            if any("flwr-serverapp" in command for _, command in _tagged(tag)):
                break
            time.sleep(0.2)
        running = [command for _, command in _tagged(tag)]
        assert proc.poll() is None, out.read_text()
        assert any("flower-supernode" in c for c in running), running
        proc.send_signal(signum)
        assert proc.wait(timeout=60) == 128 + signum
        text = out.read_text()
        time.sleep(0.5)
        assert _tagged(tag) == []  # no SuperLink, SuperNode, SuperExec, ServerApp, ClientApp
    finally:
        _cleanup(proc, tag)
    assert "Traceback" not in text, text
    last = text.strip().splitlines()[-1]
    name = signal.Signals(signum).name
    assert re.fullmatch(
        rf"\[deploy\] interrupted by {name}; all processes stopped \((\d+)\); logs in .*", last
    ), text
    # At least the SuperLink, its SuperExec and the two SuperNodes.
    assert int(re.findall(r"\((\d+)\)", last)[0]) >= 4
    assert last.endswith(f"logs in {tmp_path / 'logs'}")
    assert (tmp_path / "logs" / "superlink.log").stat().st_size > 0


@pytest.mark.slow
@needs_proc
def test_a_failing_job_on_real_processes(tmp_path: Path) -> None:
    tag = f"PRIVFED_DEPLOY_TEST={uuid.uuid4().hex}"
    proc, out = _start_script(
        tmp_path, tag, "--nodes", "1", "--timeout", "60", "--run-config", 'job="no-such-job"'
    )
    try:
        assert proc.wait(timeout=120) == 1
        text = out.read_text()
        time.sleep(0.5)
        assert _tagged(tag) == []
    finally:
        _cleanup(proc, tag)
    lines = text.strip().splitlines()
    (logs,) = (tmp_path / "runs" / "flower-deploy-logs").iterdir()
    assert lines[0].endswith(f"logs in {logs}")
    assert re.fullmatch(r"\[deploy\] all processes stopped \(\d+\)", lines[-3]), text
    assert lines[-2].startswith("[deploy] the run failed: ") and "no-such-job" in lines[-2]
    assert lines[-1].startswith(f"[deploy] full log: {logs / 'flwr-run.log'}")
    assert "no-such-job" in (logs / "flwr-run.log").read_text()
    assert "Traceback" not in text
