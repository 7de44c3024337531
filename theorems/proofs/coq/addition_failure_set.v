(* Claim addition.failure-set (theorems/areas/addition.py).

   Addends a, b with n_d digits D_p, D'_p (p = 0 least significant, each < 10), column sums
   s_p = D_p + D'_p (s_p = 0 out of range, in particular s_{n_d} = 0), MC1_p = [s_p >= 10],
   MS9_p = [s_p = 9], out-of-range terms false.  The algorithm answers the digits
     A_p = (s_p + MC1_{p-1} + [~MC1_{p-1} /\ MS9_{p-1} /\ MC1_{p-2}]) mod 10,  p = 0 .. n_d.
   Theorem failure_set: sum_p A_p 10^p <> a + b  iff  there is a p with s_p >= 10 and
   s_{p+1} = s_{p+2} = 9.  Proved for every n_d, by induction over the digit lists. *)
Require Import Arith Lia List.
Import ListNotations.

Definition column_sums (D D' : list nat) : list nat := map (fun '(x, y) => x + y) (combine D D').
Definition col (s : list nat) (p : nat) : nat := nth p s 0.                        (* s_p *)
Definition MC1 (s : list nat) (p : nat) : bool := 10 <=? col s p.
Definition MS9 (s : list nat) (p : nat) : bool := col s p =? 9.
Definition MC1_prev (s : list nat) (p : nat) : bool :=                          (* MC1_{p-1} *)
  match p with 0 => false | S q => MC1 s q end.
Definition MS9_prev (s : list nat) (p : nat) : bool :=                          (* MS9_{p-1} *)
  match p with 0 => false | S q => MS9 s q end.
Definition MC1_prev2 (s : list nat) (p : nat) : bool :=                         (* MC1_{p-2} *)
  match p with 0 | 1 => false | S (S r) => MC1 s r end.
Definition algorithm_digit (s : list nat) (p : nat) : nat :=
  (col s p + Nat.b2n (MC1_prev s p)
   + Nat.b2n (negb (MC1_prev s p) && MS9_prev s p && MC1_prev2 s p)) mod 10.

(* sum_{p < k} f(p) 10^p *)
Fixpoint value (f : nat -> nat) (k : nat) : nat :=
  match k with 0 => 0 | S q => value f q + f q * 10 ^ q end.
Definition number (D : list nat) : nat := value (fun p => nth p D 0) (length D).

(* --- arithmetic ------------------------------------------------------------------------- *)

Ltac divmod x := pose proof (Nat.div_mod_eq x 10); pose proof (Nat.mod_upper_bound x 10 ltac:(lia)).

Lemma place (a b x y P : nat) : a < P -> b < P -> a + x * P = b + y * P -> x = y /\ a = b.
Proof.
intros ha hb e. destruct (Nat.lt_trichotomy x y) as [lt|[eq|gt]].
- assert ((x + 1) * P <= y * P) by (apply Nat.mul_le_mono_r; lia). lia.
- subst; lia.
- assert ((y + 1) * P <= x * P) by (apply Nat.mul_le_mono_r; lia). lia.
Qed.

Lemma value_lt (f : nat -> nat) k : (forall p, f p < 10) -> value f k < 10 ^ k.
Proof.
intros digits; induction k as [|k IH]; simpl; [lia|].
specialize (digits k). assert (f k * 10 ^ k <= 9 * 10 ^ k) by (apply Nat.mul_le_mono_r; lia).
lia.
Qed.

Lemma value_unique (f g : nat -> nat) k : (forall p, f p < 10) -> (forall p, g p < 10) ->
  value f k = value g k <-> forall p, p < k -> f p = g p.
Proof.
intros df dg; induction k as [|k IH]; simpl.
{ split; [intros _ p hp; lia | reflexivity]. }
split.
- intros e p hp. destruct (place _ _ _ _ _ (value_lt f k df) (value_lt g k dg) e) as [top rest].
  destruct (Nat.eq_dec p k) as [->|ne]; [exact top|]. apply IH; [exact rest | lia].
- intros same. rewrite (proj2 IH (fun p hp => same p ltac:(lia))), (same k ltac:(lia)).
  reflexivity.
Qed.

Lemma value_ext (f g : nat -> nat) k : (forall p, p < k -> f p = g p) -> value f k = value g k.
Proof.
induction k; simpl; intros same; [easy|].
rewrite IHk by (intros; apply same; lia). rewrite same by lia. reflexivity.
Qed.

Lemma value_add (f g : nat -> nat) k : value f k + value g k = value (fun p => f p + g p) k.
Proof. induction k; simpl; [easy|]. rewrite <- IHk. lia. Qed.

(* --- the true carries ------------------------------------------------------------------- *)

Fixpoint carry (s : list nat) (p : nat) : nat :=
  match p with 0 => 0 | S q => (col s q + carry s q) / 10 end.

Definition true_digit (s : list nat) (p : nat) : nat := (col s p + carry s p) mod 10.

Section Sums.
Variable s : list nat.
Hypothesis bounded : forall p, col s p <= 18.

Lemma carry_le1 p : carry s p <= 1.
Proof.
induction p as [|q IH]; cbn [carry]; [lia|]. specialize (bounded q).
divmod (col s q + carry s q).
lia.
Qed.

Lemma carry_succ q : carry s (S q) = 1 <-> 10 <= col s q \/ (col s q = 9 /\ carry s q = 1).
Proof.
cbn [carry]. pose proof (carry_le1 q). specialize (bounded q). divmod (col s q + carry s q).
lia.
Qed.

(* full carry propagation: sum_{p<k} s_p 10^p = sum_{p<k} true digits + carry_k 10^k *)
Lemma propagation k : value (col s) k = value (true_digit s) k + carry s k * 10 ^ k.
Proof.
induction k as [|k IH]; cbn [value carry]; [lia|]. rewrite IH. unfold true_digit.
divmod (col s k + carry s k). rewrite Nat.pow_succ_r'.
assert (split : (col s k + carry s k) * 10 ^ k = col s k * 10 ^ k + carry s k * 10 ^ k)
  by ring.
set (x := col s k + carry s k) in *. set (P := 10 ^ k) in *.
assert (x * P = (x mod 10) * P + (x / 10) * (10 * P)) by (rewrite H at 1; ring). lia.
Qed.

(* the algorithm adds carry_in_p in {0, 1} to s_p *)
Definition carry_in (p : nat) : nat :=
  Nat.b2n (MC1_prev s p) + Nat.b2n (negb (MC1_prev s p) && MS9_prev s p && MC1_prev2 s p).

Lemma carry_in_succ q : carry_in (S q) = 1 <->
  10 <= col s q \/ (col s q = 9 /\ MC1_prev s q = true).
Proof.
unfold carry_in; cbn [MC1_prev MS9_prev MC1_prev2].
change (match q with 0 => false | S r => MC1 s r end) with (MC1_prev s q).
unfold MC1 at 1 2, MS9.
destruct (Nat.leb_spec 10 (col s q)); destruct (Nat.eqb_spec (col s q) 9);
  destruct (MC1_prev s q); simpl; intuition (try lia; try discriminate).
Qed.

Lemma carry_in_le1 p : carry_in p <= 1.
Proof.
unfold carry_in. destruct (MC1_prev s p), (MS9_prev s p), (MC1_prev2 s p); simpl; lia.
Qed.

Lemma carry_in_0 : carry_in 0 = 0.
Proof. reflexivity. Qed.

Definition cascade : Prop := exists p, 10 <= col s p /\ col s (p + 1) = 9 /\ col s (p + 2) = 9.

Lemma nines_after_carry p : carry s p = 1 -> col s p = 9 -> col s (S p) = 9 -> cascade.
Proof.
induction p as [|r IH]; intros c n0 n1; [discriminate|].
apply carry_succ in c as [big|[nine c]].
- exists r. replace (r + 1) with (S r) by lia. replace (r + 2) with (S (S r)) by lia. easy.
- exact (IH c nine n0).
Qed.

Lemma no_cascade_agrees : ~ cascade -> forall p, carry_in p = carry s p.
Proof.
intros none p. destruct p as [|q]; [reflexivity|].
pose proof (carry_in_le1 (S q)). pose proof (carry_le1 (S q)).
enough (carry_in (S q) = 1 <-> carry s (S q) = 1) by lia.
rewrite carry_in_succ, carry_succ.
enough (col s q = 9 -> (MC1_prev s q = true <-> carry s q = 1)) by intuition.
intros nine. destruct q as [|r].
- cbn. split; discriminate.
- cbn [MC1_prev]. unfold MC1. rewrite carry_succ. destruct (Nat.leb_spec 10 (col s r)); split; intros h.
  + now left.
  + reflexivity.
  + discriminate.
  + destruct h as [big|[nine' c]]; [lia|]. exfalso; apply none.
    exact (nines_after_carry r c nine' nine).
Qed.

Lemma cascade_disagrees p : 10 <= col s p -> col s (p + 1) = 9 -> col s (p + 2) = 9 ->
  carry_in (p + 3) <> carry s (p + 3).
Proof.
intros big n1 n2. replace (p + 1) with (S p) in n1 by lia.
replace (p + 2) with (S (S p)) in n2 by lia. replace (p + 3) with (S (S (S p))) by lia.
assert (c1 : carry s (S p) = 1) by (apply carry_succ; now left).
assert (c2 : carry s (S (S p)) = 1) by (apply carry_succ; now right).
assert (c3 : carry s (S (S (S p))) = 1) by (apply carry_succ; now right).
rewrite c3. intros e. apply carry_in_succ in e as [big'|[_ m]]; [lia|].
unfold MC1_prev, MC1 in m. apply Nat.leb_le in m. lia.
Qed.
End Sums.

Lemma col_beyond (s : list nat) p : length s <= p -> col s p = 0.
Proof. intros; unfold col; now apply nth_overflow. Qed.

Lemma cascade_dec (s : list nat) : {cascade s} + {~ cascade s}.
Proof.
set (test := fun p => ((10 <=? col s p) && (col s (p + 1) =? 9) && (col s (p + 2) =? 9))%bool).
assert (spec : forall p, test p = true <->
               10 <= col s p /\ col s (p + 1) = 9 /\ col s (p + 2) = 9).
{ intros p; unfold test. rewrite !Bool.andb_true_iff, Nat.leb_le, !Nat.eqb_eq. tauto. }
destruct (existsb test (seq 0 (length s))) eqn:found; [left | right].
- apply existsb_exists in found as [p [_ hp]]. exists p. now apply spec.
- intros [p hp]. pose proof hp as [_ [_ n2]].
  assert (p < length s).
  { destruct (Nat.lt_ge_cases (p + 2) (length s)); [lia|].
    rewrite col_beyond in n2 by lia; discriminate. }
  assert (yes : existsb test (seq 0 (length s)) = true).
  { apply existsb_exists. exists p. split; [apply in_seq; lia | apply spec; auto]. }
  congruence.
Qed.

(* --- the theorem ------------------------------------------------------------------------- *)

Lemma col_sums D D' p : length D = length D' ->
  col (column_sums D D') p = nth p D 0 + nth p D' 0.
Proof.
revert D' p; induction D as [|x D IH]; intros [|y D'] p len; simpl in *; try lia.
- destruct p; reflexivity.
- unfold col; simpl. destruct p as [|q]; [reflexivity|]. apply IH. lia.
Qed.

Lemma nth_digit (D : list nat) p : Forall (fun x => x < 10) D -> nth p D 0 < 10.
Proof.
intros all; revert p; induction all as [|x D hx _ IH]; intros [|q]; simpl; auto; lia.
Qed.


Theorem failure_set (nd : nat) (D D' : list nat) :
  length D = nd -> length D' = nd ->
  Forall (fun x => x < 10) D -> Forall (fun x => x < 10) D' ->
  let s := column_sums D D' in
  value (algorithm_digit s) (S nd) <> number D + number D' <->
  exists p, 10 <= col s p /\ col s (p + 1) = 9 /\ col s (p + 2) = 9.
Proof.
intros lD lD' dD dD' s.
assert (sums : forall p, col s p = nth p D 0 + nth p D' 0) by (intros; apply col_sums; lia).
assert (bounded : forall p, col s p <= 18).
{ intros p; rewrite sums. pose proof (nth_digit D p dD). pose proof (nth_digit D' p dD'). lia. }
assert (length s = nd) by (unfold s, column_sums; rewrite map_length, combine_length; lia).
(* a + b = sum_p s_p 10^p = sum_{p <= n_d} (true digit p) 10^p *)
assert (exact : number D + number D' = value (true_digit s) (S nd)).
{ unfold number; rewrite lD, lD', value_add.
  rewrite (value_ext _ (col s) nd) by (intros; now rewrite sums).
  rewrite propagation by exact bounded. cbn [value].
  assert (top : true_digit s nd = carry s nd).
  { unfold true_digit; rewrite (col_beyond s nd) by lia. pose proof (carry_le1 s bounded nd).
    apply Nat.mod_small; lia. }
  rewrite top. reflexivity. }
assert (agit : forall p, algorithm_digit s p = (col s p + carry_in s p) mod 10)
  by (intros; unfold algorithm_digit, carry_in; f_equal; lia).
rewrite exact, value_unique by (intros; apply Nat.mod_upper_bound; lia).
fold (cascade s). split.
- intros differ. destruct (cascade_dec s) as [yes|no]; [exact yes|]. exfalso; apply differ.
  intros p _. rewrite agit. unfold true_digit. now rewrite (no_cascade_agrees s bounded no p).
- intros [p [big [n1 n2]]] same.
  assert (p + 2 < nd) by (destruct (Nat.lt_ge_cases (p + 2) nd); [easy|];
                          rewrite col_beyond in n2 by lia; discriminate).
  specialize (same (p + 3) ltac:(lia)). rewrite agit in same. unfold true_digit in same.
  apply (cascade_disagrees s bounded p big n1 n2).
  pose proof (carry_in_le1 s (p + 3)). pose proof (carry_le1 s bounded (p + 3)).
  divmod (col s (p + 3) + carry_in s (p + 3)). divmod (col s (p + 3) + carry s (p + 3)). lia.
Qed.
