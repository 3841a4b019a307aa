"""The Spindle client SDK: start runs, stream their messages, answer them.

``AsyncSpindleClient`` for asyncio code and ``SpindleClient`` for the rest
(the same calls, without ``await``). Streams follow seed 002: the history as
gzip JSON first, then SSE from where it ended, reconnecting with exponential
backoff and resuming with ``Last-Event-ID``; each message arrives once, as a
``StreamedMessage`` holding both the wire ``CompactMessage`` and the readable
``AgentMessage``. ``TokenAssembler`` turns STREAMING_CHUNK messages into live
text.
"""

from spindle.client.async_client import AsyncSpindleClient
from spindle.client.backoff import BackoffPolicy, Reconnects
from spindle.client.chunks import ChunkEvent, ChunkUpdate, LiveText, TokenAssembler
from spindle.client.config import ClientConfig
from spindle.client.errors import (
    ApiError,
    BadRequestError,
    ClientError,
    ConflictError,
    ConnectionFailed,
    ForbiddenError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    StreamDisconnected,
    UnauthorizedError,
    UnavailableError,
    ValidationError,
)
from spindle.client.models import (
    Accepted,
    ArchivedNodeReport,
    HistoryBudget,
    RunBundle,
    RunInfo,
    RunPage,
    RunRef,
    RunSummary,
    StartedRun,
    StreamedMessage,
    StreamToken,
    UploadedFile,
    WebhookCreated,
)
from spindle.client.stream import MessageCursor, MessageStream
from spindle.client.sync_client import SpindleClient, SyncMessageStream
from spindle.shared.contracts.messages import AgentMessage, AgentMessageType, CompactMessage

__all__ = [
    "Accepted",
    "AgentMessage",
    "AgentMessageType",
    "ApiError",
    "ArchivedNodeReport",
    "AsyncSpindleClient",
    "BackoffPolicy",
    "BadRequestError",
    "ChunkEvent",
    "ChunkUpdate",
    "ClientConfig",
    "ClientError",
    "CompactMessage",
    "ConflictError",
    "ConnectionFailed",
    "ForbiddenError",
    "HistoryBudget",
    "LiveText",
    "MessageCursor",
    "MessageStream",
    "NotFoundError",
    "PayloadTooLargeError",
    "RateLimitedError",
    "Reconnects",
    "RunBundle",
    "RunInfo",
    "RunPage",
    "RunRef",
    "RunSummary",
    "SpindleClient",
    "StartedRun",
    "StreamDisconnected",
    "StreamToken",
    "StreamedMessage",
    "SyncMessageStream",
    "TokenAssembler",
    "UnauthorizedError",
    "UnavailableError",
    "UploadedFile",
    "ValidationError",
    "WebhookCreated",
]
