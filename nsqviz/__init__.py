"""nsqviz: see the NSQ V2 wire protocol, byte by byte, live, in captures and on Spark."""

import sys

__version__ = "0.1.0"


def _show_steps_as_html() -> None:
    """In IPython, display a session's :class:`~nsqviz.clients.session.Step` as the card of
    :func:`nsqviz.widgets.steps.step_html`, and a TubeMQ session's
    :class:`~nsqviz.clients.session.tubemq.Step` as the card of
    :func:`nsqviz.widgets.tubemq_steps.step_html`. The sessions know no HTML and the
    widgets are imported only when a step is first displayed; registering by name
    imports neither here."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return
    html = shell.display_formatter.formatters["text/html"]
    html.for_type_by_name("nsqviz.clients.session.entries", "Step", _step_html)
    html.for_type_by_name("nsqviz.clients.session.tubemq", "Step", _tubemq_step_html)


def _step_html(step: object) -> str:
    from nsqviz.widgets.steps import step_html
    from nsqviz.widgets.style import once

    return once(step_html(step))  # type: ignore[arg-type]


def _tubemq_step_html(step: object) -> str:
    from nsqviz.widgets.style import once
    from nsqviz.widgets.tubemq_steps import step_html

    return once(step_html(step))  # type: ignore[arg-type]


_show_steps_as_html()


def open(*captures: str, **options: object) -> object:  # noqa: A001 (nsqviz.open, by design)
    """A capture for a notebook: ``cap = nsqviz.open("x.pcap")`` decodes it and gives
    ``cap.frames``, ``cap.messages``, ``cap.connections``, ``cap.errors`` ... as pandas
    DataFrames, ``cap.replay()`` and ``cap.lifecycle(msg_id)``
    (:class:`nsqviz.analysis.capture.Capture`)."""
    from nsqviz.analysis.capture import open_capture

    return open_capture(*captures, **options)  # type: ignore[arg-type]
