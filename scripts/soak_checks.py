"""What ``scripts/soak.py`` checks after a run, and how it writes the results.

* :func:`round_outcomes`: each round's server record against the sum of the
  plaintext inputs its survivors wrote to the side folder (``exact``), a
  privfed error that ended the round (``clean-abort``), or anything else
  (``other``: a wrong total, a missing record, a run that died);
* :func:`audit_journals`: every node's reveal journal, read line by line
  (a torn last line is skipped, as the journal itself does): no peer's share
  revealed twice or of two kinds in one session, no two answers at one step;
* :func:`untyped_exceptions`: tracebacks (and error replies) in any log whose
  exception is not one of :mod:`privfed.errors`, except a SuperNode's start on
  a port another process took (:func:`port_collisions`: counted apart);
* :func:`slopes`: the RSS of each long-lived process, fitted with a line
  per process lifetime (KiB per round);
* :func:`leftover`: PIDs the harness started (or their descendants) still alive.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import flower_deploy as deploy
import numpy as np

_TRACEBACK = "Traceback (most recent call last)"
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Abort|Interrupt|Exit))\b:?")
_REASON_TYPE = re.compile(r"^([A-Za-z_][\w.]*)\s*:")
_HTTP_API_FAILED = "RuntimeError: SuperNode Runtime HTTP API failed to start."
_BIND_TAKEN = re.compile(r"\[Errno 98\] error while attempting to bind .*address already in use")


def _privfed_errors() -> set[str]:
    import privfed.errors as errors

    names = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, Exception)}
    return names | {f"privfed.errors.{n}" for n in names}


def rss_kib(pid: int) -> int | None:
    """VmRSS of ``pid`` in KiB (``None``: gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def set_readonly(journals: Path, node: int, readonly: bool) -> None:
    """Make node ``node``'s journal file and folder read-only (or writable again).

    Modes 0400 / 0500; as root (whom modes do not stop) the file is also made
    immutable (``chattr +i``: every open for writing fails with EPERM).
    """
    path = journals / f"node-{node}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    root = os.geteuid() == 0
    if root and not readonly:  # an immutable file cannot even be chmod-ed
        subprocess.run(["chattr", "-i", str(path)], check=False, capture_output=True)  # noqa: S603, S607
    path.touch(exist_ok=True)
    path.chmod(0o400 if readonly else 0o600)
    journals.chmod(stat.S_IRWXU & ~stat.S_IWUSR if readonly else stat.S_IRWXU)
    if root and readonly:
        subprocess.run(["chattr", "+i", str(path)], check=False, capture_output=True)  # noqa: S603, S607


def leftover(started: list[int], left: list[int]) -> list[int]:
    """Processes of the run still alive: those the stop could not end, and any started PID."""
    alive = {pid for pid in started if deploy._alive(pid)}
    return sorted(alive | set(left) | set(deploy._descendants([os.getpid()])))


def _read_bin(path: Path) -> np.ndarray | None:
    try:
        return np.frombuffer(path.read_bytes(), dtype="<u8")
    except OSError:
        return None


def round_outcomes(soak_dir: Path, rounds: int, interrupted: bool = False) -> list[dict[str, Any]]:
    """One outcome per round index ``0..rounds-1`` that a run started (see the module doc).

    ``interrupted``: the harness was stopped by a signal; a round it cut short is
    ``interrupted``, not ``other``.
    """
    path = soak_dir / "server" / "rounds.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    records = [json.loads(x) for x in lines if x.strip()]
    ends = {int(r["round"]): r for r in records if r["event"] == "end"}
    starts = {int(r["round"]): r for r in records if r["event"] == "start"}
    out: list[dict[str, Any]] = []
    for r in range(rounds):
        if r not in starts and r not in ends:
            continue
        end = ends.get(r)
        if end is None:
            kind = "interrupted" if interrupted else "other"
            out.append({"round": r, "outcome": kind, "why": "the round started but never ended"})
            continue
        entry = {"round": r, "seconds": end["seconds"], "survivors": end.get("survivors", [])}
        entry["dropped"] = end.get("dropped", {})
        entry["errors"] = {**end.get("errors", {}), **end.get("refused", {})}
        if end["outcome"] == "abort":
            out.append({**entry, "outcome": "clean-abort", "why": end["error"]})
            continue
        total = _read_bin(soak_dir / "server" / f"total-{end['run']}-{r}.bin")
        plain = [_read_bin(soak_dir / "plain" / str(end["run"]) / str(r) / f"p{p}.bin")
                 for p in end["survivors"]]  # fmt: skip
        if total is None or any(v is None for v in plain):
            why = "a total or a survivor's input is missing"
            out.append({**entry, "outcome": "other", "why": why})
            continue
        expected = np.zeros_like(total)
        for vector in plain:
            expected += vector  # type: ignore[operator]  # uint64: the ring's wrap-around
        exact = bool(np.array_equal(expected, total))
        why = {} if exact else {"why": "the total differs from the survivors' sum"}
        out.append({**entry, "outcome": "exact" if exact else "other", **why})
    return out


def audit_journals(journals: Path) -> dict[str, Any]:
    """Audit every node's journal (see the module docstring)."""
    violations: list[str] = []
    entries = unmask = resent = 0
    files = sorted(journals.glob("node-*.jsonl"))
    for path in files:
        kinds: dict[tuple[str, int, int], dict[str, str]] = {}
        answers: dict[tuple[str, int, int, int], str] = {}
        raw = path.read_bytes()
        for line in raw[: raw.rfind(b"\n") + 1].decode(errors="replace").splitlines():
            if not line.strip():
                continue
            entry = json.loads(line)
            entries += 1
            key = (entry["session"], int(entry["round"]), int(entry["client"]))
            step = (*key, int(entry["step"]))
            if entry["answer"] and step in answers:
                if answers[step] != entry["answer"]:
                    where = f"step {step[3]} of round {key[1]}"
                    violations.append(f"{path.name}: two answers at {where}")
                else:
                    resent += 1  # the same answer again (a duplicated delivery): nothing new
                continue
            answers[step] = entry["answer"]
            if entry["reveals"]:
                unmask += 1
            for peer, kind in entry["reveals"].items():
                known = kinds.setdefault(key, {})
                if peer in known:
                    violations.append(
                        f"{path.name}: round {key[1]}: peer {peer}'s share revealed again "
                        f"({known[peer]} then {kind})"
                    )
                known[peer] = kind
    return {"journals": len(files), "entries": entries, "unmask_answers": unmask,
            "same_answer_resent": resent,
            "violations": len(violations), "details": violations[:20]}  # fmt: skip


def _log_exceptions(workdir: Path) -> Iterator[tuple[str, str, list[str]]]:
    """Each traceback's ``(log name, exception line, the log's lines since the last one)``."""
    for log in sorted(workdir.glob("*.log")):
        lines = deploy._ANSI.sub("", log.read_text(errors="replace")).splitlines()
        since = 0
        for i, line in enumerate(lines):
            if _TRACEBACK not in line:
                continue
            for after in lines[i + 1 :]:
                if after.strip() and not after[0].isspace():
                    yield log.name, after.strip(), lines[since:i]
                    break
            since = i + 1


def _port_taken(exception: str, before: list[str]) -> bool:
    """A SuperNode that exited at start because its Runtime API port was taken.

    Flower raises a bare ``RuntimeError`` when uvicorn cannot bind; uvicorn
    logged the bind error (errno 98) just before.  The harness draws the port
    and starts the node again (see :func:`flower_deploy.free_port`), so this
    is the host's port race, not an exception of the code under test.
    """
    return exception == _HTTP_API_FAILED and any(_BIND_TAKEN.search(x) for x in before)


def untyped_exceptions(workdir: Path, outcomes: list[dict[str, Any]]) -> list[str]:
    """Exceptions of non-privfed types in any log or error reply (``file: Type: message``).

    A node's failed start on a port another process took (:func:`port_collisions`)
    is not one.
    """
    ours = _privfed_errors()
    found: list[str] = []
    for name, exception, before in _log_exceptions(workdir):
        match = _EXC_LINE.match(exception)
        kind = match.group(1) if match else exception[:80]
        if kind not in ours and not _port_taken(exception, before):
            found.append(f"{name}: {exception[:200]}")
    for entry in outcomes:
        for why in entry.get("errors", {}).values():
            match = _REASON_TYPE.match(why)
            if match and match.group(1) not in ours:
                found.append(f"error reply in round {entry['round']}: {why[:200]}")
    return found


def port_collisions(workdir: Path) -> list[str]:
    """The logs of SuperNodes that exited at start on a taken port, once per start."""
    return [name for name, exc, before in _log_exceptions(workdir) if _port_taken(exc, before)]


def slopes(rss: dict[str, list[tuple[int, int, int]]]) -> dict[str, dict[str, Any]]:
    """Per process name: the RSS slope (KiB/round) of its longest life, and its range."""
    out: dict[str, dict[str, Any]] = {}
    for name, samples in rss.items():
        lives: dict[int, list[tuple[int, int]]] = {}
        for r, pid, kib in samples:
            lives.setdefault(pid, []).append((r, kib))
        longest = max(lives.values(), key=len)
        xs = np.array([r for r, _ in longest], dtype=float)
        ys = np.array([k for _, k in longest], dtype=float)
        slope = float(np.polyfit(xs, ys, 1)[0]) if len(longest) >= 3 else None
        out[name] = {"kib_per_round": None if slope is None else round(slope, 2),
                     "samples": len(longest), "lives": len(lives),
                     "first_kib": int(ys[0]), "last_kib": int(ys[-1])}  # fmt: skip
    return out


def summarize(
    soak: Any,
    plan: dict[int, dict[str, Any]],
    restarts: list[int],
    failures: list[str],
    left: list[int],
    interrupted: str | None,
) -> dict[str, Any]:
    """The soak's result document (``soak.json``)."""
    outcomes = round_outcomes(soak.soak_dir, soak.args.rounds, interrupted is not None)
    ran = {o["round"] for o in outcomes}
    injected = Counter(f["kind"] for r, f in plan.items() if r in ran)
    injected["superlink-restart"] = sum(e["event"] == "superlink-restart" for e in soak.events)
    by_kind: dict[str, Counter[str]] = {}
    for o in outcomes:
        kind = plan.get(o["round"], {}).get("kind", "none")
        by_kind.setdefault(kind, Counter())[o["outcome"]] += 1
    audit = audit_journals(soak.workdir / "journals")
    untyped = untyped_exceptions(soak.workdir, outcomes)
    counts = Counter(o["outcome"] for o in outcomes)
    result = {
        "nodes": soak.args.nodes, "rounds_asked": soak.args.rounds, "rounds_run": len(outcomes),
        "seed": soak.args.seed, "rounds_per_run": soak.args.rounds_per_run,
        "security": "TLS + SuperNode authentication",
        "outcomes": {k: counts.get(k, 0) for k in ("exact", "clean-abort", "other")
                     + (("interrupted",) if interrupted else ())},
        "faults_injected": dict(sorted(injected.items())),
        "outcomes_by_fault": {k: dict(v) for k, v in sorted(by_kind.items())},
        "kills_landed": sum(e["event"] == "kill" for e in soak.events),
        "node_restarts": sum(e["event"] == "node-restart" for e in soak.events),
        "node_restarts_refused": sum(e["event"] == "node-restart-refused" for e in soak.events),
        "superlink_restarts_before_round": [e["round"] for e in soak.events
                                            if e["event"] == "superlink-restart"],
        "journal_audit": audit, "untyped_exceptions": untyped[:50],
        "node_starts_on_a_taken_port": port_collisions(soak.workdir),
        "rss_slopes": slopes(soak.rss), "leftover_processes": left,
        "run_failures": failures, "interrupted": interrupted,
        "abort_reasons": dict(Counter(o["why"].split(":")[0] for o in outcomes
                                      if o["outcome"] == "clean-abort")),
        "rounds": outcomes, "faults": {str(r): f for r, f in sorted(plan.items()) if r in ran},
        "rss": {k: v for k, v in soak.rss.items()},
    }  # fmt: skip
    result["passed"] = (
        counts.get("other", 0) == 0 and audit["violations"] == 0 and not untyped and not left
        and interrupted is None and len(outcomes) > 0
    )  # fmt: skip
    return result


def write_results(result: dict[str, Any], out: Path) -> None:
    """``out`` (JSON) and ``out`` with suffix ``.png`` (the plot)."""
    from privfed._atomic import atomic_write_text

    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(result, indent=1, sort_keys=True) + "\n")
    plot(result, out.with_suffix(".png"))


