"""README.md's figures table is generated from ``benchmarks/results/*.json``.

``benchmarks/figures.py`` writes the table between two HTML comment markers in
README.md.  The first test regenerates it from the committed JSON files and
fails when README.md differs, so a rerun benchmark whose figures did not reach
the README fails CI; the others check the generator itself on small synthetic
result files.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_figures() -> ModuleType:
    path = ROOT / "benchmarks" / "figures.py"
    spec = importlib.util.spec_from_file_location("_privfed_benchmarks_figures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses look the defining module up in sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


figures = _load_figures()


def test_readme_figures_table_matches_the_committed_results() -> None:
    section, _warnings = figures.render_section(figures.RESULTS)
    current = figures.extract_section(figures.README.read_text(encoding="utf-8"))
    if current != section:
        diff = "\n".join(
            difflib.unified_diff(
                current.splitlines(),
                section.splitlines(),
                fromfile="README.md",
                tofile="benchmarks/results/*.json",
                lineterm="",
            )
        )
        pytest.fail(
            "README.md's figures table differs from benchmarks/results/*.json: run "
            f"`python benchmarks/figures.py` and commit README.md.\n{diff}"
        )


def test_a_changed_result_changes_the_table(tmp_path: Path) -> None:
    for path in figures.RESULTS.glob("*.json"):
        shutil.copy(path, tmp_path / path.name)
    before, _ = figures.render_section(tmp_path)
    data = json.loads((tmp_path / "secagg.json").read_text())
    complete = next(r for r in data["results"] if r["scenario"]["name"] == "complete N=100")
    complete["client_seconds_mean"] = 0.0123
    (tmp_path / "secagg.json").write_text(json.dumps(data))
    after, _ = figures.render_section(tmp_path)
    changed = [
        (old, new)
        for old, new in zip(before.splitlines(), after.splitlines(), strict=True)
        if old != new
    ]
    assert len(changed) == 1
    assert "client 0.012 s" in changed[0][1]
    assert "client 0.012 s" not in changed[0][0]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.041397, "0.041"),
        (0.43063, "0.43"),
        (1.5087, "1.5"),
        (88.0, "88"),
        (204.349, "204"),
        (0.0996, "0.10"),
        (9.96, "10"),
        (0.0, "0"),
        (-2.345, "-2.3"),
    ],
)
def test_sig_rounds_to_significant_figures_without_exponents(value: float, expected: str) -> None:
    assert figures.sig(value) == expected


def test_formatting_helpers() -> None:
    assert figures.count(83850.0) == "83,850"
    with pytest.raises(ValueError, match="whole number"):
        figures.count(2.5)
    assert figures.times(2.36009) == "2.4×"
    assert figures.span(2.0804, 2.7665, figures.sig) == "2.1–2.8"
    assert figures.span(1.001, 1.04, figures.sig) == "1.0"
    assert figures.points(-0.0077777) == "−0.8"
    assert figures.points(0.0055555) == "+0.6"
    assert figures.number(1e-5) == "10⁻⁵"
    assert figures.number(0.5) == "0.5"
    assert figures.number(10.0) == "10"
    assert figures.epsilon(None) == "∞"
    assert figures.micro(153.97) == "154 µs"
    assert figures.micro(5.336) == "5.3 µs"
    assert figures.micro(1228.07) == "1.2 ms"
    assert figures.plural(1, "thread") == "1 thread"
    assert figures.plural(2, "thread") == "2 threads"
    assert figures.wrap("aaaa bbbb `cc dd` ee", width=12) == "aaaa bbbb\n`cc dd` ee"


def _summary(*values: float) -> dict[str, Any]:
    ordered = sorted(values)
    return {"median": ordered[len(ordered) // 2], "min": ordered[0], "max": ordered[-1]}


def _run_wall() -> dict[str, Any]:
    def side(wall: float, stages: float, accuracy: float) -> dict[str, Any]:
        return {
            "wall_seconds": _summary(wall),
            "stages_total_seconds": _summary(stages),
            "runs": [{"wall_seconds": wall, "accuracy_synthetic": accuracy}],
        }

    return {
        "meta": {"baseline_ref": "abc1234", "repeats": 3, "cpu_count": 4},
        "baseline": side(14.68, 7.31, 0.8889),
        "today": side(9.66, 3.49, 0.8822),
        "python_import_torch_seconds": _summary(2.46),
        "today_over_baseline": 0.658,
    }


def _imports() -> dict[str, Any]:
    def entry(name: str, baseline: str | None, base_ms: float | None, ms: float) -> dict[str, Any]:
        return {
            "name": name,
            "baseline": baseline,
            "baseline_ms": base_ms,
            "target_ms": ms,
            "ratio": None if base_ms is None else ms / base_ms,
            "heavy_loaded": [],
            "repeats": 5,
        }

    return {
        "rows": [
            entry("numpy", None, None, 140.0),
            entry("torch", "numpy", 130.0, 2080.0),
            entry("privfed.secagg + privfed.dp", "numpy", 130.0, 260.0),
            {**entry("first use, dp: calibrate", "numpy", 100.0, 330.0), "heavy_loaded": ["scipy"]},
            entry("privfed.testing", "numpy", 120.0, 132.0),
            entry("privfed.audit", "numpy", 120.0, 96.0),
            entry("privfed.engines.latent", "torch", 1900.0, 7.0),
            entry("privfed.engines", "torch", 1800.0, 4.0),
            entry("privfed.engines.latent, every export", "torch", 2000.0, 500.0),
        ]
    }


def test_synthetic_results_give_their_rows_and_name_the_missing_files(tmp_path: Path) -> None:
    (tmp_path / "run_wall.json").write_text(json.dumps(_run_wall()))
    (tmp_path / "imports.json").write_text(json.dumps(_imports()))
    section, warnings = figures.render_section(tmp_path)
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == ["imports.py", "run_wall.py"]
    assert rows[1] == (
        "| `run_wall.py` | `privfed run` with its defaults, whole process (interpreter, imports, "
        "stages), today vs commit abc1234, alternating fresh processes, median of 3 | 9.7 s wall "
        "(3.5 s in stages) vs 14.7 s (7.3 s) at abc1234: 0.66×; synthetic accuracy 0.882 vs "
        "0.889; a fresh `python -c 'import torch'` alone takes 2.5 s |"
    )
    assert "`import privfed.secagg, privfed.dp` 260 ms = 2.0× numpy's 130 ms" in rows[0]
    assert "`privfed.engines.latent` 7 ms after torch's 1900 ms" in rows[0]
    assert "every export of `privfed.engines.latent` 500 ms after torch's 2000 ms" in rows[0]
    assert (
        'first use (import and first call, after numpy): "dp: calibrate" 330 ms (3.3×, loads scipy)'
        in rows[0]
    )
    assert "4-core CPU machine" in section
    missing = {w.split()[0] for w in warnings}
    assert "benchmarks/results/secagg.json" in missing
    assert "benchmarks/results/flower.json" in missing
    assert not any("imports.json" in w or "run_wall.json" in w for w in warnings)


def test_the_secagg_scaling_row_reports_the_fitted_exponents(tmp_path: Path) -> None:
    def result(n: int, server: float, floor: float) -> dict[str, Any]:
        scenario = {"clients": n, "dropouts": n // 20, "degree": 30, "threshold": 17}
        return {"scenario": scenario, "server_seconds": server, "server_over_floor": server / floor}

    document = {
        "meta": {"repeats": 3},
        "results": [result(100, 0.2, 0.05), result(300, 0.5, 0.125), result(1000, 1.23, 0.41)],
        "scaling": {
            "clients": [100.0, 300.0, 1000.0],
            "server_exponent": 0.7854,
            "server_floor_exponent": 0.9,
            "server_over_floor_exponent": -0.1149,
            "server_stage_exponents": {"SHARE_KEYS": 1.0, "UNMASKING": 0.61},
            "client_exponent": 0.02,
        },
    }
    (tmp_path / "secagg_scaling.json").write_text(json.dumps(document))
    section, _ = figures.render_section(tmp_path)
    assert section.splitlines()[-1] == (
        "| `secagg.py --suite scaling` | SecAgg+ server cost against N = 100 / 300 / 1000 at "
        "k = 30, t = 17, 5 % dropping before masked input; least-squares fit of log time on log "
        "N, median of 3 | server ∝ N^0.79 (its mask floor N^0.90, server/floor N^−0.11; by "
        "stage: SHARE_KEYS N^1.00, UNMASKING N^0.61); mean client N^0.02; at N = 1000: server "
        "1.2 s = 3.0× its floor |"
    )


def test_the_secagg_client_row_reports_both_clocks(tmp_path: Path) -> None:
    def clock(client: float, expand: float, ctr: float, x25519: float) -> dict[str, float]:
        return {
            "client_seconds": client,
            "client_over_expand_floor": client / expand,
            "client_over_ctr_mode_floor": client / ctr,
            "lower_bound_over_expand_floor": (expand + x25519) / expand,
        }

    scenario = {"clients": 100, "threshold": 51, "length": 83850, "dropouts": 10}
    document = {
        "meta": {"scenario": {**scenario, "graph": "complete"}},
        "exact_sum": True,
        "summary": {
            "cpu": clock(0.036, 0.012, 0.018, 0.012),
            "wall": clock(0.05, 0.02, 0.04, 0.02),
        },
        "rounds": [{}, {}, {}],
    }
    (tmp_path / "secagg_client.json").write_text(json.dumps(document))
    section, _ = figures.render_section(tmp_path)
    assert section.splitlines()[-1] == (
        "| `secagg_client.py` | one client of N = 100 (complete graph, t = 51, 83,850 values, 10 "
        "dropping before masked input), every message serialized; medians over clients and 3 "
        "rounds | CPU time: client 36.0 ms = 3.0× the mask floor (`prg.expand`), 2.0× plain "
        "AES-CTR mode's keystream; the masks plus the client's X25519 agreements alone: 2.0× the "
        "floor; wall clock: 50.0 ms, 2.5× / 1.2× / 2.0×; sum exact |"
    )


def test_a_missing_field_is_an_error_naming_the_file_and_the_field(tmp_path: Path) -> None:
    data = _run_wall()
    del data["python_import_torch_seconds"]
    (tmp_path / "run_wall.json").write_text(json.dumps(data))
    with pytest.raises(figures.FigureError, match=r"run_wall\.json: no field 'python_import_torch"):
        figures.render_section(tmp_path)
    data = _run_wall()
    data["today"]["wall_seconds"]["median"] = "fast"
    (tmp_path / "run_wall.json").write_text(json.dumps(data))
    with pytest.raises(
        figures.FigureError, match=r"expected a number.*today\.wall_seconds\.median"
    ):
        figures.render_section(tmp_path)
    (tmp_path / "run_wall.json").write_text("{not json")
    with pytest.raises(figures.FigureError, match=r"run_wall\.json: cannot read it"):
        figures.render_section(tmp_path)


def test_check_reports_a_stale_table_and_a_rewrite_fixes_only_the_marked_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "run_wall.json").write_text(json.dumps(_run_wall()))
    readme = tmp_path / "README.md"
    text = f"# Title\n\nbefore\n\n{figures.BEGIN}\n| stale | table |\n{figures.END}\n\nafter\n"
    readme.write_text(text)
    args = ["--results", str(results), "--readme", str(readme)]

    assert figures.main(["--check", *args]) == 1
    out = capsys.readouterr().out
    assert "-| stale | table |" in out
    assert "run `python benchmarks/figures.py`" in out
    assert readme.read_text() == text  # --check never writes

    assert figures.main(args) == 0
    rewritten = readme.read_text()
    assert rewritten.startswith("# Title\n\nbefore\n\n" + figures.BEGIN + "\n")
    assert rewritten.endswith(figures.END + "\n\nafter\n")
    assert "| `run_wall.py` |" in rewritten
    assert "stale" not in rewritten
    assert figures.main(["--check", *args]) == 0

    readme.write_text("# no markers\n")
    assert figures.main(["--check", *args]) == 2
    assert "must contain the markers" in capsys.readouterr().err
