from __future__ import annotations

from datetime import timedelta

from django import forms
from django.utils import timezone

from tenancy import selectors
from tenancy.models import Role


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
