"""Distributed runs: topology detection, self-launch of local workers, gather to rank 0."""
