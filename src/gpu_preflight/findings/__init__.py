"""What a run found, as one typed value: the report model, its canonical assembly, the GPU health verdicts.

The floor between the checks and the formats (docs/architecture.md): the report model
(:mod:`.model`), the assembly of node and cluster findings into it (:mod:`.canonical`,
:mod:`.diagnostic_sections`) and the health verdicts derived from the findings
(:mod:`.health`) live here so that the cluster aggregation, localisation and the
distributed run can build a report without importing a renderer.
"""
