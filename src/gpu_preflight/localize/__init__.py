"""Find the bad node: pairwise and group localisation across a cluster's nodes.

:mod:`.scheduler` plans rounds of disjoint tests and judges their results (pure: no torch,
no I/O); :mod:`.simulate` answers those rounds from a modelled cluster; :mod:`.report`
turns the outcome into the report's ``cluster_summary.localization`` block, findings and
exclude lists.
"""
