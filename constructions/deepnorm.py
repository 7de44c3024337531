r"""DeepNorm's constants (Wang et al. 2022, "DeepNet: Scaling Transformers to 1,000 Layers",
arXiv:2203.00555), as read in the official code, microsoft/torchscale
(``torchscale/architecture/encoder.py`` and ``decoder.py``) [V code].

**The residual.** Every sublayer :math:`G_l` (self-attention, cross-attention, FFN) is wrapped as
:math:`x_{l+1} = \mathrm{LN}(\alpha x_l + G_l(x_l))` (post-LN with an up-weighted skip; the
code's ``residual * self.alpha + x``), and the weights of ``fc1``, ``fc2``, ``v_proj`` and
``out_proj`` are divided by ``init_scale`` after initialisation, i.e. multiplied by
:math:`\beta = 1/\mathrm{init\_scale}`.

**The constants** (:math:`N` encoder layers, :math:`M` decoder layers):

=====================================  ============================  ==============================
model                                  :math:`\alpha`                :math:`\beta`
=====================================  ============================  ==============================
encoder only (``"encoder"``)           :math:`(2N)^{1/4}`            :math:`(8N)^{-1/4}`
decoder only (``"decoder"``)           :math:`(2M)^{1/4}`            :math:`(8M)^{-1/4}`
encoder-decoder, its decoder           :math:`(3M)^{1/4}`            :math:`(12M)^{-1/4}`
encoder-decoder, its encoder           :math:`0.81\,(N^4M)^{1/16}`   :math:`1.15\,(N^4M)^{-1/16}`
=====================================  ============================  ==============================

The last row is what the code computes (``init_scale = (N^4 M)^{1/16} / 1.15``); the paper's
encoder :math:`\beta` is recalled elsewhere as :math:`0.87\,(N^4M)^{-1/16}`, the reciprocal
factor, and that text was not read here [R].

**The update budget** (ours [D]). With value and output scales :math:`v = w = \beta`, a stack
of :math:`L` sublayers has :math:`L\,(v^2 + w^2)/\alpha^2 = 1` exactly in the first three rows
(:math:`L = 2N`, :math:`2M`, :math:`3M`: attention and FFN, plus cross-attention in an
encoder-decoder's decoder). The encoder row of an encoder-decoder is not of this form.
"""

from __future__ import annotations

from collections.abc import Callable

from constructions import _validate

KINDS = ("encoder", "decoder", "encoder-decoder/decoder", "encoder-decoder/encoder")
BALANCED_KINDS = KINDS[:3]


def _root(x, k: int):
    return x ** (1.0 / k)


def _layer_counts(kind: object, n_layers: object, m_layers: object, kinds: tuple) -> None:
    """Check ``kind`` against ``kinds`` and the layer counts: ints >= 1 or SymPy symbols."""
    if not isinstance(kind, str) or kind not in kinds:
        raise ValueError(f"kind must be one of {kinds}, got {kind!r}")
    _validate.count("n_layers", n_layers)
    if m_layers is not None:
        _validate.count("m_layers", m_layers)
    elif kind.startswith("encoder-decoder"):
        raise ValueError(f"m_layers must be given for kind {kind!r}")


def deepnorm_formulas(kind: str, n_layers, m_layers=None, *, root: Callable = _root,
                      number: Callable = float) -> tuple:
    r"""``(alpha, beta)`` for ``kind`` with :math:`N` = ``n_layers`` (encoder or decoder-only
    depth) and :math:`M` = ``m_layers`` (the decoder of an encoder-decoder), in the arithmetic
    of ``root`` and ``number``: floats by default, or SymPy (``root=sympy.root``,
    ``number=sympy.Rational``) for symbolic layer counts."""
    _layer_counts(kind, n_layers, m_layers, KINDS)
    if not callable(root):
        raise TypeError(f"root must be callable, got {type(root).__name__}")
    if not callable(number):
        raise TypeError(f"number must be callable, got {type(number).__name__}")
    if kind == "encoder":
        return root(2 * n_layers, 4), 1 / root(8 * n_layers, 4)
    if kind == "decoder":
        return root(2 * n_layers, 4), 1 / root(8 * n_layers, 4)
    if kind == "encoder-decoder/decoder":
        return root(3 * m_layers, 4), 1 / root(12 * m_layers, 4)
    if kind == "encoder-decoder/encoder":
        scale = root(n_layers**4 * m_layers, 16)
        return number("0.81") * scale, 1 / (scale / number("1.15"))
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def sublayers(kind: str, n_layers, m_layers=None):
    """The number of residual sublayers the budget sums over: 2N, 2M (decoder-only) or 3M."""
    _layer_counts(kind, n_layers, m_layers, BALANCED_KINDS)
    if kind in ("encoder", "decoder"):
        return 2 * n_layers
    if kind == "encoder-decoder/decoder":
        return 3 * m_layers
    raise ValueError(f"kind must be one of {BALANCED_KINDS} for a budget, got {kind!r}")


def deepnorm_constants(kind: str, n_layers: int, m_layers: int | None = None,
                       *, formulas: Callable = deepnorm_formulas) -> tuple[float, float]:
    r"""``(alpha, beta)`` as floats, for ``n_layers`` :math:`N` (and ``m_layers`` :math:`M`
    for the two encoder-decoder kinds: there ``n_layers`` is the encoder's depth)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    n_layers = _validate.positive_int("n_layers", n_layers)
    if not callable(formulas):
        raise TypeError(f"formulas must be callable, got {type(formulas).__name__}")
    if kind.startswith("encoder-decoder"):
        if m_layers is None:
            raise ValueError(f"m_layers must be given for kind {kind!r}")
        m_layers = _validate.positive_int("m_layers", m_layers)
    alpha, beta = formulas(kind, n_layers, m_layers)
    return float(alpha), float(beta)


def update_budget(kind: str, n_layers: int, m_layers: int | None = None,
                  *, formulas: Callable = deepnorm_formulas) -> float:
    r""":math:`L\,(v^2 + w^2)/\alpha^2` with :math:`v = w = \beta` (1 for DeepNorm's constants)."""
    if kind not in BALANCED_KINDS:
        raise ValueError(f"kind must be one of {BALANCED_KINDS} for a budget, got {kind!r}")
    alpha, beta = deepnorm_constants(kind, n_layers, m_layers, formulas=formulas)
    count = sublayers(kind, n_layers, m_layers)
    return count * 2 * beta**2 / alpha**2
