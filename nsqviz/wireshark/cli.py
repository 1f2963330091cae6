"""``nsqviz wireshark``: write the Lua dissectors generated from nsqviz's grammars.

Writes every registered protocol's dissector (``nsq.lua``, ``tubemq.lua`` with the
TubeMQ ``.proto`` sources beside it, ``lookupd.lua`` for nsqlookupd's ``"  V1"``) into
a folder and prints how to load them: ``tshark -X lua_script:FILE`` and ``-o``
preferences for one run, or ``--install`` to write them into Wireshark's personal Lua
plugins folder (and the tables a dissector's preferences name -- the ``.proto`` folder
on the protobuf search path -- into the user's own), where every Wireshark and tshark
of this user finds them.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, TextIO

from nsqviz.usage import help_text
from nsqviz.wireshark.generate import dissected, preferences, write_dissectors

__all__ = ["personal_plugins_dir", "register", "run"]


def _folder(name: str, default: Path) -> Path:
    """A folder as ``tshark -G folders`` names it, or ``default`` without tshark."""
    tshark = shutil.which("tshark")
    if tshark:
        try:
            proc = subprocess.run([tshark, "-G", "folders"], capture_output=True, text=True,
                                  timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            proc = None
        for line in (proc.stdout if proc else "").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == name and value.strip():
                return Path(value.strip())
    return default


def personal_plugins_dir() -> Path:
    """Wireshark's personal Lua plugins folder (where Wireshark >= 2.6 looks on Linux
    and macOS when tshark cannot say)."""
    home = Path(os.path.expanduser("~"))
    return _folder("Personal Lua Plugins", home / ".local" / "lib" / "wireshark" / "plugins")


def _add_to_table(name: str, line: str) -> Path:
    """Add ``line`` to the user's own Wireshark table (UAT) ``name`` -- a file of that
    name in the personal configuration folder --, once."""
    home = Path(os.path.expanduser("~"))
    conf = _folder("Personal configuration", home / ".config" / "wireshark")
    table = conf / name
    lines = table.read_text().splitlines() if table.exists() else []
    if line not in lines:
        conf.mkdir(parents=True, exist_ok=True)
        table.write_text("\n".join([*lines, line]) + "\n")
    return table


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "wireshark",
        help="write Wireshark Lua dissectors generated from the grammars",
        description=help_text(__doc__),
    )
    p.add_argument("-o", "--out", default="wireshark", metavar="DIR",
                   help="folder to write the dissectors into (default: ./wireshark)")
    p.add_argument("--install", action="store_true",
                   help="write them into Wireshark's personal Lua plugins folder instead"
                        " (tshark -G folders names it)")
    p.add_argument("--protocol", action="append", choices=sorted(dissected()), default=[],
                   help="only this protocol (repeatable; default: all)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    folder = personal_plugins_dir() if args.install else Path(args.out)
    written = write_dissectors(folder, args.protocol or None)
    for path in written:
        out.write(f"wrote {path}\n")
    scripts = " ".join(shlex.quote(f"-Xlua_script:{p}") for p in written if p.suffix == ".lua")
    prefs = preferences(folder)
    options = " ".join(f"-o {shlex.quote(f'{k}:{v}')}" for k, v in prefs.items())
    if args.install:
        out.write("installed: Wireshark and tshark load them at start-up\n")
        for key, line in prefs.items():
            kind, _, name = key.partition(":")
            if kind == "uat":
                table = _add_to_table(name, line)
                out.write(f"{line} is in Wireshark's {name} table ({table})\n")
        out.write(f"try: tshark {options} -r CAPTURE\n")
    else:
        out.write(f"try: tshark {scripts} {options} -r CAPTURE\n")
        out.write(f"  or: wireshark {scripts} {options} CAPTURE\n")
    return 0
