"""The report's Jinja2 environment: the templates in `templates/`, shipped in the package, as
the viewer's are (`itemeval/view/_pages.py`).

Two rules of this environment keep the page the bytes it always was:

* a template's lines are joined without their indentation or line ends (the page is one line;
  the templates are written one element a line). `report.css` is kept as written.
* every `{{ value }}` is escaped as `html.escape` does (`'` as `&#x27;`, `"` as `&quot;`), not
  as MarkupSafe does; values already marked safe (a rendered table, a plot) pass unchanged.
  Nothing is marked safe by hand: no `|safe` in a template.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

JOINED = (".html", ".svg")  # templates whose lines are joined; others are kept as written


class _JoinedLines(PackageLoader):
    def get_source(
        self, environment: Environment, template: str
    ) -> tuple[str, str, Callable[[], bool] | None]:
        source, path, uptodate = super().get_source(environment, template)
        if template.endswith(JOINED):
            source = "".join(line.strip() for line in source.splitlines())
        return source, path, uptodate


def _escaped(value: Any) -> Markup:
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value)))


ENV = Environment(
    loader=_JoinedLines("itemeval.report", "templates"),
    autoescape=True,
    finalize=_escaped,
    keep_trailing_newline=True,
    undefined=StrictUndefined,
)


def render(template: str, **context: Any) -> Markup:
    """`template` rendered with `context`, as markup (safe to place in another template)."""
    return Markup(ENV.get_template(template).render(**context))
