r"""Out-of-context reasoning and the nuclear-norm bias (Huang et al. 2025, arXiv:2506.10887).

The abstract was read, and the task follows the authors' code (yixiao-huang/OCR-Theory); the
reduced linear model, the closed-form margins and the separation of implicit from explicit
bias are ours (see :mod:`constructions.ocr`). Each check is built by a factory that takes what
it tests, so ``tests/test_ocr.py`` can rebuild it around a broken construction.

Topic modules, in the order of the claims: :mod:`.min_norm` (the minimum-norm max-margin
solutions: the Frobenius one only ties, the nuclear one answers with margin
:math:`\min(1, \sqrt{m/k})`) and :mod:`.training` (gradient descent on the factorized and the
combined model, and implicit against explicit bias); :mod:`._shared` holds the task and the
sources both state.
"""
