"""Report models and their rendering (jinja2 templates)."""
