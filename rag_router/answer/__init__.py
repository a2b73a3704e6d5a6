"""The answer flow on top of search, read in ``flow.py``: compile → generate → parse.

- ``prompting.py``: natural-language constraints → token limits, the domain's system message
- ``llm.py``: the OpenAI-compatible client (vLLM), streaming, retries, one deadline
- ``parse.py``: robust JSON and ``[n]`` citation parsing of what the model wrote
- ``extractive.py``: the answer without a model (sentences quoted from the stored text)
"""
