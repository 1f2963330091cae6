"""Captures: reading pcap/pcapng, TCP reassembly, decoding, and writing captures.

* :mod:`~nsqviz.capture.files` -- streaming pcap and pcapng readers (records + warnings);
* :mod:`~nsqviz.capture.layers` -- link types, IPv4/IPv6, TCP -> :class:`Segment`;
* :mod:`~nsqviz.capture.tcp` -- flows and in-order byte streams with gaps and provenance;
  :mod:`~nsqviz.capture.flow` -- what a flow is; :mod:`~nsqviz.capture.tcp_analysis` --
  Wireshark's TCP analysis of their segments (retransmissions, zero windows, resets,
  snaplen cuts); :mod:`~nsqviz.capture.tcp_views` -- the analyses over what it finds;
* :mod:`~nsqviz.capture.driver` -- the one loop from files to flow events (continuation
  across files, idle split), for ``nsqviz decode``, the replay and the pipeline;
* :mod:`~nsqviz.capture.decode` -- protocol detection and decoding through each
  protocol's observer (:mod:`nsqviz.protocols`), into :mod:`nsqviz.records`;
* :mod:`~nsqviz.capture.cli` and :mod:`~nsqviz.capture.options` -- ``nsqviz decode``;
* :mod:`~nsqviz.capture.live` -- ``nsqviz decode -i``: tcpdump (or dumpcap) as a child
  writing the capture to a pipe;
* :mod:`~nsqviz.capture.writer` -- pcap/pcapng writers and synthetic TCP conversations;
* :mod:`~nsqviz.capture.synth` -- NSQ conversations built by the codec, for tests;
* :mod:`~nsqviz.capture.replay` -- what the replay view draws.
"""

from nsqviz.capture.decode import CaptureDecoder, decode_capture
from nsqviz.capture.driver import CaptureDriver
from nsqviz.capture.files import CaptureFormatError, CaptureWarning, Record, read_capture
from nsqviz.capture.layers import Segment, decode_record
from nsqviz.capture.tcp import FlowTracker
from nsqviz.capture.writer import PcapngWriter, PcapWriter, TcpConversation

__all__ = [
    "CaptureDecoder",
    "CaptureDriver",
    "CaptureFormatError",
    "CaptureWarning",
    "FlowTracker",
    "PcapWriter",
    "PcapngWriter",
    "Record",
    "Segment",
    "TcpConversation",
    "decode_capture",
    "decode_record",
    "read_capture",
]
