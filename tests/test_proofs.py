"""The proved tier: its runner (theorems.proving), and one falsified-statement mutant per proof.

A mutant edits the statement of a proof file (an inequality flipped, a constant changed) and
asserts that the check then fails: the edited file must not compile, or z3 must answer sat.
Results are cached by content hash, so a mutant costs one compile per change of its file.
"""

from __future__ import annotations

import functools

import pytest

from theorems import proving
from theorems.evidence import expect_failure
from theorems.proving import check_coq, coq_proof, smt_proof

needs_coq = pytest.mark.skipif(proving.missing_coq() is not None,
                               reason=proving.missing_coq() or "")
needs_z3 = pytest.mark.skipif(proving.missing_z3() is not None,
                              reason=proving.missing_z3() or "")


def falsified(path: str, theorem: str, old: str, new: str) -> str:
    """Run the proof of ``theorem`` with its statement edited; it must fail. Returns why."""
    return expect_failure(coq_proof(path, theorem=theorem, replace=(old, new)))


# --- the runner --------------------------------------------------------------------------

def test_unproved_markers_ignore_comments():
    text = "(* Admitted (* nested admit *) *) Lemma x : True. Proof. admit. Admitted."
    assert proving.unproved_markers(text) == ["Admitted", "admit"]
    assert proving.unproved_markers("(* Axiom *) Lemma x : True. Proof. exact I. Qed.") == []
    assert proving.unproved_markers("Unset Guard Checking. Fixpoint f (n : nat) := f n.") == [
        "Unset Guard Checking"]


def test_parse_assumptions():
    closed = "Closed under the global context\n"
    assert proving.parse_assumptions(closed) == ()
    listed = ("Axioms:\nClassical_Prop.classic : forall P : Prop, P \\/ ~ P\n"
              "ClassicalDedekindReals.sig_forall_dec\n  : forall P : nat -> Prop,\n"
              "    (forall n : nat, {P n} + {~ P n}) -> True\n")
    assert proving.parse_assumptions(listed) == ("Classical_Prop.classic",
                                                 "ClassicalDedekindReals.sig_forall_dec")
    with pytest.raises(ValueError, match="unrecognised"):
        proving.parse_assumptions("Error: something else")


def test_mutate_requires_a_unique_match():
    assert proving.mutate("a <= b", ("<=", ">=")) == "a >= b"
    with pytest.raises(ValueError, match="occurs 2 times"):
        proving.mutate("a <= b <= c", ("<=", ">="))
    with pytest.raises(ValueError, match="occurs 0 times"):
        proving.mutate("a <= b", ("==", ">="))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="theorem"):
        check_coq("proofs/coq/hopfield_twicing_identity.v", theorem="not an identifier")
    with pytest.raises(ValueError, match="path"):
        check_coq("proofs/coq/missing.v", theorem="x")


@needs_coq
def test_admitted_proof_is_rejected_before_compiling():
    message = falsified("proofs/coq/hopfield_twicing_identity.v", "twicing_identity",
                        "Qed.", "Admitted.")
    assert "not a proof" in message and "Admitted" in message


@needs_coq
def test_an_axiom_smuggled_in_through_a_module_type_is_rejected(tmp_path, monkeypatch):
    """An axiom that the text scan cannot see (a Module Type's field) is caught by
    Print Assumptions, and named."""
    source = tmp_path / "sneaky.v"
    source.write_text("Module Type T. Variable cheat : False. End T.\n"
                      "Declare Module M : T.\n"
                      "Theorem sneaky : 1 = 2. Proof. destruct M.cheat. Qed.\n")
    monkeypatch.setattr(proving, "ROOT", tmp_path)
    monkeypatch.setattr(proving, "CACHE_DIR", tmp_path / "cache")
    result = check_coq("sneaky.v", theorem="sneaky")
    assert not result.ok and "M.cheat" in result.message, result


@needs_coq
def test_a_cached_proof_is_not_recompiled(tmp_path, monkeypatch):
    (tmp_path / "trivial.v").write_text("Theorem trivial : True. Proof. exact I. Qed.\n")
    monkeypatch.setattr(proving, "ROOT", tmp_path)
    monkeypatch.setattr(proving, "CACHE_DIR", tmp_path / "cache")
    first = check_coq("trivial.v", theorem="trivial")
    second = check_coq("trivial.v", theorem="trivial")
    assert first.ok and not first.cached and second.cached and first.assumptions == ()
    assert second.seconds == first.seconds  # the recorded compile time is the cold one
    assert len(list((tmp_path / "cache").glob("*.json"))) == 1
    monkeypatch.setenv("THEOREMS_PROOF_CACHE", "off")
    assert not check_coq("trivial.v", theorem="trivial").cached


def test_missing_coq_skips_with_a_reason(monkeypatch):
    proving.coq_version.cache_clear()
    monkeypatch.setattr(proving.shutil, "which", lambda name: None)
    try:
        assert "coqc not found" in proving.missing_coq()
        with pytest.raises(pytest.skip.Exception, match="coqc not found"):
            coq_proof("proofs/coq/hopfield_twicing_identity.v", theorem="twicing_identity")()
    finally:
        proving.coq_version.cache_clear()


# --- one falsified statement per proof -----------------------------------------------------

