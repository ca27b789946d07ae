"""The API of notifications (mounted at /api/ by webapp/api_urls.py): subscriptions (list,
create, read, delete), a test message, and each subscription's deliveries. Viewers read,
editors change (catalog.api.permissions). Thin: each handler checks the request's shape and
calls one service."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from alerts import services
from alerts.models import Delivery, Subscription
from catalog.api.views import CatalogPagination, _validated
from catalog.roles import can_edit


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
            and not can_edit(request.user)
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
    @extend_schema(
        operation_id="subscriptions_list",
        responses=SubscriptionSerializer(many=True),
        tags=["notifications"],
    )
    def get(self, request: Request) -> Response:
        queryset = Subscription.objects.select_related(
            "materialized_table__table__namespace", "namespace", "created_by"
        ).order_by("pk")
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
        data = _validated(SubscriptionRequestSerializer, request)
        subscription = services.create_subscription(actor=request.user, **data)
        return Response(
            CreatedSubscriptionSerializer(subscription).data, status=status.HTTP_201_CREATED
        )


class SubscriptionDetailView(APIView):
    @extend_schema(
        operation_id="subscriptions_read",
        responses=SubscriptionSerializer,
        tags=["notifications"],
    )
    def get(self, request: Request, subscription_id: int) -> Response:
        subscription = services.get_subscription(subscription_id)
        return Response(SubscriptionSerializer(subscription, context={"request": request}).data)

    @extend_schema(
        operation_id="subscriptions_delete", responses={204: None}, tags=["notifications"]
    )
    def delete(self, request: Request, subscription_id: int) -> Response:
        services.delete_subscription(subscription_id, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SubscriptionTestView(APIView):
    @extend_schema(
        operation_id="subscriptions_test",
        request=None,
        responses={202: DeliverySerializer},
        description="Send a TEST message; its delivery is listed with the others.",
        tags=["notifications"],
    )
    def post(self, request: Request, subscription_id: int) -> Response:
        delivery = services.send_test(subscription_id, actor=request.user)
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)


class DeliveryListView(APIView):
    @extend_schema(
        operation_id="subscriptions_deliveries",
        responses=DeliverySerializer(many=True),
        description="The subscription's deliveries, newest first: status (PENDING, "
        "DELIVERED, FAILED), attempts, the last response code and error, times.",
        tags=["notifications"],
    )
    def get(self, request: Request, subscription_id: int) -> Response:
        queryset: Any = services.deliveries(subscription_id)
        paginator = CatalogPagination()
        page = paginator.paginate_queryset(queryset, request, view=self)
        return paginator.get_paginated_response(DeliverySerializer(page, many=True).data)
