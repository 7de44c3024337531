(* Claim cot-and-looping.dyck-depth-head (theorems/areas/cot_and_looping/dyck.py), and the
   construction constructions.dyck.depth_trace_head proved correct end to end.

   Statement: prepend BOS to w in {brackets}^n, n <= N, and embed BOS as (1, 0), an open
   bracket as (0, 1) and a close as (0, -1). A causal head with constant scores returns
   (y_i, x_i) = (1, d_i)/(i+1) at position i, and the read-out l_c = 2c x_i - c^2 y_i,
   c in {-N..N}, satisfies l_{d_i} - l_c = (c - d_i)^2/(i+1) >= 1/(i+1) for c != d_i: the
   argmax is the depth d_i for every string, member or not.

   Notation: tokens are naturals, 0..k-1 open and every other token closes (the claim's
   brackets are 0..2k-1); d_i = #open - #close in w_1..w_i (depth); the stream holds BOS at
   position 0 and w_j at position j; softmax weights of the constant score s over positions
   0..i are e^s / sum_{j <= i} e^s (weight); y_i, x_i are the weighted sums of the stream's
   two coordinates (bos_at, sign_at). Coq standard-library reals (exp is the real
   exponential).

   Theorem depth_head: for every k, N, s, every w with |w| <= N and every 1 <= i <= |w|:
   y_i = 1/(i+1), x_i = d_i/(i+1), l_{d_i} - l_c = (c - d_i)^2/(i+1) for every integer c,
   l_c + 1/(i+1) <= l_{d_i} for every integer c != d_i, and -N <= d_i <= N (so d_i is a
   candidate and the unique argmax over {-N..N}).

   Theorem builder_depth_head: the same model with the builder's own weights, exported exactly
   (float64 -> Q) into the generated block below by theorems/proof_export.py from
   depth_trace_head(k=2, max_len=64): embedding rows, W_Q, W_K, read-out rows and the integer
   decode table depths. The model is the builder's forward in exact real arithmetic:
   h_j = embed[stream_j], q = h W_Q^T, k = h W_K^T, scores q_i . k_j, causal softmax with the
   real exp, mixed_i = sum_j a_ij h_j, logits_i = mixed_i readout^T. For every word over the
   2k bracket tokens with |w| <= N and every position 1 <= i <= |w|, there is a class c* with
   depths[c*] = d_i whose logit exceeds every other class's by at least 1/(i+1): the argmax,
   decoded, is the depth. The proof checks the exported weights by computation (exact
   rationals, vm_compute): all scores equal, embed readout^T has the rows (-D_c^2), (2 D_c),
   (-2 D_c) for BOS, opens and closes, and D_c = depths[c] = c - N. A change to the builder's
   weights makes that computation, and so the proof, fail. What lies between this exact model
   and the float64 forward (rounding) is bounded in theorems/docs/proof-trust.md. *)
Require Import Reals Lra Lia List ZArith QArith Qreals.
Import ListNotations.
Open Scope R_scope.

Fixpoint rsum (n : nat) (f : nat -> R) : R :=
  match n with O => 0 | S m => rsum m f + f m end.

Lemma rsum_ext n f g : (forall j, (j < n)%nat -> f j = g j) -> rsum n f = rsum n g.
Proof.
induction n as [|n IH]; intros e; simpl; [reflexivity|].
rewrite IH, e; [reflexivity | lia | intros j lt; apply e; lia].
Qed.

Lemma rsum_const n c : rsum n (fun _ => c) = INR n * c.
Proof. induction n as [|n IH]; cbn [rsum]; [simpl; ring | rewrite IH, S_INR; ring]. Qed.

Lemma rsum_scal n c f : rsum n (fun j => c * f j) = c * rsum n f.
Proof. induction n as [|n IH]; simpl; [ring | rewrite IH; ring]. Qed.

Lemma rsum_swap n m (f : nat -> nat -> R) (g : nat -> R) :
  rsum n (fun a => rsum m (fun j => f j a) * g a) = rsum m (fun j => rsum n (fun a => f j a * g a)).
