"""Prometheus metrics of one server (its own registry, so several apps in one process never collide).

    patarm_serve_requests_total{route,status}    requests answered, by route template and HTTP status
    patarm_serve_request_seconds{route}          latency histogram (seconds, request in → response out)
    patarm_serve_batch_size                      items per model batch (histogram)
    patarm_serve_batch_seconds                   model time per batch (histogram, seconds)
    patarm_serve_queue_depth                     items waiting for a batch (gauge)
    patarm_serve_judgments_total                 judge rollouts parsed
    patarm_serve_parse_failures_total            judge rollouts without a valid score
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class ServeMetrics:
    """The server's counters, histograms and gauges; `render()` is the `/metrics` body."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("patarm_serve_requests", "Requests answered, by route and HTTP status.",
                                ["route", "status"], registry=r)
        self.latency = Histogram("patarm_serve_request_seconds", "Request latency in seconds.", ["route"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.batch_size = Histogram("patarm_serve_batch_size", "Items per model batch.", buckets=BATCH_BUCKETS,
                                    registry=r)
        self.batch_seconds = Histogram("patarm_serve_batch_seconds", "Model time per batch in seconds.",
                                       buckets=LATENCY_BUCKETS, registry=r)
        self.queue_depth = Gauge("patarm_serve_queue_depth", "Items waiting for a batch.", registry=r)
        self.judgments = Counter("patarm_serve_judgments", "Judge rollouts parsed.", registry=r)
        self.parse_failures = Counter("patarm_serve_parse_failures", "Judge rollouts without a valid score.",
                                      registry=r)

    def observe_request(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def observe_batch(self, size: int, seconds: float) -> None:
        self.batch_size.observe(size)
        self.batch_seconds.observe(seconds)

    def observe_judgments(self, total: int, failures: int) -> None:
        self.judgments.inc(total)
        self.parse_failures.inc(failures)

    def render(self) -> bytes:
        return generate_latest(self.registry)
