"""Gradient descent compared with the constructions: one trainer, one experiment per area."""
