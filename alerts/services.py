"""Every write of notifications: subscriptions (create, delete, a test message), what an
outcome means for each subscription covering its table (alerts.core.events: one message
per change of state), the LATE sweep, and each delivery's attempts.

A message is a Delivery row written in the transaction that records the outcome (a refresh
run's end, a verification), and its task is sent once that commits: a transaction that
rolls back leaves no message for something that did not happen, and a message whose task
could not be sent is sent again by the sweep (the row stays PENDING)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from alerts.core import addresses, signing, webhooks
from alerts.core.events import OK, TOPIC_OF, Event, Seen, step
from alerts.models import Delivery, NotificationState, Subscription
from catalog.core.errors import InvalidInput, NotFound
from catalog.models import Namespace, Table
from infra import broker
from refresh import selectors as refresh_selectors
from refresh.models import MaterializedTable, RefreshRun, Verification

logger = logging.getLogger(__name__)

TASK = "alerts.deliver"
#: The longest wait between two attempts of a delivery.
MAX_BACKOFF_SECONDS = 900.0


def allowed_networks() -> list:
    return addresses.parse_networks(settings.ALERTS_ALLOWED_NETWORKS)


# -- subscriptions -------------------------------------------------------------------------


def create_subscription(
    *,
    actor: Any = None,
    materialized_table: str | None = None,
    namespace: str | None = None,
    email: str | None = None,
    webhook_url: str | None = None,
) -> Subscription:
    """Subscribe an email address or a webhook URL to a materialized table ("ns.name") or
    to a namespace (its tables and those of the namespaces inside it)."""
    mt, ns = _subject(materialized_table, namespace)
    channel, address = _destination(email, webhook_url)
    return Subscription.objects.create(
        materialized_table=mt,
        namespace=ns,
        channel=channel,
        address=address,
        secret=signing.new_secret() if channel == Subscription.Channel.WEBHOOK else "",
        created_by=actor if getattr(actor, "pk", None) else None,
    )


def _subject(
    materialized_table: str | None, namespace: str | None
) -> tuple[MaterializedTable | None, Namespace | None]:
    if bool(materialized_table) == bool(namespace):
        raise InvalidInput(
            "Name either a materialized table or a namespace", field="materialized_table"
        )
    if materialized_table:
        qualified = str(materialized_table)
        space, _, name = qualified.rpartition(".")
        if not space or not name:
            raise InvalidInput(
                "A materialized table is named with its namespace: namespace.name",
                field="materialized_table",
            )
        try:
            return refresh_selectors.get_materialized_table(space, name), None
        except NotFound as error:
            raise NotFound(error.message, field="materialized_table") from None
    found = Namespace.objects.filter(name=str(namespace)).first()
    if found is None:
        raise NotFound(f"Namespace does not exist: {namespace}", field="namespace")
    return None, found


def _destination(email: str | None, webhook_url: str | None) -> tuple[str, str]:
    if bool(email) == bool(webhook_url):
        raise InvalidInput("Give either an email address or a webhook URL", field="email")
    if email:
        email = str(email).strip()
        try:
            validate_email(email)
        except ValidationError:
            raise InvalidInput(f"{email!r} is not an email address", field="email") from None
        return Subscription.Channel.EMAIL, email
    check_webhook_url(webhook_url)
    return Subscription.Channel.WEBHOOK, str(webhook_url).strip()


def check_webhook_url(url: Any, *, field: str = "webhook_url") -> None:
    """InvalidInput naming `field` unless webhooks may be sent to `url` (addresses)."""
    addresses.check_url(url, allowed_networks(), field=field)


def delete_subscription(subscription_id: int, *, actor: Any = None) -> None:
    deleted, _ = Subscription.objects.filter(pk=subscription_id).delete()
    if not deleted:
        raise NotFound(f"Subscription does not exist: {subscription_id}", field="id")


def get_subscription(subscription_id: int) -> Subscription:
    found = (
        Subscription.objects.select_related("materialized_table__table__namespace", "namespace")
        .filter(pk=subscription_id)
        .first()
    )
    if found is None:
        raise NotFound(f"Subscription does not exist: {subscription_id}", field="id")
    return found


def send_test(subscription_id: int, *, actor: Any = None) -> Delivery:
    """A TEST message to the subscription, delivered like any other."""
    with transaction.atomic():
        subscription = get_subscription(subscription_id)
        subject = (
            str(subscription.materialized_table.table)
            if subscription.materialized_table_id
            else str(subscription.namespace)
        )
        payload = _payload(
            Event.TEST,
            table=subject,
            is_table=subscription.materialized_table_id is not None,
            message=f"A test message for the subscription of {subscription.address} "
            f"to the {subscription.subject}",
        )
        return _deliver_later(subscription, Event.TEST, subject, payload)


# -- outcomes ------------------------------------------------------------------------------


def covering(table: Table) -> list[Subscription]:
    """The subscriptions that cover `table`: its materialized table's, and those of its
    namespace and of every namespace it lies inside."""
    levels = table.namespace.name.split(".")
    names = [".".join(levels[: i + 1]) for i in range(len(levels))]
    return list(
        Subscription.objects.filter(
            Q(materialized_table__table_id=table.pk) | Q(namespace__name__in=names)
        ).order_by("pk")
    )


def observe(table: Table, seen: Seen, *, message: str, run: dict | None = None) -> int:
    """What `seen` means for every subscription covering `table`: its new state, and a
    message where the state changed. In the caller's transaction; returns how many
    messages."""
    topic = TOPIC_OF[seen].value
    states = NotificationState.objects.filter(table=table, topic=topic)
    good = (Seen.RUN_SUCCEEDED, Seen.ON_TIME, Seen.MAINTENANCE_SUCCEEDED, Seen.EXACT)
    # The common case (every successful tick): nobody was told of a problem, nothing to do.
    if seen in good and not states.exclude(state=OK).exists():
        return 0
    subscriptions = covering(table)
    if not subscriptions:
        return 0
    last = {s.subscription_id: s for s in states.filter(subscription__in=subscriptions)}
    sent = 0
    now = timezone.now()
    for subscription in subscriptions:
        known = last.get(subscription.pk)
        state, event = step(known.state if known else OK, seen)
        if known is None and state != OK:
            NotificationState.objects.create(
                subscription=subscription, table=table, topic=topic, state=state, changed_at=now
            )
        elif known is not None and known.state != state:
            known.state, known.changed_at = state, now
            known.save(update_fields=["state", "changed_at"])
        if event is not None:
            payload = _payload(event, table=str(table), message=message, run=run)
            _deliver_later(subscription, event, str(table), payload)
            sent += 1
    return sent


def refresh_run_finished(run: RefreshRun) -> int:
    if run.materialized_table_id is None:
        return 0
    if run.state == RefreshRun.State.FAILED:
        mt = MaterializedTable.objects.select_related("table__namespace").get(
            pk=run.materialized_table_id
        )
        suspended = mt.state == MaterializedTable.State.SUSPENDED and bool(mt.suspended_reason)
        seen = Seen.SUSPENDED if suspended else Seen.RUN_FAILED
        message = mt.suspended_reason if suspended else f"Refresh run {run.pk} of {mt.table} failed"
    elif run.state in (RefreshRun.State.SUCCEEDED, RefreshRun.State.SKIPPED):
        mt = MaterializedTable.objects.select_related("table__namespace").get(
            pk=run.materialized_table_id
        )
        seen, message = Seen.RUN_SUCCEEDED, f"Refresh run {run.pk} of {mt.table} succeeded"
    else:
        return 0
    return observe(mt.table, seen, message=message, run=_refresh_run(run))


def maintenance_run_finished(run: Any) -> int:
    if run.table_id is None or run.state not in ("FAILED", "SUCCEEDED"):
        return 0
    table = Table.objects.select_related("namespace").get(pk=run.table_id)
    failed = run.state == "FAILED"
    return observe(
        table,
        Seen.MAINTENANCE_FAILED if failed else Seen.MAINTENANCE_SUCCEEDED,
        message=f"Maintenance run {run.pk} ({run.action}) of {table} "
        + ("failed" if failed else "succeeded"),
        run={
            "kind": "maintenance",
            "id": run.pk,
            "action": run.action,
            "trigger": run.trigger,
            "state": run.state,
            "queued_at": _iso(run.queued_at),
            "started_at": _iso(run.started_at),
            "finished_at": _iso(run.finished_at),
            "error": run.error,
            "url": _link(reverse("api:maintenance-run", args=[run.pk])),
        },
    )


def verified(verification: Verification) -> int:
    verdict = verification.verdict
    if verdict == Verification.Verdict.UNVERIFIABLE:
        return 0
    table = Table.objects.select_related("namespace").get(
        materialized__pk=verification.materialized_table_id
    )
    differs = verdict == Verification.Verdict.DIFFERS
    return observe(
        table,
        Seen.DIFFERS if differs else Seen.EXACT,
        message=(
            f"Snapshot {verification.snapshot_id} of {table} differs from its query: "
            f"{verification.missing_rows} rows missing, {verification.extra_rows} extra"
            if differs
            else f"Snapshot {verification.snapshot_id} of {table} is exact"
        ),
        run={
            "kind": "verification",
            "id": verification.pk,
            "snapshot_id": verification.snapshot_id,
            "verdict": verdict,
            "missing_rows": verification.missing_rows,
            "extra_rows": verification.extra_rows,
            "finished_at": _iso(verification.verified_at),
        },
    )


def sweep(*, now: datetime | None = None) -> dict[str, int]:
    """celery-beat's pass (ALERTS_SWEEP_SECONDS): LATE for each active subscribed table
    whose lag has been over its freshness for longer than ALERTS_LATE_GRACE_SECONDS, and
    RECOVERED once it is on time again; then every PENDING delivery whose attempt is
    overdue by ALERTS_RESEND_AFTER_SECONDS (its task was never sent, or the worker holding
    it died) is sent again, and finished deliveries older than ALERTS_KEEP_DAYS are
    deleted."""
    now = now or timezone.now()
    grace = timedelta(seconds=settings.ALERTS_LATE_GRACE_SECONDS)
    late = 0
    for mt_id in _subscribed_tables():
        with transaction.atomic():
            # The table's row first, as finish() takes it: one outcome at a time per table.
            mt = (
                MaterializedTable.objects.select_for_update()
                .select_related("table__namespace")
                .filter(pk=mt_id)
                .first()
            )
            if mt is None or mt.state != MaterializedTable.State.ACTIVATED:
                continue  # a suspended table's lateness is no news
            lag = refresh_selectors.lag(mt, now)
            if lag is None:
                continue
            limit = mt.freshness.to_timedelta() + grace
            seen = Seen.LATE if lag > limit else Seen.ON_TIME
            message = (
                f"{mt.table} is late: its data is {_duration(lag)} old, over its freshness of "
                f"{mt.freshness} for longer than {_duration(grace)}"
                if seen is Seen.LATE
                else f"{mt.table} is on time again: its data is {_duration(lag)} old"
            )
            late += observe(mt.table, seen, message=message)
    overdue = Delivery.objects.filter(
        status=Delivery.Status.PENDING,
        next_attempt_at__lt=now - timedelta(seconds=settings.ALERTS_RESEND_AFTER_SECONDS),
    )
    lost = list(overdue.order_by("pk").values_list("pk", flat=True)[:1000])
    for delivery_id in lost:
        _send(delivery_id)
    if lost:
        # Work that only the sweep saved: an operator wants to know the broker or a worker
        # lost tasks.
        logger.warning(
            "Sent again %d deliveries whose task was lost: %s",
            len(lost),
            ", ".join(map(str, lost[:20])) + (", ..." if len(lost) > 20 else ""),
        )
    resent = len(lost)
    kept_after = now - timedelta(days=settings.ALERTS_KEEP_DAYS)
    pruned, _ = (
        Delivery.objects.filter(created_at__lt=kept_after)
        .exclude(status=Delivery.Status.PENDING)
        .delete()
    )
    return {"messages": late, "resent": resent, "pruned": pruned}


def _subscribed_tables() -> list[int]:
    namespaces = list(
        Subscription.objects.filter(namespace__isnull=False).values_list(
            "namespace__name", flat=True
        )
    )
    covered = Q(subscriptions__isnull=False)
    for name in set(namespaces):
        covered |= Q(table__namespace__name=name) | Q(table__namespace__name__startswith=name + ".")
    return list(
        MaterializedTable.objects.filter(covered)
        .filter(state=MaterializedTable.State.ACTIVATED)
        .values_list("pk", flat=True)
        .distinct()
    )


# -- deliveries ----------------------------------------------------------------------------


def _deliver_later(
    subscription: Subscription, event: Event, table_name: str, payload: dict
) -> Delivery:
    delivery = Delivery.objects.create(
        subscription=subscription,
        event=event.value,
        table_name=table_name,
        payload=payload,
        next_attempt_at=timezone.now(),
    )
    transaction.on_commit(lambda: _send(delivery.pk))
    return delivery


def _send(delivery_id: int, countdown: float | None = None) -> None:
    try:
        broker.send_task(TASK, args=[delivery_id], countdown=countdown)
    except Exception:  # the broker is down: the sweep sends it once it is back
        logger.warning("Delivery %s not sent to a worker yet", delivery_id, exc_info=True)


class _Failure(Exception):
    def __init__(self, message: str, *, code: int | None = None, again: bool = True) -> None:
        super().__init__(message)
        self.message, self.code, self.again = message, code, again


def deliver(delivery_id: int) -> str:
    """One attempt at a PENDING delivery that is due; returns its status after it. Taken by
    a conditional update, so a task sent twice attempts once. A failure is tried again
    with exponential backoff (ALERTS_RETRY_BASE_SECONDS, doubling, at most 15 minutes
    apart) until ALERTS_RETRY_FOR_SECONDS after the message was made; a refused address
    or a 4xx other than 408 and 429 is not tried again."""
    now = timezone.now()
    lease = timedelta(seconds=settings.ALERTS_WEBHOOK_TIMEOUT_SECONDS * 4 + 30)
    taken = Delivery.objects.filter(
        Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now + timedelta(seconds=1)),
        pk=delivery_id,
        status=Delivery.Status.PENDING,
    ).update(attempts=F("attempts") + 1, last_attempt_at=now, next_attempt_at=now + lease)
    delivery = Delivery.objects.select_related("subscription").filter(pk=delivery_id).first()
    if delivery is None:
        return "GONE"
    if not taken:
        return delivery.status
    try:
        code = _attempt(delivery)
    except _Failure as failure:
        elapsed = (timezone.now() - delivery.created_at).total_seconds()
        wait = min(
            settings.ALERTS_RETRY_BASE_SECONDS * 2 ** (delivery.attempts - 1), MAX_BACKOFF_SECONDS
        )
        again = failure.again and elapsed + wait <= settings.ALERTS_RETRY_FOR_SECONDS
        Delivery.objects.filter(pk=delivery.pk).update(
            status=Delivery.Status.PENDING if again else Delivery.Status.FAILED,
            response_code=failure.code,
            error=failure.message[:2000],
            next_attempt_at=timezone.now() + timedelta(seconds=wait) if again else None,
        )
        if again:
            transaction.on_commit(lambda: _send(delivery.pk, countdown=wait))
            return Delivery.Status.PENDING
        return Delivery.Status.FAILED
    Delivery.objects.filter(pk=delivery.pk).update(
        status=Delivery.Status.DELIVERED,
        response_code=code,
        error="",
        delivered_at=timezone.now(),
        next_attempt_at=None,
    )
    return Delivery.Status.DELIVERED


def _attempt(delivery: Delivery) -> int | None:
    subscription = delivery.subscription
    if subscription.channel == Subscription.Channel.EMAIL:
        payload = delivery.payload
        try:
            send_mail(
                f"[Lakeview] {delivery.event} {delivery.table_name}".strip(),
                _email_text(payload),
                settings.DEFAULT_FROM_EMAIL,
                [subscription.address],
            )
        except Exception as error:  # smtplib's errors, refused addresses, timeouts
            raise _Failure(f"{type(error).__name__}: {error}") from None
        return None
    try:
        target, found = addresses.check_url(subscription.address, allowed_networks())
    except InvalidInput as refused:
        raise _Failure(refused.message, again=False) from None
    body = json.dumps(
        {**delivery.payload, "delivery": delivery.pk}, separators=(",", ":"), sort_keys=True
    ).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Lakeview-Webhooks/1",
        "X-Lakeview-Event": delivery.event,
        "X-Lakeview-Delivery": str(delivery.pk),
        signing.HEADER: signing.header(subscription.secret, int(time.time()), body),
    }
    try:
        answer = webhooks.post(
            target, found, body, headers, timeout=settings.ALERTS_WEBHOOK_TIMEOUT_SECONDS
        )
    except Exception as error:  # OSError, http.client's errors, TLS
        raise _Failure(f"{type(error).__name__}: {error}") from None
    if 200 <= answer.status < 300:
        return answer.status
    if 300 <= answer.status < 400:
        # A redirect is never followed: its target was not checked (addresses), and a
        # receiver that moved is told to the subscriber, not guessed. Its host only: the
        # error is shown to readers, and a URL's path may hold the receiver's token.
        where = urlsplit(answer.location)
        target = f"{where.scheme}://{where.netloc}/..." if where.netloc else "another path"
        raise _Failure(
            f"The receiver answered {answer.status}, a redirect to {target}; webhooks do "
            "not follow redirects: subscribe the URL it names",
            code=answer.status,
            again=False,
        )
    retried = answer.status >= 500 or answer.status in (408, 429)
    raise _Failure(
        f"The receiver answered {answer.status}: {answer.text[:500]}",
        code=answer.status,
        again=retried,
    )


# -- messages ------------------------------------------------------------------------------


def _payload(
    event: Event, *, table: str, message: str, run: dict | None = None, is_table: bool = True
) -> dict:
    namespace, _, name = table.rpartition(".")
    links = {}
    if is_table and namespace:
        links["table"] = _link(reverse("catalog:table-detail", args=[namespace, name]))
        links["materialized_table"] = _link(reverse("refresh:mt-detail", args=[namespace, name]))
    links["monitoring"] = _link(reverse("refresh:monitoring"))
    return {
        "event": event.value,
        "table": table,
        "message": message,
        "occurred_at": _iso(timezone.now()),
        "run": run,
        "error": (run or {}).get("error") or "",
        "links": links,
    }


def _refresh_run(run: RefreshRun) -> dict:
    return {
        "kind": "refresh",
        "id": run.pk,
        "trigger": run.trigger,
        "action": run.action,
        "state": run.state,
        "queued_at": _iso(run.queued_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "error": run.error[:2000],
        "url": _link(reverse("api:run-detail", args=[run.pk])),
    }


def _email_text(payload: dict) -> str:
    lines = [payload.get("message", ""), ""]
    run = payload.get("run") or {}
    for key in ("kind", "id", "state", "started_at", "finished_at"):
        if run.get(key) is not None:
            lines.append(f"{key}: {run[key]}")
    if payload.get("error"):
        lines += ["", "Error:", payload["error"]]
    lines.append("")
    lines += [f"{name}: {url}" for name, url in (payload.get("links") or {}).items()]
    return "\n".join(lines) + "\n"


def _link(path: str) -> str:
    return settings.ALERTS_BASE_URL.rstrip("/") + path


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _duration(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def deliveries(subscription_id: int) -> Iterable[Delivery]:
    get_subscription(subscription_id)
    return Delivery.objects.filter(subscription_id=subscription_id).order_by("-created_at", "-id")
