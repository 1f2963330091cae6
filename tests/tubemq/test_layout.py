"""Every byte of a TubeMQ frame belongs to one named field, down to each protobuf field,
also when a block boundary cuts a field."""

from __future__ import annotations

from nsqviz.tubemq import MESSAGES, encode, make_request
from nsqviz.tubemq.layout import content_fields, frame_layout
from nsqviz.widgets.hexview import HexView
from tests.tubemq._vectors import CLOSE_REQUEST_HEX, CLOSE_RESPONSE_HEX


def _tiles(lay) -> bool:
    leaves = lay.leaves()
    return leaves[0].start == 0 and leaves[-1].end == len(lay.data) and all(
        a.end == b.start for a, b in zip(leaves, leaves[1:], strict=False))


def test_golden_request_every_byte_named():
    lay = frame_layout(bytes.fromhex(CLOSE_REQUEST_HEX))
    assert lay.error is None and _tiles(lay)
    names = [leaf.dotted for leaf in lay.leaves()]
    assert names[:4] == ["token", "serialNo", "listSize", "blocks[0].length"]
    assert names[4:] == [f"blocks[0].data.{n}" for n in (
        "connHeader.length", "connHeader.flag", "header.length", "header.serviceType",
        "header.protocolVer", "body.length", "body.method", "body.timeout",
        "body.request.(key, length)", "body.request.clientId")]
    assert lay.find("blocks[0].data.body.request.clientId").value == "p1"


def test_golden_response_names_the_inner_response():
    lay = frame_layout(bytes.fromhex(CLOSE_RESPONSE_HEX))
    values = {leaf.dotted.split("data.", 1)[-1]: leaf.value for leaf in lay.leaves()}
    assert values["header.status"] == "SUCCESS"
    assert values["body.data.errMsg"] == "OK!" and values["body.data.errCode"] == 200


def test_a_field_cut_by_a_block_boundary_is_named_in_both_blocks():
    msg = MESSAGES["SendMessageRequestP2B"](clientId="p", topicName="t", partitionId=0,
                                            data=bytes(20000), flag=1, checkSum=-1,
                                            sentAddr=1)
    frame = encode(make_request(5, 13, msg))
    lay = frame_layout(frame)
    assert lay.error is None and _tiles(lay)
    names = [leaf.dotted for leaf in lay.leaves()]
    assert "blocks[1].data.body.request.data (cont.)" in names
    assert "blocks[2].data.body.request.flag" in names
    # the content leaves, joined, are the protobuf bytes of the request body
    fields = content_fields(b"".join(
        leaf.raw for leaf in lay.leaves() if ".data." in leaf.dotted))
    assert fields[-1].path == "body.request.sentAddr"


def test_bad_content_is_an_error_with_its_frame_offset():
    data = bytearray.fromhex(CLOSE_REQUEST_HEX)
    data[16] = 0x30  # connHeader length past the content
    lay = frame_layout(bytes(data))
    assert lay.error is not None and lay.error_offset == 16
    assert "✗" in HexView(lay).html()
