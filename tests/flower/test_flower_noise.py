"""Every Flower entry point of the latent job delivers the noise its release claims.

Issue: the app folder's ClientApp once masked the *exact* statistics while the
server wrote a release claiming distributed noise (only
``latent_client_app`` added it).  There is now one ClientApp for every entry
point (:mod:`privfed.flower.node_app`); these tests run each entry point --
the app folder's components (``privfed.flower.apps``) and the latent job's
own apps -- over the in-process grid double, for both distributed mechanisms,
and check on the round the server actually ran:

* two noise seeds give different noisy totals (and neither is the exact one);
* the noise in the release has the plan's variance: the pooled statistic
  ``S = sum_i (noise_i / std_i)**2`` over every noised coordinate must lie
  inside the two-sided chi-square(N) interval of false-failure rate 1e-6
  (exact for Gaussian noise; the discrete Gaussian and the Skellam noise at
  these scales have the same variance and near-Gaussian tails).  The seeds
  are fixed, so a run is deterministic; the rate is that of a fresh seed;
* no array the server holds equals the survivors' exact ring total;
* a node that declares no noise (an old client app) or another plan is
  refused, and a release never rests on it.

The deployment engine is covered in ``test_deployment.py``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flower_helpers import walk_arrays
from flwr.app import Array, ArrayRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from scipy.stats import chi2

import privfed.engines.latent.distributed as distributed_module
import privfed.engines.latent.job as job_module
import privfed.flower.server as server_module
from privfed.engines.latent.distributed import layers_supported
from privfed.errors import DeclarationError, MessageFormatError, ProtocolAbort
from privfed.flower import _wire
from privfed.flower.client import JournalIn, add_secagg_handlers
from privfed.flower.declaration import DeclaredInput, NoiseDeclaration
from privfed.flower.latent_app import (
    check_declarations,
    latent_client_app,
    latent_server_app,
    node_ring_vector,
    pipeline_config,
)
from privfed.flower.server import SecAggRound, SecAggRoundResult, quiet_privfed_errors
from privfed.secagg import SecAggServer, Stage

RUN: dict[str, Any] = {
    "num-clients": 6,
    "samples-per-class": 40,
    "latent-dim": 6,
    "dropout-rate": 0.34,
    "audit": False,
    "baselines": False,
    "classifier-epochs": 1,
    "wait-s": 5.0,
    "join-grace-s": 1.0,
    "overwrite": True,
}
MODELS = [
    pytest.param(
        "distributed-skellam", marks=pytest.mark.skipif(not layers_supported(), reason="")
    ),
    "distributed-gaussian",
]
FALSE_FAILURE = 1e-6


def _entry_point(name: str, journal: Path) -> tuple[Any, ClientApp]:
    """(ServerApp, ClientApp) of one public entry point."""
    if name == "app-folder":
        from privfed.flower import apps

        return apps.server_app, apps.client_app
    return latent_server_app(), latent_client_app(journal=JournalIn(journal))


class _Recorder:
    """Records every round, SecAggServer and decoded release of the server side."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rounds: list[SecAggRoundResult] = []
        self.servers: list[SecAggServer] = []
        self.decoded: list[Any] = []
        self.results: list[Any] = []
        recorder = self
        run, decode = SecAggRound.run, distributed_module.decode_noisy_total
        pipeline = job_module.run_pipeline

        class Recording(SecAggServer):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                recorder.servers.append(self)

        def recorded_run(flow: SecAggRound, *args: Any, **kwargs: Any) -> SecAggRoundResult:
            result = run(flow, *args, **kwargs)
            recorder.rounds.append(result)
            return result

        def recorded_decode(*args: Any, **kwargs: Any) -> Any:
            out = decode(*args, **kwargs)
            recorder.decoded.append(out)
            return out

        def recorded_pipeline(*args: Any, **kwargs: Any) -> Any:
            out = pipeline(*args, **kwargs)
            recorder.results.append(out)
            return out

        monkeypatch.setattr(job_module, "run_pipeline", recorded_pipeline)
        monkeypatch.setattr(server_module, "SecAggServer", Recording)
        monkeypatch.setattr(SecAggRound, "run", recorded_run)
        monkeypatch.setattr(distributed_module, "decode_noisy_total", recorded_decode)


