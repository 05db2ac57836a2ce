from django.db import migrations

DEFAULTS = [
    ("high", 1000, False, False, "Urgent work; may preempt lower priorities of its own project."),
    ("normal", 500, False, True, "The default."),
    ("low", 100, False, False, "Runs after normal work of its project."),
    ("preemptible", 0, True, False, "Runs only on idle capacity, charged less, first to be preempted."),
]


def create(apps, schema_editor):
    PriorityClass = apps.get_model("quotas", "PriorityClass")
    for name, value, preemptible, is_default, description in DEFAULTS:
        PriorityClass.objects.get_or_create(name=name, defaults={
            "value": value, "preemptible": preemptible, "is_default": is_default, "description": description})


class Migration(migrations.Migration):
    dependencies = [("quotas", "0001_initial")]
    # Reversing keeps the classes: by then jobs and prices may refer to them (PROTECT), and unapplying 0001 drops
    # the table anyway.
    operations = [migrations.RunPython(create, migrations.RunPython.noop)]
