"""The claims and their checks: one module (or package of topic modules) per area, each module
holding its claims first, then their checks.

``python -m theorems list | show ID | verify | docs``. See :mod:`theorems.claims` for the
data model and :mod:`theorems.evidence` for how checks report evidence.
"""
