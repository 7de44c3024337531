(* Claim boltzmann.max-bounds (theorems/areas/boltzmann.py).

   For a = (a_1, .., a_n) in R^n (n >= 1) and an inverse temperature beta > 0, with
   p_i = e^{beta a_i} / sum_j e^{beta a_j} and boltz_beta(a) = sum_i a_i p_i:
     max_i a_i - ln(n) / beta <= boltz_beta(a) <= max_i a_i.
   The vector is a nonempty list, so this holds for every n; Coq standard-library reals. *)
Require Import Reals Lra Lia List.
Open Scope R_scope.

Fixpoint sum_list (f : R -> R) (l : list R) : R :=
  match l with nil => 0 | a :: t => f a + sum_list f t end.

(* max of a nonempty list (0 for the empty list, which the theorem excludes) *)
Definition max_list (l : list R) : R :=
  match l with nil => 0 | a :: t => fold_right Rmax a t end.

Definition boltz (beta : R) (l : list R) : R :=
  sum_list (fun a => a * exp (beta * a)) l / sum_list (fun a => exp (beta * a)) l.

(* --- lists ------------------------------------------------------------------------------ *)

Lemma fold_max_ge (b : R) (t : list R) :
  b <= fold_right Rmax b t /\ forall c, In c t -> c <= fold_right Rmax b t.
Proof.
induction t as [|e t [base IH]]; simpl.
- split; [lra | intros c []].
- split; [eapply Rle_trans; [exact base | apply Rmax_r]|].
  intros c [<-|inc]; [apply Rmax_l | eapply Rle_trans; [exact (IH c inc) | apply Rmax_r]].
Qed.

Lemma max_list_ge (l : list R) a : In a l -> a <= max_list l.
Proof.
destruct l as [|b t]; [intros []|]. simpl. destruct (fold_max_ge b t) as [base rest].
intros [<-|inc]; [exact base | exact (rest a inc)].
Qed.

Lemma max_list_in (l : list R) : l <> nil -> In (max_list l) l.
Proof.
destruct l as [|b t]; [easy|]. intros _. simpl.
induction t as [|e t IH]; simpl; [now left|].
destruct (Rle_dec e (fold_right Rmax b t)) as [le|gt].
- rewrite Rmax_right by exact le. destruct IH as [eq|inc]; [now left|]. right; now right.
- rewrite Rmax_left by lra. right; now left.
Qed.

Lemma sum_list_le (f g : R -> R) (l : list R) :
  (forall a, In a l -> f a <= g a) -> sum_list f l <= sum_list g l.
Proof.
induction l as [|a t IH]; simpl; intros le; [lra|].
apply Rplus_le_compat; [apply le; now left | apply IH; intros; apply le; now right].
Qed.

Lemma sum_list_pos (f : R -> R) (l : list R) :
  (forall a, 0 < f a) -> l <> nil -> 0 < sum_list f l.
Proof.
intros pos; induction l as [|a t IH]; [easy|]; intros _; simpl.
destruct t as [|b u]; simpl in *; [specialize (pos a); lra|].
specialize (pos a); assert (0 < f b + sum_list f u) by (apply IH; easy); lra.
Qed.

Lemma sum_list_member (f : R -> R) (l : list R) m :
  (forall a, 0 <= f a) -> In m l -> f m <= sum_list f l.
Proof.
intros nonneg; induction l as [|a t IH]; [easy|]; simpl; intros [<-|inc].
- assert (0 <= sum_list f t) by (clear IH; induction t; simpl; [lra|specialize (nonneg a0); lra]).
  lra.
- specialize (IH inc); specialize (nonneg a); lra.
Qed.

Lemma sum_list_const_sub (c : R) (f : R -> R) (l : list R) :
  sum_list (fun a => c * (f a - / INR (length l))) l = c * (sum_list f l - 1)
  \/ l = nil.
Proof.
destruct l as [|b t]; [now right|left].
assert (gen : forall k, sum_list (fun a => c * (f a - k)) (b :: t)
                        = c * (sum_list f (b :: t) - k * INR (length (b :: t)))).
{ intros k; generalize (b :: t); intros l; induction l as [|a u IH]; simpl; [ring|].
  rewrite IH. destruct (length u); simpl; ring. }
rewrite gen, Rinv_l; [ring|]. apply not_0_INR; simpl; easy.
Qed.