def plot(result: dict[str, Any], path: Path) -> None:
    """Outcomes per round, faults by kind and RSS per process (one PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    colours = {"exact": "tab:green", "clean-abort": "tab:orange", "other": "tab:red",
               "interrupted": "tab:gray"}  # fmt: skip
    for o in result["rounds"]:
        axes[0].bar(o["round"], o.get("seconds", 1.0), color=colours[o["outcome"]], width=0.9)
    axes[0].set(xlabel="round", ylabel="round wall time (s)",
                title=f"{result['rounds_run']} rounds: " + ", ".join(
                    f"{k} {v}" for k, v in result["outcomes"].items()))  # fmt: skip
    kinds = sorted(result["outcomes_by_fault"])
    bottom = np.zeros(len(kinds))
    for outcome, colour in colours.items():
        values = np.array([result["outcomes_by_fault"][k].get(outcome, 0) for k in kinds])
        axes[1].bar(kinds, values, bottom=bottom, color=colour, label=outcome)
        bottom += values
    axes[1].tick_params(axis="x", rotation=45)
    audit = result["journal_audit"]
    axes[1].set(ylabel="rounds", title=f"by fault; journal violations {audit['violations']}, "
                f"leftover {len(result['leftover_processes'])}")  # fmt: skip
    axes[1].legend()
    for name, samples in sorted(result["rss"].items()):
        slope = result["rss_slopes"][name]["kib_per_round"]
        axes[2].plot([s[0] for s in samples], [s[2] / 1024 for s in samples], ".-",
                     label=f"{name} ({slope} KiB/round)")  # fmt: skip
    axes[2].set(xlabel="round", ylabel="RSS (MiB)", title="RSS after each round")
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    from privfed._atomic import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=90, format="png")
    plt.close(fig)
