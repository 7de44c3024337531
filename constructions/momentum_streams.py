r"""Sublayers as gradient oracles, and momentum on the residual stream (Gai, Huang, Wu 2026,
"Momentum Streams for Optimizer-Inspired Transformers", arXiv:2605.24425).

The paper reads a pre-norm layer's residual update as one step of a first-order optimiser on
a surrogate token energy, with attention and the MLP as gradient oracles [V abstract]. Two
tied special cases make that reading exact (ours [D]):

* **Attention with values equal to keys.** For keys :math:`k_1, \dots, k_n \in \mathbb R^d`
  (the rows of :math:`K`) and :math:`\beta > 0`,
  :math:`A(x) = \sum_i \mathrm{softmax}(\beta Kx)_i\,k_i = -\nabla_x E_{att}(x)` with
  :math:`E_{att}(x) = -\beta^{-1}\log\sum_i e^{\beta k_i\cdot x}`, the energy of a modern
  Hopfield network (the ``hopfield`` area's update is this :math:`A`).
* **The tied ReLU MLP.** For :math:`W \in \mathbb R^{m\times d}` with rows :math:`w_j` and
  :math:`b \in \mathbb R^m`, :math:`M(x) = W^\top\mathrm{ReLU}(Wx + b) = -\nabla_x E_{mlp}(x)`
  with :math:`E_{mlp}(x) = -\tfrac12\sum_j\mathrm{ReLU}(w_j\cdot x + b_j)^2`
  (:math:`\tfrac12\mathrm{ReLU}(z)^2` is :math:`C^1` with derivative :math:`\mathrm{ReLU}(z)`,
  so this holds at every :math:`x`).

**Momentum streams.** Heavy-ball momentum on the residual stream,
:math:`v_0 = 0`, :math:`v_{l+1} = \mu v_l + F_l(x_l)`, :math:`x_{l+1} = x_l + v_{l+1}`
(:func:`momentum_stream`), is the second-order recursion
:math:`x_{l+1} = x_l + \mu(x_l - x_{l-1}) + F_l(x_l)` with :math:`x_{-1} = x_0`
(:func:`second_order_stream`): :math:`v_l = x_l - x_{l-1}` by induction. For forces that do not
depend on the state, the stream is a causal filter of them:
:math:`x_L = x_0 + \sum_{l<L} c_l F_l` with :math:`c_l = \sum_{k=0}^{L-1-l}\mu^k`
(:func:`filter_weights`). The paper's Appendix F is titled "Momentum as Second-Order
Residual-Stream Filtering" [V, table of contents only]; these identities are ours [D].

The stream functions use only ``+``, ``-`` and ``*``, so they run on tensors and on SymPy
expressions alike (a symbolic check runs them on undefined functions).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from constructions import _validate


def _keys_and_state(x: object, keys: object) -> tuple[torch.Tensor, torch.Tensor]:
    keys = _validate.nonempty("keys", _validate.real_tensor("keys", keys, ndim=2))
    x = _validate.nonempty("x", _validate.real_tensor("x", x))
    _validate.matching("x", x, keys.shape[1], to="the keys' width")
    return x.to(keys.dtype), keys


def tied_attention(x: torch.Tensor, keys: torch.Tensor, beta: float) -> torch.Tensor:
    r"""Attention whose values are its keys, for queries ``x`` of shape ``(..., d)`` over the
    ``n`` keys (rows of ``keys``, ``(n, d)``): :math:`\sum_i\mathrm{softmax}(\beta Kx)_i k_i`."""
    x, keys = _keys_and_state(x, keys)
    beta = _validate.positive_float("beta", beta)
    return torch.softmax(beta * (x @ keys.T), dim=-1) @ keys


def hopfield_energy(x: torch.Tensor, keys: torch.Tensor, beta: float) -> torch.Tensor:
    r""":math:`E_{att}(x) = -\beta^{-1}\log\sum_i e^{\beta k_i\cdot x}`, shape ``x.shape[:-1]``
    (computed with ``torch.logsumexp``, differentiable)."""
    x, keys = _keys_and_state(x, keys)
    beta = _validate.positive_float("beta", beta)
    return -torch.logsumexp(beta * (x @ keys.T), dim=-1) / beta


def _mlp_arguments(x: object, W: object, b: object) -> tuple[torch.Tensor, ...]:
    W = _validate.nonempty("W", _validate.real_tensor("W", W, ndim=2))
    b = _validate.matching("b", _validate.real_tensor("b", b, ndim=1), W.shape[0],
                           to="W's rows")
    x = _validate.nonempty("x", _validate.real_tensor("x", x))
    _validate.matching("x", x, W.shape[1], to="W's columns")
    return x.to(W.dtype), W, b.to(W.dtype)


def tied_mlp(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    r""":math:`M(x) = W^\top\mathrm{ReLU}(Wx + b)` for ``x`` of shape ``(..., d)``: an MLP whose
    output weights are its input weights transposed."""
    x, W, b = _mlp_arguments(x, W, b)
    return torch.relu(x @ W.T + b) @ W


def mlp_energy(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    r""":math:`E_{mlp}(x) = -\tfrac12\sum_j\mathrm{ReLU}(w_j\cdot x + b_j)^2`, shape
    ``x.shape[:-1]`` (differentiable)."""
    x, W, b = _mlp_arguments(x, W, b)
    return -0.5 * (torch.relu(x @ W.T + b) ** 2).sum(dim=-1)


def _stream_arguments(x0: object, layers: object, mu: object) -> tuple:
    if isinstance(x0, torch.Tensor):
        x0 = _validate.nonempty("x0", _validate.real_tensor("x0", x0))
    elif not type(x0).__module__.startswith("sympy"):
        raise TypeError(f"x0 must be a torch.Tensor or a SymPy expression, "
                        f"got {type(x0).__name__}")
    if isinstance(layers, (str, bytes)) or not isinstance(layers, Sequence) or not layers:
        raise TypeError(f"layers must be a non-empty sequence of callables, "
                        f"got {type(layers).__name__}")
    for index, layer in enumerate(layers):
        if not callable(layer):
            raise TypeError(f"layers[{index}] must be callable, got {type(layer).__name__}")
    return x0, list(layers), _validate.real_number("mu", mu)


def _force(layers: list, index: int, x: object) -> object:
    """``layers[index](x)``, with a layer's failure on the state reported by name."""
    try:
        force = layers[index](x)
    except (RuntimeError, TypeError, ValueError) as error:
        raise ValueError(f"layers[{index}] failed on the stream's state (from x0): "
                         f"{error}") from None
    if isinstance(x, torch.Tensor) and (not isinstance(force, torch.Tensor)
                                        or force.shape != x.shape):
        raise ValueError(f"layers[{index}] must return a tensor of the state's shape "
                         f"{tuple(x.shape)} (from x0)")
    return force


