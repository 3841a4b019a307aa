"""The pure parts of A2A push notifications: config validation, headers, bodies."""

from __future__ import annotations

import pytest
from a2a.server.context import ServerCallContext
from a2a.types import AuthenticationInfo, Task, TaskPushNotificationConfig, TaskState
from a2a.utils.errors import InvalidParamsError

from spindle.gateway.protocols.a2a.push_watch import (
    delivery_config,
    protocol_of,
    push_body,
    validated,
)


def test_validated_defaults_the_id_to_default_and_refuses_non_http_urls() -> None:
    config = validated(TaskPushNotificationConfig(url="https://hooks.example/a"), "run-1")
    assert (config.id, config.task_id) == ("default", "run-1")
    for url in ("ftp://hooks.example/a", "hooks.example/a", "http://", ""):
        with pytest.raises(InvalidParamsError):
            validated(TaskPushNotificationConfig(url=url), "run-1")


def test_delivery_headers_follow_the_a2a_specification() -> None:
    config = TaskPushNotificationConfig(
        url="http://127.0.0.1/h",
        token="tok",
        authentication=AuthenticationInfo(scheme="Basic", credentials="dTpw"),
    )
    headers = delivery_config(config).request_headers()
    assert headers["X-A2A-Notification-Token"] == "tok"
    assert headers["Authorization"] == "Basic dTpw"
    bare = delivery_config(TaskPushNotificationConfig(url="http://127.0.0.1/h"))
    assert "Authorization" not in bare.request_headers()


def test_body_is_a_stream_response_in_1_0_and_the_task_itself_in_0_3() -> None:
    task = Task(id="run-1", context_id="run-1")
    task.status.state = TaskState.TASK_STATE_INPUT_REQUIRED
    assert push_body(task)["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    old = push_body(task, "0.3")
    assert (old["kind"], old["id"], old["status"]["state"]) == ("task", "run-1", "input-required")


def test_protocol_of_the_call_is_read_from_the_method_name() -> None:
    assert (
        protocol_of(ServerCallContext(state={"method": "tasks/pushNotificationConfig/set"}))
        == "0.3"
    )
    assert (
        protocol_of(ServerCallContext(state={"method": "CreateTaskPushNotificationConfig"}))
        == "1.0"
    )
