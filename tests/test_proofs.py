"""The proved tier: its runner (theorems.proving), the reviewed statements
(proofs/REVIEWED.json), and one falsified-statement mutant per proof.

A mutant edits the statement of a proof file (an inequality flipped, a constant changed) and
asserts that the check then fails for that reason: the edited statement still elaborates and a
tactic of its proof fails (not a broken toolchain, not a typo), or z3 answers sat. Results are
cached by content hash, so a mutant costs one compile per change of its file.
"""

from __future__ import annotations

import functools
import importlib
import json

import pytest

from theorems import evidence_file, proof_statements, proving
from theorems.evidence import declared_checks, expect_failure
from theorems.proof_statements import Scope
from theorems.proving import check_coq, coq_proof, smt_proof

needs_coq = pytest.mark.skipif(proving.missing_coq() is not None,
                               reason=proving.missing_coq() or "")
needs_z3 = pytest.mark.skipif(proving.missing_z3() is not None,
                              reason=proving.missing_z3() or "")


MUTANT = Scope("statement", "a falsified statement (a mutant)")


def falsified(path: str, theorem: str, old: str, new: str) -> str:
    """Run the proof of ``theorem`` with its statement edited; it must fail inside the proof
    (the edited statement elaborates, a tactic fails). Returns why."""
    message = expect_failure(coq_proof(path, theorem=theorem, scope=MUTANT,
                                       replace=(old, new)))
    assert "does not go through" in message, message
    return message


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
    message = expect_failure(coq_proof("proofs/coq/hopfield_twicing_identity.v",
                                       "twicing_identity", scope=MUTANT,
                                       replace=("Qed.", "Admitted.")))
    assert "not a proof" in message and "Admitted" in message


@needs_coq
def test_an_axiom_smuggled_in_through_a_module_type_is_rejected(tmp_path, monkeypatch):
    """An axiom that the text scan cannot see (a Module Type's field) is caught by
    Print Assumptions, and named."""
    source = tmp_path / "sneaky.v"
    source.write_text("Module Type T. Variable cheat : False. End T.\n"
                      "Declare Module M : T.\n"
                      "Theorem sneaky : 1 = 2. Proof. destruct M.cheat. Qed.\n")
    monkeypatch.setattr(proving, "PACKAGE", tmp_path)
    monkeypatch.setattr(proving, "CACHE_DIR", tmp_path / "cache")
    result = check_coq("sneaky.v", theorem="sneaky")
    assert not result.ok and "M.cheat" in result.message, result


@needs_coq
def test_a_cached_proof_is_not_recompiled(tmp_path, monkeypatch):
    monkeypatch.delenv("THEOREMS_PROOF_CACHE", raising=False)  # the cache is what is tested
    (tmp_path / "trivial.v").write_text("Theorem trivial : True. Proof. exact I. Qed.\n")
    monkeypatch.setattr(proving, "PACKAGE", tmp_path)
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
            coq_proof("proofs/coq/hopfield_twicing_identity.v", theorem="twicing_identity",
                      scope=MUTANT)()
    finally:
        proving.coq_version.cache_clear()


def _coq_file(tmp_path, monkeypatch, text: str) -> None:
    (tmp_path / "small.v").write_text(text)
    monkeypatch.setattr(proving, "PACKAGE", tmp_path)
    monkeypatch.setattr(proving, "CACHE_DIR", tmp_path / "cache")


SMALL = ("Lemma helper : 1 = 1. Proof. reflexivity. Qed.\n"
         "(* the statement *) Theorem small : 2 + 2 = 4.\nProof. reflexivity. Qed.\n")


@needs_coq
@pytest.mark.parametrize(("old", "new", "failure"), [
    ("2 + 2 = 4", "2 + 2 = 5", "proof"),              # false statement: its proof fails
    ("2 + 2 = 4", "2 + true = 4", "compile"),         # ill-typed statement: not elaborated
    ("Proof. reflexivity. Qed.\n(*", "Proof. exact I. Qed.\n(*", "compile"),  # another proof
    ("Lemma helper", "Require Import NoSuchLibrary.\nLemma helper", "compile"),  # toolchain
])
def test_a_mutant_counts_only_when_the_failure_is_inside_the_proof(tmp_path, monkeypatch, old,
                                                                    new, failure):
    """A falsified statement is 'not provable' only if it elaborates and a tactic of its proof
    fails: a missing library, an ill-typed edit or a failure elsewhere is not evidence."""
    _coq_file(tmp_path, monkeypatch, SMALL)
    assert check_coq("small.v", theorem="small").ok
    result = check_coq("small.v", theorem="small", replace=(old, new))
    assert not result.ok and result.failure == failure, result
    assert ("does not go through" in result.message) == (failure == "proof"), result.message


