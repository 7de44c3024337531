r"""The task every claim of the area states, and the sources they share."""

from __future__ import annotations

from theorems.claims import Source

HUANG = {"arxiv": "2506.10887", "ref": "Huang, Zhu, Guo, Jiao, Sojoudi, Jordan, Russell, Mei "
                                       "(2025), NeurIPS; code yixiao-huang/OCR-Theory"}
TASK_SOURCE = Source(where="the task of the authors' code (src/data_utils.py, "
                           "ImplicitReasoningTask; train_mode mixed_finetune)", tag="V", **HUANG)

TASK = (r"Let $C$ cities each have one animal, let $N = C(m+k)$ names live in city "
        r"$i \bmod C$ (name $i$), the first $Cm$ being train names and the last $Ck$ test "
        r"names, and let $W \in \mathbb R^{2C\times(2+N)}$ map an input $e_n + e_r$ (a name and "
        r"one of the relations $r_1$ 'lives in', $r_2$ 'implies') to logits over the $2C$ "
        r"answer tokens (cities, animals). The margin of a pair with answer $a$ is "
        r"$\mathrm{logit}_a - \max_{b\ne a}\mathrm{logit}_b$. The training pairs are "
        r"$(n, r_1) \to$ city for every name and $(n, r_2) \to$ animal for the train names; the "
        r"test pairs are $(n, r_2)$ for the test names. For a norm $\lVert\cdot\rVert_\nu$ "
        r"write $W_\nu = \arg\min\{\lVert W\rVert_\nu : \text{margin} \ge 1 \text{ on every "
        r"training pair}\}$ ($\nu = \mathrm F$ Frobenius, $\nu = *$ nuclear). ")
