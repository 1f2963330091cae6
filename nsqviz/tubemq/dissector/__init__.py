"""TubeMQ's Wireshark dissector, generated from its grammar and tables (``nsqviz
wireshark`` writes it; :attr:`nsqviz.protocols.protocol.Protocol.dissector`): ``tubemq.lua``
(:mod:`~nsqviz.tubemq.dissector.script`, with ``engine.lua``) and, beside it in
``tubemq-proto/`` (:data:`~nsqviz.tubemq.dissector.script.PROTO_DIR`), the ``.proto``
sources Wireshark's protobuf dissector reads the messages with.
"""

from __future__ import annotations

from pathlib import Path

from nsqviz.protocols.protocol import LuaScript, Protocol

__all__ = ["DISSECTOR", "TubeMQDissector"]


class TubeMQDissector(LuaScript):
    """``tubemq.lua`` and the ``.proto`` sources beside it."""

    def files(self, protocol: Protocol) -> dict[str, str]:
        from nsqviz.tubemq.dissector.script import PROTO_DIR, proto_sources

        files = super().files(protocol)
        for name, text in proto_sources().items():
            files[f"{PROTO_DIR}/{name}"] = text
        return files

    def preferences(self, folder: Path) -> dict[str, str]:
        """The ``.proto`` folder on the protobuf search path, its messages as ``pbf.*``
        filter fields too, once the sources are in ``folder``."""
        from nsqviz.tubemq.dissector.script import PROTO_DIR

        protos = Path(folder).resolve() / PROTO_DIR
        if not protos.is_dir():
            return {}
        return {"uat:protobuf_search_paths": f'"{protos}","TRUE"',
                "protobuf.pbf_as_hf": "TRUE", "protobuf.preload_protos": "TRUE"}


DISSECTOR = TubeMQDissector("nsqviz.tubemq.dissector.script")
"""TubeMQ's dissector, as :attr:`nsqviz.tubemq.protocol.TubeMQProtocol.dissector`."""