def test_the_statement_hash_follows_statement_and_definitions_only():
    base = ("From Coq Require Import Arith.\nDefinition f (n : nat) := n + 1.\n"
            "Lemma aux : f 0 = 1. Proof. reflexivity. Qed.\n"
            "Theorem t (n : nat) : f n = S n.\nProof. unfold f. lia. Qed.\n")
    sha = proof_statements.coq_statement_sha256(base, "t")
    assert proof_statements.coq_statement(base, "t") == "Theorem t (n : nat) : f n = S n"
    same = [base.replace("unfold f. lia.", "unfold f; lia."),        # another proof
            base.replace("Theorem t", "(* a (* nested *) comment *) Theorem t"),
            base.replace("f n = S n", "f n\n   = S n"),                 # layout
            base.replace("Lemma aux : f 0 = 1", "Lemma aux : f 1 = 2")]  # another lemma
    changed = [base.replace("f n = S n", "f n = n + 1"),              # the statement
               base.replace("n + 1.", "1 + n."),                        # a definition
               base.replace("Arith", "Lia")]                            # an import
    assert all(proof_statements.coq_statement_sha256(t, "t") == sha for t in same)
    assert all(proof_statements.coq_statement_sha256(t, "t") != sha for t in changed)
    spans = proof_statements.theorem_spans(base, "t")
    assert base[slice(*spans.proof)].split() == ["Proof.", "unfold", "f.", "lia.", "Qed."]
    with pytest.raises(ValueError, match="stated 0 times"):
        proof_statements.theorem_spans(base, "missing")


