"""One exception tree for the service; no HTTP in it (``api/errors.py`` maps it to statuses).

RagError
├── InvalidRequest          the caller's input is wrong (validation, unknown filter field)
├── NotFound                no such document / job
├── PayloadTooLarge         body or batch over the configured bound
├── Unauthorized            missing or unknown API key
├── RateLimited             the key is over its rate limit (retry after)
├── BackendUnavailable      no retrieval backend could answer (retry later)
└── InsufficientStorage     the data dir's disk is under its floor: writes refused (retry later)
"""

from __future__ import annotations


class RagError(Exception):
    code = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(RagError):
    code = "invalid_request"

    def __init__(self, message: str, failures: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.failures = failures  # per item (a file of an upload): {"id", "error"}, in the envelope


class NotFound(RagError):
    code = "not_found"


class PayloadTooLarge(RagError):
    code = "payload_too_large"


class Unauthorized(RagError):
    code = "unauthorized"


class BackendUnavailable(RagError):
    code = "backend_unavailable"

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class InsufficientStorage(RagError):
    code = "insufficient_storage"

    def __init__(self, message: str, retry_after_s: int = 30) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RateLimited(RagError):
    code = "rate_limited"

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
