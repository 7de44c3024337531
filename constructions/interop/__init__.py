"""The interop wing: constructions as files and as other libraries' models.

* :mod:`~constructions.interop.files`: :func:`~constructions.interop.files.save` and
  :func:`~constructions.interop.files.load`, safetensors plus a JSON sidecar naming the builder;
* :mod:`~constructions.interop.bundle`: a construction as a model-card bundle (the Hugging Face
  mixin layout);
* :mod:`~constructions.interop.layout`: the TransformerLens layout of a construction (config,
  state dict, inputs and outputs), in torch alone;
* :mod:`~constructions.interop.transformer_lens`: the export to TransformerLens's model class;
* :mod:`~constructions.interop.bridge`: the export to a TransformerLens ``TransformerBridge``.

Users reach its functions through the facade :mod:`constructions.export`, one import for all.
``constructions.files``, ``constructions.bundle``, ``constructions.transformer_lens``,
``constructions.transformer_lens_layout`` and ``constructions.transformer_bridge``, where these
modules lived before, stay public paths: each re-exports its module and holds no code.

Who may import it: ``empirics``, ``theorems``, the tests and users. No construction module
outside this folder does (``tests/test_architecture.py``): an area module describes itself to
the wing through :mod:`constructions.recording` (``@recorded`` builders) and
:mod:`constructions.residual_layout` (a ``residual_layout`` or ``transformer_lens_lacks``
method), and the wing finds it by those names. ``transformer_lens`` and ``safetensors`` (the
``interop`` extra) are imported inside the functions that need them, so importing the wing
needs torch and numpy only. (nnsight needs no export: it wraps a construction itself, through
the hook points of :mod:`constructions.layers`.)
"""
