"""Do two commits release the same bytes?  A check for restructurings (issue #22).

Usage (from the repository root; needs git and the project's venv):

    python scripts/release_identity.py --base 6b39566            # base vs the working tree
    python scripts/release_identity.py --base A --head B         # two commits

For each job below it runs ``python -m privfed run ... --noise-seed 7 --threads 1``
once with the sources of ``--base`` (a temporary ``git worktree``) and once with
those of ``--head`` (default: this working tree), each time into the same output
folder, and compares ``release.json``, ``ledger.json`` and ``synthetic.npz``:

* the latent job on the bundled digits (the default ``privfed run``);
* the factory job, Gaussian factories at target ε = 3;
* the factory job, mixture factories at target ε = 3.

The ``.npz`` files must be byte-identical.  The JSON files must be byte-identical
once the two fields that name the run itself are set aside: ``provenance.run_id``
(random by design) and ``provenance.created_utc`` (the clock); both are printed.
``--threads 1`` pins torch's thread count (the default follows the machine's
load, and another thread count may change a float's last bit).  Exit status 0
when every file matches, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
JOBS = {
    "latent": [],
    "factory-gaussian": ["--engine", "factory", "--epsilon", "3"],
    "factory-mixture": ["--engine", "factory", "--factory", "mixture", "--epsilon", "3"],
}
FILES = ("release.json", "ledger.json", "synthetic.npz")
RUN_FIELDS = ("run_id", "created_utc")


def _run(src: Path, args: list[str], out: Path, into: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    command = [sys.executable, "-m", "privfed", "run", *args, "--noise-seed", "7"]
    command += ["--threads", "1", "--quiet", "--output-dir", str(out)]
    env = dict(os.environ, PYTHONPATH=str(src))
    subprocess.run(  # noqa: S603 -- this interpreter, a fixed argv
        command, check=True, env=env, cwd=src.parent, stdout=subprocess.DEVNULL
    )
    shutil.copytree(out, into)


def _without_run_fields(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_run_fields(v)
            for k, v in value.items()
            if not (k in RUN_FIELDS and "privfed_version" in value)
        }
    if isinstance(value, list):
        return [_without_run_fields(v) for v in value]
    return value


def _same(a: Path, b: Path) -> tuple[bool, str]:
    raw_a, raw_b = a.read_bytes(), b.read_bytes()
    if raw_a == raw_b:
        return True, "bytes identical"
    if a.suffix != ".json":
        return False, "bytes differ"
    left, right = json.loads(raw_a), json.loads(raw_b)
    if _without_run_fields(left) != _without_run_fields(right):
        return False, "content differs"
    # Equal as data apart from the run's own fields: identical bytes once those are
    # put back from one side (the files are written with a fixed layout).
    text = raw_b.decode()
    for key in RUN_FIELDS:
        old, new = _run_field(right, key), _run_field(left, key)
        text = text.replace(json.dumps(old), json.dumps(new))
    same = text.encode() == raw_a
    return same, "bytes identical but for run_id and created_utc" if same else "layout differs"


def _run_field(data: Any, key: str) -> Any:
    if isinstance(data, dict):
        if key in data and "privfed_version" in data:
            return data[key]
        for v in data.values():
            found = _run_field(v, key)
            if found is not None:
                return found
    if isinstance(data, list):
        for v in data:
            found = _run_field(v, key)
            if found is not None:
                return found
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit before the change")
    parser.add_argument("--head", default=None, help="the commit after (default: working tree)")
    args = parser.parse_args(argv)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        trees = {}
        for side, rev in (("base", args.base), ("head", args.head)):
            if rev is None:
                trees[side] = ROOT / "src"
                continue
            tree = work / f"tree-{side}"
            subprocess.run(  # noqa: S603 -- git with a fixed argv; rev is the caller's own
                ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), rev],  # noqa: S607
                check=True,
            )
            trees[side] = tree / "src"
        try:
            for job, job_args in JOBS.items():
                out = work / "run"  # one path for both sides: it is recorded in the files
                for side, src in trees.items():
                    print(f"{job}: running {side} ...", flush=True)
                    _run(src, job_args, out, work / side / job)
                for name in FILES:
                    same, how = _same(work / "base" / job / name, work / "head" / job / name)
                    digest = hashlib.sha256((work / "head" / job / name).read_bytes()).hexdigest()
                    print(
                        f"  {job:17} {name:14} {'SAME' if same else 'DIFF'}  {how}  ({digest[:16]})"
                    )
                    failures += not same
        finally:
            for side in trees:
                tree = work / f"tree-{side}"
                if tree.exists():
                    subprocess.run(  # noqa: S603 -- git with a fixed argv
                        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],  # noqa: S607
                        check=False,
                    )
    print("every file matches" if not failures else f"{failures} file(s) differ")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
