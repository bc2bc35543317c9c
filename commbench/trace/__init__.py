"""Recording a training job's communication and reading it back (SPEC §9).

``format`` is the trace file format (no torch); ``recorder`` runs inside the user's ranks;
``boot`` holds the ``sitecustomize`` that installs the recorder in every rank through the
environment, so the user's command runs unchanged.
"""
