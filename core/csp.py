"""A Content-Security-Policy header on every response (Django 5.2 has no built-in one).

The pages load scripts and styles only from /static: no inline <script>, event handler attribute or style
attribute (templates/ hold none; static/js/ui.js gives forms their confirmations and auto-submits), so an injected
script or style never runs. DRF's browsable API, a page of a third-party package, has a style element and a few
style attributes: its answers allow inline styles (CSP 3's style-src-elem and style-src-attr), still no inline
script. A view that sets its own policy keeps it.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from rest_framework.renderers import BrowsableAPIRenderer

HEADER = "Content-Security-Policy"


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy = settings.TIDAL_CONTENT_SECURITY_POLICY  # read per response: a test may change it
        if policy and HEADER not in response:
            if isinstance(getattr(response, "accepted_renderer", None), BrowsableAPIRenderer):
                policy += "; style-src-elem 'self' 'unsafe-inline'; style-src-attr 'unsafe-inline'"
            response[HEADER] = policy
        return response
