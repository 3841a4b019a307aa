"""Parameter models of the built-in node types.

They live in ``shared`` so the gateway can validate a graph's parameters before
a run starts without importing worker code; the worker's node implementations
read their parameters through the same models. Each type's spec
(``spindle.shared.graphs.node_types``) names its model.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from spindle.shared.contracts.memory import ContextPolicy, MemoryMode
from spindle.shared.contracts.workstreams import LaunchRequest


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


MCP_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9-]{0,31}$"  # no "_": "__" splits server and tool


class McpSecret(_Params):
    """A header value read on the worker, never written in the graph.

    ``{secret: "GITHUB_TOKEN"}`` is the worker's environment variable
    ``SPINDLE_MCP_SECRET_GITHUB_TOKEN`` (docs/graphs/node-types.md, MCP servers).
    """

    secret: str = Field(pattern=r"^[A-Z0-9_]{1,64}$")
    prefix: str = Field("", max_length=64, description="text before the value, e.g. 'Bearer '")


class McpServer(_Params):
    """An MCP server whose tools an ``agent`` offers to its model.

    Exactly one transport: ``command`` (+ ``args``: a stdio server the worker starts,
    only if the operator allow-listed that exact command line, setting
    ``mcp_stdio_commands``) or ``url`` (streamable HTTP, through the outbound URL
    policy like push notifications).
    """

    name: str = Field(pattern=MCP_NAME_PATTERN, description="prefix of its tools' names")
    command: str | None = Field(None, min_length=1, max_length=1000)
    args: list[str] = Field(default_factory=list, max_length=64)
    url: str | None = Field(None, min_length=1, max_length=2000)
    headers: dict[str, str | McpSecret] = Field(default_factory=dict, max_length=32)
    tools: list[str] | None = Field(
        None, max_length=256, description="offer only these of its tools; default: all"
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of 'command' (stdio) or 'url' (streamable HTTP)")
        if self.command is None and self.args:
            raise ValueError("'args' belong to a stdio 'command'")
        if self.url is None and self.headers:
            raise ValueError("'headers' belong to an HTTP 'url'")
        return self


DEFAULT_IDLE_TIMEOUT_SECONDS = 24 * 3600
"""An interactive agent waits this long for the next message by default (docs/conversations.md)."""
MAX_IDLE_TIMEOUT_SECONDS = 30 * 24 * 3600
"""An interactive agent waits at most 30 days for the next message."""


class AgentParams(_Params):
    """``agent``: an LLM loop, one activity per LLM turn and one per tool call."""

    instructions: str = Field(
        "You are a helpful assistant.",
        max_length=100_000,
        description="the system message (a template over the run state)",
    )
    prompt: str | None = Field(
        None, max_length=100_000, description="user message template; default: _previous/input"
    )
    tools: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="worker tools (GET /tools) and workstream tools offered to the model",
    )
    max_turns: int = Field(
        8,
        ge=1,
        le=100,
        description="LLM turns before the node fails with AgentMaxTurns (counted anew "
        "per exchange of an interactive agent)",
    )
    model: str | None = Field(
        None, description="the model to ask; default: the openai_model setting"
    )
    temperature: float | None = Field(
        None, ge=0, le=2, description="sampling temperature; default: the provider's"
    )
    output_schema: dict[str, Any] | None = Field(
        None,
        description="JSON Schema of a structured final answer: the answer must be JSON "
        "that fits it (one retry with the error, then AgentOutputInvalid); the node's "
        "output is the parsed JSON",
    )
    mcp_servers: list[McpServer] = Field(
        default_factory=list,
        max_length=16,
        description="MCP servers whose tools are offered as '<server>__<tool>'",
    )
    interactive: bool | None = Field(
        None,
        description="true: after each answer the agent waits (IDLE) for the next user "
        "message until COMPLETE or idle_timeout_seconds; false: it takes no user "
        "messages; default: it takes messages while it runs (docs/conversations.md)",
    )
    idle_timeout_seconds: int = Field(
        DEFAULT_IDLE_TIMEOUT_SECONDS,
        ge=1,
        le=MAX_IDLE_TIMEOUT_SECONDS,
        description="an interactive agent idle this long ends with its last answer "
        "(default 24 h, at most 30 days)",
    )
    context: ContextPolicy | None = Field(
        None,
        description="what the model is given per turn: max_tokens and strategy "
        "(window | summarize); default: the agent_context_* settings",
    )
    memory: MemoryMode = Field(
        "thread",
        description="thread: continue across loop visits and share with the runs of the "
        "run's conversation; run: across visits only; per_visit / none: start empty",
    )

    @model_validator(mode="after")
    def _unique_servers(self) -> AgentParams:
        names = [s.name for s in self.mcp_servers]
        if len(names) != len(set(names)):
            raise ValueError("mcp_servers: each server needs its own name")
        return self


class ToolParams(_Params):
    """``tool``: call one registered Python callable with typed arguments."""

    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)


MAX_PROMPT_EXPIRY_SECONDS = 30 * 24 * 3600
"""A prompt waits at most 30 days (docs/graphs/node-types.md)."""

PrincipalName = Annotated[str, StringConstraints(min_length=1, max_length=256)]


class ExpiryAnswer(_Params):
    """``on_expiry: {"answer": …}``: the answer a prompt takes when nobody gave one."""

    answer: dict[str, Any] = Field(description="checked against ui_schema at registration")


class PromptParams(_Params):
    """``prompt``: ask a human (HITL) and wait for a valid answer."""

    prompt: str = Field("Please provide input:", max_length=10_000)
    ui_schema: dict[str, Any] | None = Field(
        None, description="JSON Schema of the answer; default: one required string"
    )
    title: str | None = None
    expires_in_seconds: int | None = Field(
        None,
        ge=1,
        le=MAX_PROMPT_EXPIRY_SECONDS,
        description="the prompt expires this long after it asked (1 s to 30 days); "
        "default: it waits for ever",
    )
    on_expiry: Literal["fail", "skip"] | ExpiryAnswer | None = Field(
        None,
        description='at expiry: "fail" the node, "skip" it (port "expired"), or take '
        '{"answer": …}; needs expires_in_seconds; default "fail"',
    )
    assignees: list[PrincipalName] = Field(
        default_factory=list,
        max_length=100,
        description="user ids who may answer (besides run-control roles)",
    )
    roles: list[PrincipalName] = Field(
        default_factory=list,
        max_length=100,
        description="roles whose users may answer (besides run-control roles)",
    )
    on_cancel: Literal["cancel_run", "keep_waiting"] = Field(
        "cancel_run",
        description="when a client abandons the prompt (an AG-UI resume with status "
        '"cancelled"): "cancel_run" cancels the run (default), "keep_waiting" keeps it '
        "waiting and asks again",
    )

    @field_validator("on_expiry", mode="wrap")
    @classmethod
    def _one_expiry_action(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # One error at ``on_expiry`` itself, not one per member of the union.
        try:
            return handler(value)
        except ValidationError:
            raise PydanticCustomError(
                "on_expiry", 'on_expiry is "fail", "skip" or {"answer": {…}}'
            ) from None


class Route(_Params):
    when: str
    port: str = Field(min_length=1)


class RouterParams(_Params):
    """``router``: choose the output port(s) whose condition holds."""

    routes: list[Route] = Field(min_length=1)
    default: str | None = None
    all_matches: bool = Field(False, description="take every matching route, not the first")


class OutputParams(_Params):
    """``output``: select/shape the run's result and announce it."""

    select: str | None = Field(None, description="JMESPath over the state; default _previous")
    message: str | None = Field(
        None, description="answer template posted as ANSWER; without it nothing is posted"
    )