@needs_coq
@pytest.mark.mutant("hopfield.twicing-identity")
def test_twicing_with_a_flipped_residual_sign_is_not_provable():
    falsified("proofs/coq/hopfield_twicing_identity.v", "twicing_identity",
              "A *m V + A *m (V - A *m V)", "A *m V + A *m (V + A *m V)")


@needs_coq
@pytest.mark.mutant("bilinear.tensor-identity")
def test_tensor_with_w2_on_the_wrong_index_is_not_provable():
    falsified("proofs/coq/bilinear.v", "tensor_identity",
              "= W1 i j * W2 i k).", "= W1 i j * W2 i j).")


@needs_coq
@pytest.mark.mutant("bilinear.symmetric-part")
def test_symmetric_part_with_a_flipped_sign_is_not_provable():
    falsified("proofs/coq/bilinear.v", "symmetric_part",
              "x x a = layer WO W1 W2 x a ord0.", "x x a = - layer WO W1 W2 x a ord0.")


@needs_coq
@pytest.mark.mutant("bilinear.quadratic-form")
def test_cubic_homogeneity_is_not_provable():
    falsified("proofs/coq/bilinear.v", "quadratic_form", "alpha ^+ 2 *:", "alpha ^+ 3 *:")


@needs_coq
@pytest.mark.mutant("icl-regression.one-step-gd")
def test_one_step_gd_with_the_prediction_negated_is_not_provable():
    falsified("proofs/coq/icl_regression_one_step_gd.v", "one_step_gd",
              "prediction mask_query = (xq^T", "prediction mask_query = - (xq^T")


@needs_coq
@pytest.mark.mutant("layernorm.projection-decomposition")
def test_layer_norm_with_squared_norm_d_plus_one_is_not_provable():
    falsified("proofs/coq/layernorm.v", "projection_decomposition",
              "i ^+ 2 = d%:R].", "i ^+ 2 = (d.+1)%:R].")


@needs_coq
@pytest.mark.mutant("layernorm.two-dimensions")
def test_two_dimensional_layer_norm_with_the_sign_flipped_is_not_provable():
    falsified("proofs/coq/layernorm.v", "two_dimensions",
              "i0 = Num.sg (x i0 - x i1) /\\", "i0 = Num.sg (x i1 - x i0) /\\")


@needs_coq
@pytest.mark.mutant("boltzmann.max-bounds")
def test_boltzmann_strictly_below_the_max_is_not_provable():
    """False for n = 1 (boltz(a) = a = max a), so no proof can exist."""
    falsified("proofs/coq/boltzmann_max_bounds.v", "max_bounds",
              "<= boltz beta l <= max_list l.", "<= boltz beta l < max_list l.")


def tightened(conditions):
    """The margin conditions with every bound divided by 10: false for the two-layer (A) at
    n = 1 and for the compact (D') at g = 1, where lhs/bound is a constant above 1/10."""
    def run(n, params, *, lib):
        return {name: (lhs, lib.sympify(bound) / 10) for name, (lhs, bound) in
                conditions(n, params, lib=lib).items()}
    return run


@needs_z3
@pytest.mark.mutant("induction-heads.two-layer-margins")
def test_two_layer_margins_ten_times_tighter_come_back_sat():
    from constructions.induction_heads import two_layer_conditions
    from theorems.areas.induction_heads.exactness import margin_query

    message = expect_failure(smt_proof(
        functools.partial(margin_query, conditions=tightened(two_layer_conditions)),
        name="tightened two-layer margins", source="tests/test_proofs.py"))
    assert "counterexample" in message


@needs_z3
@pytest.mark.mutant("induction-heads.compact-margins")
def test_compact_margins_ten_times_tighter_come_back_sat():
    from constructions.induction_heads import compact_conditions, compact_parameters
    from theorems.areas.induction_heads.exactness import margin_query

    message = expect_failure(smt_proof(
        functools.partial(margin_query, compact_parameters, tightened(compact_conditions),
                          geometry=True),
        name="tightened compact margins", source="tests/test_proofs.py"))
    assert "counterexample" in message


def test_sympy_translation_refuses_what_it_cannot_translate_exactly():
    sympy = pytest.importorskip("sympy")
    pytest.importorskip("z3")
    x = sympy.Symbol("x", positive=True)
    with pytest.raises(ValueError, match="cannot translate"):
        proving.z3_from_sympy(sympy.sin(x), {x: __import__("z3").Real("x")}, [])
    with pytest.raises(ValueError, match="log of a non-atom"):
        proving.z3_from_sympy(sympy.log(x + 1), {x: __import__("z3").Real("x")}, [])


def test_series_bounds_enclose_e_and_ln3():
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(100):
        for key, value in (("E", mpmath.e), ("3", mpmath.log(3)), ("2", mpmath.log(2))):
            lo, hi = (mpmath.mpf(b.numerator) / b.denominator
                      for b in proving._series_bounds(key))
            assert lo <= value <= hi and hi - lo < 1e-12, key


@needs_coq
@pytest.mark.mutant("addition.failure-set")
def test_failure_set_without_the_carry_out_digit_is_not_provable():
    """Dropping the answer's top digit A_{n_d} makes every carry-out a failure: 5 + 5."""
    falsified("proofs/coq/addition_failure_set.v", "failure_set",
              "value (algorithm_digit s) (S nd)", "value (algorithm_digit s) nd")
