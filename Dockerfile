# The scheduler core compiled to C (scripts/compile_core.py), with a compiler the image itself does not keep.
FROM python:3.11-slim AS core
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements-build.txt pyproject.toml ./
RUN pip install --no-cache-dir -r requirements-build.txt
COPY jobs/__init__.py jobs/
COPY jobs/scheduling jobs/scheduling
COPY scripts/compile_core.py scripts/
RUN python scripts/compile_core.py

# One image for web, worker, beat and scheduler; docker-compose.yml picks the command.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm && rm -rf /var/lib/apt/lists/*
# requirements.txt is what runs; tests, lint and fuzzing (requirements-dev.txt) stay out of the image.
COPY requirements.txt package.json package-lock.json ./
RUN pip install --no-cache-dir -r requirements.txt && npm ci --no-audit --no-fund
COPY . .
COPY --from=core /app/.build/core/lib /app/.build/core/lib
COPY --from=core /app/.build/core/SOURCES_HASH /app/.build/core/
# collectstatic needs the settings, not the deployment's secrets: DEBUG=1 loads them without SECRET_KEY and
# TIDAL_ENCRYPTION_KEY (the containers run with DEBUG off and refuse to start without both).
RUN pip install --no-cache-dir --no-deps -e sdk \
    && DEBUG=1 python manage.py collectstatic --noinput
EXPOSE 8000
# Threaded workers, so followed logs never take every worker (mlplatform/gunicorn.conf.py says how).
CMD ["gunicorn", "-c", "mlplatform/gunicorn.conf.py"]
