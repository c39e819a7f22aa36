"""Parts of toolops/settings.py that are a subject of their own, read from the environment
and star-imported there, so the settings module stays one page long."""
