#!/usr/bin/env python3
"""Soak privfed's secure aggregation on Flower's deployment engine, under faults.

One SuperLink and ``--nodes`` SuperNodes on 127.0.0.1, with TLS and SuperNode
authentication (the credentials, commands and process stopping of
``scripts/flower_deploy.py``), run ``--rounds`` rounds of privfed's secure sum
of fresh random vectors (``scripts/soak_app``), ``--rounds-per-run`` rounds
per Flower run, while faults drawn from ``--seed`` are injected:

* ``kill``: a node is killed (SIGKILL, its whole process group: SuperNode,
  SuperExec, ClientApp) while it handles a stage of a round, and restarted
  ``--restart-delay`` seconds later with the same key and journal;
* ``superlink-restart``: between two runs the SuperLink is stopped (SIGTERM)
  and restarted on the same port and database;
* ``delay`` / ``duplicate`` / ``reorder`` / ``garbage`` / ``journal-full``:
  acted out by the node's Mod (``scripts/soak_app/privfed_soak/client_app.py``);
* ``journal-readonly``: the harness makes a node's journal file and folder
  read-only for one round.

What survives a restart: Flower 1.42's SuperNode keeps ``Context.state`` in
memory (it has no state store), so a killed node loses its round secrets; its
reveal journal (node config ``privfed-journal``, a file) is reloaded.  A
restarted node is a dropout of the round it was killed in (it holds no state
for that session and refuses its later stages) and takes part in the next.

Every round must end with the exact total -- the server's, checked against
the sum of the plaintext inputs the survivors wrote to a side folder the
server never reads -- or a clean abort (a privfed error naming why).  After
the run: the nodes' journals are audited (no peer's share revealed twice or
of two kinds, no two answers at one step), the logs are searched for
tracebacks of non-privfed exceptions, and the RSS of the SuperLink and each
SuperNode (sampled after every round) is fitted with a line.  Every process is
stopped, also on SIGINT/SIGTERM of this script, and leftover PIDs are counted.
Progress goes to stderr; the results to ``--out`` (JSON) and a PNG beside it.

Speed: with Flower's stock processes a round here took about 62-73 s, most of
it starting one fresh ``flwr-clientapp`` interpreter per node and stage (3-5 s
of CPU importing flwr, numpy and privfed; five at once on two cores), the rest
Flower's fixed waits (the SuperNode's 3 s idle pull, the SuperExec's 1 s task
poll, the grid's 3 s reply poll).  By default the SuperNodes run
``scripts/soak_supernode.py`` (Flower's SuperNode, idle waits cut to 0.2 s)
and ``scripts/soak_superexec.py`` (Flower's SuperExec, polling every 0.1 s,
ClientApp processes forked from it after it has imported those modules), and
the ServerApp polls for replies every 0.1 s; ``--stock-flower`` runs Flower's
own SuperNode and SuperExec.

Example (the long run; see the README's reliability section)::

    python scripts/soak.py --nodes 5 --rounds 200 --rounds-per-run 10 --fault-rate 0.5 \
        --seed 1 --out benchmarks/results/soak.json
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import flower_deploy as deploy
import soak_checks as checks

ROOT = Path(__file__).resolve().parent.parent
APP = Path(__file__).resolve().parent / "soak_app"
STAGES = ("ADVERTISE_KEYS", "SHARE_KEYS", "MASKED_INPUT", "UNMASKING")
NODE_FAULTS = (
    "kill", "delay", "duplicate", "reorder", "garbage", "journal-full", "journal-readonly",
)  # fmt: skip
KILL_HOLD_S = 6.0  # a kill target waits this long in its handler: the kill lands mid-stage


def _say(line: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def draw_plan(
    seed: int, nodes: int, rounds: int, per_run: int, fault_rate: float
) -> tuple[dict[int, dict[str, Any]], list[int]]:
    """The fault schedule: ``{round: fault}`` (one node fault at most per round) and the
    run boundaries (indices of first rounds) before which the SuperLink restarts (every
    second one).

    Node faults cycle through :data:`NODE_FAULTS` (shuffled), so a short run
    meets each kind; kills cycle through :data:`STAGES`.
    """
    rng = random.Random(seed)  # noqa: S311 -- a reproducible schedule, not a secret
    kinds = list(NODE_FAULTS)
    rng.shuffle(kinds)
    plan: dict[int, dict[str, Any]] = {}
    count = kills = 0
    for r in range(rounds):
        if rng.random() >= fault_rate:
            continue
        kind = kinds[count % len(kinds)]
        count += 1
        stage = STAGES[kills % len(STAGES)] if kind == "kill" else rng.choice(STAGES)
        kills += kind == "kill"
        fault: dict[str, Any] = {"kind": kind, "node": rng.randrange(nodes), "stage": stage}
        if kind == "delay":
            fault["delay-s"] = round(rng.uniform(0.5, 4.0), 2)
        if kind == "kill":
            fault["hold-s"] = KILL_HOLD_S
        plan[r] = fault
    starts = list(range(per_run, rounds, per_run))
    restarts = starts[1::2] or starts[:1]  # before every second run: several in any long soak
    return plan, restarts


def node_plan(plan: dict[int, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What the nodes' Mod reads (``plan.json``): ``"<pid>/<round>/<stage>" -> fault``."""
    return {
        f"{f['node']}/{r}/{f['stage']}": f
        for r, f in plan.items()
        if f["kind"] not in ("journal-readonly",)
    }