def test_the_python_statement_hash_ignores_docstrings_comments_and_layout(tmp_path,
                                                                        monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    variants = {"base": "def g(x):\n    return x + 1\n",
                "doc": 'def g(x):\n    """Doc."""\n    return (x +\n            1)  # why\n',
                "other": "def g(x):\n    return x + 2\n"}
    functions = {}
    for name, source in variants.items():
        (tmp_path / f"statement_{name}.py").write_text(source)
        functions[name] = importlib.import_module(f"statement_{name}").g
    sources = {k: proof_statements.python_source(f) for k, f in functions.items()}
    assert sources["base"] == sources["doc"] != sources["other"]
    hashes = {k: proof_statements.python_statement_sha256((f,)) for k, f in functions.items()}
    assert len(set(hashes.values())) == 3  # the module:qualname is part of what is hashed
    with pytest.raises(ValueError, match="functions"):
        proof_statements.python_statement_sha256(())


def test_a_proved_check_must_declare_its_scope():
    with pytest.raises(TypeError, match="scope"):
        coq_proof("proofs/coq/hopfield_twicing_identity.v", "twicing_identity",
                  scope=("statement", "all"))
    with pytest.raises(ValueError, match="covers"):
        Scope("everything", "all of it")
    with pytest.raises(ValueError, match="text"):
        Scope("part", " ")
    with pytest.raises(ValueError, match="statement"):
        smt_proof(lambda: [], name="x", source="x", scope=MUTANT, statement=())


@pytest.fixture(scope="module")
def declared():
    return proof_statements.declared_proofs()


def test_every_proved_check_is_reviewed(declared):
    """Each proved check's statement and scope match proofs/REVIEWED.json: a proof is
    evidence for its claim only as far as a person read its statement beside the claim."""
    reviewed = {(e["claim"], e["file"], e["theorem"]): e for e in proof_statements.load_reviewed()}
    problems = []
    for claim_id, spec in declared:
        current = proof_statements.reviewed_entry(claim_id, spec)
        entry = reviewed.pop((claim_id, spec.file, spec.theorem), None)
        if entry is None:
            problems.append(f"{claim_id}: {spec.theorem} ({spec.file}) is not in "
                            f"proofs/REVIEWED.json; review it, then add:\n{json.dumps(current)}")
        elif entry != current:
            changed = sorted(k for k in current if entry.get(k) != current[k])
            problems.append(f"{claim_id}: {spec.theorem} ({spec.file}) changed {changed} since "
                            "its review: review the statement against the claim, then update "
                            f"the hash (and scope) in proofs/REVIEWED.json to\n"
                            f"{json.dumps(current)}")
    problems += [f"proofs/REVIEWED.json lists {key}, which no proved check declares"
                 for key in reviewed]
    assert not problems, "\n".join(problems)
    assert len(declared) == 24  # 22 Coq theorems in 15 files, 2 z3 queries


def test_a_partial_proof_leaves_its_claim_to_other_checks(declared):
    """A proof that covers part of a statement, or a special case, cannot be what verifies its
    claim: the claim must have a check beyond the symbolic tier besides its proofs."""
    tiers = declared_checks()
    for claim_id, spec in declared:
        if spec.scope.covers != "statement":
            others = set(tiers[claim_id]) - {"symbolic", "proved"}
            assert others, f"{claim_id}: only a {spec.scope.covers} proof beyond symbolic"


def test_proved_counts_only_passed_proofs():
    def record(*checks):
        return {"checks": [{"tier": t, "outcome": o, "proof": {"tool": "z3"} if p else None}
                           for t, o, p in checks]}

    skipped = record(("property", "passed", False), ("proved", "skipped", False))
    assert evidence_file.proved_checks(skipped) == []
    assert evidence_file.evidence_tiers(skipped) == ["property"]
    for outcome in ("failed", "inconclusive"):
        assert evidence_file.proved_checks(record(("proved", outcome, True))) == []
    proved = record(("numeric", "failed", False), ("proved", "passed", True))
    assert len(evidence_file.proved_checks(proved)) == 1
    assert evidence_file.evidence_tiers(proved) == ["proved"]


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
              "x x a = layer WO W1 W2 x a ord0) /\\", "x x a = - layer WO W1 W2 x a ord0) /\\")


@needs_coq
@pytest.mark.mutant("bilinear.symmetric-part")
def test_b_determined_by_f_outright_is_not_provable():
    """Only B's symmetric part is determined: B + A, A antisymmetric (d >= 2), gives f too."""
    falsified("proofs/coq/bilinear.v", "symmetric_part",
              "sym T a j k = sym (tensor WO W1 W2) a j k", "T a j k = tensor WO W1 W2 a j k")


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


def sat(build, name: str, statement: tuple) -> str:
    """Run an SMT check on ``build``; z3 must answer sat (a model), not any other failure."""
    message = expect_failure(smt_proof(build, name=name, source="tests/test_proofs.py",
                                       scope=MUTANT, statement=statement))
    assert message.startswith("z3 found a counterexample"), message
    return message


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

    sat(functools.partial(margin_query, conditions=tightened(two_layer_conditions)),
        "tightened two-layer margins", (two_layer_conditions, margin_query))


@needs_z3
@pytest.mark.mutant("induction-heads.compact-margins")
def test_compact_margins_ten_times_tighter_come_back_sat():
    from constructions.induction_heads import compact_conditions, compact_parameters
    from theorems.areas.induction_heads.exactness import margin_query

    sat(functools.partial(margin_query, compact_parameters, tightened(compact_conditions),
                          geometry=True),
        "tightened compact margins", (compact_conditions, margin_query))


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


# --- the proofs of the newer areas (approximation, induction-variants, training-dynamics,
# circuits, cot-and-looping): one falsified statement each ---------------------------------

@needs_coq
@pytest.mark.mutant("approximation.prefix-decomposition")
def test_prefix_mixture_with_swapped_weights_is_not_provable():
    falsified("proofs/coq/approximation_prefix.v", "prefix_decomposition",
              "attn KP VP + (1 - lambda) *: attn KX VX.\nProof. exact:",
              "attn KX VX + (1 - lambda) *: attn KP VP.\nProof. exact:")


