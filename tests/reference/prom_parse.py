"""Parses Prometheus text exposition from stdin with the official Python
client's parser (Debian's python3-prometheus-client) and prints its samples
as JSON: [{"name", "labels": {...}, "value"}], histograms as their
_bucket/_sum/_count samples. Exits non-zero when the text does not parse.
Run with /usr/bin/python3."""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

out = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        out.append({"family": family.name, "type": family.type, "name": s.name, "labels": s.labels,
                    "value": s.value})
print(json.dumps(out))
