(* Claims bilinear.tensor-identity, bilinear.symmetric-part and bilinear.quadratic-form
   (theorems/areas/bilinear.py).

   For W1, W2 in R^{h x d}, W_O in R^{o x h} and x in R^d the bilinear layer is
     f(x) = W_O ((W1 x) .* (W2 x)),
   with the interaction tensor B_{ajk} = sum_i (W_O)_{ai} (W1)_{ij} (W2)_{ik} and its symmetric
   part Bs_{ajk} = (B_{ajk} + B_{akj}) / 2.  Proved for every h, d, o, over any commutative ring
   (the tensor identity) or any numeric field (the claims that divide by 2), so in particular
   over the reals:
   - tensor_identity: f(x)_a = sum_{j,k} B_{ajk} x_j x_k, and with W_O = I, B_{ijk} = W1_ij W2_ik;
   - symmetric_part: sum_{j,k} Bs_{ajk} x_j x_k = f(x)_a, and B is determined by f only up to
     its antisymmetric part: a tensor T satisfies sum_{j,k} T_{ajk} x_j x_k = f(x)_a for all x
     and a iff its symmetric part is Bs;
   - quadratic_form: f(alpha x) = alpha^2 f(x) and f(x + y) - f(x) - f(y) = 2 Bs(x, y),
     with Bs(x, y)_a = sum_{j,k} Bs_{ajk} x_j y_k. *)
From mathcomp Require Import ssreflect ssrfun ssrbool eqtype ssrnat seq fintype bigop.
From mathcomp Require Import ssralg matrix ssrnum.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Bilinear.
Variables (R : comRingType) (h d o : nat).

