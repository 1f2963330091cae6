"""A client silent from its IDENTIFY on: nsqd closes it after one heartbeat, and the
analyses and the doctor say it was closed for missed heartbeats.

nsqd closes a client it read nothing from for two heartbeat intervals. When the silence
begins with the IDENTIFY that restarted nsqd's heartbeat clock, the second heartbeat and
that deadline fall due together: nsqd v1.3.0 sends one heartbeat or two before the close,
run to run (notebook 04's lab 9 beside the real nsqd), and the embedded broker one. A
capture with a single unanswered heartbeat before nsqd's close is the same failure as one
with two, so both must be reported.
"""

from __future__ import annotations

import json

import nsqviz
from nsqviz.clients.session.nsq import Session


def test_a_client_silent_since_identify_is_closed_for_missed_heartbeats(tmp_path):
    session = Session(answer_heartbeats=False)
    try:
        quiet = session.connect("quiet")
        quiet.answer_heartbeats = False
        quiet.magic()
        quiet.identify(heartbeat_interval=1000)
        quiet.wait(lambda e: type(e).__name__ == "ConnectionClosed", timeout=5)
        beats = sum(getattr(e, "is_heartbeat", False)
                    for a in session.arrivals("quiet") for e in a.events)
        path = tmp_path / "quiet.pcap"
        session.save_pcap(path)
    finally:
        session.close()
    assert beats >= 1
    cap = nsqviz.open(str(path))
    assert cap.connections.closed_for_missed_heartbeats.tolist() == [True]
    assert cap.heartbeats.closed_after.tolist()[-1]
    found = cap.diagnose()
    missed = found[found.rule == "nsq.heartbeat-missed"]
    assert len(missed) == 1 and missed.iloc[0].severity == "error"
    figures = json.loads(missed.iloc[0].figures)
    assert figures["in_row"] == beats and figures["nsqd_closed"]
    assert missed.iloc[0].summary.startswith(
        f"{beats} heartbeat{'s' if beats > 1 else ''} in a row unanswered")
