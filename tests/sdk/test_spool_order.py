"""The spool keeps requests in the order they were made, also when a sender puts back what it failed to send."""

import threading

from tidal.config import Options, Target
from tidal.sender import RETRY, Sender
from tidal.spool import Spool

BATCH = {"kind": "batch", "body": {"metrics": [{"key": "loss", "value": 1.0, "step": 1, "timestamp": 0}]}}
FINISHED = {"kind": "status", "status": "FINISHED"}


def test_a_spooled_batch_the_sender_fails_to_send_goes_back_before_what_was_spooled_meanwhile(tmp_path):
    """A sender starts by sending what earlier spilled to the spool. While that send hangs, finish() gives up and
    spools the run's status; then the send fails and the batch goes back: before the status, or the status would
    reach the server first and the run, finished, would refuse the points (found by
    test_log_never_waits_for_a_hanging_server on a loaded machine)."""
    options = Options(spool_dir=str(tmp_path), flush_interval=0.05)
    target = Target(url="http://127.0.0.1:9", token="t", run_id=7)
    Spool(options.spool_path(), target.url, target.run_id).append([BATCH])
    sent = threading.Event()

    class Racing(Sender):
        def _send(self, record):
            self.spool.append([FINISHED])  # what finish() spools while this send hangs
            sent.set()
            return RETRY

    sender = Racing(target, options)
    assert sent.wait(10)
    sender.close(1.0)
    spool = Spool(options.spool_path(), target.url, target.run_id)
    records = [r for path in spool.files() for r in spool.read(path)]
    assert records == [BATCH, FINISHED]


def test_put_back_goes_before_what_the_file_holds_and_appends_after_it(tmp_path):
    spool = Spool(tmp_path, "http://x", 3)
    spool.append([BATCH])
    [claimed] = spool.claim()
    spool.append([FINISHED])
    spool.put_back(spool.read(claimed))
    spool.remove(claimed)
    spool.append([{"kind": "batch", "body": {"metrics": []}}])
    assert spool.read(spool.path) == [BATCH, FINISHED, {"kind": "batch", "body": {"metrics": []}}]
