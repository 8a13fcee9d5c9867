"""The viewer's pages: Jinja2 templates (`templates/`) rendered with autoescaping on.

Item text, model answers, judge reasoning and every other value from the store reach a page
only as escaped text: `{{ value }}` in a template, never `|safe`, never an attribute that a
browser runs (links are built here, from the viewer's own paths and URL-encoded parameters).
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape

from itemeval.report import fmt_proportion, fmt_usd
from itemeval.view._answers import compare, item_detail
from itemeval.view._queries import SORTS, ItemQuery
from itemeval.view._queries import items_page as query_items

_ENV = Environment(
    loader=PackageLoader("itemeval.view", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def url(path: str, params: dict[str, Any] | None = None, **more: Any) -> str:
    """A link inside the viewer: `path` with URL-encoded parameters (empty ones left out)."""
    values = {**(params or {}), **more}
    kept = {k: str(v) for k, v in values.items() if v not in (None, "")}
    return path + ("?" + urlencode(kept) if kept else "")


def _money(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    if value == 0:
        return "$0"
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def _share(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.3f}"


def _count(value: int | float) -> str:
    return f"{int(value):,}"


_ENV.globals.update(url=url, fmt_proportion=fmt_proportion, sorts=SORTS)
_ENV.filters.update(money=_money, usd=fmt_usd, share=_share, count=_count)


def render(template: str, **context: Any) -> str:
    return _ENV.get_template(template).render(**context)


def _common(state: Any, active: str) -> dict[str, Any]:
    index = state.index
    return {
        "study": index.plan.study.study,
        "version": index.version,
        "active": active,
        "facets": index.facets,
        "built_at": index.built_at,
    }


def overview_page(state: Any, query: dict[str, str]) -> tuple[int, str]:
    kept = state.kept_page()
    if kept is not None:  # the index is being built; this page is as it was rendered from it
        return 200, str(kept["page"])
    summary = state.overview
    index = state.index
    return 200, render(
        "overview.html",
        **_common(state, "overview"),
        o=summary,
        datasets=index.cells.datasets,
        items=index.item_count,
    )


def items_page(state: Any, query: dict[str, str]) -> tuple[int, str]:
    index = state.index
    page = query_items(index, ItemQuery.of(query))
    return 200, render("items.html", **_common(state, "items"), p=page, flags=sorted(index.flags))


def item_page(state: Any, query: dict[str, str]) -> tuple[int, str]:
    index = state.index
    item_id = query.get("id", "")
    detail = item_detail(index, item_id, query.get("a"), query.get("b"))
    if detail is None:
        return 404, render(
            "missing.html", **_common(state, "items"), what=f"no item {item_id!r} in this study"
        )
    by_condition: dict[str, list[Any]] = {}
    for answer in detail.answers:
        by_condition.setdefault(answer.condition_id, []).append(answer)
    keys = [answer.key for answer in detail.answers]
    pick = dict(zip("ab", detail.diff_pair or [*keys, "", ""][:2], strict=True))
    return 200, render(
        "item.html",
        pick=pick,
        **_common(state, "items"),
        d=detail,
        by_condition=by_condition,
        epochs=list(range(detail.epochs)),
    )


def compare_page(state: Any, query: dict[str, str]) -> tuple[int, str]:
    index = state.index
    gens = index.facets.generate
    a = query.get("a") or (gens[0].id if gens else "")
    b = query.get("b") or (gens[1].id if len(gens) > 1 else a)
    try:
        page = max(1, int(query.get("page", "1")))
    except ValueError:
        page = 1
    result = compare(index, a, b, page)
    return 200, render(
        "compare.html",
        **_common(state, "compare"),
        c=result,
        a_ref=a,
        b_ref=b,
        a_facets=gens[result.a] if result.a is not None else None,
        b_facets=gens[result.b] if result.b is not None else None,
    )
