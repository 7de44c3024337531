(* Claim icl-regression.one-step-gd (theorems/areas/icl_regression.py).

   Prompt Z = [x_1 .. x_n x_q; y_1 .. y_n 0] in R^{(d+1) x (n+1)}, written as the block matrix
   Z = [X x_q; y 0] with X = [x_1 .. x_n] in R^{d x n} and y = (y_1 .. y_n) in R^{1 x n}.
   One layer of linear self-attention f(Z) = Z + (1/n) W_PV Z M Z^T W_KQ Z, with
   W_PV = e_{d+1} e_{d+1}^T = [0 0; 0 1] and W_KQ = [-(eta P)^T 0; 0 0], masked
   (M = diag(1, .., 1, 0)) or unmasked (M = I), predicts yhat = -f(Z)_{d+1, n+1}.
   Least squares L(w) = 1/(2n) sum_i (w^T x_i - y_i)^2 has gradient
   grad L(w) = (1/n) X (X^T w - y^T); one preconditioned GD step from 0 is
   w_1 = -eta P grad L(0).  Theorem one_step_gd: w_1 = eta P (1/n) sum_i y_i x_i, and
   yhat = x_q^T w_1, for both masks, for every d, n, eta, P and prompt, over any field
   (so in particular over the reals; n = 0 makes both sides 0 as 0^-1 = 0 in MathComp).
   The float64 tolerance part of the claim is numerical and is not part of this proof. *)
From mathcomp Require Import ssreflect ssrfun ssrbool eqtype ssrnat seq fintype bigop.
From mathcomp Require Import ssralg matrix.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory.
Local Open Scope ring_scope.

Section OneStepGD.
Variables (R : fieldType) (d n : nat).
Variables (eta : R) (P : 'M[R]_d) (X : 'M[R]_(d, n)) (y : 'rV[R]_n) (xq : 'cV[R]_d).

Definition prompt : 'M[R]_(d + 1, n + 1) := block_mx X xq y 0.
Definition W_PV : 'M[R]_(d + 1) := block_mx 0 0 0 1%:M.
Definition W_KQ : 'M[R]_(d + 1) := block_mx (- (eta *: P)^T) 0 0 0.
Definition mask_query : 'M[R]_(n + 1) := block_mx 1%:M 0 0 0.

Definition lsa (M : 'M[R]_(n + 1)) (Z : 'M[R]_(d + 1, n + 1)) : 'M[R]_(d + 1, n + 1) :=
  Z + n%:R^-1 *: (W_PV *m Z *m M *m Z^T *m W_KQ *m Z).

Definition prediction (M : 'M[R]_(n + 1)) : R :=
  - lsa M prompt (rshift d ord0) (rshift n ord0).

(* grad L(w) = (1/n) sum_i (w^T x_i - y_i) x_i = (1/n) X (X^T w - y^T) *)
Definition grad (w : 'cV[R]_d) : 'cV[R]_d := n%:R^-1 *: (X *m (X^T *m w - y^T)).

Definition w1 : 'cV[R]_d := - ((eta *: P) *m grad 0).

Lemma w1_sum : w1 = eta *: P *m (n%:R^-1 *: (X *m y^T)).
Proof. by rewrite /w1 /grad mulmx0 sub0r mulmxN scalerN mulmxN opprK. Qed.

Lemma prediction_formula M : M = mask_query \/ M = 1%:M ->
  prediction M = (xq^T *m w1) ord0 ord0.
Proof.
move=> mask; have rows : W_PV *m prompt *m M = block_mx 0 0 y 0.
  rewrite /W_PV /prompt mulmx_block !mul0mx !mul1mx !addr0 !add0r.
  case: mask => ->; rewrite ?scalar_mx_block mulmx_block !mul0mx !mulmx0 !mulmx1 !addr0 //.
rewrite /prediction /lsa rows /prompt /W_KQ !tr_block_mx !mulmx_block.
rewrite !mul0mx !mulmx0 !addr0 ?add0r scale_block_mx add_block_mx block_mxEdr.
rewrite w1_sum.
have -> : n%:R^-1 *: (y *m X^T *m - (eta *: P)^T *m xq)
          = - (xq^T *m (eta *: P *m (n%:R^-1 *: (X *m y^T))))^T.
  rewrite !trmx_mul trmxK !linearZ /= trmx_mul trmxK.
  by rewrite -!scalemxAl mulmxN !mulNmx !scalerN !scalerA mulrC.
by rewrite sub0r mxE opprK mxE.
Qed.

Theorem one_step_gd :
  [/\ w1 = eta *: P *m (n%:R^-1 *: (X *m y^T)),
      prediction mask_query = (xq^T *m w1) ord0 ord0
    & prediction 1%:M = (xq^T *m w1) ord0 ord0].
Proof.
by split; [exact: w1_sum | apply: prediction_formula; left | apply: prediction_formula; right].
Qed.
End OneStepGD.
