(* Claim induction-variants.dg-offset (theorems/areas/induction_variants/delay_copy.py).

   A sequence x : nat -> nat of tokens. A C pair at positions c1 < c2 = c1 + d_C (x c1 is the C
   token cC) follows m >= 1 source tokens s_k = x (c1 - m + k - 1), k = 1..m, with a token
   before them (c1 >= m + 1), and is followed by the paste: the target of paste step k, the
   token after position c2 + k - 1, is x (c2 + k) = s_k. The source tokens are data tokens, so
   s_m differs from the control token cC. The copier f_d reads f_d(i) = x (i - d - m).
   Theorem dg_offset:
   (1) every paste step k predicts at c2 + k - 1 the token at c1 - m + k - 1, and the offset
       (c2 + k - 1) - (c1 - m + k - 1) is d_C + m;
   (2) with d_C = d, f_d is right at every step: f_d (c2 + k - 1) = x (c2 + k);
   (3) with d_C = d + 1, f_d is wrong at step m: it reads x c1 = cC, not s_m;
   (4) with d_C = d - 1 (d >= 1), f_d is right at every step iff every s_k equals
       x (c1 - m - 1), i.e. x_{c1-m-1} = s_1 = ... = s_m.
   For every m, c1, d_C and every sequence; natural-number positions. The task's generator
   (R-task tokens between the C's, S pairs) is not modelled: only the positions the statement
   uses. *)
Require Import Arith Lia.

Section Offset.
Variables (x : nat -> nat) (cC m c1 dC : nat).
Definition c2 : nat := c1 + dC.
Definition s (k : nat) : nat := x (c1 - m + k - 1).
Definition copier (d i : nat) : nat := x (i - d - m).
Hypothesis source_after_a_token : m + 1 <= c1.
Hypothesis at_least_one : 1 <= m.
Hypothesis c_token : x c1 = cC.
Hypothesis data_source : s m <> cC.
Hypothesis paste : forall k, 1 <= k <= m -> x (c2 + k) = s k.

Theorem dg_offset :
  (forall k, 1 <= k <= m -> x (c2 + k) = x (c1 - m + k - 1) /\
                            (c2 + k - 1) - (c1 - m + k - 1) = dC + m) /\
  (forall d, dC = d -> forall k, 1 <= k <= m -> copier d (c2 + k - 1) = x (c2 + k)) /\
  (forall d, dC = d + 1 -> copier d (c2 + m - 1) = cC /\ copier d (c2 + m - 1) <> x (c2 + m)) /\
  (forall d, 1 <= d -> dC = d - 1 ->
     (forall k, 1 <= k <= m -> copier d (c2 + k - 1) = x (c2 + k)) <->
     (forall k, 1 <= k <= m -> s k = x (c1 - m - 1))).
Proof.
unfold copier, c2 in *. split; [|split; [|split]].
- intros k hk. split; [exact (paste k hk) | lia].
- intros d e k hk. rewrite paste by exact hk. unfold s. f_equal. lia.
- intros d e. rewrite paste by lia. replace (c1 + dC + m - 1 - d - m) with c1 by lia.
  split; [exact c_token | rewrite c_token; intro h; apply data_source; symmetry; exact h].
- intros d d1 e. split.
  + intros right k hk. induction k as [|k IH]; [lia|].
    destruct k as [|k].
    * specialize (right 1 hk). rewrite paste in right by exact hk. unfold s in *.
      replace (c1 + dC + 1 - 1 - d - m) with (c1 - m - 1) in right by lia. symmetry. exact right.
    * rewrite <- (IH ltac:(lia)). specialize (right (S (S k)) hk).
      rewrite paste in right by exact hk. unfold s in *.
      replace (c1 + dC + S (S k) - 1 - d - m) with (c1 - m + S k - 1) in right by lia.
      symmetry. exact right.
  + intros same k hk. rewrite paste by exact hk. destruct k as [|k]; [lia|].
    destruct k as [|k].
    * rewrite same by exact hk. f_equal. lia.
    * rewrite (same (S (S k)) hk). rewrite <- (same (S k) ltac:(lia)). unfold s. f_equal. lia.
Qed.
End Offset.
