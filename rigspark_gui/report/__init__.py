"""Plan reports: one model of a plan, several writers (text, HTML, PDF, Markdown, JSON)."""
