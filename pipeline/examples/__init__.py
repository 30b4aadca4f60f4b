"""Example pipelines, each runnable with one command against a local broker (docs/pipeline-*.md)."""
