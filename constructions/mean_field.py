"""Former path of :mod:`constructions.prenorm_gradients`, where the code lives (one name for
the topic in every layer); kept so that code importing it keeps working."""

from constructions.prenorm_gradients import ARCHS, MeanFieldTransformer, mean_field_transformer

__all__ = ["ARCHS", "MeanFieldTransformer", "mean_field_transformer"]
