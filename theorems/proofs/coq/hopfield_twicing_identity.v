(* Claim hopfield.twicing-identity (theorems/areas/hopfield.py).

   Statement: for any A in R^{n x n} and V in R^{n x d_v},
     (2A - A^2) V = A V + A (V - A V).
   Proved here over any ring (so in particular the reals), for every n and d_v. *)
From mathcomp Require Import ssreflect ssrfun ssrbool eqtype ssrnat seq.
From mathcomp Require Import ssralg matrix.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory.
Local Open Scope ring_scope.

Theorem twicing_identity (R : ringType) (n dv : nat) (A : 'M[R]_n) (V : 'M[R]_(n, dv)) :
  (A *+ 2 - A *m A) *m V = A *m V + A *m (V - A *m V).
Proof.
by rewrite mulr2n mulmxBl mulmxDl mulmxDr mulmxN mulmxA addrA.
Qed.
