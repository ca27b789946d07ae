"""The API of notifications (mounted at /api/ by webapp/api_urls.py): subscriptions (list,
create, read, delete), a test message, and each subscription's deliveries. A subscription is
seen by whoever may read its materialized table or namespace (read_data: its messages say
how the table's runs went) and made, tested or deleted by whoever manages it; one on what
one may not see answers as a missing one (catalog.access). Thin: each handler checks the
request's shape and calls one service."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.db.models import Q
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from alerts import services
from alerts.models import Delivery, Subscription
from catalog import access
from catalog.api.permissions import HoldsAPrivilege
from catalog.api.shared import CatalogPagination, validated
from catalog.core.access import MANAGE, READ_DATA, READ_METADATA
from catalog.core.errors import Forbidden, NotFound
from catalog.models import Namespace
from refresh.models import MaterializedTable


def _held(request: Request, subscription: Subscription) -> frozenset[str]:
    """What the request's principal holds on the subscription's subject."""
    who = access.principal_of(request)
    if subscription.materialized_table_id is not None:
        return who.privileges(access.of_object(subscription.materialized_table.table))
    if not who.sees_namespace(subscription.namespace.name):
        return frozenset()
    return who.privileges(access.namespace(subscription.namespace.name))


def _subscription(request: Request, subscription_id: int, privilege: str) -> Subscription:
    """The subscription, when its subject is one the principal may read (else the missing
    subscription's answer) and holds `privilege` on (else 403)."""
    found = services.get_subscription(subscription_id)
    held = _held(request, found)
    if READ_DATA not in held:
        raise NotFound(f"Subscription does not exist: {subscription_id}", field="id")
    if privilege not in held:
        name = getattr(request.user, "username", "?")
        raise Forbidden(f"Forbidden: {name} lacks the {privilege} privilege on the {found.subject}")
    return found


def _may_subscribe(request: Request, data: dict[str, Any]) -> None:
    """MANAGE on the subject a new subscription names; a subject the principal may not see
    is answered as the service answers a missing one."""
    who = access.principal_of(request)
    name = getattr(request.user, "username", "?")
    table, namespace = data.get("materialized_table"), data.get("namespace")
    if table and not namespace:
        space, _, short = str(table).rpartition(".")
        mt = (
            MaterializedTable.objects.select_related("table__namespace")
            .filter(table__namespace__name=space, table__name=short)
            .first()
        )
        if mt is None:
            return  # the service says what is wrong
        held = who.privileges(access.of_object(mt.table))
        if READ_METADATA not in held:
            raise NotFound(
                f"Materialized table does not exist: {space}.{short}", field="materialized_table"
            )
        if MANAGE not in held:
            raise Forbidden(
                f"Forbidden: {name} lacks the {MANAGE} privilege on materialized table {table}"
            )
    elif namespace and not table:
        if not who.sees_namespace(str(namespace)):
            raise NotFound(f"Namespace does not exist: {namespace}", field="namespace")
        if MANAGE not in who.privileges(access.namespace(str(namespace))):
            raise Forbidden(
                f"Forbidden: {name} lacks the {MANAGE} privilege on namespace {namespace}"
            )


class SubscriptionSerializer(serializers.ModelSerializer):
    materialized_table = serializers.SerializerMethodField()
    namespace = serializers.SlugRelatedField(slug_field="name", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Subscription
        fields = [
            "id",
            "materialized_table",
            "namespace",
            "channel",
            "address",
            "created_by",
            "created_at",
        ]

    def get_materialized_table(self, subscription: Subscription) -> str | None:
        mt = subscription.materialized_table
        return str(mt.table) if mt is not None else None

    def to_representation(self, subscription: Subscription) -> dict[str, Any]:
        data = super().to_representation(subscription)
        request = self.context.get("request")
        if (
            request is not None
            and subscription.channel == Subscription.Channel.WEBHOOK
            and MANAGE not in _held(request, subscription)
        ):
            # A webhook's path and query often hold a token of the receiver's (Slack's do).
            parts = urlsplit(subscription.address)
            data["address"] = f"{parts.scheme}://{parts.netloc}/..."
        return data


class CreatedSubscriptionSerializer(SubscriptionSerializer):
    """Only the answer to a create shows the webhook's signing secret."""

    class Meta(SubscriptionSerializer.Meta):
        fields = [*SubscriptionSerializer.Meta.fields, "secret"]


class SubscriptionRequestSerializer(serializers.Serializer):
    materialized_table = serializers.CharField(required=False, max_length=2048)
    namespace = serializers.CharField(required=False, max_length=2048)
    email = serializers.CharField(required=False, max_length=320)
    webhook_url = serializers.CharField(required=False, max_length=4096)


class DeliverySerializer(serializers.ModelSerializer):
    class Meta:
        model = Delivery
        fields = [
            "id",
            "subscription",
            "event",
            "table_name",
            "status",
            "attempts",
            "response_code",
            "error",
            "created_at",
            "last_attempt_at",
            "next_attempt_at",
            "delivered_at",
            "payload",
        ]


class SubscriptionListView(APIView):
    permission_classes = [HoldsAPrivilege]

    @extend_schema(
        operation_id="subscriptions_list",
        responses=SubscriptionSerializer(many=True),
        tags=["notifications"],
    )
    def get(self, request: Request) -> Response:
        queryset = Subscription.objects.select_related(
            "materialized_table__table__namespace", "namespace", "created_by"
        ).order_by("pk")
        # Only those on what one may read: tables by grants in the query, namespaces (few
        # carry subscriptions) one by one.
        who = access.principal_of(request)
        tables = access.objects_condition(who, READ_DATA, prefix="materialized_table__table__")
        if tables is not None:
            subscribed = Namespace.objects.filter(subscriptions__isnull=False).distinct()
            readable = [
                ns.pk
                for ns in subscribed.only("pk", "name")
                if who.sees_namespace(ns.name)
                and READ_DATA in who.privileges(access.namespace(ns.name))
            ]
            queryset = queryset.filter(
                (Q(materialized_table__isnull=False) & tables) | Q(namespace_id__in=readable)
            )
        paginator = CatalogPagination()
        page = paginator.paginate_queryset(queryset, request, view=self)
        return paginator.get_paginated_response(
            SubscriptionSerializer(page, many=True, context={"request": request}).data
        )

    @extend_schema(
        operation_id="subscriptions_create",
        request=SubscriptionRequestSerializer,
        responses={201: CreatedSubscriptionSerializer},
        description=(
            "Subscribe an email address (`email`) or a webhook (`webhook_url`, http or https) "
            "to a materialized table (`materialized_table`: namespace.name) or to a namespace "
            "(`namespace`, its tables and those of the namespaces inside it). The answer "
            "shows the webhook's signing secret, once. A URL that resolves to a loopback, "
            "private, link-local, multicast or reserved address is refused (400, `field`: "
            "webhook_url) unless ALERTS_ALLOWED_NETWORKS allows its network."
        ),
        tags=["notifications"],
    )
    def post(self, request: Request) -> Response:
        data = validated(SubscriptionRequestSerializer, request)
        _may_subscribe(request, data)
        subscription = services.create_subscription(actor=request.user, **data)
        return Response(
            CreatedSubscriptionSerializer(subscription).data, status=status.HTTP_201_CREATED
        )


class SubscriptionDetailView(APIView):
    permission_classes = [HoldsAPrivilege]

    @extend_schema(
        operation_id="subscriptions_read",
        responses=SubscriptionSerializer,
        tags=["notifications"],
    )
    def get(self, request: Request, subscription_id: int) -> Response:
        subscription = _subscription(request, subscription_id, READ_DATA)
        return Response(SubscriptionSerializer(subscription, context={"request": request}).data)

    @extend_schema(
        operation_id="subscriptions_delete", responses={204: None}, tags=["notifications"]
    )
    def delete(self, request: Request, subscription_id: int) -> Response:
        _subscription(request, subscription_id, MANAGE)
        services.delete_subscription(subscription_id, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SubscriptionTestView(APIView):
    permission_classes = [HoldsAPrivilege]

    @extend_schema(
        operation_id="subscriptions_test",
        request=None,
        responses={202: DeliverySerializer},
        description="Send a TEST message; its delivery is listed with the others.",
        tags=["notifications"],
    )
    def post(self, request: Request, subscription_id: int) -> Response:
        _subscription(request, subscription_id, MANAGE)
        delivery = services.send_test(subscription_id, actor=request.user)
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)


class DeliveryListView(APIView):
    permission_classes = [HoldsAPrivilege]

    @extend_schema(
        operation_id="subscriptions_deliveries",
        responses=DeliverySerializer(many=True),
        description="The subscription's deliveries, newest first: status (PENDING, "
        "DELIVERED, FAILED), attempts, the last response code and error, times.",
        tags=["notifications"],
    )
    def get(self, request: Request, subscription_id: int) -> Response:
        _subscription(request, subscription_id, READ_DATA)
        queryset: Any = services.deliveries(subscription_id)
        paginator = CatalogPagination()
        page = paginator.paginate_queryset(queryset, request, view=self)
        return paginator.get_paginated_response(DeliverySerializer(page, many=True).data)
