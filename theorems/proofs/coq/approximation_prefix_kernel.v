(* Claim approximation.prefix-finite-summary (theorems/areas/approximation/prefix_attention.py).

   A query q in R^{1 x d}, keys K (row j is k_j) and values V (row j is v_j). The kernel
   kappa(q, k) = (c + tau q . k)^2 with c > 0, and the features
   phi(q) = (c, sqrt(2 c tau) q, tau vec(q^T q)), psi(k) = (c, sqrt(2 c tau) k, tau vec(k^T k))
   (1 + d + d^2 of them; vec is MathComp's row-major mxvec; q^T q is the outer product, the
   statement's q q^T for column vectors). sqrt(2 c tau) is real only for tau >= 0, which the
   theorem assumes (the scale tau of the scores is positive in the construction).
   NTK-Attention over a prefix P (rows KP, VP) and an input X (rows KX, VX):
     (sum_{j in X} kappa(q, k_j) v_j + phi(q) Z) / (sum_{j in X} kappa(q, k_j) + phi(q) kappa_P)
   with Z = sum_{p in P} psi(k_p)^T v_p, kappa_P = sum_{p in P} psi(k_p)^T; kernel attention
   over P u X (the rows of P stacked above those of X):
     sum_{j in P u X} kappa(q, k_j) v_j / sum_{j in P u X} kappa(q, k_j).
   Theorem finite_summary: phi(q) psi(k)^T = kappa(q, k) for every q, k, and NTK-Attention
   equals kernel attention, for every d, d_v, c > 0, tau >= 0, prefix and input (any sizes),
   over any real closed field (so over the reals). *)
From mathcomp Require Import ssreflect ssrfun ssrbool eqtype ssrnat seq fintype bigop.
From mathcomp Require Import order ssralg ssrnum matrix.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import Order.TTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Kernel.
Variables (R : rcfType) (d dv : nat) (c tau : R).

Definition dot (u v : 'rV[R]_d) : R := (u *m v^T) ord0 ord0.
Definition kappa (q k : 'rV[R]_d) : R := (c + tau * dot q k) ^+ 2.
Definition features (y : 'rV[R]_d) : 'rV[R]_(1 + (d + d * d)) :=
  row_mx (c%:M) (row_mx (Num.sqrt (2%:R * c * tau) *: y) (tau *: mxvec (y^T *m y))).
Definition phi := features.
Definition psi := features.

Definition summary_Z p (KP : 'M[R]_(p, d)) (VP : 'M[R]_(p, dv)) : 'M[R]_(1 + (d + d * d), dv) :=
  \sum_(j < p) (psi (row j KP))^T *m row j VP.
Definition summary_kappa p (KP : 'M[R]_(p, d)) : 'cV[R]_(1 + (d + d * d)) :=
  \sum_(j < p) (psi (row j KP))^T.

Definition ntk_attention (q : 'rV[R]_d) p n (KP : 'M[R]_(p, d)) VP (KX : 'M[R]_(n, d))
    (VX : 'M[R]_(n, dv)) : 'rV[R]_dv :=
  (\sum_(j < n) kappa q (row j KX) + (phi q *m summary_kappa KP) ord0 ord0)^-1
  *: (\sum_(j < n) kappa q (row j KX) *: row j VX + phi q *m summary_Z KP VP).

Definition kernel_attention (q : 'rV[R]_d) m (K : 'M[R]_(m, d)) (V : 'M[R]_(m, dv)) :=
  (\sum_(j < m) kappa q (row j K))^-1 *: \sum_(j < m) kappa q (row j K) *: row j V.

Lemma entry11 (a : R) (M : 'M[R]_1) : (a *: M) ord0 ord0 = a * M ord0 ord0.
Proof. by rewrite mxE. Qed.

Lemma add11 (A B : 'M[R]_1) : (A + B) ord0 ord0 = A ord0 ord0 + B ord0 ord0.
Proof. by rewrite mxE. Qed.

Lemma scalar11 (a : R) : (a%:M : 'M[R]_1) ord0 ord0 = a.
Proof. by rewrite mxE eqxx mulr1n. Qed.

Lemma feature_kernel q k : 0 <= c -> 0 <= tau -> (phi q *m (psi k)^T) ord0 ord0 = kappa q k.
Proof.
move=> c0 t0; rewrite /phi /psi /features !tr_row_mx !mul_row_col.
rewrite tr_scalar_mx -scalar_mxM !linearZ /= -!scalemxAl mxvec_dotmul.
rewrite !add11 !entry11 scalar11.
have sq : (q *m (k^T *m k) *m q^T) ord0 ord0 = dot q k ^+ 2.
  rewrite mulmxA [q *m k^T]mx11_scalar mul_scalar_mx -scalemxAl entry11.
  by rewrite -/(dot q k) expr2; congr (_ * _); rewrite -[k *m q^T]trmxK trmx_mul trmxK mxE.
rewrite sq -/(dot q k) [Num.sqrt _ * (Num.sqrt _ * _)]mulrA.
rewrite -[Num.sqrt _ * Num.sqrt _]expr2 sqr_sqrtr ?mulr_ge0 ?ler0n //.
rewrite /kappa sqrrD exprMn -expr2 [tau * (tau * _)]mulrA -expr2 addrA.
by congr (_ + _ + _); rewrite -!mulrA mulr_natl.
Qed.
Theorem finite_summary (q : 'rV[R]_d) p n (KP : 'M[R]_(p, d)) (VP : 'M[R]_(p, dv))
    (KX : 'M[R]_(n, d)) (VX : 'M[R]_(n, dv)) : 0 < c -> 0 <= tau ->
  (forall k, (phi q *m (psi k)^T) ord0 ord0 = kappa q k) /\
  ntk_attention q KP VP KX VX = kernel_attention q (col_mx KP KX) (col_mx VP VX).
Proof.
move=> c0 t0; have fk := feature_kernel q _ (ltW c0) t0; split=> //.
have zk : (phi q *m summary_kappa KP) ord0 ord0 = \sum_(j < p) kappa q (row j KP).
  by rewrite /summary_kappa mulmx_sumr summxE; apply: eq_bigr => j _; rewrite fk.
have zv : phi q *m summary_Z KP VP = \sum_(j < p) kappa q (row j KP) *: row j VP.
  rewrite /summary_Z mulmx_sumr; apply: eq_bigr => j _.
  by rewrite mulmxA [phi q *m _]mx11_scalar fk mul_scalar_mx.
have s1 : \sum_(j < p) kappa q (row (lshift n j) (col_mx KP KX)) = \sum_(j < p) kappa q (row j KP).
  by apply: eq_bigr => j _; rewrite rowKu.
have s2 : \sum_(j < n) kappa q (row (rshift p j) (col_mx KP KX)) = \sum_(j < n) kappa q (row j KX).
  by apply: eq_bigr => j _; rewrite rowKd.
have s3 : \sum_(j < p) kappa q (row (lshift n j) (col_mx KP KX)) *: row (lshift n j) (col_mx VP VX)
          = \sum_(j < p) kappa q (row j KP) *: row j VP.
  by apply: eq_bigr => j _; rewrite !rowKu.
have s4 : \sum_(j < n) kappa q (row (rshift p j) (col_mx KP KX)) *: row (rshift p j) (col_mx VP VX)
          = \sum_(j < n) kappa q (row j KX) *: row j VX.
  by apply: eq_bigr => j _; rewrite !rowKd.
rewrite /ntk_attention /kernel_attention zk zv !big_split_ord /= s1 s2 s3 s4.
by rewrite [_ + \sum_(j < p) kappa q _]addrC [_ + \sum_(j < p) _ *: _]addrC.
Qed.
End Kernel.
