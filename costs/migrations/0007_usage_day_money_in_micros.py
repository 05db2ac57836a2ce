"""A usage day's money as whole micro-units of the currency instead of floats: reports add them exactly in SQL. The
days rolled before keep their amounts, rounded once to the micro-unit."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("costs", "0006_spend_anomalies"),
    ]

    operations = [
        migrations.AddField(
            model_name="usageday",
            name="cost_micros",
            field=models.BigIntegerField(default=0, help_text=(
                "Everything the piece cost (devices or CPU, and memory), in millionths of the currency.")),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="usageday",
            name="memory_cost_micros",
            field=models.BigIntegerField(db_default=0, help_text="The part of `cost_micros` its memory cost."),
        ),
        # A default for the float column, so that unapplying this adds it back to rows that exist (then filled).
        migrations.AlterField(
            model_name="usageday",
            name="cost",
            field=models.FloatField(default=0.0, help_text="Everything the piece cost: devices or CPU, and memory."),
        ),
        migrations.RunSQL(
            "UPDATE costs_usageday SET cost_micros = ROUND(cost * 1000000), "
            "memory_cost_micros = ROUND(memory_cost * 1000000)",
            "UPDATE costs_usageday SET cost = cost_micros / 1000000.0, "
            "memory_cost = memory_cost_micros / 1000000.0",
        ),
        migrations.RemoveField(model_name="usageday", name="cost"),
        migrations.RemoveField(model_name="usageday", name="memory_cost"),
    ]