def _run_job(server_app: Any, grid: Any, run: dict[str, Any]) -> None:
    context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=run)
    server_app(grid, context)


def _exact_total(run: dict[str, Any], partitions: list[int]) -> np.ndarray:
    config = pipeline_config(run)
    total = np.zeros_like(node_ring_vector(config, partitions[0]))
    for pid in partitions:
        total += node_ring_vector(config, pid)
    return total


def _ring(noisy: Any, spec: Any) -> np.ndarray:
    """The decoded release back on the ring grid (int64), the layout of ``to_ring_vector``."""
    f, d = spec.bits, spec.dim
    rows, cols = np.triu_indices(d)
    parts = [
        np.ldexp(noisy.sums, f),
        np.ldexp(noisy.second_moments[:, rows, cols], 2 * f),
        noisy.counts[:, None],
    ]
    grid = np.concatenate(parts, axis=1)
    ring = np.rint(grid).astype(np.int64)
    assert np.array_equal(ring.astype(np.float64), grid)  # exact on the grid
    return ring.reshape(-1)





@pytest.mark.slow  # two Flower jobs per case: 3.4-4.8 s each on two cores
@pytest.mark.parametrize("entry", ["app-folder", "latent-apps"])
@pytest.mark.parametrize("model", MODELS)
def test_every_entry_point_delivers_the_plans_noise(
    entry: str, model: str, loopback: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    totals = []
    for seed in (7, 123):
        recorder = _Recorder(monkeypatch)
        run = {
            **RUN,
            "journal-dir": str(tmp_path / "journals"),
            "noise": model,
            "noise-seed": seed,
            "output-dir": str(tmp_path / f"s{seed}"),
        }
        server_app, client_app = _entry_point(entry, tmp_path / f"journal-{seed}")
        grid = loopback(client_app, 6, run_config=run)
        _run_job(server_app, grid, run)
        (result,) = recorder.rounds
        (noisy,) = recorder.decoded
        survivors = [c - 1 for c in result.survivors]
        assert len(survivors) == 5  # the job's scripted dropouts: one before its input
        exact = _exact_total(run, survivors)

        # The server's total is not the exact one on (nearly) any noised coordinate.
        from privfed.engines.latent.job import run_spec
        from privfed.engines.latent.stages import fit_codec, load_data

        config = pipeline_config(run)
        data = load_data(config)
        spec, plan = run_spec(config, fit_codec(config, data.split.public), num_classes=10)
        noised = np.concatenate(plan.positions)
        assert np.count_nonzero(result.total[noised] != exact[noised]) >= 0.99 * noised.size

        # The release's noise has the plan's delivered variance (chi-square, rate 1e-6).
        noise = _ring(noisy, spec) - exact.view(np.int64)
        variances = plan.delivered_variances(len(survivors))
        stat = sum(
            float(np.sum(noise[pos].astype(np.float64) ** 2) / var)
            for pos, var in zip(plan.positions, variances, strict=True)
        )
        n = noised.size
        low, high = chi2.ppf(FALSE_FAILURE / 2, n), chi2.ppf(1 - FALSE_FAILURE / 2, n)
        print(f"{entry} {model} seed {seed}: S/N {stat / n:.3f} in [{low / n:.3f}, {high / n:.3f}]")
        assert low <= stat <= high, (stat / n, low / n, high / n)
        outside = np.setdiff1d(np.arange(noise.size), noised)
        assert not np.any(noise[outside])  # un-noised coordinates are exact (public counts)

        # The server never held the survivors' exact total, nor computed any client's
        # exact statistics (the job's result holds no exact aggregate).
        (job_result,) = recorder.results
        assert job_result.aggregate is None
        seen: list[np.ndarray] = []
        for server in recorder.servers:
            walk_arrays(vars(server), seen)
        walk_arrays(result, seen)
        walk_arrays(job_result, seen)
        same_shape = [a for a in seen if a.shape == exact.shape]
        assert same_shape
        assert not any(np.array_equal(a.astype(np.uint64), exact) for a in same_shape)

        # What every survivor declared, and what the release says.
        assert set(result.declarations) == set(result.survivors)
        assert all(
            d is not None and d.mechanism == plan.mechanism for d in result.declarations.values()
        )
        release = json.loads((tmp_path / f"s{seed}" / "release.json").read_text())
        assert release["dp"]["distributed"]["noise_model"] == model
        # A seeded run says that whoever knows the seed can remove the noise.
        assert "derived from the run's noise seed" in release["dp"]["trust"]
        totals.append(result.total)
        monkeypatch.undo()
    assert not np.array_equal(totals[0], totals[1])  # two seeds, two noisy totals


def _old_client_app() -> ClientApp:
    """The app folder's former ClientApp: masks the node's exact statistics, declares nothing."""

    def values(context: Context, config: Any) -> np.ndarray:
        pid = int(context.node_config["partition-id"])
        return node_ring_vector(pipeline_config(dict(context.run_config)), pid)

    return add_secagg_handlers(ClientApp(), values)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["distributed-gaussian", "central"])
