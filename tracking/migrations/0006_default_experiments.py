from django.db import migrations

DEFAULT_EXPERIMENT = "Default"  # tracking.services.DEFAULT_EXPERIMENT


def default_experiment_in_every_project(apps, schema_editor):
    """MLflow's experiment 0 is a project's "Default": every project has it from its creation on
    (tracking.listeners), and those created before get it here."""
    Project = apps.get_model("tenancy", "Project")
    Experiment = apps.get_model("tracking", "Experiment")
    have = set(Experiment.objects.filter(name=DEFAULT_EXPERIMENT).values_list("project_id", flat=True))
    Experiment.objects.bulk_create([Experiment(project_id=pk, name=DEFAULT_EXPERIMENT)
                                    for pk in Project.objects.exclude(pk__in=have).values_list("pk", flat=True)])


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0003_apitoken_read_only"),
        ("tracking", "0005_point_blocks"),
    ]

    operations = [migrations.RunPython(default_experiment_in_every_project, migrations.RunPython.noop)]
