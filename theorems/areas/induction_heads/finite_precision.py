r"""Precision: :math:`p = \lceil\log_2 M + 6\rceil` significand bits keep both of
Sanford-Hsu-Telgarsky's constructions exact, so :math:`p = O(\log n)`; checked by emulated
:math:`p`-bit rounding, in the hardware float formats and over a sweep of lengths.
"""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import example, given

from constructions.induction_heads import (
    NO_MATCH,
    InductionParameters,
    compact_induction,
    compact_parameters,
    induction_targets,
    max_score,
    required_bits,
    round_significand,
    two_layer_induction,
    two_layer_parameters,
)
from empirics.plots import pyplot
from theorems.areas.induction_heads._shared import (
    AREA_CONSTRUCTIONS,
    SHT,
    induction_cases,
    tight_sequences,
)
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.profiles import budget

IH_PRECISION = Claim(
    id="induction-heads.precision",
    title="p = log₂ M + 6 significand bits suffice: O(log n) for both constructions",
    statement=(
        r"Let $M(n)$ be the largest score magnitude of a construction for length $n$ "
        r"($\max(\beta_1, \beta_2 + \lambda n, \theta)$: $O(n \log n)$ for the one-hot model, "
        r"$O(n^2\log n)$ for the circle model at fixed $S$) and $p(n) = \lceil \log_2 M(n) + 6 "
        r"\rceil$. If every weight, activation, query, key, value, score, attention weight and "
        r"residual sum is rounded to $p(n)$ significand bits (round to nearest, wide "
        r"accumulation), both constructions remain exact on inputs of length $\le n$. Hence the "
        r"circle construction has size $h\cdot m\cdot p = 1 \cdot 11 \cdot O(\log n)$."),
    source=(Source(where="summary: p = O(log n) bits for the two-layer solution", tag="S", **SHT),
            Source(where="the bound p = ⌈log₂ M + 6⌉ and its first-order derivation (this "
                   "project)", tag="D", **SHT)),
    kind="scaling",
    construction=f"{AREA_CONSTRUCTIONS}:required_bits",
    depends_on=("induction-heads.two-layer-exact", "induction-heads.compact-exact"),
)


# --- precision -------------------------------------------------------------------------------

PRECISION_VOCAB = 8
PRECISION_LENGTHS = {"two_layer": (4, 16, 64), "compact": (4, 16, 64, 256)}
SLOW_PRECISION_LENGTHS = {"two_layer": (4, 8, 16, 32, 64, 128, 256),
                          "compact": (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)}
BUILDERS = {"two_layer": two_layer_induction, "compact": compact_induction}
FORMATS = {"bfloat16": (torch.bfloat16, 8), "float16": (torch.float16, 11),
           "float32": (torch.float32, 24), "float64": (torch.float64, 53)}


def stress_batch(vocab_size: int, length: int, seed: int = 0) -> torch.Tensor:
    """The tight sequences of :func:`tight_sequences` plus 8 seeded random ones."""
    generator = torch.Generator().manual_seed(seed)
    return torch.cat([torch.tensor(tight_sequences(vocab_size, length)),
                      torch.randint(0, vocab_size, (8, length), generator=generator)])


def exact_at(model, tokens: torch.Tensor, bits: int | None, chunk: int = 8) -> bool:
    """Is the model exact on ``tokens`` with every stored number rounded to ``bits``?

    Evaluated ``chunk`` sequences at a time: the patterns take (chunk, n+1, n+1) floats.
    """
    rounding = None if bits is None else functools.partial(round_significand, bits=bits)
    for part in tokens.split(chunk):
        classes = model.run(part, rounding=rounding)[0].argmax(-1)
        predicted = torch.where(classes == model.vocab_size, NO_MATCH, classes)
        if not torch.equal(predicted, induction_targets(part)):
            return False
    return True


def smallest_exact_bits(model, tokens: torch.Tensor, high: int) -> int:
    """Bisection for the least p with exact outputs, given that ``high`` bits are exact."""
    low = 2
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if exact_at(model, tokens, middle) else (middle + 1, high)
    return high


def parameters_for(kind: str, vocab_size: int, length: int) -> InductionParameters:
    """The default temperatures of the construction ``kind`` for this size."""
    return (two_layer_parameters(length) if kind == "two_layer"
            else compact_parameters(vocab_size, length))


def required_bits_for(kind: str, vocab_size: int, length: int) -> int:
    return required_bits(length, parameters_for(kind, vocab_size, length))


def exact_in_format(kind: str, build, vocab_size: int, length: int, dtype: torch.dtype,
                    tokens: torch.Tensor) -> bool:
    """Is the model built in ``dtype`` exact? False if its temperatures overflow the format."""
    if max_score(length, parameters_for(kind, vocab_size, length)) >= torch.finfo(dtype).max:
        return False  # a weight would be inf (float16 tops out at 65504)
    return exact_at(build(vocab_size, length, dtype=dtype), tokens, None)