class WorkstreamParams(LaunchRequest):
    """``workstream``: launch a child workstream (seed 002); ``task`` is a template."""

    wait: bool = Field(
        False,
        description="wait for the child's end and output its outcome; "
        "default: output its launch id at once",
    )


def default_ui_schema(node_id: str, prompt: str, title: str | None = None) -> dict[str, Any]:
    """Seed 000's prompt schema: one required string ``<node>_response``."""
    key = f"{node_id}_response"
    return {
        "title": title or "User Input Required",
        "type": "object",
        "properties": {key: {"type": "string", "title": prompt}},
        "required": [key],
    }


class InlineNode(_Params):
    """The node a ``map`` runs once per item: its type, literal params and ``inputs``.

    In its templates and ``inputs``, ``item`` is the element and ``item_index`` its
    position in the list, besides the run state.
    """

    type: str = Field(min_length=1, max_length=64)
    params: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[str, str] = Field(
        default_factory=dict, description="param name → JMESPath over the state, item, item_index"
    )


class MapParams(_Params):
    """``map``: run one node per element of a list (seed 001 items), in batches."""

    over: str = Field(min_length=1, description="JMESPath over the run state yielding a list")
    node: InlineNode = Field(description="the node run once per element")
    concurrency: int = Field(16, ge=1, le=1000, description="items in flight at once, at most")
    max_failed_ratio: float = Field(
        1.0,
        ge=0,
        le=1,
        description="the node fails when more than this share of its items failed; "
        "default 1: item failures never fail the node",
    )
    batch_size: int | None = Field(
        None,
        ge=1,
        le=5000,
        description="items per batch activity; default: the worker's item_batch_size",
    )


class FilterParams(_Params):
    """``filter``: keep the items whose ``where`` holds; the rest go to port ``rejected``."""

    items: str = Field(
        "_previous.items", min_length=1, description="JMESPath over the run state: the items"
    )
    where: str = Field(
        min_length=1,
        description="JMESPath per item (``item``, ``item_index`` and the run state); "
        "a truthy value keeps the item",
    )


class MergeParams(_Params):
    """``merge``: join the items of several branches by id, in input order."""

    over: str = Field(
        min_length=1,
        description="JMESPath over the run state yielding a list of item lists, "
        "e.g. ``[left.items, right.items]``",
    )
