from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.utils import timezone

from tenancy import selectors, throttling
from tenancy.models import Role

# The mixin's host, for mypy: without Django's stubs `AuthenticationForm` is an unknown (Any) base, so its
# `cleaned_data`, `request`, `user_cache` and `clean` are found on it. At run time a plain mixin.
if TYPE_CHECKING:
    from django.contrib.auth.forms import AuthenticationForm as _AuthenticationForm
else:
    _AuthenticationForm = object


class LockoutMixin(_AuthenticationForm):
    """For a sign-in form: refuse an account locked out for this client after too many wrong passwords (checked
    before the password, so the right one does not get through either), count wrong passwords, and forget them on
    a right one. A refusal leaves `locked_for`, the seconds it lasts, for the view's answer (`signin_view`)."""

    locked_for: float | None = None

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        wait = throttling.login_locked(self.request, username)
        if wait is not None:
            raise self.locked_out(wait)
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            # A right password the form refuses anyway (an inactive account, no staff status) is no guess.
            if self.user_cache is None and username:
                locked = throttling.login_failed(self.request, username)
                if locked is not None:
                    raise self.locked_out(locked) from None
            raise
        throttling.login_succeeded(self.request, username)
        return cleaned

    def locked_out(self, wait: float) -> forms.ValidationError:
        self.locked_for = wait
        return forms.ValidationError(
            "Too many failed sign-ins for this account. Try again in %(wait)s, or sign in from a browser you used "
            "before.", code="locked_out", params={"wait": throttling.wait_text(wait)})


class LoginForm(LockoutMixin, AuthenticationForm):
    """The login page's form."""


class AdminLoginForm(LockoutMixin, AdminAuthenticationForm):
    """The admin console's login form (staff only, as Django's)."""


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.MEMBER)

    def clean_username(self):
        username = self.cleaned_data["username"]
        user = selectors.active_users().filter(username=username).first()
        if user is None:
            raise forms.ValidationError("No active user with this username.")
        return user


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


class TokenCreateForm(forms.Form):
    name = forms.CharField(max_length=100)
    expires_in_days = forms.IntegerField(
        min_value=1, max_value=3650, required=False, help_text="Leave empty for a token that does not expire."
    )
    read_only = forms.BooleanField(required=False, help_text="It can read but never write (any write answers 403).")

    def expires_at(self):
        days = self.cleaned_data.get("expires_in_days")
        return timezone.now() + timedelta(days=days) if days else None
