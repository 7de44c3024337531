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
