"""What several test modules need to drive the `eagle3` command in-process."""

import contextlib

import pytest


def cli_error(argv: list[str], capsys) -> str:
    """Run `eagle3 ARGV...` as the console script does; assert a user error (exit 2, no
    traceback) and return what it printed on stderr."""
    from flows.cli import main

    with prefect_console_to_current_stderr(), pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.argv", ["eagle3", *argv])
        # `--verify` sets EAGLE3_VERIFY in os.environ; setting it here first makes the context
        # restore the session's value afterwards (a delenv of an unset name records nothing)
        mp.setenv("EAGLE3_VERIFY", "0")
        with pytest.raises(SystemExit) as exit_info:
            main()
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert "Traceback" not in err
    return err


class RecordingReporter:
    """A ``Reporter`` that keeps what a stage says, for tests that assert its lines."""

    def __init__(self):
        self.lines = []

    def progress(self, *args, **figures):
        pass

    def log(self, message):
        self.lines.append(message)


def error_line(stderr: str) -> str:
    """The `error: ...` line the CLI printed; it must come last (only its indented sample/file/fix
    lines after it), so no log or traceback follows or hides it."""
    lines = stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    assert len(starts) == 1, stderr
    assert all(line.startswith("  ") for line in lines[starts[0] + 1 :]), stderr
    return lines[starts[0]]


@contextlib.contextmanager
def prefect_console_to_current_stderr():
    """Prefect's console handlers keep the stream they were made with: for an in-process CLI call
    under ``capsys`` point them at this test's stderr, and back afterwards (never leave them on a
    stream that closes with the test, nor on one an earlier test closed)."""
    import sys

    handlers = _console_handlers()
    before = [h.stream for h in handlers]
    for handler in handlers:
        _point(handler, sys.stderr)
    try:
        yield
    finally:
        for handler, stream in zip(handlers, before):
            _point(handler, sys.__stderr__ if getattr(stream, "closed", False) else stream)
        for handler in _console_handlers():  # made during the call (Prefect's first logging setup)
            if handler not in handlers:
                _point(handler, sys.__stderr__)


def _console_handlers() -> list:
    import logging

    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in list(logging.Logger.manager.loggerDict))]
    return [
        h for logger in loggers for h in getattr(logger, "handlers", []) if type(h).__name__ == "PrefectConsoleHandler"
    ]


def _point(handler, stream) -> None:
    handler.stream = stream  # not setStream: it would flush the old, maybe closed, stream
    handler.console.file = stream
