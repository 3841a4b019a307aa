"""The Spindle exception tree, documented in one place.

Every error a client can cause or see, and every failure the worker reports
through Temporal, is a ``SpindleError`` subclass. Each class carries its HTTP
status (for REST problem bodies, RFC 9457; every problem's ``type`` is
``about:blank`` and its title the class's ``title``), its JSON-RPC code (seed
003 numbering for ``tasks.*``) and its Temporal ``ApplicationError`` type
(``application_type``; these names are in recorded workflow histories: never
rename one). The worker raises the classes, or ``to_application_error`` of
them; the gateway turns a Temporal failure back into the class with
``from_application_error`` and renders it. Nothing reads message text.

Each class's ``ApplicationError`` type is its own name::

    class                           HTTP  JSON-RPC  meaning
    SpindleError                     500   -32603   internal error
    ├── InvalidRequest               400   -32600   malformed request body
    ├── ValidationFailed             422   -32602   invalid: names field + rule
    │   ├── GraphInvalid             422   -32602   graph breaks a rule (node + rule)
    │   ├── InputInvalid             422   -32602   input/HITL answer fails its schema
    │   ├── ExecutorNotFound         422   -32003   unknown node type / executor
    │   ├── InvalidParams            422   -32602   node params no retry can fix
    │   ├── InvalidSteer             422   -32602   a steer the workstream refuses
    │   ├── UnknownTool              422   -32602   not a workstream tool
    │   └── OutboundRefused          422   -32602   a URL the outbound policy refuses
    ├── CircularDependency           422   -32002   a dependency cycle
    ├── NotFound                     404   -32001   unknown (or invisible) run, graph, task
    │   └── UnknownWorkstream        404   -32001   no such workstream in the run
    ├── Conflict                     409   -32000   the target's state forbids it
    │   ├── NotWaiting               409   -32000   not waiting for that input
    │   │   ├── PromptExpired        409   -32000   the prompt expired: answer too late
    │   │   └── AlreadyAnswered      409   -32000   the prompt was answered already
    │   ├── RunFinishing             409   -32000   launches no more workstreams
    │   ├── WorkstreamFinished       409   -32000   the workstream has ended
    │   ├── WorkstreamNotInteractive 409   -32000   the workstream takes no messages
    │   ├── BudgetRefused            409   -32000   a budget change or reservation that does not fit
    │   ├── DeadlineRefused          409   -32000   a deadline beyond the parent's
    │   └── ConversationBusy         409   -32000   the conversation has a run going
    ├── Unauthorized                 401   -32004   missing or bad credentials
    │   └── Forbidden                403   -32004   action not allowed on a visible run
    │                                               (other tenants' runs: NotFound)
    ├── PayloadTooLarge              413   -32600   body, upload or field too large
    ├── HeadersTooLarge              431   -32600   request line and headers too large
    ├── RateLimited                  429   -32005   over a rate or stream limit; retry
    ├── Unavailable                  503   -32000   a backing service is down; retry
    │   └── WorkstreamStartFailed    503   -32000   Temporal refused the child; retry
    ├── RunFailed                    500   -32603   a run ended in failure
    │   ├── NodeFailed               500   -32603   a node failed for good
    │   │   ├── ExpressionBudgetSpent 500  -32603   its expressions spent their budget
    │   │   ├── AgentOutputInvalid   500   -32603   the answer broke output_schema twice
    │   │   ├── PayloadInvalid       500   -32603   data broke input_schema/output_schema
    │   │   └── StateWriteRefused    500   -32603   an undeclared or too large state write
    │   ├── AgentMaxTurns            500   -32603   no final answer within max_turns
    │   ├── BudgetExhausted          500   -32603   a budget cap reached (on_exhausted: fail)
    │   ├── RunDeadlineExceeded      500   -32603   the run passed its deadline_seconds
    │   ├── NodeVisitsExceeded       500   -32603   a node reached the max_node_visits setting
    │   └── RunStartLimited          500   -32603   a scheduled run over rate_limit_run_starts
    ├── AttemptSuperseded            500   -32603   a newer attempt of the activity runs
    ├── ToolError                    500   -32603   a tool refused its arguments or failed
    └── LlmRefused                   502   -32603   the LLM provider refused the request
        ├── LlmAuthenticationError   502   -32603   it refused the credentials
        └── LlmRequestRejected       502   -32603   it rejected the request (model, schema)

``docs/api/errors.md`` lists the same tree for readers of the API.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field
from temporalio.exceptions import ApplicationError


class ErrorDetail(BaseModel):
    """One thing wrong with a request: where, which field, which rule.

    Every field is optional and only the fields given are sent, so each shape
    clients see stays as it is: ``{in, field, rule, message}`` for request
    validation, ``{node, field, rule, message}`` for graphs, ``{field, reason}``
    for JSON-RPC ``tasks.*``, and rule-specific extras (``position``,
    ``supported``, ``cycle``, ``graph`` …) kept as given.
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    location: str | None = Field(default=None, alias="in")
    graph: str | None = None
    node: str | None = None
    field: str | None = None
    rule: str | None = None
    reason: str | None = None
    message: str | None = None

    def wire(self) -> dict[str, Any]:
        """The JSON object clients see: the fields that were given, by wire name."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")


def error_details(errors: Sequence[ErrorDetail | Mapping[str, Any]] | None) -> list[ErrorDetail]:
    """``errors`` as ``ErrorDetail`` models (mappings are validated as given)."""
    return [
        e if isinstance(e, ErrorDetail) else ErrorDetail.model_validate(dict(e))
        for e in errors or ()
    ]


def wire_errors(errors: Sequence[ErrorDetail | Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """``errors`` checked against ``ErrorDetail`` and given as the JSON objects clients see."""
    return [e.wire() for e in error_details(errors)]


class SpindleError(Exception):
    """Base of all errors Spindle reports to clients.

    Args:
        detail: what happened, for people.
        errors: what was wrong, one ``ErrorDetail`` (or mapping of its fields) each.
        context: facts for programs (the ``ApplicationError`` details), e.g.
            ``{"node": "n1"}``.
    """

    status: int = 500
    jsonrpc_code: int = -32603
    title: str = "Internal error"
    #: The Temporal ``ApplicationError.type``; the class name unless set.
    application_type: ClassVar[str] = "SpindleError"
    #: Whether Temporal may retry an activity that raised it.
    non_retryable: ClassVar[bool] = True
    #: Whether ``to_application_error`` always sends ``errors`` in its details.
    errors_in_details: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "application_type" not in cls.__dict__:
            cls.application_type = cls.__name__
        if cls.__module__ == __name__:  # the tree is this module; callers' subclasses stay local
            _BY_APPLICATION_TYPE.setdefault(cls.application_type, cls)

    def __init__(
        self,
        detail: str,
        *,
        errors: Sequence[ErrorDetail | Mapping[str, Any]] | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        # Kept in wire form (each checked by ``ErrorDetail``): what problem bodies,
        # JSON-RPC ``data`` and Temporal details carry, and what callers index.
        self.errors: list[dict[str, Any]] = wire_errors(errors)
        self.context = dict(context or {})

    @property
    def error_details(self) -> list[ErrorDetail]:
        """``errors`` as ``ErrorDetail`` models."""
        return error_details(self.errors)

    def problem(self) -> dict[str, Any]:
        """An RFC 9457 problem body."""
        body: dict[str, Any] = {
            "type": "about:blank",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
        }
        if self.errors:
            body["errors"] = self.errors
        return body


_BY_APPLICATION_TYPE: dict[str, type[SpindleError]] = {"SpindleError": SpindleError}


class InvalidRequest(SpindleError):
    """The request cannot be read (malformed body)."""

    status, jsonrpc_code, title = 400, -32600, "Invalid request"


class ValidationFailed(SpindleError):
    """Well-formed but invalid: each error names the field and the rule."""

    status, jsonrpc_code, title = 422, -32602, "Validation failed"


class GraphInvalid(ValidationFailed):
    """A graph spec breaks a rule (each error names the node and the rule)."""

    title = "Invalid graph"


class InputInvalid(ValidationFailed):
    """An input or HITL answer fails its JSON Schema."""

    title = "Invalid input"
    errors_in_details = True


class ExecutorNotFound(ValidationFailed):
    """An unknown node type or executor."""

    jsonrpc_code, title = -32003, "Executor not found"


class InvalidParams(ValidationFailed):
    """A node's parameters are invalid in a way no retry can fix."""

    title = "Invalid parameters"
    errors_in_details = True


