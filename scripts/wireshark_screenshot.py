#!/usr/bin/env python3
"""Re-make notebooks/images/wireshark.png and docs/wireshark-sticky-segment.txt.

The real Wireshark GUI (Debian's ``wireshark-qt``), on a virtual X display (Xvfb), opens
a sticky-packet capture with the dissector ``nsqviz wireshark`` generates, selects the
TCP segment that carries several NSQ message frames, expands the first of them and the
window is captured: packet list, packet details and packet bytes panes. The same
segment's ``tshark -V`` text is written next to it.

    .venv/bin/python scripts/wireshark_screenshot.py [--capture data/pubsub-pynsq.pcap]
        [--packet 50] [--out docs/] [--pictures notebooks/images/] [--name wireshark]

    .venv/bin/python scripts/wireshark_screenshot.py --name wireshark-tubemq \
        --capture data/tubemq/tubemq-glued-requests.pcap --packet 13 --pictures docs/

The picture goes under ``notebooks/`` by default: notebook 09 shows it, and JupyterLab
serves nothing above its root (``make lab``: ``notebooks/``); the README and the site
show it from there too.

Needs ``wireshark``, ``Xvfb``, ``xwd`` and ``xdotool`` (Debian: wireshark-qt xvfb
x11-apps xdotool; installed here when missing and running as root) and Pillow.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nsqviz.wireshark.generate import tshark_args

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"wireshark": "wireshark-qt", "Xvfb": "xvfb", "xwd": "x11-apps",
            "xdotool": "xdotool"}
WIDTH, HEIGHT = 1500, 960


def ensure_tools() -> None:
    missing = [pkg for tool, pkg in PACKAGES.items() if shutil.which(tool) is None]
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        sys.exit(f"missing: {' '.join(missing)} (install them with your package manager)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
                   check=True, env=env)


def xwd_to_png(xwd: bytes, png: Path, crop: tuple[int, int, int, int]) -> None:
    """An X window dump (ZPixmap, 32 bits a pixel, as Xvfb's 24-bit screen gives) as PNG."""
    from PIL import Image

    fields = struct.unpack(">25I", xwd[:100])
    header_size, width, height = fields[0], fields[4], fields[5]
    bytes_per_line, ncolors = fields[12], fields[19]
    start = header_size + 12 * ncolors
    pixels = xwd[start:start + bytes_per_line * height]
    image = Image.frombytes("RGB", (width, height), pixels, "raw", "BGRX", bytes_per_line)
    image.crop(crop).save(png, optimize=True)


def wait_for_window(display: str, name: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", name],
                             capture_output=True, text=True, env={**os.environ, "DISPLAY": display})
        ids = out.stdout.split()
        if ids:
            return ids[-1]
        time.sleep(0.5)
    raise SystemExit(f"no window named {name!r} appeared within {timeout} s")


def xdo(display: str, *args: str) -> None:
    subprocess.run(["xdotool", *args], check=True, env={**os.environ, "DISPLAY": display})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capture", default=str(ROOT / "data" / "pubsub-pynsq.pcap"))
    parser.add_argument("--packet", type=int, default=50,
                        help="the segment to select (default 50: seven MESSAGE frames)")
    parser.add_argument("--out", default=str(ROOT / "docs"),
                        help="where NAME-sticky-segment.txt goes")
    parser.add_argument("--pictures", default=str(ROOT / "notebooks" / "images"),
                        help="where NAME.png goes")
    parser.add_argument("--name", default="wireshark",
                        help="file names: NAME.png and NAME-sticky-segment.txt")
    parser.add_argument("--filter", default="nsq || tubemq", help="the display filter")
    parser.add_argument("--display", default=":97")
    args = parser.parse_args(argv)
    ensure_tools()
    out, pictures = Path(args.out), Path(args.pictures)
    out.mkdir(parents=True, exist_ok=True)
    pictures.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        lua_dir = tmp / "lua"
        subprocess.run([sys.executable, "-m", "nsqviz.cli", "wireshark", "--out", str(lua_dir)],
                       check=True, capture_output=True)
        opts = tshark_args(lua_dir)

        # the tshark -V text of the segment
        text = subprocess.run(["tshark", *opts, "-r", args.capture, "-V", "-O", "nsq,tubemq",
                               "-Y", f"frame.number == {args.packet}"],
                              check=True, capture_output=True, text=True).stdout
        (out / f"{args.name}-sticky-segment.txt").write_text(text)

        # the GUI: a fresh profile with the window where we want it
        home = tmp / "home"
        conf = home / ".config" / "wireshark"
        conf.mkdir(parents=True)
        (conf / "recent_common").write_text(
            "gui.geometry_main_x: 0\ngui.geometry_main_y: 0\n"
            f"gui.geometry_main_width: {WIDTH}\ngui.geometry_main_height: {HEIGHT}\n"
            "gui.geometry_main_maximized: FALSE\nprivs.warn_if_elevated: FALSE\n")
        (conf / "recent").write_text("gui.geometry_main_upper_pane: 330\n"
                                     "gui.geometry_main_lower_pane: 330\n")
        (conf / "preferences").write_text("gui.layout_type: 1\n"
                                          "gui.update.enabled: FALSE\n")
        env = {**os.environ, "HOME": str(home), "DISPLAY": args.display,
               "XDG_RUNTIME_DIR": str(tmp), "XDG_CONFIG_HOME": str(home / ".config")}
        xvfb = subprocess.Popen(["Xvfb", args.display, "-screen", "0", f"{WIDTH}x{HEIGHT}x24",
                                 "-nolisten", "tcp"], stderr=subprocess.DEVNULL)
        gui = None
        try:
            time.sleep(1.0)
            gui = subprocess.Popen(["wireshark", *opts, "-r", args.capture, "-Y", args.filter,
                                    "-g", str(args.packet)], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            window = wait_for_window(args.display, "Wireshark|\\.pcap")
            time.sleep(4.0)  # the capture loads and the packet is selected
            xdo(args.display, "windowmove", window, "0", "0")
            xdo(args.display, "windowsize", window, str(WIDTH), str(HEIGHT))
            time.sleep(1.5)
            # the details pane: go to its first NSQ PDU and open it
            xdo(args.display, "mousemove", "60", str(DETAILS_Y), "click", "1")
            for _ in range(4):
                xdo(args.display, "key", "Down")
            xdo(args.display, "key", "Right")
            time.sleep(1.5)
            dump = subprocess.run(["xwd", "-root", "-silent", "-display", args.display],
                                  check=True, capture_output=True).stdout
            xwd_to_png(dump, pictures / f"{args.name}.png", (0, 0, WIDTH, HEIGHT))
        finally:
            if gui is not None:
                gui.terminate()
                gui.wait(timeout=30)
            xvfb.terminate()
            xvfb.wait(timeout=30)
    print(f"wrote {pictures / (args.name + '.png')} and "
          f"{out / (args.name + '-sticky-segment.txt')}")
    return 0


DETAILS_Y = 434
"""Where the first row of the packet details pane is with the geometry above."""

if __name__ == "__main__":
    sys.exit(main())
