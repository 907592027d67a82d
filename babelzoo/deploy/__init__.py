"""Serving a model outside training code: ONNX export (:func:`export_onnx`, ``babelzoo convert
--to-onnx``), int8 quantization for ONNX Runtime, and :class:`OnnxEncoder`, which turns
sentences into the same vectors as the PyTorch model::

    import babelzoo
    from babelzoo.deploy import export_onnx, OnnxEncoder

    model = babelzoo.create_model("multilingual_e5_small", pretrained=True)
    export_onnx(model, "e5-onnx", quantize="int8")
    vectors = OnnxEncoder("e5-onnx", prefix="query: ").encode(["Hello", "Bonjour"])
"""

from __future__ import annotations

from .._lazy import lazy_getattr

_API = {
    "export_onnx": "babelzoo.deploy.onnx",
    "OnnxEncoder": "babelzoo.deploy.onnx",
    "OnnxExportError": "babelzoo.deploy.onnx",
    "quantize_onnx": "babelzoo.deploy.onnx",
}

__all__ = list(_API)

__getattr__ = lazy_getattr(__name__, _API, relative=False)
