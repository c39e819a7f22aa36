"""The three console groups exist after `migrate` (API.md)."""

from __future__ import annotations

from django.db import migrations

GROUPS = {
    "reviewers": [("toolops", "view_toolcall"), ("toolops", "view_run")],
    "support": [("toolops", "view_toolcall"), ("toolops", "view_run")],
    "operators": [
        ("toolops", "view_toolcall"),
        ("toolops", "view_run"),
        ("toolops", "view_toolpolicy"),
        ("toolops", "add_toolpolicy"),
        ("toolops", "change_toolpolicy"),
        ("toolops", "view_agent"),
    ],
}


def create_groups(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, perms in GROUPS.items():
        group, _ = Group.objects.get_or_create(name=name)
        for app_label, codename in perms:
            perm = Permission.objects.filter(
                content_type__app_label=app_label, codename=codename
            ).first()
            if perm is not None:
                group.permissions.add(perm)


def remove_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=GROUPS).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("toolops", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
