(* Claims circuits.icl-sufficient and circuits.icl-variant (theorems/areas/circuits/icl.py).

   Tokens z_j = (x_j; y_j) in R^{d+1}, j <= n, stacked as the columns of Z(y) = [X; y]
   (X in R^{d x n}, y in R^{1 x n} the labels), and the query z_q = (x_q; 0). One linear-attention
   head with value W_PV z_j, key z_j and query W_KQ z_q, W_PV = e_y e_y^T = diag(0, 1),
   W_KQ = diag(-eta I_d, 0), predicts yhat = -(z_{q,y} + e_y^T W_PV (1/n) sum_j z_j z_j^T W_KQ z_q).
   The clean and corrupted prompts share X and x_q and differ only in their labels (the claim's
   corruption y_k -> y_k + delta is one case). Patching the edges input -> a_0<q>, a_0<k>,
   a_0<v> and input -> logits (the residual z_{q,y}) feeds each of them from either run, so the
   patched prediction is a function of four label rows:
     predict W_PV W_KQ yq yk yv yr = -(z_{q,y}(yr) + e_y^T W_PV (1/n) Z(yv) Z(yk)^T W_KQ z_q(yq)).
   Lemma scaleE p q a (A : 'M[R]_(p, q)) i j : (a *: A) i j = a * A i j.
Proof. by rewrite mxE. Qed.

Theorem icl_sufficient: for every d, n, eta, X, x_q and label rows y, y' (clean, corrupted),
   patching any subset of the 3 edges outside C = {input -> a_0<v>, a_0 -> logits} with the
   corrupted run leaves yhat unchanged, and yhat = eta x_q^T (1/n) sum_j y_j x_j.
   Theorem icl_variant: null_space_variant fills rows 1..d of W_PV (B, b) and the top d entries of
   W_KQ's last column (c) with any values, keeping W_PV's y row (0, 1) and W_KQ's zero y row; for
   all such values, all four label rows and every d, n, eta, X, x_q, its patched prediction equals
   the original's (so both predictions agree on every prompt, and under every patching).
   Exact arithmetic over any field; the claims' float64 bit-for-bit sentences are not part of
   these theorems. *)
From mathcomp Require Import ssreflect ssrfun ssrbool eqtype ssrnat seq fintype bigop.
From mathcomp Require Import ssralg matrix.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory.
Local Open Scope ring_scope.

Section ICL.
Variables (R : fieldType) (d n : nat) (eta : R) (X : 'M[R]_(d, n)) (xq : 'cV[R]_d).

Definition tokens (y : 'rV[R]_n) : 'M[R]_(d + 1, n) := col_mx X y.
Definition query (y : 'rV[R]_n) : 'cV[R]_(d + 1) := col_mx xq 0.  (* no label at the query *)
Definition ylast : 'I_(d + 1) := rshift d ord0.

Definition W_PV : 'M[R]_(d + 1) := block_mx 0 0 0 1%:M.
Definition W_KQ : 'M[R]_(d + 1) := block_mx (- eta *: 1%:M) 0 0 0.

Definition predict (Wpv Wkq : 'M[R]_(d + 1)) (yq yk yv yr : 'rV[R]_n) : R :=
  - (query yr ylast ord0
     + (Wpv *m (n%:R^-1 *: (tokens yv *m (tokens yk)^T)) *m Wkq *m query yq) ylast ord0).

Definition yhat (y : 'rV[R]_n) : R := predict W_PV W_KQ y y y y.

Lemma predict_formula Wkl (B : 'M[R]_d) (bv c : 'cV[R]_d) (yq yk yv yr : 'rV[R]_n) :
  predict (block_mx B bv 0 1%:M) (block_mx Wkl c 0 0) yq yk yv yr
  = - (n%:R^-1 * (yv *m X^T *m Wkl *m xq) ord0 ord0).
Proof.
rewrite /predict /query /ylast col_mxEd mxE add0r -scalemxAr -!scalemxAl; congr (- _).
rewrite [LHS]mxE; congr (_ * _); rewrite -!mulmxA.
rewrite mul_block_col !mulmx0 !mul0mx !addr0 /tokens tr_col_mx mul_row_col mulmx0 addr0.
by rewrite mul_col_mx col_mxEd mulmxA mul_row_col mul0mx add0r mul1mx.
Qed.
Lemma scaleE p q a (A : 'M[R]_(p, q)) i j : (a *: A) i j = a * A i j.
Proof. by rewrite mxE. Qed.

Theorem icl_sufficient (y y' : 'rV[R]_n) :
  (forall bq bk br : bool,
     predict W_PV W_KQ (if bq then y' else y) (if bk then y' else y) y (if br then y' else y)
     = yhat y)
  /\ yhat y = eta * (xq^T *m (n%:R^-1 *: (X *m y^T))) ord0 ord0.
Proof.
split; first by move=> bq bk br; rewrite /yhat /W_PV /W_KQ !predict_formula.
rewrite /yhat /W_PV /W_KQ predict_formula scalemx1 mul_mx_scalar -scalemxAl -scalemxAr !scaleE.
have tr : (y *m X^T *m xq)^T = xq^T *m (X *m y^T) by rewrite !trmx_mul trmxK mulmxA.
have -> : (y *m X^T *m xq) ord0 ord0 = (xq^T *m (X *m y^T)) ord0 ord0 by rewrite -tr [RHS]mxE.
by rewrite mulNr mulrN opprK mulrCA.
Qed.

Theorem icl_variant (B : 'M[R]_d) (b c : 'cV[R]_d) (yq yk yv yr : 'rV[R]_n) :
  predict (block_mx B b 0 1%:M) (block_mx (- eta *: 1%:M) c 0 0) yq yk yv yr
  = predict W_PV W_KQ yq yk yv yr.
Proof. by rewrite /W_PV /W_KQ !predict_formula. Qed.
End ICL.
