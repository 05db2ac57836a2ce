"""Reading a batch's body: one over the size limit is a 413 that names the limit (Django's own answer is an HTML
400), in Tidal's error shape on its API and in MLflow's on the MLflow endpoints."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework.exceptions import APIException
from rest_framework.request import Request


class BodyTooLarge(APIException):
    status_code = 413
    default_code = "too_large"


def body_of(request: Request) -> Any:
    try:
        return request.data
    except RequestDataTooBig:
        raise BodyTooLarge(f"The body is over the size limit of {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes "
                           "(DATA_UPLOAD_MAX_MEMORY_SIZE): send fewer points per batch.") from None
