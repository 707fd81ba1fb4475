"""The systems our server is measured against, each set up by the harness itself."""
