from django.core.management.base import BaseCommand
from django.db import transaction

from clusters.demo import seed_cluster
from costs.demo import seed_costs
from jobs.demo import seed_jobs
from pools.demo import seed_borrower, seed_pool
from quotas.demo import seed_quotas
from serving.demo import seed_service
from tenancy.demo import DEMO_PASSWORD, seed_tenants


class Command(BaseCommand):
    help = "Create (or keep) the demo organization, projects, users, quotas and jobs. Safe to run twice."

    def add_arguments(self, parser):
        parser.add_argument("--without-jobs", action="store_true", help="seed tenants, cluster and quotas only")

    def handle(self, *args, without_jobs=False, **options):
        with transaction.atomic():
            logins = seed_tenants()
            seed_cluster()
            seed_quotas()
            seed_pool()
            seed_service()
            history = seed_costs()
            submitted = 0 if without_jobs else seed_jobs() + seed_borrower()
        if history:
            self.stdout.write(f"Replayed {history} past jobs of the Philly trace as five weeks of usage and cost.")
        if submitted:
            self.stdout.write(f"Submitted {submitted} demo jobs to the simulated cluster.")
        self.stdout.write(f"Demo logins (password for all: {DEMO_PASSWORD}):")
        for username, description in logins:
            self.stdout.write(f"  {username:<8} {description}")
