"""Reference models with explicit weights. torch, numpy and math only: no test code here.

Each area module states its task as an oracle (the specification the checks and the
empirics share) beside builder functions that return ``torch.nn.Module`` s. Builders are
float64 by default, take ``dtype=`` and ``device=``, and validate their arguments.
"""
