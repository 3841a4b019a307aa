"""The Temporal worker, imported as ``spindle.worker``: workflows, activities, node types."""
