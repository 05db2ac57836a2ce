from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from costs.api import CostReportCsvView, CostReportView
from mlplatform import health, metrics
from mlplatform.api_router import router
from pools.api import PoolDemandView
from reliability.api import AttemptDiagnosisView, ReliabilityReportView
from serving.api import PoolServiceMetricView
from tenancy.api import MeView
from tenancy.forms import AdminLoginForm, LoginForm
from tenancy.views import PasswordResetView, signin_view
from tracking.api import RunLogBatchView

# Both sign-in doors lock an account out for clients after repeated wrong passwords (tenancy/throttling.py).
admin.site.login_form = AdminLoginForm
admin.site.login = signin_view(admin.site.login)

api_v1 = [
    path("me/", MeView.as_view(), name="me"),
    path("runs/<int:pk>/log-batch/", RunLogBatchView.as_view(), name="run-log-batch"),
    path("costs/", CostReportView.as_view(), name="cost-report"),
    path("costs/csv/", CostReportCsvView.as_view(), name="cost-report-csv"),
    path("attempts/<int:id>/diagnosis/", AttemptDiagnosisView.as_view(), name="attempt-diagnosis"),
    path("reliability/", ReliabilityReportView.as_view(), name="reliability-report"),
    path("pools/<str:name>/demand/", PoolDemandView.as_view(), name="pool-demand"),
    path("pools/<str:name>/services/<int:pk>/metric/", PoolServiceMetricView.as_view(), name="pool-service-metric"),
    path("", include(router.urls)),
]

urlpatterns = [
    # Browsers and crawlers ask for /favicon.ico whatever the pages link: the icon is an SVG in static/.
    path("favicon.ico", RedirectView.as_view(url=f"{settings.STATIC_URL}favicon.svg", permanent=True)),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("mlflow/<slug:project>/", include("tracking.mlflow.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's set-up script as a file: the Content-Security-Policy runs no inline one.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("accounts/login/", signin_view(auth_views.LoginView.as_view(redirect_authenticated_user=True,
                                                                     authentication_form=LoginForm)), name="login"),
    path("accounts/password_reset/", PasswordResetView.as_view(), name="password_reset"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("costs.analysis.urls")),
    path("", include("tracking.urls")),
    path("", include("costs.urls")),
    path("", include("reliability.urls")),
    path("", include("pools.urls")),
    path("", include("serving.urls")),
    path("", include("tenancy.urls")),
]

# Refusals and missing pages inside the page frame, with the reason; every error under /api/ is the JSON error body.
handler400 = "mlplatform.errorpages.bad_request"
handler403 = "mlplatform.errorpages.permission_denied"
handler404 = "mlplatform.errorpages.page_not_found"
handler500 = "mlplatform.errorpages.server_error"
