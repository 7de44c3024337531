(* Claim approximation.virtual-node-linear-attention (theorems/areas/approximation/virtual_node.py).

   Node features x in R^{n x d} (row x_i), q_i = x_i W_Q, k_j = x_j W_K (in R^{1 x d_k}),
   v_j = x_j W_V (in R^{1 x d_v}), and a feature map phi : R^{1 x d_k} -> R^{r x 1} (the claim
   asks for a positive one, e^{y W_phi} or ELU(y W_phi) + 1; the identity holds for every map).
   The virtual-node round: node j sends (phi(k_j) v_j, phi(k_j)); the virtual node sums them to
   S = sum_j phi(k_j) v_j and z = sum_j phi(k_j) and broadcasts them; node i outputs
   phi(q_i)^T S / phi(q_i)^T z plus the local edge messages msg i j of its neighbours j
   (E i j) with weight 0. Theorem virtual_node_round: for every edge set E and every message
   function, node i's output equals linear attention
   sum_j (phi(q_i)^T phi(k_j)) v_j / sum_j phi(q_i)^T phi(k_j), for every n, d, d_k, d_v, r,
   W_Q, W_K, W_V and phi, over any field (a zero denominator makes both sides 0). *)
From mathcomp Require Import ssreflect ssrfun ssrbool eqtype ssrnat seq fintype bigop.
From mathcomp Require Import ssralg matrix.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory.
Local Open Scope ring_scope.

Section VirtualNode.
Variables (R : fieldType) (n d dk dv r : nat).
Variables (x : 'M[R]_(n, d)) (WQ WK : 'M[R]_(d, dk)) (WV : 'M[R]_(d, dv)).
Variable phi : 'rV[R]_dk -> 'cV[R]_r.

Definition query i : 'rV[R]_dk := row i x *m WQ.
Definition key j : 'rV[R]_dk := row j x *m WK.
Definition value j : 'rV[R]_dv := row j x *m WV.

(* The virtual node's aggregates. *)
Definition S : 'M[R]_(r, dv) := \sum_(j < n) phi (key j) *m value j.
Definition z : 'cV[R]_r := \sum_(j < n) phi (key j).

(* Node i's output in the round: the broadcast read-out plus its edge messages, weight 0. *)
Definition round (E : 'I_n -> 'I_n -> bool) (msg : 'I_n -> 'I_n -> 'rV[R]_dv) i : 'rV[R]_dv :=
  (((phi (query i))^T *m z) ord0 ord0)^-1 *: ((phi (query i))^T *m S)
  + 0 *: \sum_(j < n | E i j) msg i j.

Definition kernel i j : R := ((phi (query i))^T *m phi (key j)) ord0 ord0.

Definition linear_attention i : 'rV[R]_dv :=
  (\sum_(j < n) kernel i j)^-1 *: \sum_(j < n) kernel i j *: value j.

Theorem virtual_node_round E msg i : round E msg i = linear_attention i.
Proof.
rewrite /round /linear_attention scale0r addr0 /z /S !mulmx_sumr summxE.
congr (_ *: _); apply: eq_bigr => j _.
by rewrite mulmxA /kernel -mul_scalar_mx -mx11_scalar.
Qed.
End VirtualNode.
