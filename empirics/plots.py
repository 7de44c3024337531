"""Headless matplotlib, for the figures that experiments and checks write to files."""

from __future__ import annotations


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend: figures go to files, never to a window.

    Imported lazily, so modules that only sometimes plot do not pay matplotlib's import.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def new_axes(figsize: tuple[float, float] = (5, 3.2)):
    """A fresh matplotlib figure and axes on the Agg backend."""
    return pyplot().subplots(figsize=figsize)


def tidy(*axes) -> None:
    """No labels on minor log ticks (they overlap on short ranges)."""
    from matplotlib.ticker import NullFormatter

    for ax in axes:
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