Proof.
revert m; induction n as [|n IH]; intros m; simpl.
- induction m as [|m IHm]; simpl; [reflexivity | rewrite <- IHm; ring].
- rewrite IH. clear IH. induction m as [|m IHm]; simpl; [ring|].
  rewrite <- IHm. ring.
Qed.

(* --- the task: brackets, depths ---------------------------------------------------------- *)
Section Depth.
Variable k : nat.  (* bracket types: tokens 0..k-1 open, k..2k-1 close *)

Definition step (t : nat) : Z := if Nat.ltb t k then 1%Z else (-1)%Z.

(* d_i = #open - #close in the prefix w_1 .. w_i *)
Fixpoint depth (w : list nat) (i : nat) : Z :=
  match i with O => 0%Z | S j => (depth w j + step (nth j w 0%nat))%Z end.

Lemma depth_bound w i : (- Z.of_nat i <= depth w i <= Z.of_nat i)%Z.
Proof. induction i as [|i IH]; simpl; [lia|]. unfold step. destruct (Nat.ltb _ k); lia. Qed.

(* The stream BOS, w_1 .. w_n: position j >= 1 holds w_j. Coordinates (bos, sign). *)
Definition bos_at (j : nat) : R := match j with O => 1 | S _ => 0 end.
Definition sign_at (w : list nat) (j : nat) : R :=
  match j with O => 0 | S j' => IZR (step (nth j' w 0%nat)) end.

Lemma sum_bos i (f : nat -> R) : rsum (S i) (fun j => f j * bos_at j) = f O.
Proof.
induction i as [|i IH]; simpl in *; [ring|]. rewrite IH. ring.
Qed.

Lemma sum_sign w i : rsum (S i) (fun j => sign_at w j) = IZR (depth w i).
Proof.
induction i as [|i IH]; simpl in *; [ring|]. rewrite IH, plus_IZR. ring.
Qed.

(* The read-out l_c = 2 c x - c^2 y over integer candidates c. *)
Definition ell (x y : R) (c : Z) : R := 2 * IZR c * x - IZR c ^ 2 * y.

Lemma ell_uniform (d c : Z) (n : R) : n <> 0 ->
  ell (IZR d / n) (/ n) c = (2 * IZR c * IZR d - IZR c ^ 2) / n.
Proof. intros nz. unfold ell. field. exact nz. Qed.

Lemma margin (d c : Z) (n : R) : 0 < n ->
  ell (IZR d / n) (/ n) d - ell (IZR d / n) (/ n) c = IZR ((c - d) ^ 2) / n.
Proof.
intros pos. rewrite !ell_uniform by lra. rewrite Z.pow_2_r, mult_IZR, minus_IZR. field. lra.
Qed.

Lemma margin_pos (d c : Z) (n : R) : 0 < n -> c <> d ->
  ell (IZR d / n) (/ n) c + / n <= ell (IZR d / n) (/ n) d.
Proof.
intros pos ne. assert (m := margin d c n pos).
assert (sq : (1 <= (c - d) ^ 2)%Z) by nia.
apply IZR_le in sq.
assert (/ n <= IZR ((c - d) ^ 2) / n).
{ unfold Rdiv. rewrite <- (Rmult_1_l (/ n)) at 1. apply Rmult_le_compat_r;
  [apply Rlt_le, Rinv_0_lt_compat; exact pos | exact sq]. }
lra.
Qed.

