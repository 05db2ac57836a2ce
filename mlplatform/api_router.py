"""Every /api/v1/ route, registered by each app's api module."""

from rest_framework.routers import DefaultRouter

from clusters import api as clusters_api
from costs import api as costs_api
from jobs import api as jobs_api
from pools import api as pools_api
from quotas import api as quotas_api
from reliability import api as reliability_api
from replays import api as replays_api
from serving import api as serving_api
from telemetry import api as telemetry_api
from tenancy import api as tenancy_api
from tracking import api as tracking_api

router = DefaultRouter()
router.register("organizations", tenancy_api.OrganizationViewSet, basename="organization")
router.register("projects", tenancy_api.ProjectViewSet, basename="project")
router.register("memberships", tenancy_api.MembershipViewSet, basename="membership")
router.register("tokens", tenancy_api.ApiTokenViewSet, basename="token")
router.register("audit", tenancy_api.AuditEntryViewSet, basename="audit")
router.register("flavors", quotas_api.ResourceFlavorViewSet, basename="flavor")
router.register("priority-classes", quotas_api.PriorityClassViewSet, basename="priorityclass")
router.register("quotas", quotas_api.QuotaViewSet, basename="quota")
router.register("jobs", jobs_api.JobViewSet, basename="job")
router.register("queue", jobs_api.QueueViewSet, basename="queue")
router.register("clusters", clusters_api.ClusterViewSet, basename="cluster")
router.register("nodes", clusters_api.NodeViewSet, basename="node")
router.register("replays", replays_api.ReplayRunViewSet, basename="replay")
router.register("experiments", tracking_api.ExperimentViewSet, basename="experiment")
router.register("runs", tracking_api.RunViewSet, basename="run")
router.register("chart-panels", tracking_api.ChartPanelViewSet, basename="chartpanel")
router.register("alerts", tracking_api.AlertViewSet, basename="alert")
router.register("alert-rules", tracking_api.AlertRuleViewSet, basename="alertrule")
router.register("webhooks", tracking_api.WebhookViewSet, basename="webhook")
router.register("telemetry/attempts", telemetry_api.AttemptTelemetryViewSet, basename="gpu-telemetry")
router.register("telemetry/sources", telemetry_api.TelemetrySourceViewSet, basename="telemetry-source")
router.register("telemetry/gpus", telemetry_api.GpuActivityViewSet, basename="gpu-activity")
router.register("prices/devices", costs_api.DevicePriceViewSet, basename="deviceprice")
router.register("prices/cpu", costs_api.CpuPriceViewSet, basename="cpuprice")
router.register("prices/memory", costs_api.MemoryPriceViewSet, basename="memoryprice")
router.register("prices/discounts", costs_api.ClassDiscountViewSet, basename="classdiscount")
router.register("prices/tidal", costs_api.TidalRateViewSet, basename="tidalrate")
router.register("budgets", costs_api.BudgetViewSet, basename="budget")
router.register("diagnoses", reliability_api.DiagnosisViewSet, basename="diagnosis")
router.register("failure-patterns", reliability_api.FailurePatternViewSet, basename="failurepattern")
router.register("quarantine", reliability_api.NodeQuarantineViewSet, basename="quarantine")
router.register("reliability-policies", reliability_api.ProjectPolicyViewSet, basename="reliabilitypolicy")
router.register("organization-budgets", costs_api.OrganizationBudgetViewSet, basename="organizationbudget")
router.register("user-budgets", costs_api.UserBudgetViewSet, basename="userbudget")
router.register("spend-anomaly-rules", costs_api.SpendAnomalyRuleViewSet, basename="spendanomalyrule")
router.register("pools", pools_api.PoolViewSet, basename="pool")
router.register("services", serving_api.ServiceViewSet, basename="service")
