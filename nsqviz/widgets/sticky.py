"""The sticky-packet (粘包) playground: segments as rows, frames as coloured spans.

Each row is one TCP segment (or one ``recv()`` chunk), drawn to scale. Inside it,
every byte range that belongs to frame *k* (as the reassembler's provenance says) is
painted in the frames' colour (their name's, ``FrameTypeMessage``; every other frame a
lighter shade, so neighbours stay apart) and labelled ``F k``; a frame that continues in the next
row has an open, hatched edge. To the right of each row: which frames that segment
completed, and what the reassembler is still holding.

:class:`StickyView` renders a :class:`~nsqviz.clients.session.sticky.StickyRun` (optionally
only its first ``upto`` steps); :class:`StickyPlayground` adds ipywidgets controls for
the message count and size, MSS, coalescing and the step.
"""

from __future__ import annotations

from typing import Any

from nsqviz.clients.session.sticky import (
    StickyRun,
    framing_for,
    loopback,
    message_frames,
    reassemble,
    simulate_segments,
    tubemq_frames,
)
from nsqviz.palette import ordinal_colour
from nsqviz.stream.reassembly import Garbage, RawFrame
from nsqviz.widgets.hexview import LINK_CSS, unit_view
from nsqviz.widgets.opener import MAX_OPEN_BYTES, MAX_OPENERS, OPEN_CSS, Openers, too_long
from nsqviz.widgets.style import CSS, StaticView, esc, once

__all__ = ["StickyPlayground", "StickyView"]

_MAX_ROW_PX = 640


