(* Claim training-dynamics.scan-snap-row-gauge (theorems/areas/training_dynamics/scan_snap.py).

   Tokens are natural numbers below the vocabulary size M; Z, Y : nat -> nat -> R are the
   matrices Z[m, l], Y[r, l]. A context x_1 .. x_{T-1} (a list) is followed by the query token
   m. The query's attention over the context is a_s = e^{Z[m, x_s]} / sum_{s'} e^{Z[m, x_s']}
   (attn), its output v = sum_s a_s e_{x_s} (v_l = the attention mass on the positions holding
   l), the normalised fhat = v / ||v|| (||v||^2 = sum_{l < M} v_l^2) and the next-token logits
   (Y fhat)_r = sum_{l < M} Y[r, l] fhat_l. shift Z m0 kappa adds kappa to row m0 of Z.
   Theorem row_gauge: for every row m0, constant kappa, query token m, context, M and Y, the
   attention pattern, and hence every logit (through fhat), is unchanged by the shift (for the
   query m = m0 because e^{z + kappa} = e^z e^kappa, for any other query trivially). Coq
   standard-library reals. The closing clause (rows compared only after centring) is the
   convention this justifies, not part of the theorem. *)
Require Import Reals Lra List.
Open Scope R_scope.

Definition shift (Z : nat -> nat -> R) (m0 : nat) (kappa : R) : nat -> nat -> R :=
  fun m l => if Nat.eqb m m0 then Z m l + kappa else Z m l.

Fixpoint total (Z : nat -> nat -> R) (m : nat) (ctx : list nat) : R :=
  match ctx with nil => 0 | x :: t => exp (Z m x) + total Z m t end.

Definition attn (Z : nat -> nat -> R) (m : nat) (ctx : list nat) : list R :=
  map (fun x => exp (Z m x) / total Z m ctx) ctx.

(* v_l: the attention mass on the context positions holding token l. *)
Fixpoint output (a : list R) (ctx : list nat) (l : nat) : R :=
  match a, ctx with
  | w :: a', x :: ctx' => (if Nat.eqb x l then w else 0) + output a' ctx' l
  | _, _ => 0
  end.

Fixpoint sum_below (M : nat) (f : nat -> R) : R :=
  match M with O => 0 | S k => sum_below k f + f k end.

Definition fhat (M : nat) (a : list R) (ctx : list nat) (l : nat) : R :=
  output a ctx l / sqrt (sum_below M (fun l' => output a ctx l' ^ 2)).

Definition logit (M : nat) (Y : nat -> nat -> R) (a : list R) (ctx : list nat) (r : nat) : R :=
  sum_below M (fun l => Y r l * fhat M a ctx l).

Lemma total_shift Z m0 kappa m ctx : Nat.eqb m m0 = true ->
  total (shift Z m0 kappa) m ctx = exp kappa * total Z m ctx.
Proof.
intros e. induction ctx as [|x t IH]; simpl; [ring|].
rewrite IH. unfold shift at 1. rewrite e, exp_plus. ring.
Qed.

Lemma total_other Z m0 kappa m ctx : Nat.eqb m m0 = false ->
  total (shift Z m0 kappa) m ctx = total Z m ctx.
Proof.
intros e. induction ctx as [|x t IH]; simpl; [ring|].
rewrite IH. unfold shift at 1. now rewrite e.
Qed.

Lemma total_pos Z m x t : 0 < total Z m (x :: t).
Proof.
simpl. induction t as [|y t IH]; simpl.
- rewrite Rplus_0_r. apply exp_pos.
- pose proof (exp_pos (Z m y)). pose proof (exp_pos (Z m x)). simpl in IH. lra.
Qed.

Theorem row_gauge (Z Y : nat -> nat -> R) (m0 : nat) (kappa : R) (m : nat) (ctx : list nat)
    (M : nat) :
  attn (shift Z m0 kappa) m ctx = attn Z m ctx /\
  forall r, logit M Y (attn (shift Z m0 kappa) m ctx) ctx r = logit M Y (attn Z m ctx) ctx r.
Proof.
assert (same : attn (shift Z m0 kappa) m ctx = attn Z m ctx).
{ unfold attn. destruct (Nat.eqb m m0) eqn:e.
  - rewrite (total_shift Z m0 kappa m ctx e).
    destruct ctx as [|x0 t]; [reflexivity|].
    assert (pos : 0 < total Z m (x0 :: t)) by apply total_pos.
    apply map_ext. intros x. unfold shift. rewrite e, exp_plus. field.
    split; apply Rgt_not_eq; [exact pos | apply exp_pos].
  - rewrite (total_other Z m0 kappa m ctx e). apply map_ext. intros x.
    unfold shift. now rewrite e. }
split; [exact same | intros r; now rewrite same].
Qed.
