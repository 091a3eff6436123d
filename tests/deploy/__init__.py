"""Tests of what deploys the worker: the Helm chart (helm/cq-service) and its image."""