class StickyView(StaticView):
    def __init__(self, run: StickyRun, upto: int | None = None):
        self.run = run
        self.upto = len(run.steps) if upto is None else max(0, min(upto, len(run.steps)))

    def _frame_index(self) -> dict[int, int]:
        """Stream offset of each reassembled frame -> its number (in write order)."""
        return {f.offset: i for i, f in enumerate(self.run.reassembled)}

    def html(self, *, with_css: bool = True) -> str:
        run = self.run
        longest = max((len(s) for s in run.segments), default=1) or 1
        scale = min(9.0, _MAX_ROW_PX / longest)
        index = self._frame_index()
        # which frame owns which (segment, start, end): from the reassembler's provenance
        spans: dict[int, list[tuple[int, int, int, bool, bool]]] = {}
        for f in run.reassembled:
            k = index[f.offset]
            for j, src in enumerate(f.sources):
                first, last = j == 0, j == len(f.sources) - 1
                spans.setdefault(src.segment, []).append((src.start, src.end, k, first, last))
        marks = self._marks()
        openers = Openers(f"sticky {run.label} {self.upto} {[len(f) for f in run.frames]}")
        shown = {st.segment for st in run.steps[: self.upto]}
        for f in run.reassembled:  # a pane for each frame with a span drawn so far
            k = index[f.offset]
            if k < MAX_OPENERS and any(src.segment in shown for src in f.sources):
                openers.pane(k, self._frame_html(k, f.data))
        rows = []
        for step in run.steps[: self.upto]:
            width = max(len(step.data) * scale, 2)
            cells = []
            for start, end, k, first, last in sorted(spans.get(step.segment, [])):
                left, w = start * scale, (end - start) * scale
                edge = []
                if not first:
                    edge.append("border-left:2px dashed #374151")
                if not last:
                    edge.append("border-right:2px dashed #374151")
                label = f"F{k}" if w >= 18 else ""
                tip = f"frame F{k}: bytes {start}..{end} of this segment"
                style = (f"left:{left:.1f}px;width:{w:.1f}px;"
                         f'background:{ordinal_colour(k, run.name)};{";".join(edge)}')
                cells.append(
                    openers.box(k, label, style=style, title=f"{tip} · click: its bytes",
                                cls="nv-span") if k < MAX_OPENERS else
                    f'<div class="nv-span" title="{tip}" style="{style}">{label}</div>'
                )
            for at, title in marks.get(step.segment, []):
                cells.append(f'<div class="nv-mark" title="{esc(title)}" '
                             f'style="left:{at * scale:.1f}px"></div>')
            done = [e for e in step.events if isinstance(e, RawFrame)]
            bad = [e for e in step.events if not isinstance(e, RawFrame)]
            done_txt = ", ".join(f"F{index[e.offset]}" for e in done) or "—"
            extra = "".join(
                f' <span class="nv-err">{esc(type(e).__name__)}</span>' for e in bad
            )
            held = len(step.buffered)
            rows.append(
                f'<tr><td class="nv-mono nv-muted">#{step.segment}</td>'
                f'<td class="nv-mono" style="text-align:right">{len(step.data)} B</td>'
                f'<td><div class="nv-seg" style="width:{width:.1f}px">{"".join(cells)}</div></td>'
                f'<td class="nv-mono">→ {done_txt}{extra}</td>'
                f'<td class="nv-mono nv-muted">buffer {held} B</td></tr>'
            )
        n_frames = len(run.frames)
        complete = sum(isinstance(e, RawFrame) for st in run.steps[: self.upto]
                       for e in st.events)
        status = (
            f"{complete} of {n_frames} frames complete after {run.count(self.upto)}"
            + (" ✓ all reassembled" if run.intact and self.upto == len(run.steps) else "")
        )
        legend = " ".join(
            f'<span class="nv-chip" style="background:{ordinal_colour(i, run.name)}">'
            f"F{i} · {len(f)} B"
            f"{self._blocks(i)}</span>"
            for i, f in enumerate(run.frames)
        )
        buffer = ""
        if self.upto > 0:
            reached = run.steps[self.upto - 1]
            if reached.buffered:
                buffer = (
                    '<div class="nv-mono nv-muted" style="margin-top:4px">reassembler buffer: '
                    f"{esc(reached.buffered[:48].hex(' '))}"
                    f"{' …' if len(reached.buffered) > 48 else ''}</div>"
                )
        hint = ('<div class="nv-muted" style="font-size:11px">click a frame to open its bytes'
                "</div>" if rows and run.reassembled else "")
        return (
            f'{CSS if with_css else ""}{_STICKY_CSS}{OPEN_CSS}{LINK_CSS}'
            f'<div class="nsqviz nsqviz-sticky nv-open">'
            f'<div class="nv-title">{esc(run.label)} <span class="nv-muted">· '
            f"{run.count(len(run.segments))}, step {self.upto}/{len(run.steps)} · {status}"
            f"</span></div>"
            f'<div class="nv-legend">{legend}</div>{hint}'
            f'<table class="nv-sticky">{"".join(rows)}</table>{buffer}{openers.html()}</div>'
        )

    def _frame_html(self, k: int, data: bytes) -> str:
        """Frame ``k``'s hex view and field tree (what clicking one of its spans opens)."""
        title = f"F{k} · as reassembled"
        if len(data) > MAX_OPEN_BYTES:
            return too_long(title, len(data), "its fields are in the frame's hex view above")
        view = unit_view(self.run.protocol, self.run.kind, "", data, title)
        if view is None:
            return ""
        view.fold_over = MAX_OPEN_BYTES  # opened on purpose: unfolded
        return view.html(with_css=False)

    def _blocks(self, i: int) -> str:
        """`` · 3 blocks`` for a frame with marks (TubeMQ), else nothing."""
        if i >= len(self.run.marks):
            return ""
        n = len(self.run.marks[i])
        return f" · {n} block{'' if n == 1 else 's'}"

    def _marks(self) -> dict[int, list[tuple[int, str]]]:
        """segment -> (offset in it, title) of each marked frame offset (block lengths)."""
        out: dict[int, list[tuple[int, str]]] = {}
        index = self._frame_index()
        for f in self.run.reassembled:
            k = index[f.offset]
            if k >= len(self.run.marks):
                continue
            for j, at in enumerate(self.run.marks[k]):
                pos = 0
                for src in f.sources:
                    if pos <= at < pos + src.end - src.start:
                        out.setdefault(src.segment, []).append(
                            (src.start + at - pos, f"F{k} block[{j}].length"))
                        break
                    pos += src.end - src.start
        return out

    def text(self) -> str:
        index = self._frame_index()
        lines = [f"{self.run.label}: {len(self.run.frames)} frames in "
                 f"{self.run.count(len(self.run.segments))}"]
        lines += [f"  F{i}: {len(f)} B{self._blocks(i)}" for i, f in enumerate(self.run.frames)
                  if self._blocks(i)]
        for step in self.run.steps[: self.upto]:
            done = [f"F{index[e.offset]}" for e in step.events if isinstance(e, RawFrame)]
            bad = [type(e).__name__ for e in step.events if isinstance(e, Garbage)]
            lines.append(
                f"  #{step.segment:<3} {len(step.data):>5} B -> {', '.join(done + bad) or '-':<20}"
                f" buffer {len(step.buffered)} B"
            )
        return "\n".join(lines)



_STICKY_CSS = """<style>
.nsqviz table.nv-sticky{border-collapse:collapse}
.nsqviz table.nv-sticky td{padding:2px 8px 2px 0;vertical-align:middle}
.nsqviz .nv-seg{position:relative;height:20px;background:#f3f4f6;border:1px solid #9ca3af;
 border-radius:2px}
.nsqviz .nv-span{position:absolute;top:0;height:20px;font:600 10px/20px monospace;
 text-align:center;overflow:hidden;box-sizing:border-box;color:#1f2937}
.nsqviz .nv-mark{position:absolute;top:-3px;height:26px;width:2px;background:#111827}
</style>"""


