"""The Python client, prompt rendering and the `brain` data verbs."""
