"""One ``Settings`` for every Spindle process, read from the environment.

Every field is read from ``SPINDLE_<NAME>``; the connection URLs also accept the
conventional unprefixed names (``REDIS_URL``, ``MONGO_URL``, ``TEMPORAL_ADDRESS``).
The fields are declared by section in ``spindle.shared.platform.settings_sections``;
``Settings`` inherits every section.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic_settings import BaseSettings, SettingsConfigDict

from spindle.shared.platform.settings_sections.connections import (
    MongoSettings,
    RedisSettings,
    TemporalSettings,
)
from spindle.shared.platform.settings_sections.gateway import (
    JWT_ALGORITHMS,
    AuthSettings,
    GatewaySettings,
    JwtAlgorithm,
)
from spindle.shared.platform.settings_sections.limits import (
    ExpressionBudgetSettings,
    RateLimitSettings,
    SizeLimitSettings,
    WebPageSettings,
)
from spindle.shared.platform.settings_sections.llm import LlmSettings, ModelPrice
from spindle.shared.platform.settings_sections.outbound import (
    McpSettings,
    OutboundSettings,
    PushSettings,
)
from spindle.shared.platform.settings_sections.worker import LoggingSettings, WorkerSettings


# Pydantic lists the fields of the LAST base first: the sections go in reverse of the
# order the configuration table shows them (docs/operations/configuration.md).
class Settings(
    LoggingSettings,
    WorkerSettings,
    LlmSettings,
    WebPageSettings,
    ExpressionBudgetSettings,
    SizeLimitSettings,
    PushSettings,
    McpSettings,
    OutboundSettings,
    RateLimitSettings,
    AuthSettings,
    GatewaySettings,
    MongoSettings,
    RedisSettings,
    TemporalSettings,
    BaseSettings,
):
    """Configuration shared by the worker, the gateway and the CLI."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()


__all__ = [
    "JWT_ALGORITHMS",
    "AuthSettings",
    "ExpressionBudgetSettings",
    "GatewaySettings",
    "JwtAlgorithm",
    "LlmSettings",
    "LoggingSettings",
    "McpSettings",
    "ModelPrice",
    "MongoSettings",
    "OutboundSettings",
    "PushSettings",
    "RateLimitSettings",
    "RedisSettings",
    "Settings",
    "SizeLimitSettings",
    "TemporalSettings",
    "WebPageSettings",
    "WorkerSettings",
    "get_settings",
]
