r"""MPNN + virtual node as linear attention (Cai, Hy, Yu & Wang, "On the Connection Between
MPNN and Graph Transformer", ICML 2023, PMLR 202:3408-3430, arXiv:2301.11956).

The title, authors, venue and arXiv id were confirmed on the PMLR page and the arXiv v4 PDF
header [V]; only the abstract was read. The abstract's first result, that MPNN + VN with
:math:`O(1)` depth and width approximates a Performer/linear-transformer self-attention layer,
is checked in the exact form derived here: one round *equals* the layer
(``approximation.virtual-node-linear-attention``). The abstract's other results are cited,
not checked: MPNN + VN with :math:`O(n^d)` width and :math:`O(1)` depth approximates softmax
self-attention arbitrarily well (via DeepSets), and under assumptions on the node features an
explicit MPNN + VN with :math:`O(1)` width and :math:`O(n)` depth does [V abstract, unchecked].

Tolerance (``edge_free_check``). Both the round and the reference layer compute the features
from :math:`x` themselves. A projection :math:`p = (xW)W_\varphi` is accurate to
:math:`\Delta p = \gamma_{2d}\,(|x||W|)|W_\varphi|`; so :math:`\varphi = e^p` has relative
error :math:`\le \Delta p + u`, and :math:`\varphi = \mathrm{ELU}(p) + 1` (slope
:math:`\varphi` for :math:`p<0`, 1 above) :math:`\le \Delta p + u + 2u/\varphi` (the
:math:`+1` of an :math:`\mathrm{expm1}`). A kernel weight
:math:`w_{ij} = \sum_r\varphi(q_i)_r\varphi(k_j)_r` of positive terms then has relative error
:math:`\theta_i \le \varepsilon_{q,i} + \max_j\varepsilon_{k,j}`, which moves a weighted
average by :math:`\le 2\theta_i\max_j|v_{jc}|`; the values are accurate to
:math:`\gamma_d|x||W_V|`; and either order of the sums (:math:`n` and :math:`r` terms, then a
division) adds :math:`(2\gamma_{n+r} + u)\max_j|v_{jc}|`. Each side is within that total
:math:`E_{ic}` of the exact layer, so they differ by at most :math:`2E_{ic}`. The bound needs
positive denominators, which the check asserts first.
"""

from __future__ import annotations

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.virtual_node import matching_linear_attention, virtual_node_round
from theorems.areas.approximation._bounds import U
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.numerics import gamma
from theorems.profiles import budget
from theorems.proof_statements import Scope
from theorems.proving import coq_proof
from theorems.strategies import seeds

CAI = {"arxiv": "2301.11956", "ref": "Cai, Hy, Yu & Wang (2023), ICML"}

VN_EXACT = Claim(
    id="approximation.virtual-node-linear-attention",
    title="One MPNN + virtual-node round equals one linear-attention layer, on every graph",
    statement=(
        r"Let $x \in \mathbb R^{n\times d}$ be node features of any graph on $n$ nodes, "
        r"$q_i = x_iW_Q$, $k_j = x_jW_K$, $v_j = x_jW_V$, and $\varphi: \mathbb R^{d}\to"
        r"(0,\infty)^r$ a positive feature map ($e^{yW_\varphi}$ or "
        r"$\mathrm{ELU}(yW_\varphi) + 1$). The round in which node $j$ sends "
        r"$(\varphi(k_j)v_j^\top, \varphi(k_j))$ to a virtual node, the virtual node sums "
        r"them to $S = \sum_j\varphi(k_j)v_j^\top$, $z = \sum_j\varphi(k_j)$ and broadcasts "
        r"them, and node $i$ outputs $\varphi(q_i)^\top S/\varphi(q_i)^\top z$ (local edge "
        r"messages with weight 0) equals "
        r"linear attention $\sum_j\varphi(q_i)^\top\varphi(k_j)v_j/\sum_j\varphi(q_i)^\top"
        r"\varphi(k_j)$ for every edge set."),
    source=(Source(where="Abstract (MPNN + VN with O(1) depth and width approximates a "
                         "Performer/linear-transformer layer)", tag="V", **CAI),
            Source(where="the exact one-round identity and its width, derived here", tag="D",
                   **CAI)),
    kind="identity", construction="constructions.virtual_node:virtual_node_round",
    notes="The round has depth 1 and its virtual node carries r d_v + r numbers (S and z): "
          "the shapes of the message, stated here, not checked. Cited, not checked: MPNN + "
          "VN with O(n^d) width and O(1) depth approximates "
          "softmax self-attention arbitrarily well (via DeepSets), and with O(1) width and "
          "O(n) depth under assumptions on the node features [V abstract]. With a feature "
          "map that can be negative (the identity) the denominator can vanish: the mutant "
          "pins X = (1, -1) in R^{2x1}, where phi(q)^T z = 0.")


