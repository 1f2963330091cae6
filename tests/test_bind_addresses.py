"""One bind-address rule for every server the project starts (issue 24, item 6):
loopback unless told otherwise, and ``--help`` says how to bind every interface and
what is then open to anyone."""

from __future__ import annotations

import asyncio

import pytest

from nsqviz.cli import build_parser, main
from nsqviz.servers.authd import AuthService
from nsqviz.servers.listen import LOOPBACK, split_address
from nsqviz.servers.nsqd.options import options_from_args
from nsqviz.servers.nsqlookupd.server import Lookupd, LookupdOptions
from nsqviz.servers.tubemq.cli import config_from_args


def _defaults(command: str):
    return build_parser().parse_args([command])


def test_every_server_command_binds_loopback_by_default():
    broker = options_from_args(_defaults("broker"))
    assert split_address(broker.tcp_address)[0] == LOOPBACK
    assert split_address(broker.http_address)[0] == LOOPBACK
    lookupd = _defaults("lookupd")
    assert split_address(lookupd.tcp_address)[0] == LOOPBACK  # nsqlookupd: 0.0.0.0
    assert split_address(lookupd.http_address)[0] == LOOPBACK
    assert config_from_args(_defaults("tubemq-sim")).host == LOOPBACK


@pytest.mark.parametrize("command", ["broker", "lookupd", "tubemq-sim"])
def test_help_says_how_to_bind_every_interface(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"loopback ({LOOPBACK})" in text and "0.0.0.0" in text
    assert "no authentication" in text or "no client needs credentials" in text


def test_an_empty_host_is_every_interface_as_in_go():
    assert split_address(":4150") == ("0.0.0.0", 4150)
    assert split_address("[::]:4150") == ("::", 4150)


def test_lookupd_listens_on_loopback_with_default_options():
    async def start() -> tuple[str, str]:
        defaults = LookupdOptions()
        opts = LookupdOptions(tcp_address=defaults.tcp_address.rsplit(":", 1)[0] + ":0",
                              http_address=defaults.http_address.rsplit(":", 1)[0] + ":0")
        lookupd = Lookupd(opts)
        await lookupd.start()
        try:
            return lookupd.tcp_address, lookupd.http_address
        finally:
            await lookupd.stop()

    for address in asyncio.run(start()):
        assert address.startswith(f"{LOOPBACK}:")


def test_the_auth_service_helper_listens_on_loopback():
    with AuthService({}) as service:
        assert service.address.startswith(f"{LOOPBACK}:")
