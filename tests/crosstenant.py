"""The cross-tenant tests every API endpoint inherits.

A test class sets `basename` (the router name), `make_object(tenant, project)` (an object owned by `project`), and
optionally `create_payload(tenant, project)` / `update_payload`. The mixin then checks, against the same fixtures for
every endpoint: an outsider gets 404 on retrieve/update/delete and an empty list; a viewer gets 403 on every write;
creating into another tenant's project is refused as if the project did not exist.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.urls import reverse


class CrossTenantMixin:
    basename: str
    lookup: str = "pk"  # attribute of the object used in its URL
    writable: bool = True  # False for read-only endpoints
    viewer_can_see: bool = True  # False when even a viewer of the project cannot see the objects (e.g. audit)
    detail_writes: tuple[str, ...] = ("patch", "delete")  # HTTP methods the detail URL accepts for writes
    detail_actions: tuple[str, ...] = ()  # POST sub-routes such as "cancel": outsider 404, viewer 403
    user_owned: bool = False  # objects belong to a user (tokens): "outsider" is simply another user
    owner_role: str = "viewer"  # for user-owned objects, whose object the outsider attacks

    def make_object(self, tenant, project):
        raise NotImplementedError

    def create_payload(self, tenant, project) -> dict | None:
        return None

    def update_payload(self, tenant, obj) -> dict:
        return {}

    # helpers ----------------------------------------------------------------------------------------------
    def list_url(self) -> str:
        return reverse(f"{self.basename}-list")

    def detail_url(self, obj) -> str:
        return reverse(f"{self.basename}-detail", kwargs={self.lookup: getattr(obj, self.lookup)})

    def action_url(self, obj, name: str) -> str:
        return reverse(f"{self.basename}-{name}", kwargs={self.lookup: getattr(obj, self.lookup)})

    def victim(self, tenant):
        if self.user_owned:
            return self.make_object(tenant, tenant.users[self.owner_role])
        return self.make_object(tenant, tenant.project)

    def _ids(self, response) -> set:
        assert response.status_code == 200, response.content
        rows = response.json()
        rows = rows["results"] if isinstance(rows, dict) else rows
        return {str(row.get(self.lookup if self.lookup != "pk" else "id")) for row in rows}

    # the shared tests ---------------------------------------------------------------------------------------
    def test_outsider_cannot_retrieve(self, tenant, clients):
        obj = self.victim(tenant)
        response = clients["outsider"].get(self.detail_url(obj))
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"

    def test_an_id_beyond_any_key_is_a_404(self, tenant, clients):
        """Defect (the API fuzz test): a whole number beyond a 64-bit key in the URL reached the database through a
        lookup on a related field (an attempt's telemetry, by the attempt's id) and failed there: a 500. The reader
        who sees the real object asks for one that cannot exist."""
        obj = self.victim(tenant)
        if not str(getattr(obj, self.lookup)).isdigit():
            pytest.skip("looked up by name: any text may name an object")
        reader = self.owner_role if self.user_owned else ("viewer" if self.viewer_can_see else "owner")
        for beyond in (2**63, 10**30):
            response = clients[reader].get(self.detail_url(SimpleNamespace(**{self.lookup: beyond})))
            assert response.status_code == 404, response.content
            assert response.json()["error"]["code"] == "not_found"

    def test_outsider_list_does_not_show_it(self, tenant, clients):
        obj = self.victim(tenant)
        assert str(getattr(obj, self.lookup)) not in self._ids(clients["outsider"].get(self.list_url()))

    def test_member_list_shows_it(self, tenant, clients):
        """The positive control: without it the two tests above could pass on an endpoint that shows nothing."""
        obj = self.victim(tenant)
        reader = self.owner_role if self.user_owned else ("viewer" if self.viewer_can_see else "owner")
        assert str(getattr(obj, self.lookup)) in self._ids(clients[reader].get(self.list_url()))

    def test_outsider_cannot_update_or_delete(self, tenant, clients):
        obj = self.victim(tenant)
        url = self.detail_url(obj)
        outsider = clients["outsider"]
        expected = 404 if self.writable and self.detail_writes else 405
        assert outsider.patch(url, self.update_payload(tenant, obj), format="json").status_code == (
            expected if "patch" in self.detail_writes else 405)
        assert outsider.delete(url).status_code == (expected if "delete" in self.detail_writes else 405)
        for name in self.detail_actions:
            assert outsider.post(self.action_url(obj, name)).status_code == 404
        # still there, unchanged, for its owners
        reader = clients[self.owner_role if self.user_owned else "owner"]
        assert reader.get(url).status_code == 200

    def test_viewer_cannot_write(self, tenant, clients):
        if self.user_owned:
            pytest.skip("user-owned objects have no project roles: every user manages their own")
        obj = self.victim(tenant)
        url = self.detail_url(obj)
        viewer = clients["viewer"]
        expected = {403} if (self.writable and self.viewer_can_see) else {403, 404, 405}
        if "patch" in self.detail_writes:
            assert viewer.patch(url, self.update_payload(tenant, obj), format="json").status_code in expected
        if "delete" in self.detail_writes:
            assert viewer.delete(url).status_code in expected
        for name in self.detail_actions:
            assert viewer.post(self.action_url(obj, name)).status_code == 403
        payload = self.create_payload(tenant, tenant.project)
        if payload is not None:
            assert viewer.post(self.list_url(), payload, format="json").status_code == 403

    def test_cannot_create_in_another_tenants_project(self, tenant, clients):
        payload = self.create_payload(tenant, tenant.other_project)
        if payload is None or self.user_owned:
            pytest.skip("this endpoint does not create project-owned objects")
        response = clients["owner"].post(self.list_url(), payload, format="json")
        assert response.status_code == 400
        assert "project" in response.json()["error"]["fields"]
