"""The audit report of a plan: the model (`model`), and its Markdown, HTML and JSON renderings."""
