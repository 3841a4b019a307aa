"""Choosing the LLM provider a worker uses, from its settings.

Its own module, above ``base`` and the providers, so that the providers can import
``base`` without a cycle.
"""

from __future__ import annotations

from spindle.shared.platform.settings import Settings
from spindle.worker.llm.base import LlmProvider
from spindle.worker.llm.offline import OfflineProvider


def provider_from_settings(settings: Settings) -> LlmProvider:
    """The provider named by ``settings.llm_provider`` (``offline`` needs nothing)."""
    if settings.llm_provider == "openai":
        # Imported only when chosen: the openai SDK is heavy and the offline
        # provider (the default) needs none of it.
        from spindle.worker.llm.openai_compat import OpenAICompatProvider

        return OpenAICompatProvider.from_settings(settings)
    return OfflineProvider(token_delay=settings.offline_token_delay_ms / 1000)
