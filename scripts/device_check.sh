#!/usr/bin/env bash
# Run the CUDA code-path tests (tests/test_cuda_paths.py) on a GPU machine.
#
# From the repository root of a fresh copy of the working tree (no .venv):
#
#   scripts/device_check.sh                 # on the GPU machine
#   scripts/device_check.sh --fetch-wheels  # beforehand, on a machine WITH pip access:
#                                           # download into .whl/ the wheels of the pure
#                                           # dependencies the GPU image lacks
#
# The GPU machine reaches no package index, so nothing is downloaded there: the
# script reuses the interpreter's own CUDA torch (a venv with
# --system-site-packages), installs wheels from $PRIVFED_WHEELS if that folder
# exists (carry it along), installs privfed with --no-deps (or falls back to
# PYTHONPATH=src), and runs the tests.  It never installs torch.
#
# Environment:
#   OUT                   folder for cuda_tests.txt, cuda_check.json and factory_timing.json (optional)
#   PYTHON                interpreter holding a CUDA torch (default: python3)
#   PRIVFED_WHEELS        wheel folder to install offline (default: .whl)
#   PRIVFED_FAIL_FAST=1   stop at the first failing test (pytest -x; default: run all)
#   PRIVFED_TEST_TIMEOUT  seconds allowed for the test run (default: 420)
#   PRIVFED_FACTORY_TIMING=0  skip the EDM factory-training timing after the tests
#   PRIVFED_FACTORY_TIMING_TIMEOUT  seconds allowed for that timing (default: 300)
#   PRIVFED_TEST_DEVICE=cpu  dry run of this script without a GPU (the tests then run on
#                         the CPU; a real device check leaves it unset)
#
# Exit status: pytest's (0 only if every cuda test passed); 2 if no CUDA torch was found.
set -euo pipefail

PY=${PYTHON:-python3}
WHEELS=${PRIVFED_WHEELS:-.whl}
# Wheels of what the GPU image lacks (numpy, scipy, scikit-learn, safetensors, pytest,
# hypothesis, matplotlib and diffusers' other needs are there), for its Python 3.12.
WHEEL_NAMES=(cryptography cffi pycparser dp-accounting diffusers importlib_metadata)

if [[ ${1:-} == --fetch-wheels ]]; then
    # Pin to the versions of the local .venv when there is one.
    specs=()
    for name in "${WHEEL_NAMES[@]}"; do
        version=$(.venv/bin/python -c "import importlib.metadata as m; print(m.version('$name'))" \
            2>/dev/null || true)
        specs+=("$name${version:+==$version}")
    done
    platforms=()
    for p in manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1; do
        platforms+=(--platform "${p}_x86_64")
    done
    mkdir -p "$WHEELS"
    "$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${platforms[@]}" -d "$WHEELS" "${specs[@]}"
    echo "wheels in $WHEELS/ ($(du -sh "$WHEELS" | cut -f1)); keep the folder out of git" \
        "(e.g. echo /$WHEELS/ >> .git/info/exclude) and carry it to the GPU machine"
    exit 0
fi

if [[ -n ${OUT:-} ]]; then
    mkdir -p "$OUT"
    REPORT_DIR=$OUT
else
    REPORT_DIR=$(mktemp -d)
fi
LOG=$REPORT_DIR/cuda_tests.txt
JSON=$REPORT_DIR/cuda_check.json
WORK=$(mktemp -d)
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

echo "== GPU"
GPU=$(nvidia-smi -L 2>&1 || true)
echo "${GPU:-nvidia-smi printed nothing}"

echo "== torch in $PY"
TORCH=$("$PY" -c 'import torch; print(torch.__version__, torch.cuda.is_available())' 2>&1 |
    tail -n 1 || true)
echo "found: ${TORCH:-nothing}"
DRY_RUN=0
if [[ $TORCH != *" True" ]]; then
    if [[ ${PRIVFED_TEST_DEVICE:-cuda} == cpu && $TORCH == *" False" ]]; then
        DRY_RUN=1
        echo "no CUDA: DRY RUN on the CPU (PRIVFED_TEST_DEVICE=cpu); this checks nothing on a GPU"
    else
        echo "no CUDA-capable torch is importable with $PY; set PYTHON to one (nothing is" \
            "downloaded here: a CUDA torch is multi-GB)"
        TORCH=$TORCH GPU=$GPU python3 -c 'import json, os; print(json.dumps({"torch": os.environ["TORCH"],
            "cuda_available": False, "nvidia_smi": os.environ["GPU"], "ran": False}))' | tee "$JSON"
        exit 2
    fi
fi

echo "== environment"
# A venv that sees the interpreter's packages (torch above all).  The interpreter
# may itself live in a venv, whose site-packages --system-site-packages does not
# reach, so they are linked in with a .pth file as well.
VENV=$WORK/venv
VPY=$PY
PIP=("$PY" -m pip)
SITE=
if "$PY" -m venv --system-site-packages "$VENV" >/dev/null 2>&1; then
    VPY=$VENV/bin/python
    PIP=("$VPY" -m pip)
elif "$PY" -m venv --system-site-packages --without-pip "$VENV" >/dev/null 2>&1; then
    VPY=$VENV/bin/python # no ensurepip: the interpreter's pip installs into it
    PIP=("$PY" -m pip --python "$VPY")
fi
if [[ $VPY != "$PY" ]]; then
    "$PY" -c 'import site; print("\n".join(site.getsitepackages()))' \
        >"$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_parent.pth"
    if "$VPY" -c 'import torch' >/dev/null 2>&1; then
        echo "venv $VENV (system site packages and $PY's site packages)"
    else
        echo "the venv does not see $PY's torch; using $PY directly"
        VPY=$PY
        PIP=("$PY" -m pip)
    fi
