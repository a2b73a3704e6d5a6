"""/v1/chat/completions: the fields of OpenAI's request that matter here (rag_router/api/routes/chat.py)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    """The fields of OpenAI's request that matter here; others (temperature, …) are accepted and ignored."""

    model_config = ConfigDict(extra="allow")
    model: str = "rag-router"
    messages: list[ChatMessage] = Field(..., min_length=1)
    stream: bool = False
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
