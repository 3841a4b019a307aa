"""The REST API: dependencies, request and response models, and one router per resource."""
