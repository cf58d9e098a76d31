"""The terminal bar shows done/total, in flight, rejected, rate and ETA."""

import io

from eagle3_core.stages.generate.terminal import Fanout, TerminalProgress
from tests.stages.generate.helpers import Recorder


def test_the_bar_shows_progress_in_flight_and_rejected_and_fans_out():
    stream, recorder = io.StringIO(), Recorder()
    reporter = Fanout(lambda: recorder, TerminalProgress(stream))
    reporter.log("probe: model m on 1 endpoint(s): reasoning in `reasoning`")
    reporter.progress("generate", 3, 10, in_flight=4, rejected=1, rate=2.0)
    reporter.progress("generate", 10, 10, in_flight=0, rejected=1, rate=2.0)
    text = stream.getvalue()
    assert "probe: model m" in text and "10/10" in text
    assert "in_flight=0" in text and "rejected=1" in text and "row/s" in text and "<00:00" in text  # rate, ETA
    assert recorder.updates[-1][0] == 10 and recorder.lines == [
        "probe: model m on 1 endpoint(s): reasoning in `reasoning`"
    ]
