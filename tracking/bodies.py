"""Reading a batch's body: one over the size limit is a 413 that names the limit and what to do about it, in Tidal's
error shape on its API and in MLflow's on the MLflow endpoints."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework.request import Request

from core.parsers import BodyTooLarge


def body_of(request: Request) -> Any:
    try:
        return request.data
    # The JSON parser refuses an oversized body itself; Django's own check refuses form-encoded ones.
    except (BodyTooLarge, RequestDataTooBig):
        raise BodyTooLarge(settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
                           "Send fewer points per batch (the limit is DATA_UPLOAD_MAX_MEMORY_SIZE).") from None
