"""`GET /metrics`: the app's Prometheus metrics in the text format (infra/metrics.py).

Answered by its middleware right after the health endpoints, before the host check,
sessions and the login redirect, none of which a scraper should meet. Who may scrape:

- METRICS_ALLOWED_NETWORKS: the client addresses (CIDRs) allowed. Default: loopback only;
  with METRICS_TOKEN set, any address (the token guards it).
- METRICS_TOKEN: when set, the request must carry `Authorization: Bearer <token>`.

A request from an address outside the networks is not answered here at all: it goes on
through the app like any unknown path (the same 404), so the endpoint's existence does not
show. One from an allowed address without the right token gets a 403 that says only that.

The client address is the one infra/proxies.py decided, as everywhere in the app: the
connection's own, except that a request relayed by a proxy in TRUSTED_PROXIES is judged by
the client the proxy names. That is deliberate: judged by the socket, every request the
proxy relays would come from the proxy's address, and a proxy on the same machine would
open the loopback-only default to everyone it serves. A scraper that connects directly is
judged by its own address (the headers of a sender outside TRUSTED_PROXIES are ignored),
and one behind the proxy by its own address too, so list the scrapers' networks, never the
proxy's; a proxy not listed in TRUSTED_PROXIES stays one address for all its clients, and
a token is then the way to tell scrapers apart."""

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
from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.utils import floatToGoString

from infra import metrics
from infra.proxies import client_address

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


#: A family as the text format writes it: name, help, type and its lines (sample name,
#: rendered labels, value).
Family = tuple[str, str, str, list[tuple[str, str, float]]]

#: The multiprocess files' keys (JSON) parsed, and label sets rendered, kept across scrapes:
#: doing both again for every sample was most of a scrape's time. Bounded by the series the
#: processes record; emptied past `_KEPT` all the same.
_KEYS: dict[str, tuple] = {}
_LABELS: dict[tuple, str] = {}
_KEPT = 200_000


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _rendered(labels: tuple[tuple[str, str], ...]) -> str:
    """`{a="1",b="2"}` for sorted labels (names are the code's own, valid ones)."""
    found = _LABELS.get(labels)
    if found is None:
        if len(_LABELS) >= _KEPT:
            _LABELS.clear()
        inner = ",".join(f'{name}="{_escape(str(value))}"' for name, value in labels)
        found = _LABELS[labels] = f"{{{inner}}}" if inner else ""
    return found


def _parsed(key: str) -> tuple:
    """(family, sample name, labels without `le`, `le` as a number or None, help)."""
    found = _KEYS.get(key)
    if found is None:
        if len(_KEYS) >= _KEPT:
            _KEYS.clear()
        family, name, labels, help_text = json.loads(key)
        le = labels.pop("le", None)
        found = _KEYS[key] = (
            family,
            name,
            tuple(sorted(labels.items())),
            None if le is None else float(le),
            help_text,
        )
    return found


def _read_folder(path: str, gauges: list[str]) -> list[tuple[str, list]]:
    """(kind, entries) of each summed file in the folder; gauge files' paths go to `gauges`."""
    found = []
    for file in glob.glob(os.path.join(path, "*.db")):
        kind = os.path.basename(file).split("_", 1)[0]
        if kind == "gauge":
            gauges.append(file)
            continue
        try:
            found.append((kind, MmapedDict.read_all_values_from_file(file)))
        except FileNotFoundError:
            continue
    return found


