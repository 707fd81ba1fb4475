"""The benchmark harness's parts."""
