"""MyST helpers of the circuits page's modules (:mod:`._page`, :mod:`._benchmark`): escaped
text, list-tables, and which published result a section shows."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any


def _markdown(text: str) -> str:
    """Plain text safe in MyST: Markdown's active characters escaped, ``-`` and ``+`` among
    them (a table cell holding only ``-`` would otherwise become a bullet list)."""
    return re.sub(r"([\\`*_\[\]<>{}|#$+-])", r"\\\1", text)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["::::{list-table}", ":header-rows: 1", ":class: tt-data", ""]
    for row in [list(header), *map(list, rows)]:
        lines += [("* - " if i == 0 else "  - ") + (str(cell) or "\u00a0")
                  for i, cell in enumerate(row)]
    return "\n".join([*lines, "::::"])


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else _markdown(str(value))


def published_result(results: Sequence[Mapping[str, Any]], experiment: str
                     ) -> Mapping[str, Any] | None:
    """The result of ``experiment`` to show: ``full`` if published, else any (smoke)."""
    mine = [r for r in results if r.get("experiment") == experiment]
    full = [r for r in mine if r.get("config_name") == "full"]
    return (full or mine or [None])[0]
