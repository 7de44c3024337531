r"""Training dynamics: scan and snap, grokking, truth encodings, knowledge extraction, conditioning

Claims about what gradient descent does, each anchored to an exact quantity: a closed-form
population test loss, an NTK-regression level, a long-sequence limit, a Bayes loss plateau or a
Jacobian identity. A trend is asserted against such a number, never against a picture; a trend
that does not reproduce at CPU size is recorded as a metric and said so on the page. The papers:
Tian et al. (2023, arXiv:2305.16380, scan and snap), Kumar et al. (2024, arXiv:2310.06110,
grokking as lazy to rich), Ravfogel et al. (2025, arXiv:2510.15804, linear truth encodings)
and the ICLR 2026 submission on conditioned initialisation for attention (OpenReview
cKNOCYPo2W); for Xu & Chen (arXiv:2508.00901, knowledge acquisition and extraction) only the
abstracts were read, and the relation-covering law and the storage construction are ours.
The heavier experiments (truth encoding by gradient descent, training speed under conditioned
initialisation) are in the slow tier.

One topic module per paper; every check is built by a factory that takes what it tests, so
``tests/test_training_dynamics.py`` can rebuild it around a broken construction.
"""
