"""What both pages share: the Jinja2 environment over the packaged templates (autoescaped:
every text of a transcript is data, never markup) and the atomic write of a page."""

from __future__ import annotations

from typing import Any

from ..errors import OutputError


def environment(**globals_: Any) -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("compactor_cli.pages", "templates"),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(globals_)
    return env


def write_page(path: str, html: str) -> None:
    """Write a page atomically (a special file is written into); OutputError when it cannot be."""
    from ..files.sinks import open_sink

    sink = open_sink(None if path == "-" else path)
    try:
        sink.write(html.encode("utf-8", "replace"))  # a file name that is not UTF-8: shown with '?', not a crash
        sink.commit()
    except OSError as exc:
        sink.abort()
        raise OutputError(f"cannot write the page {path}: {exc.strerror or exc}") from None
    except BaseException:
        sink.abort()
        raise