def _node_environment(env: dict[str, str], workdir: Path, *, warm: bool) -> dict[str, str]:
    """The SuperNodes' environment: their SuperExec looks for tasks every 0.1 s (Flower's
    default: 1 s) and, with ``warm``, is ``scripts/soak_superexec.py`` (ClientApps forked
    from a process that has imported flwr and privfed, instead of a fresh interpreter each)."""
    out = {**env, "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "0.1"}
    if warm:
        bin_dir = workdir / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        shim = bin_dir / "flower-superexec"
        here = Path(__file__).resolve().parent
        shim.write_text(
            f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(here)!r})\n"
            "import soak_superexec\nsoak_superexec.main()\n"
        )
        shim.chmod(0o755)
        out["PATH"] = f"{bin_dir}:{env.get('PATH', '')}"
    return out


class Soak:
    """The processes of one soak run and what happened to them."""

    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.soak_dir = workdir / "soak"
        self.nodes = args.nodes
        self.credentials = deploy.generate_credentials(workdir / "credentials", args.nodes)
        self.port = deploy.free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = deploy.cli_environment(workdir, self.address, self.credentials)
        self.node_env = _node_environment(self.env, workdir, warm=not args.stock_flower)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.started: list[int] = []  # every PID this harness started
        self.events: list[dict[str, Any]] = []
        self.rss: dict[str, list[tuple[int, int, int]]] = {}  # name -> (round, pid, KiB)
        self.pending_restart: dict[int, float] = {}

    # -- processes ------------------------------------------------------------------

    def _start(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        log = self.workdir / f"{name}.log"
        proc = deploy.spawn(argv, log, env or self.env, self.workdir, append=True)
        self.procs[name] = proc
        self.started.append(proc.pid)
        return proc

    def start_superlink(self) -> None:
        argv = deploy.superlink_argv(self.port, self.workdir / "superlink.db", self.credentials)
        deploy._wait_port(self.port, 60.0, self._start("superlink", argv))

    def start_node(self, i: int) -> None:
        journal = self.workdir / "journals" / f"node-{i}.jsonl"
        config = f'partition-id={i} num-partitions={self.nodes} privfed-journal="{journal}"'
        argv = deploy.supernode_argv(i, self.address, config, self.credentials)
        if not self.args.stock_flower:  # Flower's SuperNode, its idle waits cut (see there)
            argv[:1] = [sys.executable, str(Path(__file__).resolve().parent / "soak_supernode.py")]
        self._start(f"supernode-{i}", argv, self.node_env)

    def kill_node(self, i: int) -> None:
        """SIGKILL the node: its SuperNode's group and every descendant (its SuperExec runs in
        a session of its own), then schedule its restart."""
        proc = self.procs[f"supernode-{i}"]
        tree = deploy._descendants([proc.pid])
        deploy._signal(proc.pid, signal.SIGKILL, group=True)
        for pid in tree:
            deploy._signal(pid, signal.SIGKILL)
        proc.wait(timeout=10)
        self.pending_restart[i] = time.monotonic() + self.args.restart_delay

    def check_nodes(self) -> None:
        """A restarted node that exited (Flower refuses to activate a node whose old session
        the SuperLink still holds: exit code 305) is started again a few seconds later."""
        for i in range(self.nodes):
            proc = self.procs.get(f"supernode-{i}")
            if proc is not None and proc.poll() is not None and i not in self.pending_restart:
                self.events.append({"event": "node-restart-refused", "node": i,
                                    "code": proc.returncode, "time": time.time()})  # fmt: skip
                self.pending_restart[i] = time.monotonic() + 5.0

    def restart_superlink(self) -> None:
        link = self.procs["superlink"]
        deploy._stop([link], grace=10.0)
        self.start_superlink()
        self.wait_online()

    def wait_online(self, timeout: float = 120.0) -> None:
        """Wait until every node is online, restarting any that exited meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_nodes()
            self.restart_due(wait=True)
            listed = deploy.list_nodes(deploy.CONNECTION, self.env) or []
            online = {int(str(n["node-id"])) for n in listed if n.get("status") == "online"}
            if set(self.node_ids) <= online:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(online)} of {self.nodes} SuperNodes online")
            time.sleep(1.0)

    def restart_due(self, *, wait: bool = False) -> None:
        """Start the nodes whose restart is due (``wait``: all pending ones, now)."""
        now = time.monotonic()
        for i, when in list(self.pending_restart.items()):
            if wait or now >= when:
                self.pending_restart.pop(i)
                self.start_node(i)
                self.events.append({"event": "node-restart", "node": i, "time": time.time()})
                _say(f"node {i} restarted")

    def up(self) -> None:
        self.start_superlink()
        self.node_ids: list[int] = [
            deploy.register_node(deploy.CONNECTION, self.env, key.public)
            for key in self.credentials.nodes
        ]
        for i in range(self.nodes):
            self.start_node(i)
        self.wait_online()

    def stop(self) -> deploy.StopReport:
        """Stop every process; leave every journal writable (a fault may have been cut short)."""
        report = deploy._stop(list(reversed(self.procs.values())), orphans=deploy._subreaper)
        for i in range(self.nodes):
            checks.set_readonly(self.workdir / "journals", i, False)
        return report

    def sample_rss(self, r: int) -> None:
        for name, proc in self.procs.items():
            if name == "flwr-run":
                continue
            kib = checks.rss_kib(proc.pid)
            if kib is not None and proc.poll() is None:
                self.rss.setdefault(name, []).append((r, proc.pid, kib))


def _run_config(soak: Soak, first: int, rounds: int) -> str:
    a = soak.args
    return (
        f'soak-dir="{soak.soak_dir}" num-clients={a.nodes} first-round={first} rounds={rounds} '
        f"vector-length={a.vector_length} timeout={a.stage_timeout}"
    )


def _round_records(soak: Soak) -> list[dict[str, Any]]:
    path = soak.soak_dir / "server" / "rounds.jsonl"
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


class _Segment:
    """One Flower run of the soak: submit it, watch it, act out the harness's faults."""

    def __init__(self, soak: Soak, plan: dict[int, dict[str, Any]], first: int, count: int):
        self.soak, self.plan, self.first, self.count = soak, plan, first, count
        self.seen = len(_round_records(soak))
        self.progress_offsets: dict[int, int] = {}
        self.readonly: dict[int, int] = {}  # node -> round it was made read-only for

    def run(self) -> str:
        soak = self.soak
        log = soak.workdir / f"flwr-run-{self.first}.log"
        argv = [str(Path(sys.executable).parent / "flwr"), "run", str(APP), deploy.CONNECTION]
        argv += ["--stream", "--run-config", _run_config(soak, self.first, self.count)]
        proc = deploy.spawn(argv, log, soak.env, soak.workdir)
        soak.procs["flwr-run"] = proc
        soak.started.append(proc.pid)
        budget = self.count * (4 * soak.args.stage_timeout + 30.0) + 180.0
        deadline = time.monotonic() + budget
        while proc.poll() is None and time.monotonic() < deadline:
            self.tick()
            time.sleep(0.2)
        if proc.poll() is None:
            deploy._stop([proc], grace=5.0)
        self.tick()
        for i in list(self.readonly):
            checks.set_readonly(soak.workdir / "journals", i, False)
            self.readonly.pop(i)
        del soak.procs["flwr-run"]
        text = log.read_text(errors="replace")
        failure = deploy.read_outcome(text).failure
        return failure or ("" if proc.returncode == 0 else f"flwr run exited {proc.returncode}")

    def tick(self) -> None:
        soak = self.soak
        soak.check_nodes()
        soak.restart_due()
        for record in _round_records(soak)[self.seen :]:
            self.seen += 1
            self.on_record(record)
        for r, fault in self.plan.items():
            if fault["kind"] == "kill" and not fault.get("done") and self._reached(fault, r):
                fault["done"] = True
                soak.kill_node(fault["node"])
                soak.events.append({"event": "kill", "round": r, **_public(fault)})
                _say(f"round {r}: killed node {fault['node']} -9 in {fault['stage']}")

    def _reached(self, fault: dict[str, Any], r: int) -> bool:
        path = self.soak.soak_dir / "progress" / f"node-{fault['node']}.log"
        if not path.exists():
            return False
        for line in path.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[2] == str(r) and parts[3] == fault["stage"]:
                return True
        return False

    def on_record(self, record: dict[str, Any]) -> None:
        soak, r = self.soak, int(record["round"])
        fault = self.plan.get(r, {})
        if record["event"] == "start":
            if fault.get("kind") == "journal-readonly":
                checks.set_readonly(soak.workdir / "journals", fault["node"], True)
                self.readonly[fault["node"]] = r
            return
        for i, since in list(self.readonly.items()):
            if since <= r:
                checks.set_readonly(soak.workdir / "journals", i, False)
                self.readonly.pop(i)
        soak.sample_rss(r)
        _say(f"round {r}: {record['outcome']} ({record['seconds']:.1f} s)")


def _public(fault: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fault.items() if k != "done"}


def run_soak(soak: Soak, plan: dict[int, dict[str, Any]], restarts: list[int]) -> list[str]:
    """Every run of the soak; the failures of runs that did not finish cleanly."""
    args = soak.args
    soak.soak_dir.mkdir(parents=True, exist_ok=True)
    (soak.soak_dir / "plan.json").write_text(json.dumps(node_plan(plan), sort_keys=True))
    soak.up()
    _say(f"up: 1 SuperLink + {args.nodes} SuperNodes (TLS, node authentication)")
    failures: list[str] = []
    deadline = time.monotonic() + args.budget_s
    first = 0
    while first < args.rounds:
        if time.monotonic() > deadline:
            _say(f"wall-clock budget of {args.budget_s:g} s spent after {first} rounds")
            break
        if first in restarts:
            soak.restart_superlink()
            soak.events.append({"event": "superlink-restart", "round": first, "time": time.time()})
            _say(f"SuperLink restarted before round {first}")
        count = min(args.rounds_per_run, args.rounds - first)
        failure = _Segment(soak, plan, first, count).run()
        if failure:
            failures.append(f"rounds {first}..{first + count - 1}: {failure}")
            _say(f"run of rounds {first}..{first + count - 1} failed: {failure}")
        first += count
    return failures


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = deploy._Parser(prog="soak.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--rounds-per-run", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fault-rate", type=float, default=0.7, help="rounds with a fault")
    parser.add_argument("--vector-length", type=int, default=64)
    parser.add_argument("--stage-timeout", type=float, default=20.0)
    parser.add_argument("--restart-delay", type=float, default=2.0)
    parser.add_argument("--budget-s", type=float, default=3600.0, help="stop starting runs after")
    parser.add_argument(
        "--stock-flower", action="store_true",
        help="Flower's stock SuperNode and SuperExec (3 s idle pulls, a fresh flwr-clientapp "
        "interpreter per message) instead of scripts/soak_supernode.py and soak_superexec.py",
    )  # fmt: skip
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/soak.json")
    args = parser.parse_args(argv)
    if args.nodes < 3:
        parser.error(f"--nodes must be at least 3, got {args.nodes}")
    if args.rounds < 1 or args.rounds_per_run < 1:
        parser.error("--rounds and --rounds-per-run must be at least 1")
    if not 0.0 <= args.fault_rate <= 1.0:
        parser.error(f"--fault-rate must be in [0, 1], got {args.fault_rate}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the soak; 0 when every invariant held."""
    args = _parse(argv)
    workdir = (args.workdir or deploy._fresh_log_dir(ROOT / "runs" / "soak")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    deploy._become_subreaper()
    previous = {sig: signal.signal(sig, deploy._on_signal) for sig in deploy._HANDLED_SIGNALS}
    plan, restarts = draw_plan(args.seed, args.nodes, args.rounds, args.rounds_per_run,
                               args.fault_rate)  # fmt: skip
    soak = Soak(args, workdir)
    interrupted: str | None = None
    failures: list[str] = []
    started = time.monotonic()
    _say(f"soak: {args.nodes} nodes, {args.rounds} rounds, seed {args.seed}; logs in {workdir}")
    try:
        failures = run_soak(soak, plan, restarts)
    except deploy.Interrupted as exc:
        interrupted = str(exc)
        _say(f"interrupted by {exc}; stopping every process")
    except (RuntimeError, TimeoutError, OSError) as exc:
        failures.append(f"harness: {type(exc).__name__}: {exc}")
        _say(f"harness failure: {exc}")
    finally:
        report = soak.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    leftover = checks.leftover(soak.started, report.left)
    result = checks.summarize(soak, plan, restarts, failures, leftover, interrupted)
    result["wall_s"] = round(time.monotonic() - started, 1)
    checks.write_results(result, args.out)
    _say(
        f"{result['rounds_run']} rounds: {result['outcomes']}; journal violations "
        f"{result['journal_audit']['violations']}; untyped exceptions "
        f"{len(result['untyped_exceptions'])}; leftover processes {len(leftover)}; "
        f"results in {args.out}"
    )
    if interrupted is not None:
        return 128 + int(getattr(signal.Signals, interrupted))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
