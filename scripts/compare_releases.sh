#!/usr/bin/env bash
# Byte-compare what `privfed run` releases at two git revisions, for fixed seeds.
#
#   scripts/compare_releases.sh REV_A [REV_B]     (REV_B defaults to the working tree)
#
# Runs six fixed-seed configurations (latent: central, distributed Skellam, distributed
# discrete Gaussian under add/remove, central under add/remove; factory: Gaussian
# factories with a DP noise seed) with the sources of each revision and the current
# virtual environment, then compares release.json, ledger.json and synthetic.npz byte
# for byte.  Prints one line per file and exits 1 if any differs.  A refactoring of the
# release path must leave every line "same"; a change to the noise stream or the
# calibration shows up here as DIFFER (say so in its commit).
#
# The factory configuration needs a revision whose factory engine accepts --noise-seed;
# at an older revision it is reported as "missing".
set -euo pipefail

REPO=$(git rev-parse --show-toplevel)
PY=${PYTHON:-$REPO/.venv/bin/python}
A=${1:?usage: scripts/compare_releases.sh REV_A [REV_B]}
B=${2:-}
WORK=$(mktemp -d)
cleanup() {
    git -C "$REPO" worktree remove --force "$WORK/src-a" >/dev/null 2>&1 || true
    [ -n "$B" ] && git -C "$REPO" worktree remove --force "$WORK/src-b" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

git -C "$REPO" worktree add --detach -q "$WORK/src-a" "$A"
if [ -n "$B" ]; then
    git -C "$REPO" worktree add --detach -q "$WORK/src-b" "$B"
    TREE_B=$WORK/src-b
else
    TREE_B=$REPO
fi

COMMON=(--threads 1 --seed 3 --noise-seed 11 --quiet --overwrite)
CONFIGS=(
    "latent-central|"
    "latent-skellam|--noise distributed-skellam"
    "latent-dg-add-remove|--noise distributed-gaussian --adjacency add-remove"
    "latent-central-add-remove|--adjacency add-remove --no-audit"
    "factory-gaussian|--engine factory --epsilon 5 --factory gaussian"
)

run_all() {  # tree outdir
    local tree=$1 out=$2 entry name args
    for entry in "${CONFIGS[@]}"; do
        name=${entry%%|*}
        args=${entry#*|}
        echo "  $name" >&2
        # shellcheck disable=SC2086  # the configuration's options are words
        PYTHONPATH=$tree/src "$PY" -m privfed run "${COMMON[@]}" $args \
            --output-dir "$out/$name" >/dev/null 2>"$out.$name.err" || true
    done
}

echo "running $A" >&2
mkdir -p "$WORK/out-a" "$WORK/out-b"
run_all "$WORK/src-a" "$WORK/out-a"
echo "running ${B:-the working tree}" >&2
run_all "$TREE_B" "$WORK/out-b"

status=0
for entry in "${CONFIGS[@]}"; do
    name=${entry%%|*}
    for file in release.json ledger.json synthetic.npz; do
        a=$WORK/out-a/$name/$file
        b=$WORK/out-b/$name/$file
        if [ ! -f "$a" ] || [ ! -f "$b" ]; then
            echo "missing $name/$file"
            status=1
        elif cmp -s "$a" "$b"; then
            echo "same    $name/$file $(sha256sum <"$a" | cut -c1-16)"
        else
            echo "DIFFER  $name/$file"
            status=1
        fi
    done
done
exit $status
