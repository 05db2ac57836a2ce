"""Pages for projects: overview, settings (members and API tokens), audit log, and the project switcher; the
sign-in and password reset pages' answers to brute force (tenancy.throttling)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from core.errors import DomainError
from tenancy import selectors, services, throttling
from tenancy.forms import MemberAddForm, RoleForm, TokenCreateForm
from tenancy.middleware import SESSION_KEY
from tenancy.models import Project, Role, is_slug
from tenancy.panels import project_panels
from tenancy.permissions import has_role, role_in_project


def too_many(response: HttpResponse, wait: float) -> HttpResponse:
    """A page that refused a request for now: 429 with Retry-After, which clients and proxies understand."""
    response.status_code = 429
    response["Retry-After"] = str(math.ceil(wait))
    return response


def signin_view(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Wrap a sign-in view (the login page, the admin console's): a sign-in refused as locked out answers 429 with
    Retry-After (its form says why and for how long), and a successful one makes the browser a device of the
    account, which other clients' wrong passwords never lock out."""

    @functools.wraps(view)
    def answer(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        response = view(request, *args, **kwargs)
        form = (getattr(response, "context_data", None) or {}).get("form")
        wait = getattr(form, "locked_for", None)
        if wait is not None:
            return too_many(response, wait)
        if request.method == "POST" and response.status_code == 302 and request.user.is_authenticated:
            throttling.remember_device(response, request.user)
        return response

    return answer


class PasswordResetView(auth_views.PasswordResetView):
    """Django's, limited per account and per client address: past a limit the request is refused with 429 and no
    mail goes out, whether the account exists or not."""

    def form_valid(self, form):
        wait = throttling.password_reset_refused(self.request, form.cleaned_data["email"])
        if wait is None:
            return super().form_valid(form)
        form.add_error(None, f"Too many password reset requests; try again in {throttling.wait_text(wait)}.")
        return too_many(self.form_invalid(form), wait)


def project_or_404(request: HttpRequest, slug: str) -> Project:
    """The caller's project by slug, whatever their role; a missing project and another tenant's answer alike (404)."""
    project = selectors.projects_for_user(request.user).filter(slug=slug).first() if is_slug(slug) else None
    if project is None:
        raise Http404("No such project.")
    return project


def project_with_role_or_403(request: HttpRequest, slug: str, role: str, reason: str) -> Project:
    """The caller's project when they hold at least `role` in it.

    An outsider gets the 404 of a missing project; a member below `role` gets 403 with `reason`: a project the user
    belongs to never reads as missing.
    """
    project = project_or_404(request, slug)
    if not has_role(request.user, project, role):
        raise PermissionDenied(reason)
    return project


@login_required
def home(request: HttpRequest) -> HttpResponse:
    project = request.project
    if project:
        return redirect("project_detail", slug=project.slug)
    return render(request, "tenancy/no_project.html")


@login_required
@require_POST
def switch_project(request: HttpRequest) -> HttpResponse:
    project = project_or_404(request, request.POST.get("project", ""))
    request.session[SESSION_KEY] = project.slug
    target = request.POST.get("next") or reverse("project_detail", kwargs={"slug": project.slug})
    # A path of this site only. `redirect()` is not given it: it takes a word without "/" for a view's name
    # ("abc" answered 500, "switch_project" went to /switch/).
    if not target.startswith("/") or not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = reverse("home")
    return HttpResponseRedirect(_same_page_in(project, target))


# The address parameters that name a project: a project's own page (/projects/<slug>/...), MLflow's links of a
# project (/mlflow/<project>/), a list or report filtered to one (?project=).
PROJECT_NAMES = ("slug", "project")


def _same_page_in(project: Project, target: str) -> str:
    """The page being viewed, for the project switched to: a project's own page (settings, audit, MLflow links...)
    becomes the same page of the new project, a page filtered to the old project (?project=) the same page filtered
    to the new one, and a page of one object of the old project (a job, an experiment) the list of its kind (the
    first part of its address), or the new project's page when there is none. Other pages show the current project
    already."""
    path, _, query = target.partition("?")
    try:
        match = resolve(path)
    except Resolver404:
        return target
    params = QueryDict(query, mutable=True)
    for name in PROJECT_NAMES:
        if name in params:
            params[name] = project.slug
    query = f"?{params.urlencode()}" if params else ""
    named = {name: project.slug for name in PROJECT_NAMES if name in match.kwargs}
    if named:
        return reverse(match.view_name, kwargs={**match.kwargs, **named}) + query
    if not match.kwargs:
        return path + query
    return _list_of_kind(path) or reverse("project_detail", kwargs={"slug": project.slug})


def _list_of_kind(path: str) -> str | None:
    """`/jobs/` for `/jobs/12/logs/`: the first part of the address, when it is a page of its own."""
    first = "/" + path.strip("/").split("/", 1)[0] + "/"
    try:
        return first if not resolve(first).kwargs else None
    except Resolver404:
        return None


@login_required
def project_detail(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_or_404(request, slug)
    request.session[SESSION_KEY] = project.slug
    return render(request, "tenancy/project_detail.html", {
        "project": project,
        "role": role_in_project(request.user, project),
        "member_count": selectors.memberships_for_user(request.user).filter(project=project).count(),
        "panels": project_panels(request, project),
    })


def _settings_context(request: HttpRequest, project: Project, **extra) -> dict:
    return {
        "project": project,
        "can_admin": has_role(request.user, project, Role.ADMIN),
        "memberships": selectors.memberships_for_user(request.user).filter(project=project),
        "tokens": selectors.tokens_for_user(request.user),
        "member_form": extra.pop("member_form", MemberAddForm()),
        "token_form": extra.pop("token_form", TokenCreateForm()),
        "roles": Role.choices,
        **extra,
    }


@login_required
def project_settings(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_or_404(request, slug)
    return render(request, "tenancy/project_settings.html", _settings_context(request, project))


def _partial(request: HttpRequest, template: str, context: dict) -> HttpResponse:
    """htmx swaps the fragment in place; a plain form post (no JavaScript) gets the whole settings page.

    The fragment renders this request's messages itself: the page frame, which shows messages on a full page, is
    not part of an htmx answer, and a message not rendered stays in the session and shows on whatever page opens
    next (another project's included). Rendering them consumes them.
    """
    if request.headers.get("HX-Request"):
        return render(request, template, {**context, "htmx_fragment": True})
    return render(request, "tenancy/project_settings.html", context)


@login_required
@require_POST
def member_add(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_with_role_or_403(request, slug, Role.ADMIN, "Adding members needs the admin role.")
    form = MemberAddForm(request.POST)
    if form.is_valid():
        try:
            services.membership_add(actor=request.user, project=project, user=form.cleaned_data["username"],
                                    role=form.cleaned_data["role"])
            messages.success(request, f"Added {form.cleaned_data['username']}.")
            form = MemberAddForm()
        except DomainError as error:
            form.add_error(error.field if error.field in form.fields else None, error.message)
    return _partial(request, "tenancy/_members.html", _settings_context(request, project, member_form=form))


@login_required
@require_POST
def member_update(request: HttpRequest, slug: str, membership_id: int) -> HttpResponse:
    project = project_or_404(request, slug)
    membership = selectors.memberships_for_user(request.user).filter(project=project, pk=membership_id).first()
    if membership is None:
        raise Http404("No such member.")
    leaving = bool(request.POST.get("remove")) and membership.user_id == request.user.pk  # needs no role
    if not leaving and not has_role(request.user, project, Role.ADMIN):
        raise PermissionDenied("Changing or removing members needs the admin role.")
    try:
        if request.POST.get("remove"):
            services.membership_remove(actor=request.user, membership=membership)
            messages.success(request, f"Removed {membership.user}.")
        else:
            form = RoleForm(request.POST)
            if not form.is_valid():
                raise DomainError("Choose a valid role.", field="role")
            services.membership_change_role(actor=request.user, membership=membership, role=form.cleaned_data["role"])
            messages.success(request, f"{membership.user} is now {form.cleaned_data['role']}.")
    except DomainError as error:
        messages.error(request, error.message)
    return _partial(request, "tenancy/_members.html", _settings_context(request, project))


@login_required
@require_POST
def token_create(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_or_404(request, slug)
    form = TokenCreateForm(request.POST)
    context = {}
    if form.is_valid():
        token, secret = services.token_create(user=request.user, name=form.cleaned_data["name"],
                                              expires_at=form.expires_at(), read_only=form.cleaned_data["read_only"])
        context = {"new_token": token, "new_secret": secret}
        form = TokenCreateForm()
    return _partial(request, "tenancy/_tokens.html", _settings_context(request, project, token_form=form, **context))


@login_required
@require_POST
def token_revoke(request: HttpRequest, slug: str, token_id: int) -> HttpResponse:
    project = project_or_404(request, slug)
    token = selectors.tokens_for_user(request.user).filter(pk=token_id).first()
    if token is None:
        raise Http404("No such token.")
    services.token_revoke(actor=request.user, token=token)
    messages.success(request, f"Revoked token {token.name}.")
    return _partial(request, "tenancy/_tokens.html", _settings_context(request, project))


@login_required
def project_audit(request: HttpRequest, slug: str) -> HttpResponse:
    """The project's audit log, for its admins and owners: the rule of the API's audit endpoint
    (`selectors.audit_for_user`), which lists no entries to members and viewers."""
    project = project_with_role_or_403(request, slug, Role.ADMIN, "Reading the audit log needs the admin role.")
    entries = selectors.audit_for_user(request.user).filter(project=project)[:200]
    return render(request, "tenancy/project_audit.html", {"project": project, "entries": entries})
