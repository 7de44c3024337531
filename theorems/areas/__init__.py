"""The areas: one module per area, or a package of topic modules where an area holds several
papers. Each is found by its location here (see :func:`theorems.claims.area_modules`), and its
name, with ``_`` read as ``-``, is the area part of its claims' ids."""
