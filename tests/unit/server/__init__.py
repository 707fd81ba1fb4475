"""The server's configuration and its key store."""