def momentum_stream(x0: object, layers: Sequence[Callable], mu: object) -> list:
    r"""The heavy-ball stream :math:`v_{l+1} = \mu v_l + F_l(x_l)`,
    :math:`x_{l+1} = x_l + v_{l+1}`, :math:`v_0 = 0`: the states ``[x_0, ..., x_L]`` for the
    ``L`` callables ``layers`` (:math:`F_l`)."""
    x0, layers, mu = _stream_arguments(x0, layers, mu)
    states, velocity = [x0], None
    for index in range(len(layers)):
        force = _force(layers, index, states[-1])
        velocity = force if velocity is None else mu * velocity + force
        states.append(states[-1] + velocity)
    return states


def second_order_stream(x0: object, layers: Sequence[Callable], mu: object) -> list:
    r"""The second-order recursion :math:`x_{l+1} = x_l + \mu(x_l - x_{l-1}) + F_l(x_l)`,
    :math:`x_{-1} = x_0`: the states ``[x_0, ..., x_L]``."""
    x0, layers, mu = _stream_arguments(x0, layers, mu)
    states = [x0]
    for index in range(len(layers)):
        previous = states[-2] if len(states) > 1 else states[-1]
        force = _force(layers, index, states[-1])
        states.append(states[-1] + mu * (states[-1] - previous) + force)
    return states


def filter_weights(n_layers: int, mu: object) -> list:
    r"""The weights :math:`c_l = \sum_{k=0}^{L-1-l}\mu^k`, :math:`l = 0, \dots, L-1`, with which
    a momentum stream of ``n_layers`` :math:`L` state-independent forces sums them
    (:math:`x_L = x_0 + \sum_l c_l F_l`); for :math:`\mu \ne 1`,
    :math:`c_l = (1 - \mu^{L-l})/(1 - \mu)`."""
    n_layers = _validate.positive_int("n_layers", n_layers)
    mu = _validate.real_number("mu", mu)
    return [sum((mu**k for k in range(1, n_layers - index)), start=mu**0)
            for index in range(n_layers)]

