"""A bound on the size of a request's line and headers.

uvicorn's httptools protocol reads headers of any size (a 32 MiB header was
accepted). ``bounded_http_protocol`` returns the same protocol that stops at
``Settings.max_header_bytes``: it answers 431 with a problem body and closes the
connection. Two counts, because httptools hands a header over only once it is
complete: the bytes read while no header block has completed (a header streamed
without end never reaches a callback), and the URL and headers as parsed (a
block that arrives whole in one read).
"""

from __future__ import annotations

from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from spindle.shared.contracts.errors import HeadersTooLarge


class _TooLarge(Exception):
    """Raised from a parser callback to stop parsing this connection."""


class _BoundedHttpToolsProtocol(HttpToolsProtocol):
    max_header_bytes = 65_536

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unfinished_head = 0  # bytes read since the last header block completed
        self._parsed_head = 0  # URL and header bytes of the current request
        self._in_body = False
        self._refused = False

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if not self._in_body:
            if self._unfinished_head > self.max_header_bytes:
                self._refuse()
                return
            self._unfinished_head += len(data)
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._parsed_head = 0

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_body = True
        self._unfinished_head = 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_body = False
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        # uvicorn answers 400 to any error a parser callback raises; ours is a 431.
        if self._refused:
            self._write_refusal()
        else:
            super().send_400_response(msg)

    def _count(self, size: int) -> None:
        self._parsed_head += size
        if self._parsed_head > self.max_header_bytes:
            self._refused = True
            raise _TooLarge

    def _refuse(self) -> None:
        self._refused = True
        self._write_refusal()

    def _write_refusal(self) -> None:
        error = HeadersTooLarge(
            f"the request line and headers are over {self.max_header_bytes} bytes "
            "(SPINDLE_MAX_HEADER_BYTES)"
        )
        body = orjson.dumps(error.problem())
        head = (
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"content-type: application/problem+json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n"
            b"connection: close\r\n\r\n"
        )
        if not self.transport.is_closing():
            self.transport.write(head + body)
            self.transport.close()


def bounded_http_protocol(max_header_bytes: int) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol, refusing heads over ``max_header_bytes`` with 431."""
    return type(
        "BoundedHttpToolsProtocol",
        (_BoundedHttpToolsProtocol,),
        {"max_header_bytes": max_header_bytes},
    )
