"""The run loop and its wiring: the run directory's state (``run``), the services built once per
run (``services``), the search loop over stages and nodes (``orchestrator``) and replay set-up."""