class StickyPlayground:
    """Controls + view. ``run()``/``view()`` are plain; ``widget()`` wires ipywidgets.

    ``sizes`` (body bytes per message) overrides ``count`` x ``size`` when given.
    ``protocol="tubemq"`` draws TubeMQ SendMessageRequestP2B frames instead of NSQ
    messages, with each 8192-byte block's length marked.
    """

    def __init__(self, count: int = 4, size: int = 10, mss: int = 48, coalesce: bool = True,
                 *, sizes: list[int] | None = None, recv_size: int = 64,
                 protocol: str = "nsq"):
        self.count, self.size, self.mss, self.coalesce = count, size, mss, coalesce
        self.sizes = list(sizes) if sizes else None
        self.recv_size = recv_size
        if protocol not in ("nsq", "tubemq"):
            raise ValueError(f"protocol must be 'nsq' or 'tubemq', got {protocol!r}")
        self.protocol = protocol

    def body_sizes(self) -> list[int]:
        return self.sizes or [self.size] * self.count

    def frames(self) -> list[bytes]:
        if self.protocol == "tubemq":
            return tubemq_frames(self.body_sizes())
        return message_frames(self.body_sizes())

    def run(self) -> StickyRun:
        frames = self.frames()
        mode = "coalesced (Nagle on)" if self.coalesce else "one write per frame (Nagle off)"
        segments = simulate_segments(frames, mss=self.mss, coalesce=self.coalesce)
        return reassemble(f"simulated sender, MSS {self.mss}, {mode}", frames, segments,
                          **framing_for(frames, self.protocol == "tubemq"))

    def loopback(self, recv_size: int | None = None, pause: float = 0.0) -> StickyRun:
        return loopback(self.frames(), recv_size=recv_size or self.recv_size,
                        nodelay=not self.coalesce, pause=pause,
                        tubemq=self.protocol == "tubemq")

    def view(self, upto: int | None = None) -> StickyView:
        return StickyView(self.run(), upto)

    def __repr__(self) -> str:
        return self.view().text()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The live controls where widgets run; the static view everywhere else."""
        bundle = dict(self.widget()._repr_mimebundle_() or {})
        bundle["text/html"] = once(self.view().html())
        bundle["text/plain"] = self.view().text()
        return bundle

    def widget(self) -> Any:
        import ipywidgets as w

        wide = {"description_width": "initial"}
        count = w.IntSlider(self.count, 1, 8, description="messages")
        size = w.IntSlider(self.size, 1, 120, description="body bytes")
        sizes = w.Text(", ".join(map(str, self.sizes or [])), description="or sizes",
                       placeholder="e.g. 5, 80, 20", style=wide)
        mss = w.IntSlider(self.mss, 8, 200, description="MSS")
        coalesce = w.Checkbox(self.coalesce, description="coalesce writes (Nagle)")
        step = w.IntSlider(0, 0, 1, description="fed segments", style=wide)
        recv = w.IntSlider(self.recv_size, 8, 256, description="recv() size", style=wide)
        pause = w.Checkbox(False, description="pause 50 ms between writes")
        real = w.Button(description="send over real loopback TCP", icon="plug",
                        layout=w.Layout(width="auto"))
        out = w.HTML()
        real_out = w.HTML()

        def parse_sizes() -> list[int] | None:
            try:
                got = [int(x) for x in sizes.value.replace(",", " ").split()]
            except ValueError:
                return None
            return [max(1, min(n, 4096)) for n in got][:12] or None

        def refresh(_change: Any = None) -> None:
            self.count, self.size = count.value, size.value
            self.mss, self.coalesce = mss.value, coalesce.value
            self.sizes, self.recv_size = parse_sizes(), recv.value
            run = self.run()
            at_end = step.value == step.max
            step.max = len(run.steps)
            if at_end or step.value > step.max:
                step.value = step.max
            out.value = StickyView(run, step.value).html()

        def on_real(_b: Any) -> None:
            real_out.value = StickyView(
                self.loopback(pause=0.05 if pause.value else 0.0)
            ).html()

        for c in (count, size, sizes, mss, coalesce, step, recv):
            c.observe(refresh, names="value")
        real.on_click(on_real)
        refresh()
        step.value = step.max
        refresh()
        controls = w.HBox([
            w.VBox([count, size, sizes]),
            w.VBox([mss, coalesce, step]),
            w.VBox([recv, pause, real]),
        ])
        return w.VBox([controls, out, real_out])
