"""`GET /metrics`: the app's Prometheus metrics in the text format (webapp/metrics.py).

Answered by its middleware right after the health endpoints, before the host check,
sessions and the login redirect, none of which a scraper should meet. Who may scrape:

- METRICS_ALLOWED_NETWORKS: the client addresses (CIDRs) allowed. Default: loopback only;
  with METRICS_TOKEN set, any address (the token guards it).
- METRICS_TOKEN: when set, the request must carry `Authorization: Bearer <token>`.

A request from an address outside the networks is not answered here at all: it goes on
through the app like any unknown path (the same 404), so the endpoint's existence does not
show. One from an allowed address without the right token gets a 403 that says only that.

The client address is REMOTE_ADDR, never a forwarded header a client can write: behind a
proxy it is the proxy's, and a token is then the way to tell scrapers apart."""

from __future__ import annotations

import glob
import hmac
import ipaddress
import json
import logging
import os
from collections.abc import Callable, Iterable
from functools import cache

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.multiprocess import MultiProcessCollector

from webapp import metrics

logger = logging.getLogger(__name__)

PATH = "/metrics"
#: Prometheus's classic text format, which every Prometheus version reads.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@cache
def _networks(cidrs: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def address_allowed(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in _networks(tuple(settings.METRICS_ALLOWED_NETWORKS)))


def token_accepted(request: HttpRequest) -> bool:
    expected = settings.METRICS_TOKEN
    if not expected:
        return True
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), expected.encode())


#: The multiprocess files' keys (JSON) as prometheus_client parses them, kept across
#: scrapes: parsing every key of every file again was a third of a scrape's time. Bounded by
#: the series the processes record; emptied past `_KEYS_KEPT` all the same.
_KEYS: dict[str, tuple] = {}
_KEYS_KEPT = 200_000


def _parsed(key: str) -> tuple:
    found = _KEYS.get(key)
    if found is None:
        if len(_KEYS) >= _KEYS_KEPT:
            _KEYS.clear()
        metric_name, name, labels, help_text = json.loads(key)
        found = _KEYS[key] = (metric_name, name, tuple(sorted(labels.items())), help_text)
    return found


def recorded(path: str) -> Iterable[Metric]:
    """Every process's metrics from the multiprocess folder, merged as prometheus_client's
    MultiProcessCollector merges them (its own merge), reading the files the same way."""
    families: dict[str, Metric] = {}
    for file in glob.glob(os.path.join(path, "*.db")):
        parts = os.path.basename(file).split("_")
        kind = parts[0]
        try:
            entries = MmapedDict.read_all_values_from_file(file)
        except FileNotFoundError:
            continue  # a live gauge's file, removed by mark_process_dead meanwhile
        for key, value, timestamp, _ in entries:
            metric_name, name, labels, help_text = _parsed(key)
            family = families.get(metric_name)
            if family is None:
                family = families[metric_name] = Metric(metric_name, help_text, kind)
            if kind == "gauge":
                family._multiprocess_mode = parts[1]  # type: ignore[attr-defined]
                family.add_sample(name, labels + (("pid", parts[2][:-3]),), value, timestamp)
            else:
                family.add_sample(name, labels, value)  # type: ignore[arg-type]
    return MultiProcessCollector._accumulate_metrics(families, True)


class _Scrape:
    """What one scrape reads: the recorded metrics (every process's, in multiprocess mode)
    and the apps' collectors of state read from the database."""

    def collect(self) -> Iterable[Metric]:
        if metrics.MULTIPROC_DIR:
            yield from recorded(metrics.MULTIPROC_DIR)
        else:
            yield from REGISTRY.collect()
        up = GaugeMetricFamily(
            "lakeview_metrics_collector_up",
            "Whether a collector of state read from the database answered this scrape.",
            labels=["collector"],
        )
        for collect in metrics.COLLECTORS:
            name = f"{collect.__module__}.{collect.__qualname__}"
            try:
                families = list(collect())
            except Exception as error:  # noqa: BLE001 - a scrape still shows the rest
                logger.warning("Metrics collector %s failed: %s", name, type(error).__name__)
                up.add_metric([name], 0)
                continue
            up.add_metric([name], 1)
            yield from families
        yield up


def scrape() -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Scrape())
    return generate_latest(registry)


def metrics_view(request: HttpRequest) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        response = HttpResponse("Only GET and HEAD\n", status=405, content_type="text/plain")
        response["Allow"] = "GET, HEAD"
        return response
    if not token_accepted(request):
        response = HttpResponse(
            "A bearer token is required\n", status=403, content_type="text/plain"
        )
        response["WWW-Authenticate"] = "Bearer"
        return response
    response = HttpResponse(scrape(), content_type=CONTENT_TYPE)
    response["Cache-Control"] = "no-store"
    return response


class MetricsEndpointMiddleware:
    """Answers /metrics for allowed addresses; any other request goes on (see the module)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info != PATH or not address_allowed(request.META.get("REMOTE_ADDR", "")):
            return self.get_response(request)
        return metrics_view(request)