def test_a_node_that_declares_no_noise_is_refused(
    model: str, loopback: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _Recorder(monkeypatch)
    run = {
        **RUN,
        "journal-dir": str(tmp_path / "journals"),
        "noise": model,
        "noise-seed": 7,
        "scripted-dropouts": False,
    }
    run["output-dir"] = str(tmp_path / "out")
    from privfed.flower import apps

    grid = loopback(apps.client_app, 6, run_config=run, apps={1006: _old_client_app()})
    _run_job(apps.server_app, grid, run)
    (result,) = recorder.rounds
    assert result.survivors == (1, 2, 3, 4, 5)  # client 6 (partition 5) is refused ...
    assert 6 in result.dropped[Stage.MASKED_INPUT]
    assert "declared no noise" in result.refused[6]
    evaluation = json.loads((tmp_path / "out" / "flower_evaluation.json").read_text())
    assert evaluation["survivors"] == [0, 1, 2, 3, 4]  # ... and its input is not in the release
    declared = evaluation["declarations"]
    assert sorted(declared) == ["0", "1", "2", "3", "4"]
    assert {d["noise_model"] for d in declared.values()} == {model}


@pytest.mark.slow
def test_too_many_outdated_nodes_abort_before_any_release(
    loopback: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = {
        **RUN,
        "journal-dir": str(tmp_path / "journals"),
        "noise": "distributed-gaussian",
        "noise-seed": 7,
        "scripted-dropouts": False,
    }
    run["output-dir"] = str(tmp_path / "out")
    from privfed.flower import apps

    old = {1004 + i: _old_client_app() for i in range(3)}  # 3 of 6 old: 3 < t = 4
    grid = loopback(apps.client_app, 6, run_config=run, apps=old)
    with pytest.raises(ProtocolAbort) as info:
        _run_job(apps.server_app, grid, run)
    assert info.value.stage == "MASKED_INPUT"
    assert not (tmp_path / "out" / "release.json").exists()
    # No survivor was asked to unmask anything.
    asked = [m for m in grid.delivered if m.metadata.message_type.endswith("unmask")]
    assert asked == []


@pytest.mark.slow
def test_a_node_with_another_plan_is_refused(
    loopback: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _Recorder(monkeypatch)
    run = {
        **RUN,
        "journal-dir": str(tmp_path / "journals"),
        "noise": "distributed-gaussian",
        "noise-seed": 7,
        "scripted-dropouts": False,
    }
    run["output-dir"] = str(tmp_path / "out")
    from privfed.flower import apps

    # Same n, t and vector length, but a node calibrated for epsilon = 50: less noise.
    weak = latent_client_app({"epsilon": 50.0}, journal=JournalIn(tmp_path / "j"))
    grid = loopback(apps.client_app, 6, run_config=run, apps={1002: weak})
    _run_job(apps.server_app, grid, run)
    (result,) = recorder.rounds
    assert 2 not in result.survivors
    assert "plan_sha256" in result.refused[2]


def test_the_release_check_refuses_a_round_with_an_undeclared_survivor() -> None:
    expected = NoiseDeclaration("distributed-gaussian", "discrete-gaussian", "ab" * 32)
    result = SecAggRoundResult(
        total=np.zeros(3, np.uint64), config=None,  # type: ignore[arg-type]
        clients={}, survivors=(1, 2), dropped={}, refused={}, errors={}, seconds={},
        server_seconds={}, bytes_received={}, bytes_sent={},
        declarations={1: expected, 2: None},
    )  # fmt: skip
    with pytest.raises(DeclarationError, match=r"refusing to write a DP release.*client 1"):
        check_declarations(result, expected)
    other = NoiseDeclaration("distributed-gaussian", "discrete-gaussian", "cd" * 32)
    again = SecAggRoundResult(**{**vars(result), "declarations": {1: expected, 2: other}})
    with pytest.raises(DeclarationError, match="plan_sha256"):
        check_declarations(again, expected)
    fine = SecAggRoundResult(**{**vars(result), "declarations": {1: expected, 2: expected}})
    check_declarations(fine, expected)


def test_declarations_round_trip_and_refuse_malformed_bytes() -> None:
    declared = NoiseDeclaration("distributed-skellam", "skellam", "0f" * 32, layers=2, seeded=True)
    session = bytes(range(32))
    again, bound = NoiseDeclaration.from_bytes(declared.to_bytes(session))
    assert again == declared and bound == session
    good = json.loads(declared.to_bytes(session))
    bad: list[bytes] = [
        b"",
        b"\xff\xfe",
        b"[1, 2]",
        b"x" * 5000,
        json.dumps({**good, "v": 2}).encode(),
        json.dumps({**good, "v": True}).encode(),
        json.dumps({**good, "v": 1.0}).encode(),
        b"[" * 2000 + b"]" * 2000,  # deep nesting: RecursionError inside json
        b'{"v":' + b"[" * 1500 + b"]" * 1500 + b"}",
        json.dumps({**good, "extra": 1}).encode(),
        json.dumps({k: v for k, v in good.items() if k != "plan_sha256"}).encode(),
        json.dumps({**good, "layers": True}).encode(),
        json.dumps({**good, "seeded": 1}).encode(),
        json.dumps({**good, "session": "zz"}).encode(),
    ]
    for data in bad:
        with pytest.raises(MessageFormatError):
            NoiseDeclaration.from_bytes(data)


def _tamper(kind: str) -> Any:
    """A Mod that rewrites partition 0's masked input into one malformed form."""

    def mod(message: Message, context: Context, call_next: Any) -> Message:
        reply = call_next(message, context)
        if (
            context.node_config["partition-id"] != 0
            or _wire.STAGE_OF_TYPE.get(message.metadata.message_type) is not Stage.MASKED_INPUT
        ):
            return reply
        content = reply.content
        header = dict(_wire.config_record(content))
        if kind == "declaration-session":
            declared, _ = NoiseDeclaration.from_bytes(header[_wire.DECLARATION])
            header[_wire.DECLARATION] = declared.to_bytes(bytes(32))
        elif kind == "declaration-garbage":
            header[_wire.DECLARATION] = b"{not json"
        arrays = content.array_records[_wire.ARRAYS]
        original = arrays["values"]
        import io

        buffer = io.BytesIO()
        if kind == "npz":
            np.savez(buffer, values=np.zeros(4, np.uint64))
            arrays = ArrayRecord(
                {
                    "values": Array(
                        dtype="uint64", shape=(4,), stype="numpy.ndarray", data=buffer.getvalue()
                    )
                }
            )
        elif kind == "empty":
            arrays = ArrayRecord(
                {"values": Array(dtype="uint64", shape=(0,), stype="numpy.ndarray", data=b"")}
            )
        elif kind == "huge-header":
            np.lib.format.write_array_header_1_0(
                buffer, {"descr": "<u8", "fortran_order": False, "shape": (10**11,)}
            )
            arrays = ArrayRecord(
                {
                    "values": Array(
                        dtype="uint64",
                        shape=(10**11,),
                        stype="numpy.ndarray",
                        data=buffer.getvalue(),
                    )
                }
            )
        else:
            arrays = ArrayRecord({"values": original})
        from flwr.app import ConfigRecord

        forged = RecordDict({_wire.RECORD: ConfigRecord(header), _wire.ARRAYS: arrays})
        return Message(forged, reply_to=message)

    return mod


@pytest.mark.parametrize(
    "kind", ["npz", "empty", "huge-header", "declaration-session", "declaration-garbage"]
)
def test_a_malformed_masked_input_is_a_dropout_not_the_end_of_the_round(
    kind: str, loopback: Any, tmp_path: Path
) -> None:
    from privfed.flower.node_app import demo_values

    def values(context: Context, config: Any) -> DeclaredInput:
        pid = int(context.node_config["partition-id"])
        vector = demo_values(pid, config.round_index, config.vector_length)
        return DeclaredInput(vector, NoiseDeclaration.none())

    app = add_secagg_handlers(ClientApp(mods=[_tamper(kind)]), values, journal=JournalIn(tmp_path))
    grid = loopback(app, 4)
    flow = SecAggRound(threshold=3, vector_length=16, timeout=1.0)
    result = flow.run(grid, {1001 + i: i + 1 for i in range(4)})
    assert result.survivors == (2, 3, 4)
    assert 1 in result.refused, dict(result.errors)
    expected = sum((demo_values(p, 0, 16) for p in (1, 2, 3)), np.zeros(16, np.uint64))
    np.testing.assert_array_equal(result.total, expected)


def test_scripted_dropouts_are_error_replies_not_exceptions(
    loopback: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from privfed.engines.latent.job import dropout_plan

    run = {**RUN, "journal-dir": str(tmp_path / "journals"), "noise": "central"}
    planned = {p for who in dropout_plan(pipeline_config(run)).values() for p in who}
    grid = loopback(latent_client_app(journal=JournalIn(tmp_path)), 6, run_config=run)
    flow = SecAggRound(threshold=4, vector_length=280, timeout=1.0)
    with caplog.at_level(logging.INFO, logger="privfed.flower"):
        flow.run(grid, {1001 + i: i + 1 for i in range(6)})
    errors = [m for m in grid.delivered if m.has_error()]
    assert {int(m.metadata.src_node_id) - 1001 for m in errors} == planned
    # The node answered with an error reply itself (the grid double's wrapper of a
    # raised exception would prefix the exception's type).
    assert all(m.error.reason.startswith("scripted dropout of partition") for m in errors)
    lines = [r for r in caplog.records if "scripted dropout" in r.getMessage()]
    assert lines and all(r.exc_info is None for r in lines)


def test_a_small_federation_fails_fast_with_one_line_saying_what_to_do(
    loopback: Any, tmp_path: Path
) -> None:
    import time

    from privfed.flower import apps

    run = {
        **RUN,
        "journal-dir": str(tmp_path / "journals"),
        "num-clients": 10,
        "wait-s": 120.0,
        "join-grace-s": 0.5,
    }
    grid = loopback(apps.client_app, 2, run_config=run)
    start = time.monotonic()
    with pytest.raises(ProtocolAbort) as info:
        _run_job(apps.server_app, grid, run)
    assert time.monotonic() - start < 10.0  # not the 120 s wait
    message = str(info.value)
    assert "only 2 of 10 Flower nodes" in message
    assert "num-clients=2" in message and "num-supernodes=10" in message
    assert "\n" not in message


def test_wait_for_nodes_reports_who_it_waits_for(loopback: Any) -> None:
    from privfed.flower.node_app import make_client_app
    from privfed.flower.server import wait_for_nodes

    lines: list[str] = []
    grid = loopback(make_client_app(), 3)
    assert wait_for_nodes(grid, 3, timeout=1.0, report=lines.append) == [1001, 1002, 1003]
    assert lines == ["3 of 3 Flower nodes connected"]
    lines.clear()
    with pytest.raises(ProtocolAbort, match="only 3 of 4"):
        wait_for_nodes(grid, 4, timeout=30.0, settle=0.2, report=lines.append)
    assert lines[0] == "waiting for 4 Flower nodes: 3 connected"


def test_flower_logs_a_privfed_error_of_the_server_app_as_one_line() -> None:
    quiet_privfed_errors()
    quiet_privfed_errors()  # idempotent
    logger = logging.getLogger("flwr")
    assert sum(type(f).__name__ == "_OneLinePrivfedErrors" for f in logger.filters) == 1
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    handler = Keep()
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    try:
        for exc in (ProtocolAbort("only 2 of 10 Flower nodes connected"), KeyError("a bug")):
            try:
                raise exc
            except Exception as raised:
                logger.error("%s raised an exception", "ServerApp", exc_info=raised)
    finally:
        logger.removeHandler(handler)
    privfed_line, bug = records
    assert privfed_line == (
        "ERROR ServerApp raised an exception: ProtocolAbort: protocol aborted: "
        "only 2 of 10 Flower nodes connected"
    )
    assert "Traceback" in bug and "KeyError" in bug


def _no_hello_app() -> ClientApp:
    """A node that connects but fails every message (it never answers the hello)."""
    return ClientApp()


@pytest.mark.slow
@pytest.mark.parametrize("model", ["distributed-gaussian", "central"])
def test_a_node_missing_from_the_hello_is_a_dropout_not_the_end_of_the_job(
    model: str, loopback: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its partition stays a client of the round (the nodes' plan counts n = 6 of them)."""
    recorder = _Recorder(monkeypatch)
    run = {**RUN, "journal-dir": str(tmp_path / "journals"), "noise": model}
    run.update({"noise-seed": 7, "scripted-dropouts": False, "output-dir": str(tmp_path / "o")})
    from privfed.flower import apps

    grid = loopback(apps.client_app, 6, run_config=run, apps={1004: _no_hello_app()})
    _run_job(apps.server_app, grid, run)
    (result,) = recorder.rounds
    assert len(result.config.client_ids) == 6
    assert result.survivors == (1, 2, 3, 5, 6)
    assert 4 in result.dropped[Stage.ADVERTISE_KEYS]
    assert (tmp_path / "o" / "release.json").exists()


@pytest.mark.slow
def test_a_partition_id_outside_the_job_is_left_out(
    loopback: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _Recorder(monkeypatch)
    run = {**RUN, "journal-dir": str(tmp_path / "journals"), "noise": "distributed-gaussian"}
    run.update({"noise-seed": 7, "scripted-dropouts": False, "output-dir": str(tmp_path / "o")})
    from privfed.flower import apps

    grid = loopback(apps.client_app, 6, run_config=run)
    grid.contexts[1006].node_config["partition-id"] = 9  # outside [0, 6)
    _run_job(apps.server_app, grid, run)
    (result,) = recorder.rounds
    assert 1006 not in result.clients and result.survivors == (1, 2, 3, 4, 5)


def test_settings_flower_cannot_honour_are_refused_before_any_node_is_asked(
    loopback: Any, tmp_path: Path
) -> None:
    from privfed.errors import ParameterError
    from privfed.flower import apps

    base = {**RUN, "journal-dir": str(tmp_path / "journals"), "output-dir": str(tmp_path / "o")}
    for bad, key in (
        # The active mode needs the server's copy of the registry (named in the run config).
        ({"secagg-mode": "active", "noise": "distributed-gaussian"}, "secagg-registry"),
        ({"baselines": True, "noise": "distributed-skellam"}, "baselines"),
    ):
        grid = loopback(apps.client_app, 6, run_config={**base, **bad})
        with pytest.raises(ParameterError, match=key):
            _run_job(apps.server_app, grid, {**base, **bad})
        assert grid.delivered == []


def test_a_node_refuses_a_round_in_another_security_mode() -> None:
    from privfed.engines.latent.job import run_spec
    from privfed.engines.latent.stages import fit_codec, load_data
    from privfed.flower.latent_app import check_round_config
    from privfed.secagg import SecAggConfig

    config = pipeline_config({**RUN, "noise": "distributed-gaussian"})
    data = load_data(config)
    _, plan = run_spec(config, fit_codec(config, data.split.public), num_classes=10)
    import dataclasses

    semi_honest = SecAggConfig(
        client_ids=tuple(range(1, 7)), threshold=plan.threshold,
        vector_length=plan.spec.num_values, session_id=bytes(32),
    )  # fmt: skip
    check_round_config(semi_honest, plan)
    active_plan = dataclasses.replace(plan, secagg_mode="active")
    with pytest.raises(ProtocolAbort, match="mode semi-honest \\(plan: active\\)"):
        check_round_config(semi_honest, active_plan)


@pytest.mark.slow
def test_an_unseeded_run_noises_from_the_csprng_and_claims_no_seed(
    loopback: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _Recorder(monkeypatch)
    run = {**RUN, "journal-dir": str(tmp_path / "journals"), "noise": "distributed-skellam"}
    run.update({"noise-seed": -1, "output-dir": str(tmp_path / "o")})
    from privfed.flower import apps

    _run_job(apps.server_app, loopback(apps.client_app, 6, run_config=run), run)
    (result,) = recorder.rounds
    assert all(d is not None and not d.seeded for d in result.declarations.values())
    release = json.loads((tmp_path / "o" / "release.json").read_text())
    assert "noise seed" not in release["dp"]["trust"]
    assert "server not trusted with the data" in release["dp"]["trust"]
