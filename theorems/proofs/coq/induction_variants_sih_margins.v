(* Claim induction-variants.sih-margins (theorems/areas/induction_variants/spatial_induction.py).

   For V >= 1, L >= 3, P >= 1: M_0 = ln P + 29, M = M_0 + 1, lambda = M/(3V),
   beta_t = (2 lambda V + M)/(1 - cos(2 pi/3)), beta_s = (2 lambda V + M)/(1 - cos(2 pi/L)).
   Theorem sih_margins: (i) 3 V lambda - M_0 >= 1, (ii) beta_t (1 - cos(2 pi/3))
   - lambda (2V - 1) - M_0 >= 1, (iii) beta_s (1 - cos(2 pi/L)) - lambda (V - 1) - M_0 >= 1,
   so each margin holds with slack at least 1. Here ln P is any lnP >= 0 (ln P >= 0 for
   P >= 1) and the two cosines are any ct, cs different from 1 (cos(2 pi/3) = -1/2, and
   cos(2 pi/L) < 1 for L >= 3 since 0 < 2 pi/L < 2 pi): the theorem holds for every such value,
   over any real field. The builder's float64 temperatures are not part of this theorem. *)
From mathcomp Require Import ssreflect ssrfun ssrbool eqtype ssrnat seq fintype bigop.
From mathcomp Require Import order ssralg ssrnum.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Margins.
Variables (R : realFieldType) (V : nat) (lnP ct cs : R).

Definition M0 : R := lnP + 29%:R.
Definition M : R := M0 + 1.
Definition lambda : R := M / (3 * V)%:R.
Definition beta_t : R := (2%:R * lambda * V%:R + M) / (1 - ct).
Definition beta_s : R := (2%:R * lambda * V%:R + M) / (1 - cs).

Theorem sih_margins : (0 < V)%N -> 0 <= lnP -> ct != 1 -> cs != 1 ->
  [/\ 3%:R * V%:R * lambda - M0 >= 1,
      beta_t * (1 - ct) - lambda * ((2 * V)%:R - 1) - M0 >= 1
    & beta_s * (1 - cs) - lambda * (V%:R - 1) - M0 >= 1].
Proof.
move=> V0 lnP0 ct1 cs1.
have M0pos : 0 <= M0 by rewrite addr_ge0 ?ler0n.
have Mpos : 0 < M by rewrite ltr_spaddr ?ltr01.
have l0 : 0 <= lambda by rewrite divr_ge0 ?ler0n ?ltW.
have three : 3%:R * V%:R * lambda = M.
  by rewrite /lambda -natrM mulrC divfK // pnatr_eq0 -lt0n muln_gt0.
have sub1 (c : R) : c != 1 -> (2%:R * lambda * V%:R + M) / (1 - c) * (1 - c)
                               = 2%:R * lambda * V%:R + M.
  by move=> c1; rewrite divfK // subr_eq0 eq_sym.
have slack (x : R) : 0 <= x -> 1 <= M + x - M0.
  by move=> x0; rewrite /M addrAC [M0 + 1]addrC addrK ler_addl.
have gap_t : 2%:R * lambda * V%:R + M - lambda * ((2 * V)%:R - 1) - M0 = M + lambda - M0.
  have -> : lambda * ((2 * V)%:R - 1) = 2%:R * lambda * V%:R - lambda.
    by rewrite natrM mulrBr mulr1 mulrA [lambda * _]mulrC.
  by congr (_ - _); rewrite opprB addrC addrA subrK addrC.
have gap_s : 2%:R * lambda * V%:R + M - lambda * (V%:R - 1) - M0
             = M + lambda * V%:R + lambda - M0.
  have -> : lambda * (V%:R - 1) = lambda * V%:R - lambda by rewrite mulrBr mulr1.
  congr (_ - _); rewrite -mulrA mulr_natl mulr2n opprB addrA.
  rewrite -[lambda * V%:R + lambda * V%:R + M]addrA addrAC.
  by rewrite [lambda * V%:R + (_ + M)]addrC addrK [lambda * V%:R + M]addrC.
split.
- by rewrite three /M addrAC subrr add0r.
- by rewrite /beta_t sub1 // gap_t slack.
- by rewrite /beta_s sub1 // gap_s -[M + lambda * V%:R + lambda]addrA slack // addr_ge0 // mulr_ge0 ?ler0n.
Qed.
End Margins.
