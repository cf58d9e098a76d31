"""What several test modules need to drive the `eagle3` command in-process."""

import pytest


def cli_error(argv: list[str], capsys) -> str:
    """Run `eagle3 ARGV...` as the console script does; assert a user error (exit 2, no
    traceback) and return what it printed on stderr."""
    from flows.cli import main

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.argv", ["eagle3", *argv])
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
