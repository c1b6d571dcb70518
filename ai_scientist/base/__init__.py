"""Base layer: errors and exit codes, the config schema, the idea, the run-directory paths, redaction,
crash-safe file IO, defensive reading of user files, fault-injection points, the run lock, log set-up
and the prompt-template environment. Imports nothing from the rest of the package."""
