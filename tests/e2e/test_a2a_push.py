"""A2A push notifications: configs per task, delivered by the real worker to a loopback receiver.

The v1.0 flows use the a2a-sdk client's push config calls; the 0.3 flows are
raw JSON-RPC with the 0.3 method names (as in ``test_a2a``).
"""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis
from a2a.types import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError

from spindle.gateway.protocols.a2a.push_watch import WATCH_KEY
from tests.callback_receiver import CallbackReceiver, callback_receiver
from tests.e2e.conftest import Caller, SpindleStack
from tests.e2e.test_a2a import a2a_client, rpc, send_blocking, user_message
from tests.polling import eventually

pytestmark = pytest.mark.e2e

COMPLETED = TaskState.Name(TaskState.TASK_STATE_COMPLETED)
INPUT_REQUIRED = TaskState.Name(TaskState.TASK_STATE_INPUT_REQUIRED)


def states(receiver: CallbackReceiver) -> list[str]:
    """The task states the receiver accepted, in order (task snapshots and status updates).

    1.0 bodies are ``StreamResponse`` objects; 0.3 bodies the Task or event itself.
    """
    found = []
    for body in receiver.accepted():
        holder = body.get("task") or body.get("statusUpdate") or body
        if "status" in holder:
            found.append(holder["status"]["state"])
    return found


async def received(receiver: CallbackReceiver, state: str) -> None:
    """Wait until the receiver accepted a push with ``state``."""

    async def arrived() -> bool:
        return state in states(receiver)

    seen: bool = await eventually(arrived, what=f"a push with state {state}", timeout=30)
    assert seen


async def test_push_config_on_a_waiting_task_gets_input_required_then_completed(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    # The receiver fails the first POST: delivery must retry it.
    async with (
        callback_receiver(lambda n: 500 if n == 0 else 200) as receiver,
        a2a_client(stack, callers["alice"], streaming=False) as client,
    ):
        asked = await send_blocking(client, user_message("push budget", graph="approval-flow"))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        config = TaskPushNotificationConfig(
            task_id=asked.id,
            id="hook-1",
            url=receiver.url,
            token="tok-123",
            authentication=AuthenticationInfo(scheme="Bearer", credentials="cred-9"),
        )
        stored = await client.create_task_push_notification_config(config)
        assert (stored.id, stored.task_id, stored.url) == ("hook-1", asked.id, receiver.url)

        await received(receiver, INPUT_REQUIRED)
        assert receiver.statuses[0] == 500, "the first delivery failed and was retried"
        first = receiver.accepted()[0]
        assert first["task"]["id"] == asked.id
        assert receiver.headers[-1]["x-a2a-notification-token"] == "tok-123"
        assert receiver.headers[-1]["authorization"] == "Bearer cred-9"

        await send_blocking(client, user_message("approve", task_id=asked.id))
        await received(receiver, COMPLETED)
        bodies = receiver.accepted()
        assert any("artifactUpdate" in b for b in bodies), bodies
        assert all(
            (b.get("task") or b.get("statusUpdate") or b.get("artifactUpdate"))
            and (b.get("task", {}).get("id") or next(iter(b.values()))["taskId"]) == asked.id
            for b in bodies
        )
        assert states(receiver)[-1] == COMPLETED


async def test_get_list_delete_and_another_tenant_cannot_see_configs(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], redis_url: str
) -> None:
    async with (
        callback_receiver(lambda n: 200) as receiver,
        a2a_client(stack, callers["alice"], streaming=False) as client,
        a2a_client(stack, callers["mallory"], streaming=False) as other,
    ):
        asked = await send_blocking(client, user_message("push offsite", graph="approval-flow"))
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=asked.id, id="a", url=receiver.url)
        )
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=asked.id, id="b", url=f"{receiver.url}/b")
        )
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=asked.id, id="b")
        )
        assert got.url == f"{receiver.url}/b"
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=asked.id)
        )
        assert [c.id for c in listed.configs] == ["a", "b"]
        assert await watched(redis_url, asked.id), "a waiting task is followed"

        with pytest.raises(TaskNotFoundError):
            await other.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=asked.id)
            )
        with pytest.raises(TaskNotFoundError):
            await other.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=asked.id, id="x", url=receiver.url)
            )
        theirs = await rpc(
            stack,
            callers["mallory"],
            "tasks/pushNotificationConfig/get",
            {"id": asked.id, "pushNotificationConfigId": "a"},
        )
        assert theirs["error"]["code"] == -32001

        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=asked.id, id="a")
        )
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=asked.id)
        )
        assert [c.id for c in listed.configs] == ["b"]
        with pytest.raises(TaskNotFoundError):
            await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=asked.id, id="a")
            )


async def test_protocol_0_3_inline_config_and_set_validation(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    async with callback_receiver(lambda n: 200) as receiver:
        message: dict[str, Any] = {
            "kind": "message",
            "role": "user",
            "messageId": f"inline-{unique}",
            "parts": [{"kind": "text", "text": f"inline {unique}"}],
            "metadata": {"graph": "approval-flow"},
        }
        sent = await rpc(
            stack,
            callers["alice"],
            "message/send",
            {
                "message": message,
                "configuration": {
                    "blocking": True,
                    "pushNotificationConfig": {"url": receiver.url, "token": "t03"},
                },
            },
        )
        task = sent["result"]
        assert task["status"]["state"] == "input-required", task
        await received(receiver, "input-required")
        first = receiver.accepted()[0]
        assert (first["kind"], first["id"]) == ("task", task["id"])
        assert states(receiver)[0] == "working", "the task as it started comes first"
        assert receiver.headers[0]["x-a2a-notification-token"] == "t03"

        answer = {
            "kind": "message",
            "role": "user",
            "messageId": f"answer-{unique}",
            "taskId": task["id"],
            "parts": [{"kind": "text", "text": "approve"}],
        }
        resumed = await rpc(stack, callers["alice"], "message/send", {"message": answer})
        assert resumed["result"]["status"]["state"] == "completed", resumed
        await received(receiver, "completed")
        kinds = [b["kind"] for b in receiver.accepted()]
        assert "artifact-update" in kinds and kinds[-1] == "status-update", kinds

        listed = await rpc(
            stack, callers["alice"], "tasks/pushNotificationConfig/list", {"id": task["id"]}
        )
        assert [c["pushNotificationConfig"]["url"] for c in listed["result"]] == [receiver.url]

        bad = await rpc(
            stack,
            callers["alice"],
            "tasks/pushNotificationConfig/set",
            {"taskId": task["id"], "pushNotificationConfig": {"url": "ftp://example.com/x"}},
        )
        assert bad["error"]["code"] == -32602


async def test_config_on_a_finished_task_pushes_it_once_and_is_not_watched(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], redis_url: str
) -> None:
    async with (
        callback_receiver(lambda n: 200) as receiver,
        a2a_client(stack, callers["alice"], streaming=False) as client,
    ):
        done = await send_blocking(client, user_message("How many days are there in 3 weeks?"))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=done.id, url=receiver.url)
        )
        await received(receiver, COMPLETED)
        assert receiver.accepted()[0]["task"]["id"] == done.id
    assert not await watched(redis_url, done.id)


async def watched(redis_url: str, task_id: str) -> bool:
    """Whether the gateways follow ``task_id``'s run for pushes."""
    redis = aioredis.Redis.from_url(redis_url)
    try:
        return await redis.zscore(WATCH_KEY, task_id) is not None
    finally:
        await redis.aclose()
