"""The pages people look at: the dataset page of a run (dataset.py, over digest.py's aggregates
and charts.py's pygal charts) and the view of one conversation (conversation.py), rendered from
Jinja2 templates (templates/) into self-contained HTML files that fetch nothing."""
