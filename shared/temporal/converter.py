"""The one data converter every Spindle process talks to Temporal with.

Pydantic models as payloads (``temporalio.contrib.pydantic``) plus the claim
check of ``spindle.shared.temporal.payload_offload``: payloads above
``Settings.payload_offload_bytes`` travel as references to MongoDB. The gateway,
the worker, the replayer and the tests must all use it, or a run whose payloads
were offloaded cannot be read back.
"""

from __future__ import annotations

import dataclasses

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter

from spindle.shared.platform.settings import Settings
from spindle.shared.temporal.payload_offload import OffloadingPayloadCodec


def data_converter(settings: Settings) -> DataConverter:
    """``pydantic_data_converter`` with the payload-offloading codec attached.

    Safe to call before an event loop runs: the codec opens its Mongo client
    on first use.
    """
    return dataclasses.replace(
        pydantic_data_converter, payload_codec=OffloadingPayloadCodec(settings)
    )


__all__ = ["data_converter"]
