"""Retry policies, timeouts, task queues and priorities of every activity a graph
run schedules, in one place.

A node type's defaults are plain data in its spec
(``spindle.shared.graphs.node_types.NodeTypeSpec``: ``timeout_seconds``, ``retry``);
this module turns them into Temporal objects. A node's ``retry``, ``timeout_seconds``
and ``priority`` (``NodeSpec``) override the defaults of its node type; its task queue
is its own ``task_queue``, else the graph's ``task_queues`` entry for its type, else
the run's queue. Pure module: the workflow imports it.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import Priority, RetryPolicy
from temporalio.workflow import ActivityCancellationType

from spindle.shared.contracts.errors import ExecutorNotFound, InputInvalid, InvalidParams
from spindle.shared.contracts.graph_spec import GraphSpec, NodeSpec, RetrySpec
from spindle.shared.graphs.node_types import AGENT, BUILTIN_NODE_TYPES, NodeTypeSpec, RetryDefaults

# Errors that no retry can fix: bad parameters, a bad answer, a missing type.
NON_RETRYABLE_ERRORS = [
    error.application_type for error in (InvalidParams, InputInvalid, ExecutorNotFound)
]


def retry_policy(defaults: RetryDefaults) -> RetryPolicy:
    """The Temporal policy of a node type's ``RetryDefaults``."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=defaults.initial_interval_seconds),
        backoff_coefficient=defaults.backoff_coefficient,
        maximum_interval=timedelta(seconds=defaults.max_interval_seconds),
        maximum_attempts=defaults.max_attempts,
        non_retryable_error_types=[*NON_RETRYABLE_ERRORS, *defaults.non_retryable_errors],
    )


NODE_RETRY = retry_policy(RetryDefaults())
"""``execute_node`` of a type that declares no retry of its own."""

LLM_RETRY = retry_policy(AGENT.retry or RetryDefaults())
"""``llm_turn``: the ``agent`` type's retry (providers rate-limit and time out)."""

TOOL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=3,
    non_retryable_error_types=NON_RETRYABLE_ERRORS,
)
"""``tool_call``: tool errors come back as results; this covers infrastructure faults."""

LIFECYCLE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=30,
)
"""``request_input``, ``accept_input``, ``finish_run``: bookkeeping that must happen
(messages, run document), so it outlasts a Redis/Mongo restart."""

NOTICE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=5,
)
"""``post_message``: informative messages (warnings); the run goes on without them."""

ARTIFACT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=10,
    non_retryable_error_types=["ValidationFailed"],
)
"""``merge_child_artifacts``: copying a finished workstream's artifacts to its parent
outlasts a MongoDB restart; an unsafe artifact name cannot be fixed by retrying."""

WORKSTREAM_FINISH_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=6,
)
"""``finish_workstream``: a child's result artifact and closing message. Bounded:
a child whose store is down still ends (with no artifact) instead of retrying for long."""

EVALUATION_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
)
"""The ``Evaluation`` workflow's activities: bookkeeping retried until MongoDB, Redis
and the archive queue answer (a compare waits for a fork's end to be archived)."""

# History volume (docs/graphs/index.md, long runs). Temporal refuses a run's history
# past 51,200 events or 50 MB; a run warns on its stream at half of either.
HISTORY_WARNING_EVENTS = 25_000
HISTORY_WARNING_BYTES = 25 * 1024 * 1024
# Node reports a run keeps in its workflow state (describe, result); the archive has all.
REPORTS_KEPT = 100

DEFAULT_START_TO_CLOSE = timedelta(minutes=5)
TOOL_CALL_START_TO_CLOSE = timedelta(minutes=5)
LIFECYCLE_START_TO_CLOSE = timedelta(seconds=30)
LOCAL_ACTIVITY_START_TO_CLOSE = timedelta(seconds=30)
ARTIFACT_MERGE_START_TO_CLOSE = timedelta(minutes=2)
WORKSTREAM_FINISH_START_TO_CLOSE = timedelta(minutes=1)
ITEM_BATCH_HEARTBEAT = timedelta(seconds=30)
"""A ``run_item_batch`` silent this long is lost (its worker died): it is retried then,
not after the whole start-to-close timeout."""
EVALUATION_START_TO_CLOSE = timedelta(seconds=60)
"""Above ``archive_catch_up_seconds`` (30 s by default), which a compare may wait."""
EVALUATION_HEARTBEAT = timedelta(seconds=10)
"""An evaluation activity silent this long is lost (its worker died): it is retried
then, not after the whole start-to-close timeout."""
NODE_HEARTBEAT = timedelta(seconds=30)
"""``execute_node``, ``llm_turn``, ``tool_call``: an attempt that has not heartbeaten
this long (its worker died or froze) is retried on another worker, and the late
attempt's results are refused (docs/design.md §3, fencing in ``MessagePoster``)."""