class InvalidSteer(ValidationFailed):
    """A steer the workstream refuses (the error names the ``command`` field)."""

    def __init__(
        self,
        detail: str,
        *,
        errors: Sequence[ErrorDetail | Mapping[str, Any]] | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        default = [ErrorDetail(field="command", rule="invalid_steer", message=detail)]
        super().__init__(detail, errors=errors or default, context=context)


class UnknownTool(ValidationFailed):
    """A call to a tool the workstream supervisor does not answer."""


class OutboundRefused(ValidationFailed):
    """A caller-chosen URL (push callback) the outbound policy refuses (names the problem)."""


class CircularDependency(SpindleError):
    """A dependency cycle."""

    status, jsonrpc_code, title = 422, -32002, "Circular dependency detected"


class NotFound(SpindleError):
    """An unknown run, graph or task, or one the caller may not see."""

    status, jsonrpc_code, title = 404, -32001, "Not found"


class UnknownWorkstream(NotFound):
    """The run has no workstream of that id."""


class Conflict(SpindleError):
    """The target's state forbids the operation."""

    status, jsonrpc_code, title = 409, -32000, "Conflict"


class NotWaiting(Conflict):
    """The run is not waiting for input (on that node)."""


class PromptExpired(NotWaiting):
    """An answer to a prompt that expired (its ``on_expiry`` was taken); the run is unchanged."""

    title = "Prompt expired"


class AlreadyAnswered(NotWaiting):
    """A second answer to a prompt someone already answered; the run is unchanged."""

    title = "Prompt already answered"


class RunFinishing(Conflict):
    """The run is finishing: it launches no more workstreams."""


class WorkstreamFinished(Conflict):
    """The workstream has ended."""


class WorkstreamNotInteractive(Conflict):
    """The workstream takes no messages."""


class BudgetRefused(Conflict):
    """A budget raise below what was spent, or a child budget the parent's remainder lacks."""


class DeadlineRefused(Conflict):
    """A workstream deadline extension past the parent's own deadline."""


class ConversationBusy(Conflict):
    """The conversation has a run going and the start asked ``if_busy: reject``."""


class Unauthorized(SpindleError):
    """Missing or bad credentials."""

    status, jsonrpc_code, title = 401, -32004, "Unauthorized"


class Forbidden(Unauthorized):
    """A known caller not allowed this action on a run it can see."""

    status, title = 403, "Forbidden"


class PayloadTooLarge(SpindleError):
    """A body, upload or field over its limit."""

    status, jsonrpc_code, title = 413, -32600, "Payload too large"


class HeadersTooLarge(SpindleError):
    """A request's line and headers together over the gateway's limit."""

    status, jsonrpc_code, title = 431, -32600, "Request header fields too large"


class RateLimited(SpindleError):
    """The tenant is over its rate or stream limit; retry after ``retry_after`` s."""

    status, jsonrpc_code, title = 429, -32005, "Too many requests"
    non_retryable = False

    def __init__(
        self,
        detail: str,
        *,
        retry_after: int = 1,
        errors: Sequence[ErrorDetail | Mapping[str, Any]] | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(detail, errors=errors, context=context)
        self.retry_after = max(1, retry_after)


class Unavailable(SpindleError):
    """A backing service is down; retry after ``retry_after`` seconds."""

    status, jsonrpc_code, title = 503, -32000, "Service unavailable"
    non_retryable = False
    default_retry_after: ClassVar[int] = 5

    def __init__(
        self,
        detail: str,
        *,
        retry_after: int | None = None,
        errors: Sequence[ErrorDetail | Mapping[str, Any]] | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(detail, errors=errors, context=context)
        self.retry_after = self.default_retry_after if retry_after is None else retry_after


class WorkstreamStartFailed(Unavailable):
    """Temporal refused to start the workstream's child workflow; retry."""

    # An update refusal: the client retries the launch, Temporal does not.
    non_retryable = True
    default_retry_after = 2


class RunFailed(SpindleError):
    """A run ended in failure (the workflow's own failure)."""


class NodeFailed(RunFailed):
    """A node failed for good, failing the run."""


class ExpressionBudgetSpent(NodeFailed):
    """The expressions of one node execution, or of one workflow task, passed their
    step budget together; the error names the node and the setting that sizes it
    (docs/graphs/index.md#expression-limits)."""


class PayloadInvalid(NodeFailed):
    """Data crossing an edge broke a node's ``input_schema`` or ``output_schema``;
    ``errors`` name each field (per item for a ``map``; docs/graphs/index.md#payload-schemas)."""


class StateWriteRefused(NodeFailed):
    """A node wrote a shared-state key the graph does not declare writable, or its
    writes made shared state or context larger than the ``shared_state_max_bytes``
    setting; the error names the key and the size (docs/graphs/index.md#shared-state)."""


class AgentMaxTurns(RunFailed):
    """An agent still asked for tools after ``max_turns`` turns."""


class AgentOutputInvalid(NodeFailed):
    """An agent's final answer broke its ``params.output_schema`` again after one retry
    with the error; ``errors`` name each violation (docs/graphs/node-types.md)."""


class BudgetExhausted(RunFailed):
    """A budget cap was reached and the budget says ``on_exhausted: fail``."""


class RunDeadlineExceeded(RunFailed):
    """The run passed its ``deadline_seconds`` and was stopped."""


class NodeVisitsExceeded(RunFailed):
    """A node would have run more often than the ``max_node_visits`` setting allows."""


class RunStartLimited(RunFailed):
    """A run a schedule started was over its tenant's ``rate_limit_run_starts``: it ran
    none of its nodes (docs/schedules.md#tenants-and-limits)."""


class AttemptSuperseded(SpindleError):
    """A newer attempt of this activity has started (this one's worker was lost
    past the heartbeat timeout): this attempt's results are refused."""

    non_retryable = True


class ToolError(SpindleError):
    """A tool refused its arguments or failed; the same call would fail again.

    Raised by tools (``spindle.nodes.tool``): a ``tool`` node fails with it, an
    agent's tool call shows its text to the model.
    """

    title = "Tool failed"


class LlmRefused(SpindleError):
    """The LLM provider refused the request; the same request would be refused again."""

    status = 502
    title = "LLM provider refused the request"


class LlmAuthenticationError(LlmRefused):
    """The provider refused the credentials (HTTP 401/403)."""


class LlmRequestRejected(LlmRefused):
    """The provider rejected the request itself (HTTP 400/404/422: unknown model,
    bad tool schema)."""


def spindle_error_classes() -> list[type[SpindleError]]:
    """Every class of the tree, base first (declaration order)."""
    return list(_BY_APPLICATION_TYPE.values())


def non_retryable_error_types() -> list[str]:
    """The ``ApplicationError`` types no activity retry can fix."""
    return [cls.application_type for cls in spindle_error_classes() if cls.non_retryable]


def to_application_error(exc: SpindleError) -> ApplicationError:
    """The Temporal failure for ``exc``: its type, ``non_retryable`` from its class,
    and its ``context`` (plus ``errors``) as the one details payload."""
    payload: dict[str, Any] = dict(exc.context)
    if exc.errors or exc.errors_in_details:
        payload["errors"] = exc.errors
    details = (payload,) if payload else ()
    return ApplicationError(
        exc.detail, *details, type=exc.application_type, non_retryable=exc.non_retryable
    )


def from_application_error(failure: BaseException | None) -> SpindleError | None:
    """The ``SpindleError`` a Temporal failure carries, or None when it carries none.

    Walks the ``cause`` chain, so ``WorkflowUpdateFailedError``, ``ActivityError``,
    ``ChildWorkflowError`` and ``WorkflowFailureError`` all yield the error the
    worker raised.
    """
    for error in _cause_chain(failure):
        if isinstance(error, SpindleError):
            return error
        if isinstance(error, ApplicationError) and error.type in _BY_APPLICATION_TYPE:
            return _rebuilt(_BY_APPLICATION_TYPE[error.type], error)
    return None


def _cause_chain(failure: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while failure is not None and id(failure) not in seen:
        seen.add(id(failure))
        yield failure
        failure = getattr(failure, "cause", None) or failure.__cause__


def _rebuilt(cls: type[SpindleError], failure: ApplicationError) -> SpindleError:
    context: dict[str, Any] = {}
    for detail in failure.details:
        if isinstance(detail, Mapping):
            context.update(detail)
    errors = context.pop("errors", None)
    listed = [e for e in errors if isinstance(e, Mapping)] if isinstance(errors, list) else None
    return cls(failure.message, errors=listed, context=context)
