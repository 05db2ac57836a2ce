"""Forms of the jobs pages: list filters and the YAML submit form.

The submit form only parses YAML and runs `JobSubmitSerializer` (the same validation as the API); the rules a
serializer cannot check (role, archived project, can it ever run) stay in `jobs.services.job_submit`.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import HttpRequest

from core.errors import flatten_errors
from core.parsers import YAML_MAX_BYTES, BodyProblem, load_yaml
from jobs.models import Launcher, Stage
from jobs.serializers import JobSubmitSerializer
from jobs.states import State
from quotas import selectors as quota_selectors


def _blank(choices) -> list[tuple[str, str]]:
    return [("", "any"), *choices]


class JobFilterForm(forms.Form):
    """GET filters of the jobs list. Unknown values are ignored rather than answered with an error page."""

    state = forms.ChoiceField(required=False, choices=_blank(State.choices))
    stage = forms.ChoiceField(required=False, choices=_blank(Stage.choices))
    flavor = forms.ChoiceField(required=False)
    all = forms.BooleanField(required=False, label="All my projects")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["flavor"].choices = _blank((f.name, f.name) for f in quota_selectors.flavors())

    def filter(self, jobs):
        if not self.is_valid():
            return jobs
        data = self.cleaned_data
        if data["state"]:
            jobs = jobs.filter(state=data["state"])
        if data["stage"]:
            jobs = jobs.filter(stage=data["stage"])
        if data["flavor"]:
            jobs = jobs.filter(flavor__name=data["flavor"])
        return jobs


class LauncherForm(forms.Form):
    launcher = forms.ChoiceField(choices=Launcher.choices, initial=Launcher.PYTORCH, required=False)


class JobSpecForm(forms.Form):
    """A job spec as YAML. `clean()` leaves `spec_errors`: a list of (field, message) naming what is wrong."""

    spec = forms.CharField(widget=forms.Textarea(attrs={"rows": 30, "spellcheck": "false", "autocapitalize": "off",
                                                        "autocomplete": "off", "id": "spec-editor"}),
                           max_length=YAML_MAX_BYTES, strip=False, label="Job spec (YAML)")

    def __init__(self, *args, request: HttpRequest, **kwargs):
        super().__init__(*args, **kwargs)
        self.request = request
        self.spec_errors: list[tuple[str, str]] = []
        self.validated: dict[str, Any] | None = None

    def add_spec_error(self, field: str | None, message: str) -> None:
        self.spec_errors.append((field or "", message))
        self.add_error(None, f"{field}: {message}" if field else message)

    def clean(self):
        cleaned = super().clean()
        text = cleaned.get("spec")
        if text is None:
            return cleaned
        try:  # with an API body's limits: depth, aliases, integers, JSON's values only
            data = load_yaml(text)
        except BodyProblem as problem:
            self.add_spec_error("yaml", str(problem))
            return cleaned
        if not isinstance(data, dict):
            self.add_spec_error("yaml", "The spec must be a mapping of fields (name: ..., image: ..., groups: ...).")
            return cleaned
        project = getattr(self.request, "project", None)
        if project and "project" not in data:
            data["project"] = project.slug
        serializer = JobSubmitSerializer(data=data, context={"request": self.request})
        if not serializer.is_valid():
            for field, reasons in flatten_errors(serializer.errors).items():
                for reason in reasons:
                    self.add_spec_error("" if field == "non_field_errors" else field, reason)
            return cleaned
        self.validated = dict(serializer.validated_data)
        return cleaned
