"""Settings of the language model: provider, prices and token streaming."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from spindle.shared.platform.settings_sections.env_names import spindle_env as _env


class ModelPrice(BaseModel):
    """What one model costs (``Settings.model_prices``)."""

    model_config = ConfigDict(extra="forbid")

    input_per_1k: float = Field(0.0, ge=0, description="USD per 1,000 prompt tokens")
    output_per_1k: float = Field(0.0, ge=0, description="USD per 1,000 completion tokens")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """USD for one turn's tokens."""
        return (prompt_tokens * self.input_per_1k + completion_tokens * self.output_per_1k) / 1000


class LlmSettings(BaseModel):
    """The model agent nodes call, what it costs and how its tokens stream."""

    llm_provider: Literal["offline", "openai"] = Field(
        "offline",
        description="offline (deterministic, no API key) or openai (any OpenAI-compatible API)",
        validation_alias=_env("LLM_PROVIDER"),
    )
    openai_base_url: str | None = Field(
        None,
        description="Base URL of the OpenAI-compatible API (vLLM, Ollama, a proxy); unset: OpenAI",
        validation_alias=_env("OPENAI_BASE_URL", "OPENAI_BASE_URL"),
    )
    openai_api_key: str | None = Field(
        None,
        description="API key of the OpenAI-compatible API",
        validation_alias=_env("OPENAI_API_KEY", "OPENAI_API_KEY"),
    )
    openai_model: str = Field(
        "gpt-4o-mini",
        description="Model name for the OpenAI-compatible API",
        validation_alias=_env("OPENAI_MODEL"),
    )
    openai_stream_usage: bool = Field(
        True,
        description=(
            "Ask the OpenAI-compatible API for token usage in the last chunk of a stream "
            "(stream_options.include_usage); turn off for servers that reject it"
        ),
        validation_alias=_env("OPENAI_STREAM_USAGE"),
    )
    model_prices: dict[str, ModelPrice] = Field(
        default_factory=dict,
        description=(
            'Price per model for budgets\' max_cost_usd, JSON: {"<model>": {"input_per_1k": '
            'USD per 1,000 prompt tokens, "output_per_1k": USD per 1,000 completion tokens}}; '
            '"*" prices any model not listed; an unpriced model costs 0'
        ),
        validation_alias=_env("MODEL_PRICES"),
    )
    llm_streaming: bool = Field(
        True,
        description=(
            "Stream LLM tokens to clients as STREAMING_CHUNK messages; off: only the "
            "final THOUGHT/ANSWER is posted"
        ),
        validation_alias=_env("LLM_STREAMING"),
    )
    stream_chunk_interval_ms: float = Field(
        16.0,
        gt=0,
        description="Longest time a streamed token waits before it is posted in a chunk",
        validation_alias=_env("STREAM_CHUNK_INTERVAL_MS"),
    )
    stream_chunk_max_chars: int = Field(
        200,
        ge=1,
        description="Most characters in one STREAMING_CHUNK; a fuller buffer is posted at once",
        validation_alias=_env("STREAM_CHUNK_MAX_CHARS"),
    )
    agent_context_max_tokens: int = Field(
        100_000,
        ge=256,
        le=10_000_000,
        description=(
            "Most (estimated, ~4 characters a token) tokens of conversation an agent's model "
            "is given per turn when its params.context sets none (agent nodes and workstreams "
            "alike; docs/conversations.md, Memory)"
        ),
        validation_alias=_env("AGENT_CONTEXT_MAX_TOKENS"),
    )
    agent_context_strategy: Literal["window", "summarize"] = Field(
        "window",
        description=(
            "How a conversation over its max_tokens is cut when params.context sets none: "
            "window drops the oldest whole exchanges, summarize has the same model summarize them"
        ),
        validation_alias=_env("AGENT_CONTEXT_STRATEGY"),
    )
    offline_token_delay_ms: float = Field(
        0.0,
        ge=0,
        description=(
            "Pause of the offline model before each token it streams (0: as fast as it "
            "can; ~20 looks like a hosted model)"
        ),
        validation_alias=_env("OFFLINE_TOKEN_DELAY_MS"),
    )
