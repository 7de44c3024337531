"""A pytest plugin that runs every mutant test on its checks' pinned examples alone.

Mutant tests run their checks under the current profile (``dev`` for the README's test command:
random examples), so a mutant that only the random search can kill is killed only when the
search happens to draw a suitable input: a flaky test. Loaded with ``-p``, this plugin replaces
the mutants' phases (``theorems.profiles.without_shrinking``, which ``conftest.py`` and
``killed.fails_at`` apply) by the explicit phase alone::

    PYTHONPATH=tests python -m pytest -m mutant -p pinned_only

A mutant that then *passes its check* needs a pinned ``@example`` in that check which kills it;
one reported as skipped ("told to run no test cases") belongs to a check with no pinned example,
killed by almost any drawn input (try it under several ``--hypothesis-seed`` values).
"""

from hypothesis import Phase, settings

import theorems.profiles as profiles

profiles.without_shrinking = lambda **overrides: settings(phases=[Phase.explicit], **overrides)
