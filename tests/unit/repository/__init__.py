"""The repository itself: the spec covers the code, and every cited document exists."""
