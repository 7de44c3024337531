(* Claims approximation.prefix-decomposition and approximation.prefix-limit
   (theorems/areas/approximation/prefix_attention.py).

   Notation. A query q in R^{1 x d}, keys K in R^{m x d} (row j is k_j), values V in R^{m x d_v}
   (row j is v_j), a temperature tau, scores s_j = tau q . k_j and the exponential weights
   e^{s_j}, written ex (s_j) for a function ex : R -> R with ex x > 0 for every x (e^x is one;
   an ordered field has no exp, so the theorems hold for every positive weight function, in
   particular for e^x over the reals). Z_J = sum_{j in J} ex(s_j), N_J = sum_{j in J} ex(s_j) v_j
   and Attn(q; J) = N_J / Z_J. The prefix P (m tokens) precedes the input X (n tokens): the
   keys and values of [P; X] stack P's rows above X's (col_mx).

   prefix_decomposition: for all m, n >= 1,
     Attn(q; [P; X]) = lambda Attn(q; P) + (1 - lambda) Attn(q; X),  lambda = Z_P/(Z_P + Z_X).
   prefix_limit: for a prefix of t >= 1 copies of a block B (b >= 1 tokens),
     Attn(q; [B^t; X]) - Attn(q; B) = (1 - lambda_t)(Attn(q; X) - Attn(q; B)),
     lambda_t = t Z_B/(t Z_B + Z_X), and every coordinate c satisfies
     |Attn(q; [B^t; X]) - Attn(q; B)|_c <= Z_X/(t Z_B) |Attn(q; X) - Attn(q; B)|_c
   (so the infinity norms satisfy the same bound); the limit t -> infinity of the bound is not
   formalised. Over any real field. *)
