"""`/healthz` and `/readyz`, for balancers and orchestrators (docs/deploy.md, README)."""
