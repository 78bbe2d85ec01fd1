#!/usr/bin/env python3
"""alert_tests.py RULES DIR: print a `promtool test rules` file (JSON, which is YAML) for
RULES, whose sweeper series are the metrics files real idem-sweep runs wrote into DIR:

  healthy.prom  a run with nothing open; later runs succeed every minute
  open.prom     a run with one open reconciliation item of each kind
  behind.prom   a run that stopped at --max-batches with records still due
  failing.prom  the file as a failing run left it (the last success's, never rewritten)
  (none)        no run has succeeded: no file

Each case is evaluated after 3 hours of its series, with every alert of RULES: those the
case expects fire (with the labels given here), all others stay silent. The gateway's
series are written here, by the names of its metrics, in a healthy state and in one bad
state per alert. Annotations are not compared (the test's copy of the rules has none)."""
import json
import re
import sys

STEPS = 240  # minutes of series, at 1m
EVAL = "3h"
NODE = {"instance": "db1:9100", "job": "node"}  # node_exporter's textfile collector
GATEWAY = {"instance": "gw1:8080", "job": "idem-gateway"}

SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')


def labels_text(name, labels):
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def read_prom(path):
    """The samples of a text-format file: [(name, labels, value)]."""
    out = []
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"{path}: not a sample: {line!r}"
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"', m[2] or ""))
        out.append((m[1], labels, float(m[3])))
    return out


def sweep_series(path, clock_follows):
    """The file's samples as series of STEPS minutes, the test's clock starting at the run:
    its last-success time is 0 then, and moves with the clock when later runs succeed
    (clock_follows), or stays when they fail."""
    series = []
    for name, labels, value in read_prom(path):
        if name == "idem_sweep_last_success_timestamp_seconds":
            values = f"0+60x{STEPS}" if clock_follows else f"0x{STEPS}"
        else:
            values = f"{value:g}x{STEPS}"
        series.append({"series": labels_text(name, {**labels, **NODE}), "values": values})
    return series


def gateway_series(bad=None):
    """A busy, healthy gateway's series; @bad names the one thing that goes wrong."""
    g = GATEWAY
    tool = {**g, "tool": "create_ticket"}
    s = {
        labels_text("idem_gateway_ready", g): "1x240",
        labels_text("idem_gateway_config_last_reload_success", g): "1x240",
        labels_text("idem_gateway_calls_total", {**tool, "status": "created"}): "0+100x240",
        labels_text("idem_gateway_calls_total", {**tool, "status": "replayed"}): "0+10x240",
        labels_text("idem_gateway_calls_total", {**tool, "status": "unavailable"}): "0x240",
        labels_text("idem_gateway_calls_total", {**tool, "status": "misconfigured"}): "0x240",
        labels_text("idem_gateway_calls_total", {**tool, "status": "outcome_unknown"}): "0x240",
        labels_text("idem_gateway_requests_total", {**tool, "code": "200"}): "0+110x240",
        labels_text("idem_gateway_requests_total", {**tool, "code": "503"}): "0x240",
        # The front's answer to an HTTP version not 1.x: the client's doing.
        labels_text("idem_gateway_requests_total", {**g, "tool": "(none)", "code": "505"}):
            "0x240",
        labels_text("idem_gateway_upstream_total", {**tool, "outcome": "sent"}): "0+100x240",
        labels_text("idem_gateway_upstream_total", {**tool, "outcome": "timeout"}): "0x240",
        labels_text("idem_gateway_pool_connections", {**g, "state": "busy"}): "3x240",
        labels_text("idem_gateway_pool_connections", {**g, "state": "idle"}): "7x240",
        labels_text("idem_gateway_pool_size", g): "10x240",
        labels_text("idem_gateway_connections_refused_total", g): "0x240",
        labels_text("idem_gateway_calls_in_flight", g): "3x240",
    }
    fast = {"0.005": 90, "0.01": 110, "10": 110, "+Inf": 110}
    slow = {"0.005": 0, "0.01": 0, "10": 110, "+Inf": 110}
    for le, per_min in (slow if bad == "slow" else fast).items():
        s[labels_text("idem_gateway_request_duration_seconds_bucket", {**tool, "le": le})] = (
            f"0+{per_min}x240")
    changes = {
        "not_ready": {"idem_gateway_ready": "0x240"},
        "reload_failed": {"idem_gateway_config_last_reload_success": "0x240"},
        "misconfigured": {'status="misconfigured"': "0+5x240"},
        "unavailable": {'status="unavailable"': "0+50x240"},
        "outcome_unknown": {'status="outcome_unknown"': "0+1x240"},
        "upstream": {'outcome="timeout"': "0+50x240"},
        "server_errors": {'code="503"': "0+50x240"},
        "clients_505": {'code="505"': "0+50x240"},
        "pool": {'state="busy"': "10x240", 'state="idle"': "0x240"},
        "refused": {"idem_gateway_connections_refused_total": "0+1x240"},
    }.get(bad, {})
    for key in list(s):
        for part, values in changes.items():
            if part in key:
                s[key] = values
    return [{"series": k, "values": v} for k, v in s.items()]


