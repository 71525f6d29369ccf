"""What a release publishes, built from the checkout: ``python -m release.dist`` (``make dist``)."""