@needs_coq
@pytest.mark.mutant("approximation.prefix-limit")
def test_prefix_limit_at_rate_one_over_t_squared_is_not_provable():
    """1 - lambda_t = Z_X/(t Z_B + Z_X) exceeds Z_X/(t^2 Z_B) once t Z_B >= Z_X ... (t >= 2)."""
    falsified("proofs/coq/approximation_prefix.v", "prefix_limit",
              "Z KX / (t%:R * Z KB) *", "Z KX / (t%:R * t%:R * Z KB) *")


@needs_coq
@pytest.mark.mutant("approximation.virtual-node-linear-attention")
def test_virtual_node_round_at_twice_linear_attention_is_not_provable():
    falsified("proofs/coq/approximation_virtual_node.v", "virtual_node_round",
              "round E msg i = linear_attention i", "round E msg i = 2%:R *: linear_attention i")


@needs_coq
@pytest.mark.mutant("approximation.deepnorm-budget")
def test_deepnorm_budget_with_beta_from_4n_is_not_provable():
    """beta = (4N)^(-1/4) gives L (2 beta^2)/alpha^2 = sqrt 2, not 1."""
    falsified("proofs/coq/approximation_deepnorm.v", "deepnorm_budget",
              "(root4 (8 * N)%:R)^-1 = 1", "(root4 (4 * N)%:R)^-1 = 1")


@needs_coq
@pytest.mark.mutant("induction-variants.sih-margins")
def test_sih_margin_i_with_slack_two_is_not_provable():
    """(i) holds with equality at slack 1: 3 V lambda = M = M_0 + 1."""
    falsified("proofs/coq/induction_variants_sih_margins.v", "sih_margins",
              "3%:R * V%:R * lambda - M0 >= 1,", "3%:R * V%:R * lambda - M0 >= 2%:R,")


@needs_coq
@pytest.mark.mutant("circuits.icl-sufficient")
def test_patching_the_circuit_value_edge_is_not_provably_harmless():
    """The value edge is in the circuit: feeding it the corrupted labels moves yhat."""
    falsified("proofs/coq/circuits_icl.v", "icl_sufficient",
              "(if bk then y' else y) y (if br", "(if bk then y' else y) y' (if br")


@needs_coq
@pytest.mark.mutant("circuits.icl-variant")
def test_variant_with_a_dense_key_label_row_is_not_provable():
    """A non-zero y row of W_KQ lets the keys' labels into the prediction."""
    falsified("proofs/coq/circuits_icl.v", "icl_variant",
              "(block_mx (- eta *: 1%:M) c 0 0)", "(block_mx (- eta *: 1%:M) c b^T 0)")


@needs_coq
@pytest.mark.mutant("training-dynamics.conditioned-init-value-jacobian")
def test_value_jacobian_mixing_value_columns_is_not_provable():
    """AX (x) 11^T in place of AX (x) I: the W_V block would mix the value columns."""
    falsified("proofs/coq/training_dynamics_value_jacobian.v", "value_jacobian",
              "+ kron (A *m X) 1%:M *m vecr H.", "+ kron (A *m X) (const_mx 1) *m vecr H.")


@needs_coq
@pytest.mark.mutant("training-dynamics.scan-snap-row-gauge")
def test_a_token_dependent_shift_is_not_provably_a_gauge():
    """Adding kappa l to Z[m, l] (not a constant) reweights the context."""
    falsified("proofs/coq/training_dynamics_row_gauge.v", "row_gauge",
              "attn (shift Z m0 kappa) m ctx = attn Z m ctx /\\",
              "attn (fun m l => Z m l + kappa * INR l) m ctx = attn Z m ctx /\\")


@needs_coq
@pytest.mark.mutant("cot-and-looping.dyck-depth-head")
def test_depth_head_with_margin_two_over_i_plus_one_is_not_provable():
    """The margin is exactly 1/(i+1) at c = d_i +- 1."""
    falsified("proofs/coq/cot_and_looping_dyck_depth_head.v", "depth_head",
              "ell x y c + / INR (S i) <= ell x y d)", "ell x y c + 2 / INR (S i) <= ell x y d)")


# --- the end-to-end proof: the builder's own weights ----------------------------------------

