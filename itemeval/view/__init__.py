"""`itemeval view`: a local, read-only web viewer over a study's store.

The public names are `serve`, `ViewServer`, `ViewOptions` and `DEFAULT_PORT`; the modules
are private:

* `_index`     the small columns of every logical row and where it is stored; per-item counts
* `_partitions` a grade partition's rows per condition, read the way its layout makes cheap
* `_queries`   the overview and the items page (filters, search, sort)
* `_answers`   one item with every condition's answers; two conditions compared
* `_rows`      the rows a page shows, fetched by fragment and position
* `_pages`     Jinja2 templates (autoescaped) and static assets shipped in the package
* `_server`    aiohttp: GET only, 127.0.0.1 by default, a token elsewhere, live refresh

`serve(plan, options)` serves until interrupted; `ViewServer(plan, options).start()` serves
from a background thread and returns the URL (tests, notebooks).
"""

from __future__ import annotations

from itemeval.planning import Plan
from itemeval.view._server import DEFAULT_PORT, ViewOptions, ViewServer

__all__ = ["DEFAULT_PORT", "ViewOptions", "ViewServer", "serve"]


def serve(plan: Plan, options: ViewOptions | None = None) -> None:
    """Serve the viewer over `plan`'s store until interrupted (Ctrl-C)."""
    ViewServer(plan, options).serve()
