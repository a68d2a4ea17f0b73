"""The reproduction lab: configs, data, training, DVC stages, study, statistics, reports, README, benchmark.

Everything here may import the ODE-ViT layer (`odevit`); the layer never imports this package
(tests/test_layout.py). Module map: docs/pipeline.md (odevit.repro.readme.module_map).
"""
