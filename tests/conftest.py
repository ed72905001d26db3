"""Shared test configuration.

Hypothesis profiles: ``ci`` (selected when the ``CI`` environment variable is set)
is derandomized, so every CI run replays the same examples; ``dev`` explores
with fresh randomness.  Randomness in properties enters only through drawn seeds,
so a failing example shrinks and replays exactly.

Tests marked ``cuda`` are deselected unless ``--run-cuda`` is given (see below).
"""

from __future__ import annotations

import os

# -- one core per pytest-xdist worker ---------------------------------------------------
#
# torch (and numpy's BLAS) start one OpenMP thread per core.  Under ``pytest -n N``
# every worker does, so on two cores with -n 2 four threads spin-wait for two cores:
# tests/engines/test_training.py's Adam tests took 70 s instead of 14 s (-n 0,
# loaded machine).  A worker and the processes it starts (Flower's, the examples',
# ``privfed run``'s) get cores // N threads (at least one) unless the caller set
# OMP_NUM_THREADS.  Set before anything imports torch; a test that needs a thread
# count sets it itself (tests/engines/latent/test_latent_client.py).
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _workers = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _workers)))

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=50,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=50, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


# -- CUDA-only tests -----------------------------------------------------------------
#
# Tests marked ``cuda`` exercise the ``device="cuda"`` code paths.  They are
# DESELECTED unless ``--run-cuda`` is given, so a CPU-only run neither runs nor
# counts them.  With ``--run-cuda`` on a machine without a usable CUDA device they
# FAIL (never skip), so a device run cannot pass without having run them.
# ``PRIVFED_TEST_DEVICE`` (default ``cuda``) names the device the tests use; set it
# to ``cpu`` only to check the tests' own logic on a machine without a GPU.

_CUDA_OPTION = "--run-cuda"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        _CUDA_OPTION,
        action="store_true",
        default=False,
        help="run the tests marked 'cuda' (deselected otherwise); they fail without a GPU",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption(_CUDA_OPTION):
        selected, deselected = [], []
        for item in items:
            (deselected if item.get_closest_marker("cuda") else selected).append(item)
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = selected
    if hasattr(config, "workerinput"):  # a pytest-xdist worker (-n N): longest first
        items.sort(key=_expected_seconds, reverse=True)  # stable: the rest keep their order


# -- the order of a parallel run (pytest -n N) -----------------------------------------
#
# Under -n N the tests below start first (every worker collects the same list and
# sorts it the same way, as xdist requires).  With xdist's default ``load``
# scheduler that backfires: it hands each worker one contiguous chunk of a quarter
# of its share to start with, so one worker got every long test at once and ran
# them end to end.  ``make test`` uses ``--dist worksteal``: each worker starts on
# its contiguous part and an idle worker takes half of what is queued on another,
# so the short tests fill in around the long ones.  The Flower deployment and soak
# tests mostly wait on SuperNodes' polls, which is why ``make`` runs one worker
# more than there are cores.  The figures are seconds of one run with -n 0 on two
# loaded cores (2026-12-03; the examples' after they ran once, one OpenMP thread);
# only their order matters.  A test not listed keeps its place after them.
_LONGEST = {  # test function, or function[parameters]: seconds
    "test_latent_job_across_supernode_processes": 363,  # tests/flower/test_deployment.py
    "test_dp_training_example_across_supernode_processes": 226,  # ditto
    "test_a_short_soak_keeps_every_invariant": 136,  # tests/flower/test_soak.py
    "test_flwr_run_of_the_example_completes_its_rounds": 110,  # test_training_examples.py
    "test_flwr_run_of_the_app_folder_adds_the_noise_its_release_claims": 74,  # test_flwr_run.py
    "test_an_interrupted_soak_leaves_no_process": 55,  # tests/flower/test_soak.py
    "test_example_runs_twice[audit_lira.py]": 82,
    "test_example_runs_twice[audit_self.py]": 60,
    "test_secagg_over_the_simulation_engine": 48,  # tests/flower/test_simulation.py
    "test_legacy_training_with_secagg_mod_in_the_simulation_engine": 29,
    "test_strangers_and_plaintext_clients_are_refused": 29,  # test_deploy_script.py
    "test_a_failing_job_on_real_processes": 25,  # ditto
    "test_interrupt_stops_everything_without_a_traceback": 22,  # ditto
    "test_example_runs_twice[factory_unlearning.py]": 32,
    "test_mixture_ledger_events_match_dp_accounting_and_the_release_names_them": 18,
    "test_the_active_mode_over_the_simulation_engine": 16,  # test_active_simulation.py
    "test_page_blocks_run[docs/getting-started.rst]": 12,
    "test_example_runs_twice[pipeline.py]": 17,
    "test_example_runs_twice[dp_property_test.py]": 19,
    "test_latent_classes_and_factory_cells_compose_sequentially": 11,  # test_dp_ledger.py
}


def _expected_seconds(item: pytest.Item) -> float:
    """The figure of ``_LONGEST`` for the item (by its name, else its function's), else 0."""
    function = getattr(item, "originalname", item.name)
    return float(_LONGEST.get(item.name, _LONGEST.get(function, 0)))


def _cuda_unavailable_reason() -> str | None:
    """Why the cuda-marked tests cannot run here, or ``None`` when they can."""
    device = os.environ.get("PRIVFED_TEST_DEVICE", "cuda")
    if not device.startswith("cuda"):
        return None  # PRIVFED_TEST_DEVICE=cpu: checking the test logic only
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a dev dependency
        return f"{_CUDA_OPTION} was given but torch cannot be imported ({exc})"
    if not torch.cuda.is_available():
        return (
            f"{_CUDA_OPTION} was given but torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}): these tests "
            "need an NVIDIA GPU and a CUDA build of torch.  Set PRIVFED_TEST_DEVICE=cpu "
            "only to check the tests' logic without a GPU."
        )
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    # Raised here, in the call phase, the failure is reported as FAILED (not as a
    # setup error, and never as a skip).
    if item.get_closest_marker("cuda") and item.config.getoption(_CUDA_OPTION):
        reason = _cuda_unavailable_reason()
        if reason is not None:
            pytest.fail(reason, pytrace=False)