def recorded(path: str) -> list[Family]:
    """Every process's counters, histograms and summaries from the multiprocess folder,
    summed across processes as prometheus_client's MultiProcessCollector sums them
    (histogram buckets made cumulative, a histogram's count its last bucket); gauge files,
    whose modes differ, merged by that collector itself."""
    sums: dict[str, dict[tuple[str, tuple], float]] = {}
    buckets: dict[str, dict[tuple, dict[float, float]]] = {}
    kinds: dict[str, tuple[str, str]] = {}
    gauges = []
    with metrics.folder_lock(path, exclusive=False):
        entries_of = _read_folder(path, gauges)
    for kind, entries in entries_of:
        for key, value, _, _ in entries:
            family, name, labels, le, help_text = _parsed(key)
            if family not in kinds:
                kinds[family] = (help_text, kind)
                sums[family] = {}
                buckets[family] = {}
            if le is None:
                samples = sums[family]
                samples[(name, labels)] = samples.get((name, labels), 0.0) + value
            else:
                bounds = buckets[family].setdefault(labels, {})
                bounds[le] = bounds.get(le, 0.0) + value
    families: list[Family] = []
    for family, (help_text, kind) in kinds.items():
        lines = []
        for labels, bounds in buckets[family].items():
            total = 0.0
            for bound in sorted(bounds):
                total += bounds[bound]
                le = (("le", floatToGoString(bound)),)
                lines.append((f"{family}_bucket", _rendered(tuple(sorted(labels + le))), total))
            lines.append((f"{family}_count", _rendered(labels), total))
        for (name, labels), value in sums[family].items():
            if kind == "histogram" and name == f"{family}_count":
                continue  # the last bucket says it
            lines.append((name, _rendered(labels), value))
        families.append((family, help_text, kind, lines))
    if gauges:
        families += _families(MultiProcessCollector.merge(gauges, accumulate=True))
    return families


def _families(metrics_: Iterable[Metric]) -> list[Family]:
    return [
        (
            metric.name,
            metric.documentation,
            metric.type,
            [
                (sample.name, _rendered(tuple(sorted(sample.labels.items()))), sample.value)
                for sample in metric.samples
            ],
        )
        for metric in metrics_
    ]


#: Sample names (by suffix) the text format writes as gauges of their own after the family.
_OPENMETRICS_ONLY = ("_created", "_gsum", "_gcount")


def text(families: Iterable[Family]) -> bytes:
    """Prometheus's text format 0.0.4, as prometheus_client's generate_latest writes it."""
    output: list[str] = []
    for name, documentation, kind, lines in families:
        exposed, shown = name, kind
        if kind == "counter":
            exposed = f"{name}_total"
        elif kind == "info":
            exposed, shown = f"{name}_info", "gauge"
        elif kind == "stateset":
            shown = "gauge"
        elif kind == "gaugehistogram":
            shown = "histogram"
        elif kind == "unknown":
            shown = "untyped"
        help_text = documentation.replace("\\", r"\\").replace("\n", r"\n")
        output.append(f"# HELP {exposed} {help_text}\n# TYPE {exposed} {shown}\n")
        later: dict[str, list[str]] = {}
        for sample, labels, value in lines:
            line = f"{sample}{labels} {floatToGoString(value)}\n"
            suffix = next((x for x in _OPENMETRICS_ONLY if sample == name + x), None)
            if suffix is None:
                output.append(line)
            else:
                later.setdefault(suffix, []).append(line)
        for suffix, moved in sorted(later.items()):
            output.append(f"# HELP {name}{suffix} {help_text}\n# TYPE {name}{suffix} gauge\n")
            output.extend(moved)
    return "".join(output).encode()


def collected() -> list[Family]:
    """What one scrape reads: the recorded metrics (every process's, in multiprocess mode)
    and the apps' collectors of state read from the database."""
    if metrics.MULTIPROC_DIR:
        families = recorded(metrics.MULTIPROC_DIR)
    else:
        families = _families(REGISTRY.collect())
    up = GaugeMetricFamily(
        "lakeview_metrics_collector_up",
        "Whether a collector of state read from the database answered this scrape.",
        labels=["collector"],
    )
    for collect in metrics.COLLECTORS:
        name = f"{collect.__module__}.{collect.__qualname__}"
        try:
            families += _families(list(collect()))
        except Exception as error:  # noqa: BLE001 - a scrape still shows the rest
            logger.warning("Metrics collector %s failed: %s", name, type(error).__name__)
            up.add_metric([name], 0)
            continue
        up.add_metric([name], 1)
    return families + _families([up])


def scrape() -> bytes:
    return text(collected())


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
        if request.path_info != PATH or not address_allowed(client_address(request)):
            return self.get_response(request)
        return metrics_view(request)
