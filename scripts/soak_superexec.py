"""The soak's SuperNode-side ``flower-superexec``: Flower's SuperExec, ClientApps forked warm.

Flower 1.42's SuperNode starts ``flower-superexec`` (found on ``PATH``), whose
subprocess executor starts one ``flwr-clientapp`` process per message.  On a
2-core machine that start-up (a fresh interpreter importing flwr, numpy and
privfed: about 3-5 s of CPU) is most of a soak round: five nodes times four
stages.  This SuperExec is Flower's own (``flower_superexec()``, same
arguments, same Runtime API, same task tokens); only its executor's launch is
changed: the ClientApp process is ``fork()``-ed from this already-importing
process and runs Flower's ``flwr-clientapp`` entry point there, with the same
argument vector the subprocess executor would have used.  Each message still
gets a fresh process that pulls its Message and Context from the SuperNode
and pushes its reply; a kill -9 of the node still takes SuperNode, SuperExec
and ClientApp.  Any other task type is launched as Flower launches it.

``scripts/soak.py`` puts a ``flower-superexec`` that runs this file first on
the SuperNodes' ``PATH`` (not the SuperLink's); ``--stock-flower`` leaves
Flower's stock executor in place.
"""

from __future__ import annotations

import os
import signal
import sys

from flwr.supercore.constant import TASK_TYPE_TO_APPIO_API_ADDRESS_ARG, TaskType
from flwr.supercore.superexec.executor import subprocess_executor
from flwr.supercore.superexec.executor.types import ExecutionSpec, LaunchResult

_stock_launch = subprocess_executor.SubprocessExecutor.launch


def _warm() -> None:
    """Import what every ClientApp of the soak imports (the app module itself stays fresh)."""
    import flwr.clientapp
    import flwr.supernode.cli.flwr_clientapp  # noqa: F401
    import numpy  # noqa: F401

    import privfed.flower.client
    import privfed.flower.node_app
    import privfed.secagg.protocol.state  # noqa: F401


def _child(args: list[str], quiet: bool) -> None:
    """In the forked child: be ``flwr-clientapp args...`` and exit with its status."""
    code = 0
    try:
        if quiet:  # as the stock executor's stdout/stderr=DEVNULL
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        sys.argv = args
        from flwr.supernode.cli.flwr_clientapp import flwr_clientapp

        flwr_clientapp()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _launch(self: subprocess_executor.SubprocessExecutor, spec: ExecutionSpec) -> LaunchResult:
    if spec.task_type != TaskType.CLIENT_APP or spec.runtime_dependency_install:
        return _stock_launch(self, spec)
    args = ["flwr-clientapp", TASK_TYPE_TO_APPIO_API_ADDRESS_ARG[spec.task_type],
            spec.runtime_api_address, "--token", spec.token]  # fmt: skip
    if spec.insecure:
        args.append("--insecure")
    elif spec.root_certificates_path is not None:
        args.extend(["--root-certificates", spec.root_certificates_path])
    if spec.parent_pid is not None:
        args.extend(["--parent-pid", str(spec.parent_pid)])
    sys.stdout.flush()
    sys.stderr.flush()
    if os.fork() == 0:
        _child(args, spec.suppress_output)
    return LaunchResult.accepted()


def _quiet_exit(signum: int, frame: object) -> None:
    """SIGINT/SIGTERM before Flower's own handlers are in place: exit, no traceback.

    Flower's SuperExec watches its SuperNode from a thread that raises SIGINT
    once the SuperNode is gone, and starts that watch before it registers its
    signal handlers; a SuperNode that exits at once (Flower refuses to
    re-activate a node whose old session the SuperLink still holds: exit code
    305) then leaves a ``KeyboardInterrupt`` traceback from the middle of an
    import.  Flower's handlers replace this one when they are registered.
    """
    os._exit(1)  # Flower's code for a graceful exit on SIGINT


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _quiet_exit)
    _warm()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # finished ClientApps are reaped at once
    subprocess_executor.SubprocessExecutor.launch = _launch  # type: ignore[method-assign]
    from flwr.supercore.cli import flower_superexec

    sys.argv[0] = "flower-superexec"
    flower_superexec()


if __name__ == "__main__":
    main()
