"""The lab that tests the paper: the plan and its knobs, data, the trainers, verdicts, figures and pages, weights.

Everything here may import the ODE-ViT layer (`odevit`); the layer never imports this package
(tests/test_layout.py). Module map: docs/pipeline.md (odevit.repro.pages.module_map).
"""
