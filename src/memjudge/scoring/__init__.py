"""Scoring: inputs to tasks, judge calls, validated answers, the journal and the cache."""
