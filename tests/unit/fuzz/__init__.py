"""The fuzz targets, run briefly."""
