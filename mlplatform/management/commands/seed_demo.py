from django.core.management.base import BaseCommand
from django.db import transaction

from tenancy.demo import DEMO_PASSWORD, seed_tenants


class Command(BaseCommand):
    help = "Create (or keep) the demo organization, projects, users, quotas and jobs. Safe to run twice."

    def handle(self, *args, **options):
        with transaction.atomic():
            logins = seed_tenants()
        self.stdout.write(f"Demo logins (password for all: {DEMO_PASSWORD}):")
        for username, description in logins:
            self.stdout.write(f"  {username:<8} {description}")
