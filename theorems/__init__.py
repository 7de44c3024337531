"""The claims and their checks: one module per area, each claim followed by its checks.

``python -m theorems list | show ID | verify | docs``. See :mod:`theorems.claims` for the
data model and :mod:`theorems.evidence` for how checks report evidence.
"""
