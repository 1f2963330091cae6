"""Every sub-command's ``--help`` reads as its authors meant: a description and an epilog
of whole sentences (ending with a period, or with a list), no reST markup, and no
option's default printed twice."""

from __future__ import annotations

import argparse
import contextlib
import io
import re

import pytest

from nsqviz.cli import build_parser, main

_COMMANDS = next(a for a in build_parser()._actions
                 if isinstance(a, argparse._SubParsersAction)).choices
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s")


def _help(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0
    return out.getvalue()


def _whole(text: str) -> bool:
    """Does ``text`` end as a sentence ends -- or with a list?"""
    text = text.rstrip()
    return text.endswith((".", "!", "?")) or bool(_LIST_ITEM.match(text.splitlines()[-1]))


def _option_helps(text: str) -> dict[str, str]:
    """Each option's help, its wrapped lines joined, by the option's first line."""
    out: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        if re.match(r"^  -", line):
            name = line.split()[0]
            out[name] = line
        elif name is not None and line.startswith("    "):
            out[name] += " " + line.strip()
        else:
            name = None
    return out


@pytest.mark.parametrize("command", [None, *sorted(_COMMANDS)])
def test_help_is_whole_sentences_with_each_default_once(command):
    argv = ["--help"] if command is None else [command, "--help"]
    text = _help(argv)
    parser = build_parser(command) if command is None else _COMMANDS[command]
    flat = "".join(text.split())  # argparse wraps lines, also at a hyphen
    for part in ("description", "epilog"):
        value = getattr(parser, part)
        if value:
            assert _whole(value), f"{part} of {argv}: ...{value[-60:]!r}"
            assert "".join(value.split()) in flat, f"{part} of {argv} is not printed whole"
    assert "``" not in text and not re.search(r":\w+:`", text), "reST markup in --help"
    for option, help_ in _option_helps(text).items():
        # a default is named after "(", ";" or ","; "default time ..." is a meaning
        assert len(re.findall(r"[(;,]\s*default\b", help_)) <= 1, f"{argv} {option}: {help_}"


def test_every_sub_command_is_checked():
    assert {"broker", "decode", "fields", "lookupd", "messages", "pipeline",
            "tubemq-sim", "wireshark"} <= set(_COMMANDS)