def node_heartbeat(node: NodeSpec) -> timedelta:
    """Heartbeat timeout of ``node``'s remote activities: its ``heartbeat_seconds``, else 30 s."""
    if node.heartbeat_seconds is not None:
        return timedelta(seconds=node.heartbeat_seconds)
    return NODE_HEARTBEAT


def retry_from_spec(spec: RetrySpec, base: RetryPolicy) -> RetryPolicy:
    """A Temporal policy from a node's ``retry``; keeps ``base``'s non-retryable types."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=spec.initial_interval_seconds),
        backoff_coefficient=spec.backoff_coefficient,
        maximum_interval=timedelta(seconds=spec.max_interval_seconds),
        maximum_attempts=spec.max_attempts,
        non_retryable_error_types=[
            *(base.non_retryable_error_types or []),
            *spec.non_retryable_errors,
        ],
    )


def type_retry(spec: NodeTypeSpec | None) -> RetryPolicy:
    """The default retry policy of a node type's activities (``NODE_RETRY`` if it has none)."""
    if spec is None or spec.retry is None:
        return NODE_RETRY
    return retry_policy(spec.retry)


def type_timeout(spec: NodeTypeSpec | None, *, local: bool = False) -> timedelta:
    """The default start-to-close timeout of one activity of a node type.

    A type without one gets the worker's default for an activity, or for a local
    activity when ``local``.
    """
    if spec is not None and spec.timeout_seconds is not None:
        return timedelta(seconds=spec.timeout_seconds)
    return LOCAL_ACTIVITY_START_TO_CLOSE if local else DEFAULT_START_TO_CLOSE


def node_retry(node: NodeSpec, base: RetryPolicy = NODE_RETRY) -> RetryPolicy:
    """The retry policy of ``node``: its own ``retry`` if set, else ``base``."""
    return retry_from_spec(node.retry, base) if node.retry is not None else base


def node_timeout(node: NodeSpec, spec: NodeTypeSpec | None = None) -> timedelta:
    """Start-to-close timeout of one activity of ``node``.

    Args:
        node: its own ``timeout_seconds`` wins.
        spec: its type's spec; default: the built-in of that name, if any.
    """
    if node.timeout_seconds is not None:
        return timedelta(seconds=node.timeout_seconds)
    if spec is None:
        spec = BUILTIN_NODE_TYPES.get(node.type)
    return type_timeout(spec, local=runs_local(node, spec))


def node_priority(node: NodeSpec) -> Priority:
    """Temporal priority of ``node``'s activities; unset: the run's (``Priority.default``).

    The default object adds nothing to the scheduling command, so graphs without
    priorities schedule exactly what they did before the field existed.
    """
    if node.priority is None:
        return Priority.default
    return Priority(priority_key=node.priority)


def routed(graph: GraphSpec, node: NodeSpec) -> NodeSpec:
    """``node`` with the task queue its activities run on filled in from the graph.

    A node's own ``task_queue`` wins over the graph's ``task_queues`` entry for its
    type; a node neither names is returned as it is (the run's own queue).
    """
    queue = graph.task_queue_of(node)
    if queue == node.task_queue:
        return node
    return node.model_copy(update={"task_queue": queue})


def runs_local(node: NodeSpec, spec: NodeTypeSpec | None) -> bool:
    """Whether ``node``'s ``execute_node`` is a local activity.

    Its own ``local`` wins; unset, its type's default (``NodeTypeSpec.local``: router
    and output), unless it runs on a task queue of its own (``node`` as ``routed``
    returns it), which only a remote activity can reach.
    """
    if node.local is not None:
        return node.local
    return spec is not None and spec.local and node.task_queue is None


def ask_cancellation(settles: bool) -> ActivityCancellationType:
    """How a canceled run cancels its in-flight ``request_input``.

    ``settles`` (the run carries the patch ``ask-settles-before-the-run-ends``): wait for
    the short activity to end, so its prompt message and inbox record land before
    ``finish_run`` posts the last message and closes the run's prompts; runs recorded
    before the patch keep Temporal's default, TRY_CANCEL, so their histories replay.
    """
    if settles:
        return ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
    return ActivityCancellationType.TRY_CANCEL
