r"""Chain of thought beyond one path: continuous thought, formal-language traces and looped GD

Three papers push chain of thought and looping past the icl-regression and power-method areas:
CoT2's superposed reasoning on the minimum non-negative sum task (Gozeten et al. 2025), whose
task, targets and loss come from the authors' code while the one-layer construction is this
project's; protoreasoning on Dyck languages (Valle & Reid 2026), of which only the abstract was
read, so the trace format and the small trace-emitting transformer are this project's; and
in-context deep learning (Wu et al. 2025), checked on its smallest new case, an explicit
transformer whose (2N + 4)L layers run L gradient-descent steps on an N = 2 layer ReLU
network. A fourth, on recursive transformers under a data budget (Gülbahar, Edman, Fraser
2026), is empirical at BabyLM scale; what it makes exact is the weight accounting of shared
blocks and factorised embeddings.

Topics: :mod:`.cot2` (with :mod:`.cot2_definitions`, more checks of its claims, and
:mod:`.cot2_sampled`, its sampled and trained claims), :mod:`.dyck`, :mod:`.icdl`,
:mod:`.recursive_transformer`. Constructions live in ``constructions/cot2.py``,
``constructions/dyck.py``, ``constructions/icdl.py`` and ``constructions/recursive_transformer.py``.
"""
