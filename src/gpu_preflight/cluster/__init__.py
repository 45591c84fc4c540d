"""Cluster aggregation: node reports and workload results from every rank into one report."""