(* --- the logarithm ------------------------------------------------------------------------ *)

Lemma ln_ge_1_minus_inv (y : R) : 0 < y -> 1 - / y <= ln y.
Proof.
intros pos. pose proof (exp_ineq1_le (- ln y)) as ineq.
rewrite exp_Ropp, exp_ln in ineq by exact pos. lra.
Qed.

Lemma xlnx_bound (x k : R) : 0 < x -> 0 < k -> x - / k <= x * (ln x + ln k).
Proof.
intros px pk. rewrite <- ln_mult by assumption.
pose proof (ln_ge_1_minus_inv (x * k) (Rmult_lt_0_compat _ _ px pk)) as ineq.
apply Rmult_le_compat_l with (r := x) in ineq; [|lra].
replace (x * (1 - / (x * k))) with (x - / k) in ineq by (field; lra). exact ineq.
Qed.

(* --- the bounds --------------------------------------------------------------------------- *)

Theorem max_bounds (l : list R) (beta : R) :
  l <> nil -> 0 < beta ->
  max_list l - ln (INR (length l)) / beta <= boltz beta l <= max_list l.
Proof.
intros nonempty pbeta.
set (M := max_list l). set (n := INR (length l)).
set (Z := sum_list (fun a => exp (beta * a)) l).
set (N := sum_list (fun a => a * exp (beta * a)) l).
assert (pZ : 0 < Z) by (apply sum_list_pos; [intros; apply exp_pos | exact nonempty]).
assert (pn : 0 < n) by (unfold n; destruct l; [easy|]; apply lt_0_INR; simpl; lia).
unfold boltz; fold Z N. split.
- (* lower bound: sum_a e^{beta a} (beta (a - M) + ln n) >= 0 *)
  set (g := fun a => exp (beta * a) * (beta * (a - M) + ln n)).
  assert (lin : sum_list g l = beta * N - beta * M * Z + ln n * Z).
  { unfold g, N, Z; generalize M (ln n); intros c k; clear.
    induction l as [|a t IH]; simpl; [ring|]. rewrite IH; ring. }
  set (x := fun a => exp (beta * (a - M))).
  assert (pointwise : forall a, In a l -> exp (beta * M) * (x a - / n) <= g a).
  { intros a _. unfold g, x.
    replace (exp (beta * a)) with (exp (beta * M) * exp (beta * (a - M)))
      by (rewrite <- exp_plus; f_equal; ring).
    rewrite Rmult_assoc. apply Rmult_le_compat_l; [apply Rlt_le, exp_pos|].
    pose proof (xlnx_bound (exp (beta * (a - M))) n (exp_pos _) pn) as bound.
    rewrite ln_exp in bound; exact bound. }
  assert (ge1 : 1 <= sum_list x l).
  { replace 1 with (x M) by (unfold x; rewrite Rminus_diag_eq, Rmult_0_r, exp_0; reflexivity).
    apply sum_list_member; [intros; apply Rlt_le, exp_pos | apply max_list_in, nonempty]. }
  assert (g_nonneg : 0 <= sum_list g l).
  { eapply Rle_trans; [|exact (sum_list_le _ _ l pointwise)].
    destruct (sum_list_const_sub (exp (beta * M)) x l) as [sum | empty]; [|easy].
    fold n in sum; rewrite sum.
    apply Rmult_le_pos; [apply Rlt_le, exp_pos | lra]. }
  rewrite lin in g_nonneg.
  apply (Rmult_le_reg_r Z); [exact pZ|].
  replace (N / Z * Z) with N by (field; lra).
  apply (Rmult_le_reg_l beta); [exact pbeta|].
  replace (beta * ((M - ln n / beta) * Z)) with (beta * M * Z - ln n * Z) by (field; lra).
  lra.
- (* upper bound: every a_i <= M *)
  assert (le : N <= M * Z).
  { unfold N, Z. replace (M * sum_list (fun a => exp (beta * a)) l)
      with (sum_list (fun a => M * exp (beta * a)) l)
      by (generalize M; intros c; clear; induction l; simpl; [ring | rewrite IHl; ring]).
    apply sum_list_le; intros a inl. apply Rmult_le_compat_r; [apply Rlt_le, exp_pos|].
    apply max_list_ge, inl. }
  apply (Rmult_le_reg_r Z); [exact pZ|].
  replace (N / Z * Z) with N by (field; lra). exact le.
Qed.
