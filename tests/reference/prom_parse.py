"""Parses Prometheus text exposition from stdin with the official Python
client's parser (prometheus-client, from the project's .venv) and prints its samples
as JSON: [{"name", "labels": {...}, "value"}], histograms as their
_bucket/_sum/_count samples. Exits non-zero when the text does not parse.
Run with .venv/bin/python."""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

out = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        out.append({"family": family.name, "type": family.type, "name": s.name, "labels": s.labels,
                    "value": s.value})
print(json.dumps(out))
