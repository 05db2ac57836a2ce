"""Rate limits per API token (or per session user, or per address when anonymous)."""

from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from tenancy.models import ApiToken


class PerTokenRateThrottle(SimpleRateThrottle):
    scope = "token"

    def get_rate(self):
        # Read at request time so a changed setting (or a test's override) takes effect.
        return api_settings.DEFAULT_THROTTLE_RATES[self.scope]

    def allow_request(self, request, view):
        self.scope = "token" if request.user and request.user.is_authenticated else "anon"
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request, view)

    def get_cache_key(self, request, view):
        if isinstance(request.auth, ApiToken):
            ident = f"token-{request.auth.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            ident = f"addr-{self.get_ident(request)}"
        return f"throttle_{ident}"
