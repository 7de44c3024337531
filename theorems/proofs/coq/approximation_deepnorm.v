(* Claim approximation.deepnorm-budget (theorems/areas/approximation/deepnorm.py).

   DeepNorm's constants: alpha = (2N)^{1/4}, beta = (8N)^{-1/4} for an N-layer encoder-only or
   decoder-only model, with L = 2N residual sublayers; alpha = (3M)^{1/4}, beta = (12M)^{-1/4}
   for the M-layer decoder of an encoder-decoder, with L = 3M (self-attention,
   cross-attention, FFN). The value and output scales are v = w = beta. The fourth root of
   x >= 0 is written sqrt (sqrt x). Theorem deepnorm_budget: L (v^2 + w^2) / alpha^2 = 1 for
   every N >= 1 (first conjunct) and every M >= 1 (second), over any real closed field (so
   over the reals). That these are torchscale's constants is a statement about its code, not
   part of this theorem. *)
From mathcomp Require Import ssreflect ssrfun ssrbool eqtype ssrnat seq fintype bigop.
From mathcomp Require Import order ssralg ssrnum.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section DeepNorm.
Variable R : rcfType.

Definition root4 (x : R) : R := Num.sqrt (Num.sqrt x).

(* L (v^2 + w^2) / alpha^2 with v = w = beta. *)
Definition budget (L : nat) (alpha beta : R) : R := L%:R * (beta ^+ 2 + beta ^+ 2) / alpha ^+ 2.

Lemma root4_sqr (x : R) : root4 x ^+ 2 = Num.sqrt x.
Proof. by rewrite /root4 sqr_sqrtr // sqrtr_ge0. Qed.

Lemma balanced (L : nat) : (0 < L)%N -> budget L (root4 L%:R) (root4 (4 * L)%:R)^-1 = 1.
Proof.
move=> L0; have Lpos : 0 < L%:R :> R by rewrite ltr0n.
have sL : 0 < Num.sqrt (L%:R : R) by rewrite sqrtr_gt0.
rewrite /budget exprVn !root4_sqr.
have -> : Num.sqrt (4 * L)%:R = 2 * Num.sqrt (L%:R : R) :> R.
  rewrite natrM sqrtrM ?ler0n //; congr (_ * _).
  by rewrite -[4%N]/(2 ^ 2)%N natrX sqrtr_sqr ger0_norm ?ler0n.
have half (y : R) : (2 * y)^-1 + (2 * y)^-1 = y^-1.
  by rewrite [RHS]splitr invfM mulrC.
rewrite half -mulrA -invfM -expr2.
by rewrite sqr_sqrtr ?ler0n // divff ?gt_eqF.
Qed.

Theorem deepnorm_budget (N M : nat) : (0 < N)%N -> (0 < M)%N ->
  budget (2 * N) (root4 (2 * N)%:R) (root4 (8 * N)%:R)^-1 = 1 /\
  budget (3 * M) (root4 (3 * M)%:R) (root4 (12 * M)%:R)^-1 = 1.
Proof.
move=> N0 M0; split.
  by rewrite (_ : (8 * N = 4 * (2 * N))%N) ?balanced ?muln_gt0 // mulnA.
by rewrite (_ : (12 * M = 4 * (3 * M))%N) ?balanced ?muln_gt0 // mulnA.
Qed.
End DeepNorm.
