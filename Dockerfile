# ToolOps: one image for every process of the production topology (docs/deploy.md).
# The command chooses the role:
#   web     (default)  uvicorn toolops.asgi:application …
#   worker             celery -A toolops worker …
#   beat               celery -A toolops beat …     (exactly one in the whole deployment)
#   migrate            python manage.py migrate --noinput
# Settings come from the environment only (README, "Running it"); no secret is baked in.
#
# The base is an argument so that a registry mirror, or a local image of the same
# Debian and Python, can stand in for Docker Hub's.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    DJANGO_SETTINGS_MODULE=toolops.settings

# No compiler: every dependency ships a manylinux wheel for CPython 3.11 (psycopg's binary
# build, uvloop, httptools, cryptography).
RUN python -m venv /opt/venv

WORKDIR /app

# The dependencies first, read from pyproject.toml, so that a change to the code alone
# reuses this layer.
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# Then the project itself. Editable: templates/, static/ and manage.py live beside the
# packages, and settings find them from the packages' own folder (BASE_DIR).
COPY manage.py ./
COPY templates ./templates
COPY static ./static
COPY toolops ./toolops
COPY compensations ./compensations
COPY traces ./traces
RUN pip install --no-deps -e . && python -m compileall -q toolops compensations traces

# The console's static files into STATIC_ROOT (the data directory's static/), for a proxy
# or CDN that takes them over; the web process serves them itself too. Throwaway values
# for the settings that would otherwise make and keep a key in the data directory: the
# image must hold no secret of its own.
RUN TOOLOPS_ARGS_KEYS="$(python -c 'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())')" \
    DJANGO_SECRET_KEY=collectstatic-only-not-a-secret \
    CELERY_BROKER_URL=redis://collectstatic.invalid:6379/0 \
    python manage.py collectstatic --noinput -v0 \
    && test ! -e var/secret_key && test ! -e var/args_keys

# A user of its own, without a login; it owns only the data directory (beat's schedule
# file; the static files collected above). The code stays root's, read-only to it.
RUN useradd --system --uid 10001 --user-group --no-create-home --home-dir /app \
        --shell /usr/sbin/nologin toolops \
    && chown -R toolops:toolops /app/var
USER toolops

EXPOSE 8000

# One single-worker uvicorn process per container (README, "Serving"); uvicorn believes
# no X-Forwarded-* header itself: TOOLOPS_TRUSTED_PROXIES decides. On SIGTERM it stops
# accepting, closes WebSockets (1012, the live pages reconnect elsewhere) and waits up to
# 35 s for requests in flight: above the 30 s long-poll and MCP wait maxima.
CMD ["uvicorn", "toolops.asgi:application", "--host", "0.0.0.0", "--port", "8000", \
     "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--no-proxy-headers", \
     "--timeout-graceful-shutdown", "35"]
