from django.apps import AppConfig


class RefreshConfig(AppConfig):
    name = "refresh"
    verbose_name = "Refresh"