def alert(name, severity, **labels):
    return (name, {"severity": severity, **labels})


def cases(d):
    sweep_ok = sweep_series(f"{d}/healthy.prom", True)
    node = NODE
    tool = {**GATEWAY, "tool": "create_ticket"}
    out = [("healthy", sweep_ok + gateway_series(), [])]
    out.append(("gateway_clients_505", sweep_ok + gateway_series("clients_505"), []))
    out.append(("sweep_never_ran", gateway_series(), [alert("IdemSweepMetricsAbsent", "warning")]))
    out.append(("sweep_failing", sweep_series(f"{d}/failing.prom", False),
                [alert("IdemSweepStale", "warning", **node)]))
    out.append(("sweep_behind", sweep_series(f"{d}/behind.prom", True),
                [alert("IdemSweepBehind", "warning", **node)]))
    open_alerts = [alert("IdemOutcomeUnknown", "warning", kind=k, **node)
                   for k in ("outcome_unknown", "stalled_pending", "lease_lost", "outbox_exhausted")]
    open_alerts += [alert("IdemIntentNeedsReconciliation", "warning", kind="intent", **node),
                    alert("IdemLateRetries", "info", kind="expired", **node)]
    out.append(("open_items_of_each_kind", sweep_series(f"{d}/open.prom", True), open_alerts))
    g = {k: GATEWAY[k] for k in ("instance", "job")}
    for bad, expected in (
            ("not_ready", alert("IdemGatewayNotReady", "critical", **GATEWAY)),
            ("reload_failed", alert("IdemGatewayConfigReloadFailed", "warning", **GATEWAY)),
            ("misconfigured", alert("IdemGatewayMisconfigured", "critical", **tool)),
            ("unavailable", alert("IdemGatewayUnavailable", "warning", **g)),
            ("outcome_unknown", alert("IdemGatewayOutcomeUnknown", "warning", **tool)),
            ("upstream", alert("IdemGatewayUpstreamFailing", "warning", **tool)),
            ("server_errors", alert("IdemGatewayServerErrors", "warning", **g)),
            ("pool", alert("IdemGatewayPoolExhausted", "warning", **GATEWAY)),
            ("refused", alert("IdemGatewayConnectionsRefused", "warning", **GATEWAY)),
            ("slow", alert("IdemGatewaySlow", "warning", **tool))):
        out.append((f"gateway_{bad}", sweep_ok + gateway_series(bad), [expected]))
    return out


def main():
    rules, d = sys.argv[1], sys.argv[2]
    names = re.findall(r"^\s*- alert: (\S+)", open(rules, encoding="utf-8").read(), re.M)
    tests = []
    for case, series, expected in cases(d):
        fired = {}
        for name, labels in expected:
            assert name in names, f"{case}: no alert {name} in {rules}"
            fired.setdefault(name, []).append({"exp_labels": labels})
        tests.append({
            "name": case,
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [{"eval_time": EVAL, "alertname": n, "exp_alerts": fired.get(n, [])}
                                for n in names],
        })
    json.dump({"rule_files": [rules], "evaluation_interval": "1m", "tests": tests}, sys.stdout,
              indent=1)


main()
