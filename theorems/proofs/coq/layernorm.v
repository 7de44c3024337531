(* Claims layernorm.projection-decomposition (theorem projection_decomposition) and
   layernorm.two-dimensions (theorem two_dimensions, at the end); theorems/areas/layernorm.py.

   For x in R^d, with mean xbar = (1/d) sum_i x_i, centred vector (Px)_i = x_i - xbar
   (P = I - (1/d) 1 1^T), population standard deviation sigma(x) = sqrt((1/d) sum_i (Px)_i^2)
   and LayerNorm without affine parameters and epsilon = 0, LN(x)_i = (Px)_i / sigma(x):
   if Px <> 0 then
     LN(x) = sqrt d * Px / ||Px||,   1^T LN(x) = 0   and   ||LN(x)||^2 = d.
   Proved for every d (Px <> 0 forces d >= 2; the claim's d >= 2 is therefore implied) over
   any real closed field, so in particular over the reals. *)
From mathcomp Require Import ssreflect ssrfun ssrbool eqtype ssrnat seq fintype bigop.
From mathcomp Require Import order ssralg ssrnum.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section LayerNorm.
Variables (R : rcfType) (d : nat).
Local Notation vec := ('I_d -> R).

Definition mean (x : vec) : R := (\sum_i x i) / d%:R.
Definition center (x : vec) : vec := fun i => x i - mean x.           (* Px *)
Definition variance (x : vec) : R := (\sum_i center x i ^+ 2) / d%:R.
Definition sigma (x : vec) : R := Num.sqrt (variance x).
Definition layer_norm (x : vec) : vec := fun i => center x i / sigma x.
Definition norm (v : vec) : R := Num.sqrt (\sum_i v i ^+ 2).

Section Facts.
Variables (x : vec) (j : 'I_d).
Hypothesis nonconstant : center x j != 0.

Let d_gt0 : (0 < d)%N. Proof. by case: (d) j => [[]|]. Qed.
Let d_neq0 : d%:R != 0 :> R. Proof. by rewrite pnatr_eq0 -lt0n d_gt0. Qed.
Let d_gt0R : 0 < d%:R :> R. Proof. by rewrite ltr0n d_gt0. Qed.

Let sumsq_gt0 : 0 < \sum_i center x i ^+ 2.
Proof.
rewrite lt_neqAle sumr_ge0 ?andbT => [|i _]; last exact: sqr_ge0.
apply/negP => /eqP /esym zero.
have all0 := psumr_eq0P (P := xpredT) (F := fun i => center x i ^+ 2)
  (fun i _ => sqr_ge0 _) zero.
have := all0 j isT.
by move/eqP; rewrite sqrf_eq0 (negPf nonconstant).
Qed.

Let variance_gt0 : 0 < variance x.
Proof. by rewrite /variance divr_gt0. Qed.

Let sigma_neq0 : sigma x != 0.
Proof. by rewrite /sigma gt_eqF // sqrtr_gt0. Qed.

Lemma sum_center : \sum_i center x i = 0.
Proof.
rewrite /center sumrB sumr_const card_ord /mean -[(_ / _) *+ d]mulr_natr.
by rewrite divfK // subrr.
Qed.

Lemma sum_layer_norm : \sum_i layer_norm x i = 0.
Proof. by rewrite /layer_norm -mulr_suml sum_center mul0r. Qed.

Lemma sumsq_layer_norm : \sum_i layer_norm x i ^+ 2 = d%:R.
Proof.
under eq_bigr do rewrite /layer_norm expr_div_n.
rewrite -mulr_suml /sigma sqr_sqrtr ?ltW // /variance invf_div.
by rewrite mulrA mulrC mulrA mulVf ?mul1r // gt_eqF.
Qed.

Lemma decomposition i : layer_norm x i = Num.sqrt d%:R * center x i / norm (center x).
Proof.
have norm_eq : norm (center x) = sigma x * Num.sqrt d%:R.
  by rewrite /norm /sigma -sqrtrM ?ltW // /variance divfK.
have sqrtd_neq0 : Num.sqrt d%:R != 0 :> R by rewrite gt_eqF // sqrtr_gt0.
rewrite /layer_norm norm_eq invfM [(sigma x)^-1 * _]mulrC mulrA.
by rewrite (mulrAC (Num.sqrt d%:R)) divff // mul1r.
Qed.
End Facts.

Theorem projection_decomposition (x : vec) :
  (exists j, center x j != 0) ->
  [/\ forall i, layer_norm x i = Num.sqrt d%:R * center x i / norm (center x),
      \sum_i layer_norm x i = 0
    & \sum_i layer_norm x i ^+ 2 = d%:R].
Proof.
case=> j nonconstant; split; [exact: decomposition nonconstant | |].
  exact: sum_layer_norm x j.
exact: sumsq_layer_norm nonconstant.
Qed.
End LayerNorm.

(* Claim layernorm.two-dimensions: for x = (x_1, x_2) with x_1 <> x_2,
   LN(x) = sign(x_1 - x_2) (1, -1), with LN as above (here d = 2, indices 0 and 1). *)
Section TwoDimensions.
Variable R : rcfType.
Local Notation i0 := (ord0 : 'I_2).
Local Notation i1 := (ord_max : 'I_2).

Lemma sum2 (F : 'I_2 -> R) : \sum_i F i = F i0 + F i1.
Proof. by rewrite big_ord_recl big_ord_recl big_ord0 addr0; congr (_ + F _); apply: val_inj. Qed.

Theorem two_dimensions (x : 'I_2 -> R) : x i0 != x i1 ->
  layer_norm x i0 = Num.sg (x i0 - x i1) /\ layer_norm x i1 = - Num.sg (x i0 - x i1).
Proof.
move=> distinct.
have opp : center x i1 = - center x i0.
  by apply/eqP; rewrite -addr_eq0 addrC -sum2 (sum_center x i0).
have diff : x i0 - x i1 = center x i0 *+ 2.
  have e : center x i0 - center x i1 = x i0 - x i1 by rewrite /center opprB addrA subrK.
  by rewrite -e opp opprK mulr2n.
have nz : center x i0 != 0.
  by apply/eqP => c0; move: distinct; rewrite -subr_eq0 diff c0 mul0rn eqxx.
have ln1 : layer_norm x i1 = - layer_norm x i0 by rewrite /layer_norm opp mulNr.
have sq : layer_norm x i0 ^+ 2 = 1.
  have := sumsq_layer_norm nz; rewrite sum2 ln1 sqrrN -mulr2n => /eqP.
  have two : 2%:R != 0 :> R by rewrite pnatr_eq0.
  by move=> twice; apply: (mulIf two); rewrite mul1r mulr_natr; apply/eqP.
have sigma_gt0 : 0 < sigma x.
  rewrite lt_neqAle sqrtr_ge0 andbT eq_sym; apply/eqP => s0; move: sq.
  by rewrite /layer_norm s0 invr0 mulr0 expr0n /= => /eqP; rewrite eq_sym oner_eq0.
have unit : layer_norm x i0 = Num.sg (layer_norm x i0).
  by move/eqP: sq; rewrite sqrf_eq1 => /orP[] /eqP ->; rewrite ?sgr1 ?sgrN1.
have sign : layer_norm x i0 = Num.sg (x i0 - x i1).
  rewrite unit {1}/layer_norm sgrM sgrV (gtr0_sg sigma_gt0) mulr1 diff sgrMn /=.
  by rewrite mul1r.
by split; rewrite ?ln1 sign.
Qed.
End TwoDimensions.
