(* Claim training-dynamics.conditioned-init-value-jacobian
   (theorems/areas/training_dynamics/conditioned_init.py).

   X in R^{n x d}, W_V in R^{d x d_v} and A in R^{n x n} (the row-wise softmax of
   X W_Q W_K^T X^T / sqrt d_k, which does not involve W_V; the theorem holds for every A),
   Y = A X W_V. vec_r is the row-major vectorisation, MathComp's mxvec (its index
   mxvec_index i j enumerates the pairs (i, j) lexicographically), written as a column.
   B (x) C is the Kronecker product, (B (x) C)_{(i,a),(k,b)} = B_ik C_ab, with the pairs read
   through the same row-major index. Y is linear in W_V, so its Jacobian with respect to
   vec_r(W_V) at W_V is the unique matrix J with
     vec_r(Y(W_V + H)) = vec_r(Y(W_V)) + J vec_r(H)   for every H
   (uniqueness: take H = each unit matrix). Theorem value_jacobian: this holds with
   J = A X (x) I_{d_v}, for every n, d, d_v, A, X, W_V and H, over any commutative ring; so the
   W_V block does not depend on W_V. The singular-value sentence and the closing clause follow
   from the Kronecker form and are not part of this theorem. *)
From mathcomp Require Import ssreflect ssrfun ssrbool eqtype ssrnat seq choice fintype bigop.
From mathcomp Require Import ssralg matrix.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory.
Local Open Scope ring_scope.

Section Jacobian.
Variable R : comRingType.

(* The pair (i, j) that a row-major index stands for: the inverse of mxvec_index. *)
Definition pair_of p q (x : 'I_(p * q)) : 'I_p * 'I_q :=
  enum_val (cast_ord (esym (mxvec_cast p q)) x).

Definition kron p q r s (B : 'M[R]_(p, q)) (C : 'M[R]_(r, s)) : 'M[R]_(p * r, q * s) :=
  \matrix_(x, y) (B (pair_of x).1 (pair_of y).1 * C (pair_of x).2 (pair_of y).2).

Definition vecr p q (M : 'M[R]_(p, q)) : 'cV[R]_(p * q) := (mxvec M)^T.

Lemma pair_ofK p q (i : 'I_p) (j : 'I_q) : pair_of (mxvec_index i j) = (i, j).
Proof. by rewrite /pair_of /mxvec_index cast_ordK enum_rankK. Qed.

Theorem value_jacobian n d dv (A : 'M[R]_n) (X : 'M[R]_(n, d)) (W H : 'M[R]_(d, dv)) :
  vecr (A *m X *m (W + H)) = vecr (A *m X *m W) + kron (A *m X) 1%:M *m vecr H.
Proof.
rewrite mulmxDr /vecr linearD /= linearD /=; congr (_ + _).
apply/colP => x; rewrite !mxE.
case/mxvec_indexP: x => i a; rewrite mxvecE.
rewrite (reindex (uncurry (@mxvec_index d dv))) /=; last first.
  exact: curry_mxvec_bij.
rewrite (eq_bigr (fun p => (A *m X) i p.1 * ((1%:M : 'M[R]_dv) a p.2 * H p.1 p.2))); last first.
  by case=> k b _; rewrite !mxE /= !pair_ofK mxvecE /= mulrA.
rewrite -(pair_bigA _ (fun k b => (A *m X) i k * ((1%:M : 'M[R]_dv) a b * H k b))) /=.
rewrite mxE; apply: eq_bigr => k _; rewrite -big_distrr /=; congr (_ * _).
rewrite (bigD1 a) //= big1 ?addr0 => [|b ba]; first by rewrite mxE eqxx mul1r.
by rewrite mxE eq_sym (negPf ba) mul0r.
Qed.
End Jacobian.
