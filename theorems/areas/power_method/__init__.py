r"""Looped transformers with ℓ2 normalisation learn the power method (Wu, Zhang, Cao 2026,
arXiv:2606.00605).

What we relied on. The abstract (read, tag V) states the results qualitatively: a looped
linear transformer with LN trained by GD converges to a solution in which each layer performs
one power iteration, and even with layer-wise guidance from power iterations a transformer
without LN cannot exactly learn the power method. Theorem numbers, the rates and the loss come
from two secondary notes that agree (tag S). The input layout
:math:`E = \begin{pmatrix}X & 0\\0 & a\end{pmatrix}`, the block weights and the layer-wise loss
(squared error to the normalised power iterate) are our reconstruction (tag D); we could not
read the paper's body to confirm them.

Tolerances (float64 unless stated). One step of the (shifted) power method computes
:math:`y + \rho X(X^\top y)` from :math:`n`- and :math:`2d`-term dot products, so its error is
at most :math:`\gamma_m\,\lVert\,|y| + |\rho|\,|X|(|X|^\top|y|)\rVert` with
:math:`m = n + 2d + 8` (the products, the residual, and :math:`\rho = wv` from two square
roots). Normalising turns it into a direction error divided by :math:`g_k = \lVert My_k\rVert`,
plus :math:`\gamma_{2d+4}` for the normalisation itself. The direction after the remaining
:math:`j` steps, :math:`M^jy/\lVert M^jy\rVert`, has derivative of norm at most
:math:`\lVert M\rVert^j/\lVert M^jy\rVert`, so the errors add up to the first-order bound of
:func:`iteration_error_bound`; a check allows four times it (model and reference each err by
up to the bound, and a factor 2 covers second-order terms while the bound is below
:math:`10^{-3}`).
"""