(* The head: constant scores s give softmax weights e^s / sum_{j' <= i} e^s. *)
Definition weight (s : R) (i : nat) : R := exp s / rsum (S i) (fun _ => exp s).

Lemma weight_uniform s i : weight s i = / INR (S i).
Proof.
unfold weight. rewrite rsum_const.
assert (e := exp_pos s). assert (n := lt_0_INR (S i) ltac:(lia)).
field. split; lra.
Qed.

Theorem depth_head (N : nat) (w : list nat) (s : R) (i : nat) :
  (length w <= N)%nat -> (1 <= i <= length w)%nat ->
  let y := rsum (S i) (fun j => weight s i * bos_at j) in
  let x := rsum (S i) (fun j => weight s i * sign_at w j) in
  let d := depth w i in
  y = / INR (S i) /\ x = IZR d / INR (S i) /\
  (forall c : Z, ell x y d - ell x y c = IZR ((c - d) ^ 2) / INR (S i)) /\
  (forall c : Z, c <> d -> ell x y c + / INR (S i) <= ell x y d) /\
  (- Z.of_nat N <= d <= Z.of_nat N)%Z.
Proof.
intros len pos y x d.
assert (hy : y = / INR (S i)).
{ unfold y. rewrite (sum_bos i (fun _ => weight s i)). apply weight_uniform. }
assert (hx : x = IZR d / INR (S i)).
{ unfold x. rewrite rsum_scal, sum_sign, weight_uniform. unfold d, Rdiv. ring. }
assert (n0 : 0 < INR (S i)) by (apply lt_0_INR; lia).
rewrite hy, hx. repeat split; [intros c; apply margin; exact n0
  | intros c ne; apply margin_pos; assumption | |];
  pose proof (depth_bound w i); unfold d; lia.
Qed.
End Depth.

(* --- the builder's weights --------------------------------------------------------------- *)
Open Scope Q_scope.
(* BEGIN GENERATED by theorems/proof_export.py: do not edit by hand *)
(* constructions.dyck.depth_trace_head(k=2, max_len=64), float64 buffers read exactly *)
Definition builder_k : nat := 2.
Definition builder_N : nat := 64.
Definition vocab : nat := 5.
Definition dmodel : nat := 2.
Definition dhead : nat := 1.
Definition nclasses : nat := 129.
Definition embed_rows : list (list Q) :=
  [[(0 # 1); (1 # 1)];
   [(0 # 1); (1 # 1)];
   [(0 # 1); (-1 # 1)];
   [(0 # 1); (-1 # 1)];
   [(1 # 1); (0 # 1)]].
Definition WQ_rows : list (list Q) :=
  [[(0 # 1); (0 # 1)]].
Definition WK_rows : list (list Q) :=
  [[(0 # 1); (0 # 1)]].
Definition readout_rows : list (list Q) :=
  [[(-4096 # 1); (-128 # 1)];
   [(-3969 # 1); (-126 # 1)];
   [(-3844 # 1); (-124 # 1)];
   [(-3721 # 1); (-122 # 1)];
   [(-3600 # 1); (-120 # 1)];
   [(-3481 # 1); (-118 # 1)];
   [(-3364 # 1); (-116 # 1)];
   [(-3249 # 1); (-114 # 1)];
   [(-3136 # 1); (-112 # 1)];
   [(-3025 # 1); (-110 # 1)];
   [(-2916 # 1); (-108 # 1)];
   [(-2809 # 1); (-106 # 1)];
   [(-2704 # 1); (-104 # 1)];
   [(-2601 # 1); (-102 # 1)];
   [(-2500 # 1); (-100 # 1)];
   [(-2401 # 1); (-98 # 1)];
   [(-2304 # 1); (-96 # 1)];
   [(-2209 # 1); (-94 # 1)];
   [(-2116 # 1); (-92 # 1)];
   [(-2025 # 1); (-90 # 1)];
   [(-1936 # 1); (-88 # 1)];
   [(-1849 # 1); (-86 # 1)];
   [(-1764 # 1); (-84 # 1)];
   [(-1681 # 1); (-82 # 1)];
   [(-1600 # 1); (-80 # 1)];
   [(-1521 # 1); (-78 # 1)];
   [(-1444 # 1); (-76 # 1)];
   [(-1369 # 1); (-74 # 1)];
   [(-1296 # 1); (-72 # 1)];
   [(-1225 # 1); (-70 # 1)];
   [(-1156 # 1); (-68 # 1)];
   [(-1089 # 1); (-66 # 1)];
   [(-1024 # 1); (-64 # 1)];
   [(-961 # 1); (-62 # 1)];
   [(-900 # 1); (-60 # 1)];
   [(-841 # 1); (-58 # 1)];
   [(-784 # 1); (-56 # 1)];
   [(-729 # 1); (-54 # 1)];
   [(-676 # 1); (-52 # 1)];
   [(-625 # 1); (-50 # 1)];
   [(-576 # 1); (-48 # 1)];
   [(-529 # 1); (-46 # 1)];
   [(-484 # 1); (-44 # 1)];
   [(-441 # 1); (-42 # 1)];
   [(-400 # 1); (-40 # 1)];
   [(-361 # 1); (-38 # 1)];
   [(-324 # 1); (-36 # 1)];
   [(-289 # 1); (-34 # 1)];
   [(-256 # 1); (-32 # 1)];
   [(-225 # 1); (-30 # 1)];
   [(-196 # 1); (-28 # 1)];
   [(-169 # 1); (-26 # 1)];
   [(-144 # 1); (-24 # 1)];
   [(-121 # 1); (-22 # 1)];
   [(-100 # 1); (-20 # 1)];
   [(-81 # 1); (-18 # 1)];
   [(-64 # 1); (-16 # 1)];
   [(-49 # 1); (-14 # 1)];
   [(-36 # 1); (-12 # 1)];
   [(-25 # 1); (-10 # 1)];
   [(-16 # 1); (-8 # 1)];
   [(-9 # 1); (-6 # 1)];
   [(-4 # 1); (-4 # 1)];
   [(-1 # 1); (-2 # 1)];
   [(0 # 1); (0 # 1)];
   [(-1 # 1); (2 # 1)];
   [(-4 # 1); (4 # 1)];
   [(-9 # 1); (6 # 1)];
   [(-16 # 1); (8 # 1)];
   [(-25 # 1); (10 # 1)];
   [(-36 # 1); (12 # 1)];
   [(-49 # 1); (14 # 1)];
   [(-64 # 1); (16 # 1)];
   [(-81 # 1); (18 # 1)];
   [(-100 # 1); (20 # 1)];
   [(-121 # 1); (22 # 1)];
   [(-144 # 1); (24 # 1)];
   [(-169 # 1); (26 # 1)];
   [(-196 # 1); (28 # 1)];
   [(-225 # 1); (30 # 1)];
   [(-256 # 1); (32 # 1)];
   [(-289 # 1); (34 # 1)];
   [(-324 # 1); (36 # 1)];
   [(-361 # 1); (38 # 1)];
   [(-400 # 1); (40 # 1)];
   [(-441 # 1); (42 # 1)];
   [(-484 # 1); (44 # 1)];
   [(-529 # 1); (46 # 1)];
   [(-576 # 1); (48 # 1)];
   [(-625 # 1); (50 # 1)];
   [(-676 # 1); (52 # 1)];
   [(-729 # 1); (54 # 1)];
   [(-784 # 1); (56 # 1)];
   [(-841 # 1); (58 # 1)];
   [(-900 # 1); (60 # 1)];
   [(-961 # 1); (62 # 1)];
   [(-1024 # 1); (64 # 1)];
   [(-1089 # 1); (66 # 1)];
   [(-1156 # 1); (68 # 1)];
   [(-1225 # 1); (70 # 1)];
   [(-1296 # 1); (72 # 1)];
   [(-1369 # 1); (74 # 1)];
   [(-1444 # 1); (76 # 1)];
   [(-1521 # 1); (78 # 1)];
   [(-1600 # 1); (80 # 1)];
   [(-1681 # 1); (82 # 1)];
   [(-1764 # 1); (84 # 1)];
   [(-1849 # 1); (86 # 1)];
   [(-1936 # 1); (88 # 1)];
   [(-2025 # 1); (90 # 1)];
   [(-2116 # 1); (92 # 1)];
   [(-2209 # 1); (94 # 1)];
   [(-2304 # 1); (96 # 1)];
   [(-2401 # 1); (98 # 1)];
   [(-2500 # 1); (100 # 1)];
   [(-2601 # 1); (102 # 1)];
   [(-2704 # 1); (104 # 1)];
   [(-2809 # 1); (106 # 1)];
   [(-2916 # 1); (108 # 1)];
   [(-3025 # 1); (110 # 1)];
   [(-3136 # 1); (112 # 1)];
   [(-3249 # 1); (114 # 1)];
   [(-3364 # 1); (116 # 1)];
   [(-3481 # 1); (118 # 1)];
   [(-3600 # 1); (120 # 1)];
   [(-3721 # 1); (122 # 1)];
   [(-3844 # 1); (124 # 1)];
   [(-3969 # 1); (126 # 1)];
   [(-4096 # 1); (128 # 1)]].
Definition depths_table : list Z := [(-64); (-63); (-62); (-61); (-60); (-59); (-58); (-57); (-56); (-55); (-54); (-53); (-52); (-51); (-50); (-49); (-48); (-47); (-46); (-45); (-44); (-43); (-42); (-41); (-40); (-39); (-38); (-37); (-36); (-35); (-34); (-33); (-32); (-31); (-30); (-29); (-28); (-27); (-26); (-25); (-24); (-23); (-22); (-21); (-20); (-19); (-18); (-17); (-16); (-15); (-14); (-13); (-12); (-11); (-10); (-9); (-8); (-7); (-6); (-5); (-4); (-3); (-2); (-1); (0); (1); (2); (3); (4); (5); (6); (7); (8); (9); (10); (11); (12); (13); (14); (15); (16); (17); (18); (19); (20); (21); (22); (23); (24); (25); (26); (27); (28); (29); (30); (31); (32); (33); (34); (35); (36); (37); (38); (39); (40); (41); (42); (43); (44); (45); (46); (47); (48); (49); (50); (51); (52); (53); (54); (55); (56); (57); (58); (59); (60); (61); (62); (63); (64)]%Z.
(* END GENERATED *)
Close Scope Q_scope.

Section Builder.
Open Scope R_scope.

Definition entryQ (rows : list (list Q)) (i j : nat) : Q := nth j (nth i rows []) 0%Q.
Definition entry (rows : list (list Q)) (i j : nat) : R := Q2R (entryQ rows i j).
Definition bos_token : nat := (2 * builder_k)%nat.

(* The forward pass in exact real arithmetic, on the stream BOS, w_1 .. w_n. *)
Definition stream (w : list nat) (j : nat) : nat :=
  match j with O => bos_token | S j' => nth j' w 0%nat end.
Definition query_of (t b : nat) : R := rsum dmodel (fun a => entry embed_rows t a * entry WQ_rows b a).
Definition key_of (t b : nat) : R := rsum dmodel (fun a => entry embed_rows t a * entry WK_rows b a).
Definition score (t t' : nat) : R := rsum dhead (fun b => query_of t b * key_of t' b).
Definition attn (w : list nat) (i j : nat) : R :=
  exp (score (stream w i) (stream w j))
  / rsum (S i) (fun j' => exp (score (stream w i) (stream w j'))).
Definition mixed (w : list nat) (i a : nat) : R :=
  rsum (S i) (fun j => attn w i j * entry embed_rows (stream w j) a).
Definition logit (w : list nat) (i c : nat) : R :=
  rsum dmodel (fun a => mixed w i a * entry readout_rows c a).

(* --- the same sums in Q, computed, and their images in R ------------------------------- *)
Fixpoint qsum (n : nat) (f : nat -> Q) : Q :=
  match n with O => 0%Q | S m => (qsum m f + f m)%Q end.

Lemma Q2R_qsum n f : Q2R (qsum n f) = rsum n (fun j => Q2R (f j)).
Proof.
induction n as [|n IH]; simpl; [unfold Q2R; simpl; field|].
rewrite Q2R_plus, IH. reflexivity.
Qed.

Definition scoreQ (t t' : nat) : Q :=
  qsum dhead (fun b => qsum dmodel (fun a => entryQ embed_rows t a * entryQ WQ_rows b a)
                     * qsum dmodel (fun a => entryQ embed_rows t' a * entryQ WK_rows b a))%Q.
Definition rowQ (t c : nat) : Q :=
  qsum dmodel (fun a => entryQ embed_rows t a * entryQ readout_rows c a)%Q.
Definition DQ (c : nat) : Z := nth c depths_table 0%Z.
Definition expectedQ (t c : nat) : Q :=
  (if Nat.eqb t bos_token then - (inject_Z (DQ c) * inject_Z (DQ c))
   else if Nat.ltb t builder_k then 2 * inject_Z (DQ c) else - (2 * inject_Z (DQ c)))%Q.

Lemma score_Q t t' : score t t' = Q2R (scoreQ t t').
Proof.
unfold score, scoreQ. rewrite Q2R_qsum. apply rsum_ext. intros b _.
rewrite Q2R_mult, !Q2R_qsum. f_equal; apply rsum_ext; intros a _; now rewrite Q2R_mult.
Qed.

Lemma row_Q t c : rsum dmodel (fun a => entry embed_rows t a * entry readout_rows c a)
                  = Q2R (rowQ t c).
Proof. unfold rowQ. rewrite Q2R_qsum. apply rsum_ext. intros a _. now rewrite Q2R_mult. Qed.

Lemma forallb_seq (p : nat -> bool) n : forallb p (seq 0 n) = true -> forall j, (j < n)%nat -> p j = true.
Proof. intros h j lt. apply (proj1 (forallb_forall p (seq 0 n)) h). apply in_seq. lia. Qed.

Lemma Q2R_inject_Z z : Q2R (inject_Z z) = IZR z.
Proof. unfold Q2R, inject_Z. simpl. field. Qed.

Lemma Q2R_two : Q2R 2 = 2.
Proof. unfold Q2R. simpl. field. Qed.

Lemma expected_R (c : nat) (w : list nat) (j : nat) :
  Forall (fun t => (t < 2 * builder_k)%nat) w -> (j <= length w)%nat ->
  Q2R (expectedQ (stream w j) c)
  = 2 * IZR (DQ c) * sign_at builder_k w j - IZR (DQ c) ^ 2 * bos_at j.
Proof.
intros tokens len. unfold expectedQ, stream, sign_at, bos_at, step.
destruct j as [|j].
- rewrite Nat.eqb_refl, Q2R_opp, Q2R_mult, !Q2R_inject_Z. ring.
- assert (lt : (nth j w 0%nat < 2 * builder_k)%nat).
  { apply (proj1 (Forall_forall _ w) tokens). apply nth_In. lia. }
  assert (ne : Nat.eqb (nth j w 0%nat) bos_token = false) by (apply Nat.eqb_neq; unfold bos_token; lia).
  rewrite ne. destruct (Nat.ltb (nth j w 0%nat) builder_k).
  + rewrite Q2R_mult, Q2R_inject_Z, Q2R_two. ring.
  + rewrite Q2R_opp, Q2R_mult, Q2R_inject_Z, Q2R_two. ring.
Qed.

Theorem builder_depth_head (w : list nat) (i : nat) :
  Forall (fun t => (t < 2 * builder_k)%nat) w -> (length w <= builder_N)%nat ->
  (1 <= i <= length w)%nat ->
  exists cstar, (cstar < nclasses)%nat /\ nth cstar depths_table 0%Z = depth builder_k w i /\
    forall c, (c < nclasses)%nat -> c <> cstar -> logit w i c + / INR (S i) <= logit w i cstar.
Proof.
intros tokens len pos.
(* the exported weights, checked by computation *)
assert (sizes : vocab = S bos_token /\ nclasses = S (2 * builder_N)) by (split; vm_compute; reflexivity).
assert (scores : forallb (fun t => forallb (fun t' => Qeq_bool (scoreQ t t') (scoreQ 0 0))
                                           (seq 0 vocab)) (seq 0 vocab) = true)
  by (vm_compute; reflexivity).
assert (rows : forallb (fun t => forallb (fun c => Qeq_bool (rowQ t c) (expectedQ t c))
                                         (seq 0 nclasses)) (seq 0 vocab) = true)
  by (vm_compute; reflexivity).
assert (table : forallb (fun c => Z.eqb (DQ c) (Z.of_nat c - Z.of_nat builder_N))
                        (seq 0 nclasses) = true) by (vm_compute; reflexivity).
destruct sizes as [vsize csize].
set (d := depth builder_k w i).
assert (db := depth_bound builder_k w i). fold d in db.
assert (instream : forall j, (j <= i)%nat -> (stream w j < vocab)%nat).
{ intros j le. rewrite vsize. destruct j as [|j]; simpl; [unfold bos_token; lia|].
  assert (lt : (nth j w 0%nat < 2 * builder_k)%nat).
  { apply (proj1 (Forall_forall _ w) tokens). apply nth_In. lia. }
  unfold bos_token. lia. }
(* uniform attention *)
assert (uniform : forall j, (j <= i)%nat -> attn w i j = / INR (S i)).
{ intros j le. unfold attn.
  assert (same : forall j', (j' <= i)%nat ->
            score (stream w i) (stream w j') = Q2R (scoreQ 0 0)).
  { intros j' le'. rewrite score_Q. apply Qeq_eqR, Qeq_bool_iff.
    apply (forallb_seq _ vocab (forallb_seq _ vocab scores _ (instream i (le_n i))) _).
    apply instream; lia. }
  rewrite same by lia. rewrite (rsum_ext (S i) _ (fun _ => exp (Q2R (scoreQ 0 0)))).
  - exact (weight_uniform (Q2R (scoreQ 0 0)) i).
  - intros j' lt. rewrite same by lia. reflexivity. }
(* the logits: l_c = (2 D_c d - D_c^2)/(i+1) *)
assert (logits : forall c, (c < nclasses)%nat ->
          logit w i c = ell (IZR d / INR (S i)) (/ INR (S i)) (DQ c)).
{ intros c lt. unfold logit, mixed.
  rewrite rsum_swap.
  rewrite (rsum_ext (S i) _ (fun j => / INR (S i) * Q2R (rowQ (stream w j) c))).
  2: { intros j lt'. rewrite uniform by lia. rewrite <- row_Q, <- rsum_scal.
       apply rsum_ext. intros a _. ring. }
  rewrite rsum_scal.
  rewrite (rsum_ext (S i) _ (fun j => 2 * IZR (DQ c) * sign_at builder_k w j
                                     - IZR (DQ c) ^ 2 * bos_at j)).
  2: { intros j lt'. rewrite <- expected_R by (assumption || lia). apply Qeq_eqR, Qeq_bool_iff.
       apply (forallb_seq _ nclasses (forallb_seq _ vocab rows _ (instream j ltac:(lia))) c lt). }
  assert (split : forall n (f g : nat -> R), rsum n (fun j => f j - g j) = rsum n f - rsum n g).
  { induction n as [|n IH]; intros f g; simpl; [ring | rewrite IH; ring]. }
  rewrite split, (rsum_scal (S i) (2 * IZR (DQ c)) (sign_at builder_k w)).
  rewrite (sum_bos i (fun _ => IZR (DQ c) ^ 2)), sum_sign. fold d.
  assert (n0 : 0 < INR (S i)) by (apply lt_0_INR; lia).
  unfold ell. field. lra. }
(* the decoded class c* = d + N, and the margin *)
assert (dN : (0 <= d + Z.of_nat builder_N)%Z) by lia.
exists (Z.to_nat (d + Z.of_nat builder_N)).
assert (clt : (Z.to_nat (d + Z.of_nat builder_N) < nclasses)%nat) by (rewrite csize; lia).
assert (tbl : forall c, (c < nclasses)%nat -> DQ c = (Z.of_nat c - Z.of_nat builder_N)%Z).
{ intros c lt. apply Z.eqb_eq. exact (forallb_seq _ nclasses table c lt). }
assert (dstar : DQ (Z.to_nat (d + Z.of_nat builder_N)) = d) by (rewrite tbl by exact clt; lia).
split; [exact clt | split; [exact dstar|]].
intros c lt ne. rewrite !logits by assumption. rewrite dstar.
assert (n0 : 0 < INR (S i)) by (apply lt_0_INR; lia).
apply margin_pos; [exact n0|]. rewrite tbl by exact lt. lia.
Qed.
End Builder.
