"""The admin what-if form: how much history, and one proposed change."""

from __future__ import annotations

import hashlib
from typing import Any

from django import forms

from core.errors import DomainError
from replay.trace import PRIORITY_CLASSES
from replays import selectors, services

POLICY_VALUES = [("backfill", "backfill"), ("skip", "skip"), ("strict", "strict"),
                 ("priority-fairshare", "priority-fairshare"), ("fifo", "fifo"), ("true", "on"), ("false", "off")]
# DomainError field -> form field, per kind of change.
FIELD_FOR = {
    "quota": {"project": "project", "flavor": "flavor", "field": "quota_field", "value": "quota_value"},
    "priority": {"name": "priority_name", "value": "priority_value"},
    "policy": {"field": "policy_field", "value": "policy_value"},
}


class WhatIfForm(forms.Form):
    days = forms.IntegerField(min_value=1, max_value=366, initial=7, label="Replay the last N days of real jobs")
    kind = forms.ChoiceField(label="Proposed change", widget=forms.RadioSelect, initial="quota", choices=[
        ("quota", "a project's guarantee or borrow limit for a flavor"),
        ("priority", "a priority class value"),
        ("policy", "a scheduling policy setting")])
    project = forms.ChoiceField(required=False)
    flavor = forms.ChoiceField(required=False)
    quota_field = forms.ChoiceField(required=False, label="Quota", choices=[
        ("guaranteed", "guarantee"), ("borrow_limit", "borrow limit")])
    quota_value = forms.IntegerField(required=False, min_value=0, label="New value (devices)")
    priority_name = forms.ChoiceField(required=False, label="Priority class")
    priority_value = forms.IntegerField(required=False, label="New value")
    policy_field = forms.ChoiceField(required=False, label="Setting",
                                     choices=[(name, name) for name in services.POLICY_SETTINGS])
    policy_value = forms.ChoiceField(required=False, label="New value", choices=POLICY_VALUES)
    # A checkbox whose value is the digest of the warnings shown (see whatif_form.html): ticking it confirms those
    # warnings only, so a value changed after ticking is checked (and warned about) again.
    run_anyway = forms.CharField(required=False, max_length=64, label="Replay it anyway",
                                 help_text="The change has warnings; tick to replay it all the same.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["project"].choices = [(p.slug, f"{p.slug} ({p.organization.slug})") for p in selectors.projects()]
        self.fields["flavor"].choices = [(f.name, f.name) for f in selectors.flavors()]
        values = selectors.priority_values()
        self.fields["priority_name"].choices = [(n, f"{n} (now {values[n]})") for n in PRIORITY_CLASSES
                                                if n in values]
        self.change: dict[str, Any] | None = None
        self.warnings: dict[str, list[str]] = {}  # form field -> warnings about the proposed change

    @property
    def warnings_digest(self) -> str:
        text = "\n".join(w for field in sorted(self.warnings) for w in self.warnings[field])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def ready(self) -> bool:
        """Valid, and either without warnings or with "replay it anyway" ticked for these very warnings: then the
        run may start."""
        if not self.is_valid() or self.change is None:
            return False
        return not self.warnings or self.cleaned_data.get("run_anyway") == self.warnings_digest

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        kind = data.get("kind")
        if self.errors or not kind:
            return data
        if kind == "quota":
            args = {"project": data.get("project"), "flavor": data.get("flavor"), "field": data.get("quota_field"),
                    "value": data.get("quota_value")}
        elif kind == "priority":
            args = {"name": data.get("priority_name"), "value": data.get("priority_value")}
        else:
            raw = data.get("policy_value")
            value: Any = {"true": True, "false": False}.get(raw, raw)
            args = {"field": data.get("policy_field"), "value": value}
        try:
            self.change = services.whatif_change(kind=kind, **args)
        except DomainError as exc:
            self.add_error(FIELD_FOR.get(kind, {}).get(exc.field or "", None), exc.message)
            return data
        if self.change["warnings"]:
            self.warnings[FIELD_FOR[kind]["value"]] = self.change["warnings"]
        return data