fi
if [[ $VPY == "$PY" ]]; then
    SITE=$WORK/site # no venv: install next to nothing, import from here
    export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
fi
pip_install() {
    "${PIP[@]}" install -q --disable-pip-version-check --no-deps --no-compile \
        ${SITE:+--target "$SITE"} "$@"
}

WHEELS_USED=none
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    if pip_install --no-index "$WHEELS"/*.whl; then
        WHEELS_USED=$(cd "$WHEELS" && echo *.whl)
        echo "installed wheels: $WHEELS_USED"
    else
        echo "installing the wheels in $WHEELS failed"
    fi
fi
INSTALL=editable
if [[ -n $SITE ]] || ! pip_install --no-index --no-build-isolation -e . >"$WORK/pip.txt" 2>&1; then
    INSTALL=PYTHONPATH=src
    export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
    [[ -s $WORK/pip.txt ]] && tail -n 3 "$WORK/pip.txt"
fi
echo "privfed: $INSTALL"

MISSING=$("$VPY" - <<'EOF'
import importlib.util
mods = ["torch", "numpy", "scipy", "sklearn", "safetensors", "diffusers", "cryptography",
        "dp_accounting", "matplotlib", "hypothesis", "pytest", "privfed"]
print(" ".join(m for m in mods if importlib.util.find_spec(m) is None))
EOF
)
if [[ -n $MISSING ]]; then
    echo "MISSING modules: $MISSING (carry their wheels: scripts/device_check.sh --fetch-wheels)"
fi

echo "== tests"
EXTRA=()
[[ ${PRIVFED_FAIL_FAST:-0} == 1 ]] && EXTRA+=(-x)
JUNIT=$WORK/junit.xml
set +e
timeout "${PRIVFED_TEST_TIMEOUT:-420}" "$VPY" -m pytest -q --run-cuda -m cuda \
    tests/test_cuda_paths.py -p no:cacheprovider --durations=15 --junitxml="$JUNIT" \
    "${EXTRA[@]}" 2>&1 | tee "$LOG"
RC=${PIPESTATUS[0]}
set -e

# Issue 28's GPU path: pixel-space EDM factories trained on the device, timed
# (benchmarks/factory_device_timing.py).  It never changes the exit status: the
# tests above decide it; its own status goes into the JSON.
FACTORY_JSON=$REPORT_DIR/factory_timing.json
FACTORY_RC=skipped
if [[ ${PRIVFED_FACTORY_TIMING:-1} == 1 ]]; then
    echo "== factory timing"
    FACTORY_ARGS=(--device "${PRIVFED_TEST_DEVICE:-cuda}" --output "$FACTORY_JSON")
    if [[ $DRY_RUN == 1 ]]; then # the CPU cannot train the real size in a dry run
        FACTORY_ARGS+=(--tiny --steps 2 --baseline-steps 1 --sampling-steps 2
            --synthetic-per-class 20 --classifier-epochs 1 --epsilons inf)
    fi
    set +e
    timeout "${PRIVFED_FACTORY_TIMING_TIMEOUT:-300}" "$VPY" benchmarks/factory_device_timing.py \
        "${FACTORY_ARGS[@]}" 2>&1 | tee "$REPORT_DIR/factory_timing.txt"
    FACTORY_RC=${PIPESTATUS[0]}
    set -e
fi

FACTORY_RC=$FACTORY_RC FACTORY_JSON=$FACTORY_JSON GPU=$GPU RC=$RC JUNIT=$JUNIT INSTALL=$INSTALL WHEELS_USED=$WHEELS_USED MISSING=$MISSING \
    DRY_RUN=$DRY_RUN "$VPY" - "$JSON" <<'EOF' || echo "could not write $JSON"
import json, os, sys, xml.etree.ElementTree as ET
import torch

env = os.environ
out = {
    "torch": torch.__version__,
    "torch_cuda": torch.version.cuda,
    "cuda_available": torch.cuda.is_available(),
    "device_name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    "nvidia_smi": env["GPU"],
    "python": sys.version.split()[0],
    "privfed_install": env["INSTALL"],
    "wheels": env["WHEELS_USED"],
    "missing_modules": env["MISSING"].split(),
    "dry_run_on_cpu": env["DRY_RUN"] == "1",
    "pytest_exit": int(env["RC"]),
    "ran": True,
}
counts = {"tests": 0, "passed": 0, "failed": 0, "errors": 0, "skipped": 0}
failed = []
try:
    for case in ET.parse(env["JUNIT"]).getroot().iter("testcase"):
        counts["tests"] += 1
        kinds = {child.tag for child in case}
        name = f"{case.get('classname')}::{case.get('name')}"
        if "failure" in kinds:
            counts["failed"] += 1
            failed.append(name)
        elif "error" in kinds:
            counts["errors"] += 1
            failed.append(name)
        elif "skipped" in kinds:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
except (OSError, ET.ParseError) as exc:  # timeout or crash before the report
    out["junit_error"] = str(exc)
out.update(counts, failed_tests=failed)
out["factory_timing_exit"] = env["FACTORY_RC"]
if os.path.exists(env["FACTORY_JSON"]):
    out["factory_timing"] = json.load(open(env["FACTORY_JSON"]))
text = json.dumps(out, indent=2)
open(sys.argv[1], "w").write(text + "\n")
print(text)
EOF
echo "== wrote $LOG and $JSON; pytest exit status $RC"
exit "$RC"