def precision_check(builders=BUILDERS, lengths=PRECISION_LENGTHS, bits=required_bits_for,
                    vocab_size: int = PRECISION_VOCAB):
    """Exact at the predicted p on stress inputs for each n; record measured p and formats."""
    def run():
        rows = []
        for kind, build in builders.items():
            for n in lengths[kind]:
                model, tokens = build(vocab_size, n), stress_batch(vocab_size, n)
                predicted = bits(kind, vocab_size, n)
                ok = exact_at(model, tokens, predicted)
                measured = smallest_exact_bits(model, tokens, predicted) if ok else None
                formats = [name for name, (dtype, _) in FORMATS.items()
                           if exact_in_format(kind, build, vocab_size, n, dtype, tokens)]
                rows.append([kind, n, predicted, measured, formats[0] if formats else "none",
                             ", ".join(formats)])
                evidence.cases(len(tokens))
                if ok:
                    evidence.margin(predicted - measured)
                assert ok, f"{kind}, n={n}: not exact with the predicted p={predicted} bits"
        evidence.table("significand bits p against n",
                       ["construction", "n", "predicted p", "measured least p",
                        "smallest exact format", "exact formats"], rows)
        evidence.figure(precision_figure(rows), "p-vs-n")
    return run


def precision_figure(rows: list[list]):
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 4))
    for kind, colour in (("two_layer", "C0"), ("compact", "C1")):
        mine = [r for r in rows if r[0] == kind]
        ax.plot([r[1] for r in mine], [r[2] for r in mine], "--", color=colour,
                label=f"{kind}: predicted ⌈log₂M + 6⌉")
        ax.plot([r[1] for r in mine], [r[3] for r in mine], "o-", color=colour,
                label=f"{kind}: least exact p (stress inputs)")
    ax.set(xscale="log", xlabel="sequence length n", ylabel="significand bits p",
           title="Precision an exact induction head needs")
    for name, (_, p) in FORMATS.items():
        if p < 53:
            ax.axhline(p, color="grey", lw=0.7, ls=":")
            ax.text(0.01, p + 0.3, name, fontsize=7, color="grey",
                    transform=ax.get_yaxis_transform())
    ax.legend(fontsize=7)
    return fig


def emulated_exactness_check(build=two_layer_induction, kind: str = "two_layer"):
    """Property check: random and tight inputs stay exact at the predicted p."""
    models = functools.lru_cache(maxsize=64)(build)

    @budget(0.3)
    @given(case=induction_cases(max_len=64))
    @example(case=(2, 64, [0] * 63 + [1]))
    @example(case=(8, 64, [7] * 62 + [6, 7]))
    def run(case):
        S, limit, sequence = case
        p = required_bits_for(kind, S, limit)
        assert exact_at(models(S, limit), torch.tensor([sequence]), p), (
            f"S={S}, max_len={limit}: wrong with p={p} bits on {sequence}")
    return run


test_predicted_precision_suffices = check(IH_PRECISION, "numeric")(precision_check())
test_predicted_precision_suffices_on_random_inputs = check(IH_PRECISION, "property")(
    emulated_exactness_check())
test_compact_predicted_precision_suffices_on_random_inputs = check(IH_PRECISION, "property")(
    emulated_exactness_check(compact_induction, "compact"))


def logarithmic_bits_check(bits=required_bits_for):
    r"""p(n) grows like :math:`c\log_2 n`: c = 1 for the one-hot model, 2 for the circle one.

    Over the ten doublings from :math:`2^{20}` to :math:`2^{30}` the slope
    :math:`(p(2^{30}) - p(2^{20}))/10` must lie in :math:`[c - 0.1, c + 0.25]`: the ceilings
    move it by at most :math:`1/10`, and the :math:`\log_2\log n` terms of
    :math:`\log_2 M` (from :math:`\lambda = \ln(3n/\rho) + 2` and
    :math:`\ln(n\beta_2)`) add at most :math:`1/\lambda + 2/\ln(n\beta_2) < 0.15` per
    doubling there. Formulas only, so it is cheap to go to :math:`n = 2^{30}`.
    """
    def run():
        rows = []
        for k in range(1, 31):
            n = 2**k
            rows.append([n, bits("two_layer", 2, n), bits("compact", 2, n)])
            evidence.cases(1)
        for column, (kind, c) in enumerate((("one-hot", 1), ("circle", 2)), start=1):
            slope = (rows[29][column] - rows[19][column]) / 10
            evidence.metric(f"{kind}: bits per doubling of n, 2^20..2^30", slope)
            assert c - 0.1 <= slope <= c + 0.25, f"{kind}: p grows by {slope} bits per doubling"
        evidence.table("predicted p for large n (S = 2)", ["n", "one-hot p", "circle p"], rows)
    return run


test_predicted_precision_is_logarithmic = check(IH_PRECISION, "numeric")(
    logarithmic_bits_check())
test_predicted_precision_sweep = pytest.mark.slow(check(IH_PRECISION, "numeric")(
    precision_check(lengths=SLOW_PRECISION_LENGTHS)))
