"""Progress on stderr: stage lines, tqdm bars on a terminal, rate-limited lines elsewhere."""

from __future__ import annotations

import io

from privfed.cli._progress import reporter
from privfed.progress import ProgressEvent


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _events(steps: int) -> list[ProgressEvent]:
    return [
        ProgressEvent("train", 0, 1, "training the classifier"),
        *(ProgressEvent("train", done, steps) for done in range(1, steps + 1)),
        ProgressEvent("train", 1, 1, "accuracy 0.9", seconds=1.0),
    ]


def test_quiet_reports_nothing() -> None:
    assert reporter(True, io.StringIO()) is None


def test_a_log_file_gets_stage_lines_and_no_line_per_step() -> None:
    stream = io.StringIO()
    report = reporter(False, stream)
    for event in _events(500):
        report(event)
    lines = stream.getvalue().splitlines()
    # Start and finish; the 500 steps came within LINE_INTERVAL seconds, so none printed.
    assert len(lines) == 2, lines
    assert "training the classifier" in lines[0] and "accuracy 0.9" in lines[1]
    assert "\r" not in stream.getvalue()


def test_a_terminal_gets_a_bar_for_counted_steps() -> None:
    stream = _Terminal()
    report = reporter(False, stream)
    for event in _events(50):
        report(event)
    text = stream.getvalue()
    assert "\r" in text and "/50" in text  # tqdm redrew a bar in place
    assert "accuracy 0.9" in text


def test_factory_stages_say_what_they_do() -> None:
    """No empty stage header: every factory stage has a start message."""
    from privfed.engines.factory.job import STAGES

    assert all(stage.begin is not None for stage in STAGES)


def test_the_summary_shows_dropouts_in_words() -> None:
    from privfed.cli.run import _dropped

    assert _dropped({}) == "none"
    assert _dropped({"MASKED_INPUT": [3, 9]}) == "2 (masked input: 3, 9)"
