"""What a real kube-apiserver does in front of its storage and kmock does not, so the tests meet it too.

* **Content negotiation.** The API server encodes every JSON answer, errors included (a ``Status``), with the
  serializer the ``Accept`` header asks for; when the header allows none of its serializers (``text/plain`` only)
  it answers 406 NotAcceptable instead of the real error. Streams (a pod's log, a watch) are not negotiated.

:class:`ApiServerGate` wraps kmock's handler: kmock's ``Server`` builds its HTTP server through ``server_cls``, and
:class:`GatedServer` is that class with the gate in front, so every request of every test goes through it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp.test_utils
import aiohttp.web

Handler = Callable[[aiohttp.web.BaseRequest], Awaitable[aiohttp.web.StreamResponse]]

# The media ranges under which the API server can encode a JSON answer.
JSON_RANGES = frozenset({"application/json", "application/*", "*/*"})
NOT_ACCEPTABLE = ("only the following media types are accepted: application/json, application/yaml, "
                  "application/vnd.kubernetes.protobuf")


def accepts_json(accept: str | None) -> bool:
    """Whether an ``Accept`` header lets the server answer JSON. No header (or an empty one) accepts anything."""
    if not accept or not accept.strip():
        return True
    for clause in accept.split(","):
        media, *params = (part.strip() for part in clause.split(";"))
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if media.lower() in JSON_RANGES and quality > 0:
            return True
    return False


def status_response(code: int, reason: str, message: str) -> aiohttp.web.Response:
    """A ``Status`` object, the API server's shape of every error."""
    return aiohttp.web.json_response({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
                                      "message": message, "reason": reason, "code": code}, status=code)


def negotiate(request: aiohttp.web.BaseRequest, response: aiohttp.web.StreamResponse) -> aiohttp.web.StreamResponse:
    """The answer as the API server would send it: a JSON answer the client does not accept becomes 406."""
    if response.prepared or response.content_type != "application/json":
        return response  # a stream already under way, or bytes served as they are (a pod log)
    if accepts_json(request.headers.get("Accept")):
        return response
    return status_response(406, "NotAcceptable", NOT_ACCEPTABLE)


class ApiServerGate:
    """The API server's own layers in front of kmock's storage."""

    def wrap(self, handler: Handler) -> Handler:
        async def serve(request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
            return negotiate(request, await handler(request))

        return serve


class GatedServer(aiohttp.test_utils.RawTestServer):
    """aiohttp's raw test server serving kmock's handler through an :class:`ApiServerGate`."""

    def __init__(self, handler: Handler, *, gate: ApiServerGate, **kwargs: Any) -> None:
        super().__init__(gate.wrap(handler), **kwargs)
