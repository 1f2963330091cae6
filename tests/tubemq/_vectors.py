"""Golden TubeMQ frames computed by hand from FACTS.md's worked examples, and builders.

The hex below is FACTS.md section 1's example, typed from its byte listing (not produced
by our encoder), so a test comparing our encoder with it checks the encoder.
"""

from __future__ import annotations

from nsqviz.tubemq import MESSAGES

CLOSE_REQUEST_HEX = (
    "ff7ff4fe" "0000002a" "00000001" "00000014"
    "02" "0800"
    "04" "08011003"
    "0b" "0803" "10904e" "1a04" "0a027031"
)
"""Java-style CloseRequestP2M{clientId="p1"}, serial 42: RpcConnHeader{flag=0},
RequestHeader{serviceType=1, protocolVer=3}, RequestBody{method=3, timeout=10000}."""

CLOSE_RESPONSE_HEX = (
    "ff7ff4fe" "0000002a" "00000001" "00000017"
    "02" "0801"
    "04" "08001803"
    "0e" "0803" "120a" "080110c8011a034f4b21"
)
"""The answer CloseResponseM2P{success=true, errCode=200, errMsg="OK!"}: flag=1,
ResponseHeader{status=SUCCESS, protocolVer=3}, RspResponseBody{method=3, data}."""

PAYLOAD_HEX = "00000003" "6b3d76" "68656c6c6f"
"""Section 7: attribute ``k=v``, body ``hello``, flag 1."""
PAYLOAD_CRC = 723795346


def close_request():
    return MESSAGES["CloseRequestP2M"](clientId="p1")


def close_response():
    return MESSAGES["CloseResponseM2P"](success=True, errCode=200, errMsg="OK!")


def be32(n: int) -> bytes:
    return (n & 0xFFFFFFFF).to_bytes(4, "big")
