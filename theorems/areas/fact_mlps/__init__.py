r"""Fact-storing MLPs and associative memories (Dugan et al. 2025, arXiv:2512.00207;
Nichani, Lee, Bietti 2024, arXiv:2412.06538; Cabannes, Dohmatob, Bietti 2024,
arXiv:2310.02984; ROME, Meng et al. 2022, arXiv:2202.05262).

Each claim is followed by its checks; a check is built by a factory that takes the
construction (or bound) under test, so ``tests/test_fact_mlps.py`` rebuilds it around a broken
one and asserts that it then fails.

The efficiency frontier (``frontier.py``, published as ``fact-mlps-frontier``): bits stored per
parameter against the number of facts and against the weight precision needed, for the
single-bucket, multi-bucket and bucketed scalar-code constructions, the Hebbian memory and the
published GD widths. The scalar code stores at least 1 bit per parameter from F = 512 (2.1 at
F = 4096); GD's smallest widths still store about twice as many at F = 512.

Past GD (``shared_route.py``, published as ``fact-mlps-side-by-side``): the shared-route MLP,
one route for every gadget and a ladder decoder in an optimised 3-dimensional code space,
stores about 3.1 bits per parameter at F = 512 and 4.9 at F = 4096 with every margin certified
in ball arithmetic; GD's smallest width, trained side by side on the same fact sets, stores
2.3 to 2.7 at F = 512.

What was read in the primary sources: the abstract and section titles of Dugan et al. (v1, a
working draft; no public code) and the first page of its blog post; ROME's ``compute_u.py`` and
``compute_v.py`` (kmeng01/rome), which fix the update and the :math:`\bar k`/:math:`k_p`
asymmetry. The encoder's gate nonlinearity, the bucket sizes and the paper's decodability
formula were not found; the single-bucket construction, the logistic gate, the JL code
dimension and the thresholded-memory exponent are stated as ours or as recalled (tags D, R).

Tolerances. Float64 rounding is bounded with :func:`theorems.numerics.gamma` on the
absolute-value computation (Higham, Ch. 3); singular values move by at most the spectral norm
of a perturbation (Weyl), which certifies a numerical rank; a backward-stable least-squares
solve leaves a residual of at most :math:`\tilde\gamma_{rc}(\lVert M\rVert\lVert a\rVert +
\lVert c\rVert)` (Higham, Thm. 20.3, :math:`\tilde\gamma_n = cnu` with a small constant
:math:`c`, taken as 10); Monte Carlo rates carry :math:`3\sigma` with
:math:`\sigma \le 1/(2\sqrt n)`; fitted slopes carry :math:`t_{0.975}` standard errors.
"""
