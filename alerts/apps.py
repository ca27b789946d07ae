"""The notifications app's config: connects its receivers to refresh's and maintenance's signals
and adds its section to the materialized table's page (neither app imports alerts)."""

from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "alerts"
    verbose_name = "Notifications"

    def ready(self) -> None:
        # Refresh and maintenance announce outcomes; they import nothing of this app.
        from alerts import receivers
        from maintenance import signals as maintenance_signals
        from refresh import signals as refresh_signals

        refresh_signals.run_finished.connect(receivers.refresh_run_finished, dispatch_uid="alerts")
        refresh_signals.verified.connect(receivers.verified, dispatch_uid="alerts")
        maintenance_signals.run_finished.connect(
            receivers.maintenance_run_finished, dispatch_uid="alerts"
        )
        # The materialized table's page shows this app's section; refresh imports nothing of it.
        from alerts import pages
        from catalog.pages.tables import Panel
        from refresh.pages import table

        panel = Panel("notifications", "alerts/_section.html", pages.later)
        if panel not in table.PANELS:
            table.PANELS.append(panel)