def test_the_dyck_proof_holds_the_builders_weights():
    """The generated block of the Dyck proof is what depth_trace_head(2, 64) exports now: a
    change to the builder fails here until the file is regenerated (python -m
    theorems.proof_export) and its new statement reviewed (the REVIEWED.json hash)."""
    from theorems import proof_export

    current = (proving.PACKAGE / proof_export.DYCK_PROOF).read_text()
    assert current == proof_export.dyck_proof_text(), (
        "the Dyck proof's exported weights differ from the builder's: run "
        "python -m theorems.proof_export and review the new statement")


def test_exported_rationals_are_exact():
    from fractions import Fraction

    from theorems.proof_export import coq_rational

    assert coq_rational(-0.375) == "(-3 # 8)" and coq_rational(2.0) == "(2 # 1)"
    tiny = 2.0 ** -1074
    assert coq_rational(tiny) == f"(1 # {2 ** 1074})" and Fraction(tiny) == Fraction(1, 2 ** 1074)
    with pytest.raises(ValueError, match="finite"):
        coq_rational(float("nan"))
    with pytest.raises(TypeError, match="value"):
        coq_rational("1")


@needs_coq
@pytest.mark.mutant("cot-and-looping.dyck-depth-head")
def test_a_builder_with_a_halved_readout_breaks_the_end_to_end_proof(tmp_path, monkeypatch):
    """Read-out l_c = c x - c^2 y (not 2c x): its argmax is about d_i/2. Exported from the
    broken builder, the proof's computation on the weights fails inside builder_depth_head."""
    from constructions.dyck import depth_trace_head
    from theorems import proof_export

    broken = depth_trace_head(proof_export.DYCK_K, proof_export.DYCK_N)
    broken.readout[:, 1] /= 2
    target = tmp_path / proof_export.DYCK_PROOF
    target.parent.mkdir(parents=True)
    target.write_text(proof_export.dyck_proof_text(broken))
    monkeypatch.setattr(proving, "PACKAGE", tmp_path)
    monkeypatch.setattr(proving, "CACHE_DIR", tmp_path / "cache")
    message = expect_failure(coq_proof(proof_export.DYCK_PROOF, theorem="builder_depth_head",
                                       scope=MUTANT))
    assert "does not go through" in message, message


def test_the_dyck_margin_exceeds_the_float64_rounding():
    """The bridge from the exact model to float64: the computed logits lie within E of the
    exact ones (dyck.depth_tolerance's derivation, E per logit, 2E + gamma_4 for a gap), and
    the proof's exact margin is at least 1/(i+1) >= 1/(N+1), so the float64 argmax is the
    proved one at every position when the tolerance is below 1/(N+1)."""
    from theorems.areas.cot_and_looping.dyck import depth_tolerance
    from theorems.proof_export import DYCK_N

    assert depth_tolerance(DYCK_N, DYCK_N) < 1 / (DYCK_N + 1)


@needs_coq
@pytest.mark.mutant("induction-variants.dg-offset")
def test_offset_without_the_copy_length_is_not_provable():
    falsified("proofs/coq/induction_variants_dg_offset.v", "dg_offset",
              "(c2 + k - 1) - (c1 - m + k - 1) = dC + m) /\\",
              "(c2 + k - 1) - (c1 - m + k - 1) = dC) /\\")


@needs_coq
@pytest.mark.mutant("induction-variants.dg-offset")
def test_copier_one_step_short_right_at_every_step_is_not_provable():
    """At d_C = d + 1 the copier reads the C token at step m: 'right at every step' is false."""
    falsified("proofs/coq/induction_variants_dg_offset.v", "dg_offset",
              "copier d (c2 + m - 1) <> x (c2 + m)) /\\",
              "copier d (c2 + m - 1) = x (c2 + m)) /\\")


@needs_coq
@pytest.mark.mutant("approximation.prefix-finite-summary")
def test_ntk_attention_without_its_prefix_is_not_provable():
    """Dropping P from the kernel attention: the summary (Z, kappa_P) does carry the prefix."""
    falsified("proofs/coq/approximation_prefix_kernel.v", "finite_summary",
              "= kernel_attention q (col_mx KP KX) (col_mx VP VX).",
              "= kernel_attention q KX VX.")