# A graph where phi = identity gives phi(q_i)^T z = 0 (keys 1 and -1 with unit weights);
# with a positive map it is an ordinary example.
ZERO_DENOMINATOR = {"n": 2, "d": 1, "d_v": 1, "r": 1, "seed": -1, "data_seed": 0,
                    "edge_seeds": (0, 1)}


@st.composite
def graph_cases(draw) -> dict:
    return {"n": draw(st.integers(1, 8)), "d": draw(st.integers(1, 4)),
            "d_v": draw(st.integers(1, 3)), "r": draw(st.integers(1, 6)),
            "seed": draw(seeds()), "data_seed": draw(seeds()),
            "edge_seeds": (draw(seeds()), draw(seeds()))}


def _build(case: dict, feature_map: str, build, **kwargs):
    if case["seed"] >= 0:
        return (build(case["d"], case["d_v"], case["r"], feature_map=feature_map,
                      seed=case["seed"], **kwargs),
                matching_linear_attention(case["d"], case["d_v"], case["r"],
                                          feature_map=feature_map, seed=case["seed"]))
    # the pinned case: every weight 1
    one = torch.ones(1, 1, dtype=torch.float64)
    round_ = build(1, 1, 1, feature_map=feature_map, **kwargs)
    layer = matching_linear_attention(1, 1, 1, feature_map=feature_map)
    for module in (round_, layer):
        for w in (module.W_Q, module.W_K, module.W_V, module.W_phi):
            w.data.copy_(one)
    return round_, layer


def _data(case: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    if case["seed"] < 0:
        x = torch.tensor([[[1.0], [-1.0]]], dtype=torch.float64)
    else:
        x = 2 * torch.rand(4, case["n"], case["d"], dtype=torch.float64,
                           generator=torch.Generator().manual_seed(case["data_seed"])) - 1
    edges = [(torch.rand(x.shape[0], case["n"], case["n"], dtype=torch.float64,
                         generator=torch.Generator().manual_seed(s)) < 0.5).double()
             for s in case["edge_seeds"]]
    return x, edges


def feature_error(kind: str, x: torch.Tensor, W: torch.Tensor, W_phi: torch.Tensor,
                  phi: torch.Tensor) -> torch.Tensor:
    """Relative error bound of each computed feature (module docstring), ``(B, n, r)``."""
    delta_p = gamma(2 * x.shape[-1]) * ((x.abs() @ W.abs()) @ W_phi.abs())
    extra = 0.0 if kind == "exp" else 2 * U / phi
    return delta_p + U + extra


def edge_free_check(build=virtual_node_round, feature_maps=("exp", "elu1"), **kwargs):
    """The round against the linear-attention layer, on two random edge sets per example."""
    @budget(0.6)
    @given(case=graph_cases(), feature_map=st.sampled_from(feature_maps))
    @example(case=ZERO_DENOMINATOR, feature_map=feature_maps[0])
    def run(case, feature_map):
        round_, layer = _build(case, feature_map, build, **kwargs)
        x, edges = _data(case)
        phi_q, phi_k, v = round_.features(x)
        denominator = phi_q @ phi_k.sum(dim=-2)[..., None]                # (B, n, 1)
        assert bool((denominator > 0).all()), (
            f"phi(q)^T z = {float(denominator.min()):.3g} is not positive: the readout "
            "divides by zero or changes sign")
        n, r = x.shape[1], phi_q.shape[-1]
        theta = (feature_error(feature_map, x, round_.W_Q, round_.W_phi, phi_q)
                 + feature_error(feature_map, x, round_.W_K, round_.W_phi, phi_k)
                 .amax(dim=1, keepdim=True)).amax(dim=-1, keepdim=True)   # (B, n, 1)
        v_max = v.abs().amax(dim=1, keepdim=True)                         # (B, 1, d_v)
        value_error = gamma(x.shape[-1]) * (x.abs() @ round_.W_V.abs()).amax(dim=1,
                                                                             keepdim=True)
        tol = 2 * ((2 * theta + 2 * gamma(n + r) + U) * v_max + value_error)
        reference = layer(x)
        for adjacency in edges:
            out = round_(x, adjacency)
            err = (out - reference).abs()
            evidence.ratio(float((err / tol).max()))
            assert bool((err <= tol).all()), (
                f"the round differs from linear attention by {float(err.max()):.3g} "
                f"(bound {float(tol.min()):.3g})")
    return run


test_one_virtual_node_round_is_linear_attention = check(VN_EXACT, "property")(
    edge_free_check())


# --- proved ---
# Coq, MathComp: the round equals linear attention for every graph, over any field.
test_round_is_linear_attention_proved = check(VN_EXACT, "proved")(
    coq_proof("proofs/coq/approximation_virtual_node.v", theorem="virtual_node_round",
              scope=Scope("statement", "the virtual-node round (aggregates S and z, broadcast, "
                          "read-out phi(q_i)^T S / phi(q_i)^T z, local edge messages with weight "
                          "0) equals linear attention for every edge set and message function, "
                          "every n, d, d_k, d_v, r, W_Q, W_K, W_V and every feature map phi "
                          "(positive ones included), in exact arithmetic over any field")))