(* f(x) = W_O ((W1 x) .* (W2 x)) *)
Definition layer (WO : 'M[R]_(o, h)) (W1 W2 : 'M[R]_(h, d)) (x : 'cV[R]_d) : 'cV[R]_o :=
  WO *m \col_i ((W1 *m x) i ord0 * (W2 *m x) i ord0).

(* B_{ajk} = sum_i (W_O)_{ai} (W1)_{ij} (W2)_{ik} *)
Definition tensor (WO : 'M[R]_(o, h)) (W1 W2 : 'M[R]_(h, d)) a j k : R :=
  \sum_i WO a i * W1 i j * W2 i k.

(* sum_{j,k} T_{ajk} x_j y_k *)
Definition contract (T : 'I_o -> 'I_d -> 'I_d -> R) (x y : 'cV[R]_d) a : R :=
  \sum_j \sum_k T a j k * x j ord0 * y k ord0.

Lemma layer_contract WO W1 W2 x y a :
  (WO *m \col_i ((W1 *m x) i ord0 * (W2 *m y) i ord0)) a ord0 = contract (tensor WO W1 W2) x y a.
Proof.
rewrite /contract /tensor mxE.
transitivity (\sum_i \sum_j \sum_k WO a i * (W1 i j * x j ord0) * (W2 i k * y k ord0)).
  apply: eq_bigr => i _; rewrite !mxE big_distrlr /= big_distrr /=.
  by apply: eq_bigr => j _; rewrite big_distrr /=; apply: eq_bigr => k _; rewrite mulrA.
rewrite exchange_big /=; apply: eq_bigr => j _.
rewrite exchange_big /=; apply: eq_bigr => k _.
rewrite !mulr_suml; apply: eq_bigr => i _.
by rewrite -!mulrA; congr (_ * (_ * _)); rewrite mulrCA.
Qed.

Theorem tensor_identity :
  (forall WO W1 W2 x a, layer WO W1 W2 x a ord0 = contract (tensor WO W1 W2) x x a) /\
  (forall (W1 W2 : 'M[R]_(h, d)) i j k,
      \sum_(l < h) (1%:M : 'M[R]_h) i l * W1 l j * W2 l k = W1 i j * W2 i k).
Proof.
split=> [WO W1 W2 x a|W1 W2 i j k]; first exact: layer_contract.
rewrite (bigD1 i) //= mxE eqxx mulr1n mul1r big1 ?addr0 // => l /negPf nil.
by rewrite mxE eq_sym nil mulr0n !mul0r.
Qed.
End Bilinear.

Section Symmetric.
Variables (R : numFieldType) (h d o : nat).
Local Notation tensor3 := ('I_o -> 'I_d -> 'I_d -> R).
Local Notation vec := 'cV[R]_d.

(* Bs_{ajk} = (T_{ajk} + T_{akj}) / 2 *)
Definition sym (T : tensor3) a j k : R := (T a j k + T a k j) / 2%:R.

Lemma contract_swap (T : tensor3) (x y : vec) a : contract (fun a j k => T a k j) x y a = contract T y x a.
Proof.
rewrite /contract exchange_big /=; apply: eq_bigr => j _; apply: eq_bigr => k _.
by rewrite mulrAC.
Qed.

Lemma contract_half (T U : tensor3) (x y : vec) a :
  contract (fun a j k => (T a j k + U a j k) / 2%:R) x y a =
  (contract T x y a + contract U x y a) / 2%:R.
Proof.
rewrite /contract -big_split mulr_suml; apply: eq_bigr => j _.
rewrite -big_split mulr_suml; apply: eq_bigr => k _.
by rewrite /= -!mulrDl -!mulrA; congr (_ * _); rewrite mulrC -mulrA.
Qed.

Lemma contractDl (T : tensor3) (x x' y : vec) a :
  contract T (x + x') y a = contract T x y a + contract T x' y a.
Proof.
rewrite /contract -big_split; apply: eq_bigr => j _; rewrite -big_split.
by apply: eq_bigr => k _; rewrite mxE mulrDr mulrDl.
Qed.

Lemma contractDr (T : tensor3) (x y y' : vec) a :
  contract T x (y + y') a = contract T x y a + contract T x y' a.
Proof.
rewrite /contract -big_split; apply: eq_bigr => j _; rewrite -big_split.
by apply: eq_bigr => k _; rewrite mxE mulrDr.
Qed.

Lemma half_double (c : R) : (c + c) / 2%:R = c.
Proof. by rewrite -mulr2n -[c *+ 2]mulr_natr mulfK // pnatr_eq0. Qed.

Lemma contract_sym (T : tensor3) (x : vec) a : contract (sym T) x x a = contract T x x a.
Proof. by rewrite /sym (contract_half T (fun a j k => T a k j)) contract_swap half_double. Qed.

Lemma contract_sym_swap (T : tensor3) (x y : vec) a :
  contract (sym T) y x a = contract (sym T) x y a.
Proof.
rewrite -(contract_swap (sym T) x y) /contract; apply: eq_bigr => j _; apply: eq_bigr => k _.
by rewrite /sym addrC.
Qed.

(* e_j^T T_a e_k = T_{ajk} *)
Lemma contract_delta (T : tensor3) a j k :
  contract T (delta_mx j ord0) (delta_mx k ord0) a = T a j k.
Proof.
rewrite /contract (bigD1 j) //= [X in _ + X]big1 => [|j' nj]; last first.
  by apply: big1 => k' _; rewrite [delta_mx j _ _ _]mxE (negPf nj) mulr0 mul0r.
rewrite addr0 (bigD1 k) //= [X in _ + X]big1 => [|k' nk]; last first.
  by rewrite [delta_mx k _ _ _]mxE (negPf nk) mulr0.
by rewrite !mxE !eqxx mulr1 mulr1 addr0.
Qed.

(* polarisation of a symmetric tensor's quadratic form *)
Lemma polarize (T : tensor3) (x y : vec) a :
  contract (sym T) (x + y) (x + y) a - contract (sym T) x x a - contract (sym T) y y a
  = 2%:R * contract (sym T) x y a.
Proof.
rewrite contractDl !contractDr (contract_sym_swap T x y) mulr_natl mulr2n.
set p := contract _ x x a; set q := contract _ x y a; set r := contract _ y y a.
by rewrite -addrA -opprD [p + q]addrC addrACA addrK.
Qed.

Lemma sym_determined (S U : tensor3) :
  (forall (x : vec) a, contract (sym S) x x a = contract (sym U) x x a) ->
  forall a j k, sym S a j k = sym U a j k.
Proof.
move=> same a j k; have two : 2%:R != 0 :> R by rewrite pnatr_eq0.
apply: (mulfI two); rewrite -(contract_delta (sym S)) -(contract_delta (sym U)) -!polarize.
by rewrite !same.
Qed.

(* The identity, and: a tensor T gives f (T(x, x) = f(x) for all x) iff its symmetric part is
   B's, i.e. B is determined by f only up to its antisymmetric part. *)
Theorem symmetric_part (WO : 'M[R]_(o, h)) (W1 W2 : 'M[R]_(h, d)) :
  (forall (x : vec) a, contract (sym (tensor WO W1 W2)) x x a = layer WO W1 W2 x a ord0) /\
  (forall T : tensor3, (forall (x : vec) a, contract T x x a = layer WO W1 W2 x a ord0) <->
                       (forall a j k, sym T a j k = sym (tensor WO W1 W2) a j k)).
Proof.
have fB (x : vec) a : contract (sym (tensor WO W1 W2)) x x a = layer WO W1 W2 x a ord0.
  by rewrite contract_sym /layer layer_contract.
split=> // T; split=> [fT|same x a].
  by apply: sym_determined => x a; rewrite !contract_sym fT -fB contract_sym.
rewrite -contract_sym -fB /contract; apply: eq_bigr => j _; apply: eq_bigr => k _.
by rewrite same.
Qed.

Theorem quadratic_form :
  (forall (WO : 'M[R]_(o, h)) (W1 W2 : 'M[R]_(h, d)) (alpha : R) (x : vec),
      layer WO W1 W2 (alpha *: x) = alpha ^+ 2 *: layer WO W1 W2 x) /\
  (forall (WO : 'M[R]_(o, h)) (W1 W2 : 'M[R]_(h, d)) (x y : vec) a,
      layer WO W1 W2 (x + y) a ord0 - layer WO W1 W2 x a ord0 - layer WO W1 W2 y a ord0
      = 2%:R * contract (sym (tensor WO W1 W2)) x y a).
Proof.
split=> [WO W1 W2 alpha x|WO W1 W2 x y a].
  rewrite /layer scalemxAr; congr (_ *m _); apply/matrixP => i j.
  by rewrite -!scalemxAr !mxE mulrACA -expr2.
rewrite /layer !layer_contract contractDl !contractDr /sym.
rewrite (contract_half (tensor WO W1 W2) (fun a j k => tensor WO W1 W2 a k j)).
rewrite (contract_swap (tensor WO W1 W2)).
rewrite [RHS]mulrC divfK ?pnatr_eq0 //.
by rewrite !addrA addrAC addrK -(addrA (contract _ x x a)) addrC addKr.
Qed.
End Symmetric.