From mathcomp Require Import ssreflect ssrfun ssrbool eqtype ssrnat seq fintype bigop.
From mathcomp Require Import order ssralg ssrnum matrix.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Prefix.
Variables (R : realFieldType) (d dv : nat) (ex : R -> R) (tau : R) (q : 'rV[R]_d).
Hypothesis ex_pos : forall x, 0 < ex x.

Definition score m (K : 'M[R]_(m, d)) (j : 'I_m) : R := tau * (q *m (row j K)^T) ord0 ord0.
Definition Z m (K : 'M[R]_(m, d)) : R := \sum_(j < m) ex (score K j).
Definition N m (K : 'M[R]_(m, d)) (V : 'M[R]_(m, dv)) : 'rV[R]_dv :=
  \sum_(j < m) ex (score K j) *: row j V.
Definition attn m (K : 'M[R]_(m, d)) (V : 'M[R]_(m, dv)) : 'rV[R]_dv := (Z K)^-1 *: N K V.

(* t copies of a block, stacked. *)
Fixpoint copies b (t : nat) (A : 'M[R]_(b, dv)) : 'M[R]_(t * b, dv) :=
  match t return 'M[R]_(t * b, dv) with
  | 0 => 0
  | t'.+1 => col_mx A (copies t' A)
  end.
Fixpoint kcopies b (t : nat) (A : 'M[R]_(b, d)) : 'M[R]_(t * b, d) :=
  match t return 'M[R]_(t * b, d) with
  | 0 => 0
  | t'.+1 => col_mx A (kcopies t' A)
  end.

Lemma Z_col m n (KP : 'M[R]_(m, d)) (KX : 'M[R]_(n, d)) : Z (col_mx KP KX) = Z KP + Z KX.
Proof. by rewrite /Z big_split_ord /=; congr (_ + _); apply: eq_bigr => j _; rewrite /score ?rowKu ?rowKd. Qed.

Lemma N_col m n (KP : 'M[R]_(m, d)) (KX : 'M[R]_(n, d)) VP VX :
  N (col_mx KP KX) (col_mx VP VX) = N KP VP + N KX VX.
Proof. by rewrite /N big_split_ord /=; congr (_ + _); apply: eq_bigr => j _; rewrite /score ?rowKu ?rowKd. Qed.

Lemma Z_pos m (K : 'M[R]_(m, d)) : (0 < m)%N -> 0 < Z K.
Proof.
case: m K => // m K _; rewrite /Z big_ord_recl ltr_paddr ?ex_pos //.
by apply: sumr_ge0 => j _; apply: ltW.
Qed.

Lemma mixture zp zx (np nx : 'rV[R]_dv) : 0 < zp -> 0 < zx ->
  (zp + zx)^-1 *: (np + nx)
  = (zp / (zp + zx)) *: (zp^-1 *: np) + (1 - zp / (zp + zx)) *: (zx^-1 *: nx).
Proof.
move=> p x; have s0 : zp + zx != 0 by rewrite gt_eqF // addr_gt0.
have -> : 1 - zp / (zp + zx) = zx / (zp + zx).
  by apply: (mulIf s0); rewrite mulrBl mul1r !divfK // [zp + zx]addrC addrK.
rewrite !scalerA mulrAC divff ?gt_eqF // mul1r mulrAC divff ?gt_eqF // mul1r.
by rewrite scalerDr.
Qed.

Lemma decomposition m n (KP : 'M[R]_(m, d)) (VP : 'M[R]_(m, dv))
    (KX : 'M[R]_(n, d)) (VX : 'M[R]_(n, dv)) : (0 < m)%N -> (0 < n)%N ->
  let lambda := Z KP / (Z KP + Z KX) in
  attn (col_mx KP KX) (col_mx VP VX) = lambda *: attn KP VP + (1 - lambda) *: attn KX VX.
Proof.
move=> m0 n0 lambda; rewrite /attn Z_col N_col /lambda.
by rewrite mixture // Z_pos.
Qed.

Theorem prefix_decomposition m n (KP : 'M[R]_(m, d)) (VP : 'M[R]_(m, dv))
    (KX : 'M[R]_(n, d)) (VX : 'M[R]_(n, dv)) : (0 < m)%N -> (0 < n)%N ->
  let lambda := Z KP / (Z KP + Z KX) in
  attn (col_mx KP KX) (col_mx VP VX) = lambda *: attn KP VP + (1 - lambda) *: attn KX VX.
Proof. exact: decomposition. Qed.

Lemma mix_gap (l : R) (A B : 'rV[R]_dv) : l *: A + (1 - l) *: B - A = (1 - l) *: (B - A).
Proof. by rewrite !scalerBl !scale1r scalerBr opprB addrCA addrAC. Qed.

Lemma copies_sums b t (KB : 'M[R]_(b, d)) (VB : 'M[R]_(b, dv)) :
  Z (kcopies t KB) = t%:R * Z KB /\ N (kcopies t KB) (copies t VB) = t%:R *: N KB VB.
Proof.
elim: t => [|t [IHZ IHN]] /=.
  by rewrite /Z /N !big_ord0 mul0r scale0r.
by rewrite Z_col N_col IHZ IHN -addn1 natrD mulrDl scalerDl mul1r scale1r addrC [_ + N _ _]addrC.
Qed.

Theorem prefix_limit b n t (KB : 'M[R]_(b, d)) (VB : 'M[R]_(b, dv))
    (KX : 'M[R]_(n, d)) (VX : 'M[R]_(n, dv)) : (0 < b)%N -> (0 < n)%N -> (0 < t)%N ->
  let lambda := t%:R * Z KB / (t%:R * Z KB + Z KX) in
  let gap := attn (col_mx (kcopies t KB) KX) (col_mx (copies t VB) VX) - attn KB VB in
  gap = (1 - lambda) *: (attn KX VX - attn KB VB) /\
  forall c, `|gap ord0 c| <= Z KX / (t%:R * Z KB) * `|(attn KX VX - attn KB VB) ord0 c|.
Proof.
move=> b0 n0 t0 lambda gap.
have [zt nt] := copies_sums t KB VB.
have zb := Z_pos KB b0; have zx := Z_pos KX n0.
have tpos : 0 < t%:R :> R by rewrite ltr0n.
have ztb : 0 < t%:R * Z KB by rewrite mulr_gt0.
have same : attn (kcopies t KB) (copies t VB) = attn KB VB.
  by rewrite /attn zt nt scalerA invfM mulrAC mulVf ?gt_eqF // mul1r.
have split : gap = (1 - lambda) *: (attn KX VX - attn KB VB).
  rewrite /gap decomposition ?muln_gt0 ?b0 ?t0 // same -/lambda zt.
  by rewrite -/lambda mix_gap.
split=> // c; rewrite split mxE normrM.
have -> : 1 - lambda = Z KX / (t%:R * Z KB + Z KX).
  apply: (mulIf (lt0r_neq0 (addr_gt0 ztb zx))); rewrite mulrBl mul1r !divfK ?gt_eqF ?addr_gt0 //.
  by rewrite addrAC subrr add0r.
rewrite ger0_norm; last by rewrite divr_ge0 // ltW // addr_gt0.
apply: ler_wpmul2r; first exact: normr_ge0.
apply: ler_wpmul2l; first exact: ltW.
by rewrite lef_pinv ?posrE ?addr_gt0 // ler_addl ltW.
Qed.
End Prefix.
