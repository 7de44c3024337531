"""Machine-checked proofs for the spatial-induction claims (the ``proved`` tier; see
theorems/proving.py). A module of its own: spatial_induction.py is at the module-size limit."""

from __future__ import annotations

from theorems.areas.induction_variants.spatial_induction import SIH_MARGINS
from theorems.evidence import check
from theorems.proof_statements import Scope
from theorems.proving import coq_proof

# --- proved ---
# Coq, MathComp: (i)-(iii) with slack at least 1, for every V >= 1 and every value of ln P >= 0
# and of the two cosines (each != 1), over any real field.
test_margins_proved = check(SIH_MARGINS, "proved")(
    coq_proof("proofs/coq/induction_variants_sih_margins.v", theorem="sih_margins",
              scope=Scope("part", "(i) 3 V lambda - M_0 >= 1, (ii) beta_t (1 - cos(2 pi/3)) - "
                          "lambda (2V - 1) - M_0 >= 1, (iii) beta_s (1 - cos(2 pi/L)) - "
                          "lambda (V - 1) - M_0 >= 1 for every V >= 1, with ln P any value >= 0 "
                          "(P >= 1) and the cosines any values != 1 (true for L >= 3), over any "
                          "real field; not the builder's float64 temperatures, which the "
                          "certified check reads")))
