"""A real model behind the answers: llama.cpp's server (xllamacpp) on the packaged SmolLM2-135M.

Started once per test run on a free loopback port and stopped at the end. One thread and
OMP_WAIT_POLICY=passive (rag_router.cli.llm): a busy 2-core CI machine keeps 30-55 tokens/s,
where spinning OpenMP threads fell to ~1 token/s. Two slots of 1024 tokens each, so a test that
leaves a generation running does not block the next one.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rag_router.cli.llm import LocalConfig, local_server, packaged_gguf
from tests.fakes.vllm import free_port

SLOT_CTX = 1024


@pytest.fixture(scope="session")
def real_llm() -> Iterator[LocalConfig]:
    config = LocalConfig(
        model=packaged_gguf(), ctx=2 * SLOT_CTX, threads=1, parallel=2, port=free_port(), alias="smollm2"
    )
    with local_server(config) as running:
        yield running
