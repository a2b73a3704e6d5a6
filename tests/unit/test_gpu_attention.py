"""Embedders on a GPU turn cuDNN's attention off (a graph built for every new batch shape)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from indexers.embed.base import attention_without_cudnn


@pytest.fixture
def cudnn_attention_on() -> Iterator[None]:
    before = torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(True)
    yield
    torch.backends.cuda.enable_cudnn_sdp(before)


@pytest.mark.usefixtures("cudnn_attention_on")
def test_a_cpu_embedder_leaves_torch_as_it_was() -> None:
    attention_without_cudnn("cpu")
    assert torch.backends.cuda.cudnn_sdp_enabled()


@pytest.mark.usefixtures("cudnn_attention_on")
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_an_embedder_on_a_gpu_turns_cudnn_attention_off(device: str) -> None:
    attention_without_cudnn(device)
    assert not torch.backends.cuda.cudnn_sdp_enabled()
    assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
