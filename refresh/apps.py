from django.apps import AppConfig
from django.db.models.signals import post_delete


class RefreshConfig(AppConfig):
    name = "refresh"
    verbose_name = "Refresh"

    def ready(self) -> None:
        from refresh import schedules
        from refresh.models import MaterializedTable

        post_delete.connect(schedules.forget_schedule, sender=MaterializedTable)
