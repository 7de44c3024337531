"""What an experiment returns: a :class:`Result` of metrics, figures and tables, its JSON file
(:meth:`Result.save`), and the one spelling of a metric's key (:func:`metric_key`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from empirics.provenance import json_ready, save_figure

MetricPart = str | int | float | tuple[str, int | float]


def metric_key(*parts: MetricPart) -> str:
    """The one spelling of a :class:`Result` metric key: ``parts`` joined by ``/``.

    A part may itself be a key built here (a group of metrics). An int is written as is, a
    float with ``:g``, and a ``(label, number)`` pair as ``label=number``, so the experiment that
    writes a metric and the check that reads it cannot spell ``alpha=1`` and ``alpha=1.0``
    differently. Checks read a metric with :meth:`Result.metric` of the same parts; an
    experiment whose keys have a structure of their own wraps this in a typed function (for
    example :func:`empirics.ocr.metric_name`), which both sides call.

    >>> metric_key("factorized", ("wd", 0.0), "test_margin_min")
    'factorized/wd=0/test_margin_min'
    """
    if not parts:
        raise ValueError("metric_key: parts is empty")
    texts = []
    for part in parts:
        if isinstance(part, tuple) and len(part) == 2 and isinstance(part[0], str):
            text = f"{part[0]}={_number(part[1])}"
        elif isinstance(part, str):
            text = part
        else:
            text = _number(part)
        if not text:
            raise ValueError("metric_key: a part is empty")
        texts.append(text)
    return "/".join(texts)


def _number(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"metric_key: a part must be a str, a number or a (label, number) pair, "
                        f"not {value!r}")
    return str(value) if isinstance(value, int) else f"{value:g}"  # :g would write 1e+06


@dataclass
class Result:
    """Metrics comparing the trained model with the construction, plus figures and tables."""

    experiment: str
    config: dict[str, Any]
    seed: int
    device: str
    config_name: str = "custom"  # set by Experiment.__call__
    metrics: dict[str, float] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)   # name -> matplotlib Figure
    tables: dict[str, dict] = field(default_factory=dict)   # name -> {"header", "rows"}
    training: dict[str, Any] = field(default_factory=dict)  # TrainResult.as_record()s
    record: dict[str, Any] = field(default_factory=dict)

    def metric(self, *parts: MetricPart) -> float:
        """The metric named by :func:`metric_key` of ``parts``; a KeyError lists the keys."""
        key = metric_key(*parts)
        try:
            return self.metrics[key]
        except KeyError:
            raise KeyError(f"{self.experiment} has no metric {key!r}; it has "
                           f"{sorted(self.metrics)}") from None

    def rows(self, name: str) -> list[dict[str, Any]]:
        """The rows of table ``name`` as dicts keyed by its header."""
        table = self.tables[name]
        return [dict(zip(table["header"], row, strict=True)) for row in table["rows"]]

    def table(self, name: str, header: list[str], rows: list[list]) -> None:
        self.tables[name] = {"header": list(header), "rows": [list(r) for r in rows]}

    def as_dict(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "config_name": self.config_name,
                "config": self.config, "seed": self.seed, "device": self.device,
                "metrics": self.metrics, "tables": self.tables, "training": self.training,
                "figures": sorted(self.figures), "record": self.record}

    def save(self, out: str | Path, *, stem: str | None = None) -> Path:
        """Write ``<out>/<experiment>/<stem>.json`` and its PNG figures; return the JSON path.

        ``stem`` defaults to the config name for seed 0 and ``<config>-seed<k>`` otherwise.
        Figures are written as ``<stem>-<figure>.png`` and closed.
        """
        directory = Path(out) / self.experiment
        directory.mkdir(parents=True, exist_ok=True)
        if stem is None:
            stem = self.config_name if self.seed == 0 else f"{self.config_name}-seed{self.seed}"
        names = save_figures(self.figures, directory, stem)
        data = self.as_dict() | {"figures": names}
        path = directory / f"{stem}.json"
        path.write_text(json.dumps(json_ready(data), indent=1) + "\n")
        return path


def figure_file(stem: str, name: str) -> str:
    """The file name of figure ``name``: ``<stem>-<name>.png`` with every run of characters
    other than letters, digits and ``. = + -`` made one ``_`` (a figure named after a metric
    key holds spaces and slashes, which a wheel listing, a shell and a figure directive split)."""
    return re.sub(r"[^\w.=+-]+", "_", f"{stem}-{name}") + ".png"


def save_figures(figures: Mapping[str, Any], directory: Path, stem: str) -> dict[str, str]:
    """Write each figure as ``<directory>/<figure_file(stem, name)>`` (closing it); name ->
    file name."""
    return {name: save_figure(fig, directory / figure_file(stem, name), dpi=120).name
            for name, fig in figures.items()}
